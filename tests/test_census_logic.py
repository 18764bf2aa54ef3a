"""Census grouping, the ledger's partition, recompile messages, op counts: pure logic."""

from __future__ import annotations

from pathlib import Path

import pytest
from records_factory import make_record

from pytest_jaxcompile.backends import signed_names, unique_names
from pytest_jaxcompile.backends.jax.census import build_ledger, recompile_problems
from pytest_jaxcompile.backends.jax.measure import is_cache_entry
from pytest_jaxcompile.backends.jax.moduletext import ModuleText
from pytest_jaxcompile.backends.jax.monitor import (
    EVENT_BACKEND_COMPILE,
    EVENT_CACHE_HIT,
    EVENT_CACHE_REQUEST,
    EVENT_CACHE_RETRIEVAL,
    EVENT_CACHE_SAVED,
    EVENT_CACHE_WRITE,
    EVENT_LOWER,
    EVENT_TRACE,
    NESTED_BEGIN,
    NESTED_END,
    REPEAT_BEGIN,
    REPEAT_END,
    EventLog,
    JaxEvent,
    TimeSpan,
    _event_from_log,
)
from pytest_jaxcompile.backends.jax.traceprofile import (
    GROUP_JAX,
    GROUP_OTHER,
    GROUP_PROJECT,
    GROUP_STDLIB_NUMPY,
    file_label,
    group_of,
)
from pytest_jaxcompile.gate.view import trace_rollup


def compile_events(name: str, *cache: str, duration: float = 0.5) -> list[JaxEvent]:
    return [
        JaxEvent(EVENT_TRACE, 0.1, name),
        JaxEvent(EVENT_LOWER, 0.2, f"jit({name})"),
        *(JaxEvent(event) for event in cache),
        JaxEvent(EVENT_BACKEND_COMPILE, duration, f"jit({name})"),
    ]


def test_events_group_into_module_compiles_with_their_phases_and_cache_events() -> None:
    log = EventLog(
        compile_events("f", EVENT_CACHE_REQUEST, EVENT_CACHE_WRITE)
        + compile_events("g", EVENT_CACHE_REQUEST, EVENT_CACHE_HIT, duration=0.01)
    )
    first, second = log.module_compiles()
    assert (first.fun_name, first.trace_s, first.lower_s, first.backend_compile_s) == (
        "jit(f)",
        0.1,
        0.2,
        0.5,
    )
    assert (first.cache_writes, first.cache_hits) == (1, 0)
    assert (second.fun_name, second.cache_hits) == ("jit(g)", 1)


def test_compiles_inside_a_fixture_measurement_are_marked_nested() -> None:
    log = EventLog(
        [
            *compile_events("census"),
            JaxEvent(NESTED_BEGIN),
            *compile_events("fixture"),
            JaxEvent(NESTED_END),
        ]
    )
    assert [(m.fun_name, m.nested) for m in log.module_compiles()] == [
        ("jit(census)", False),
        ("jit(fixture)", True),
    ]


def test_names_and_module_names_come_from_the_logs_where_events_lack_them() -> None:
    # jax 0.4.30: the duration event has no fun_name, its dispatch log names the function
    # (formatted before logging), and a hit is logged with the module name only.
    logged = [
        _event_from_log("Finished XLA compilation of jit(step) in 0.0123 sec", ()),
        _event_from_log("Persistent compilation cache hit for '%s'", ("jit_step",)),
    ]
    assert None not in logged
    log = EventLog(
        [
            *(e for e in logged if e is not None),
            JaxEvent(EVENT_CACHE_REQUEST),
            JaxEvent(EVENT_CACHE_HIT),
            JaxEvent(EVENT_BACKEND_COMPILE, 0.2),
        ]
    )
    (module,) = log.module_compiles()
    assert (module.fun_name, module.module_name, module.cache_key) == (
        "jit(step)",
        "jit_step",
        None,
    )
    # Later versions: the event's own name wins over the log's.
    log = EventLog(
        [
            *(e for e in logged if e is not None),
            JaxEvent(EVENT_BACKEND_COMPILE, 0.2, "jit(step_v2)"),
        ]
    )
    assert log.module_compiles()[0].fun_name == "jit(step_v2)"
    assert _event_from_log("Finished XLA compilation of %s in %s sec", ("jit(f)", 0.5)) == JaxEvent(
        "log:compile_name", fun_name="jit(f)"
    )
    assert _event_from_log("Finished tracing + transforming f in 0.1 sec", ()) is None


def test_cache_entries_are_recognised_in_every_jax_layout() -> None:
    for name in ("jit_f-0a1b", "jit_f-0a1b-cache"):  # jax 0.4.30, then 0.4.31 on
        assert is_cache_entry(name)
    for name in ("jit_f-0a1b-atime", ".lockfile", "_temp_jit_f-0a1b"):
        assert not is_cache_entry(name)


def test_covered_time_counts_nested_spans_once() -> None:
    log = EventLog(
        spans=[
            TimeSpan(EVENT_TRACE, 0.0, 1.0),
            TimeSpan(EVENT_TRACE, 0.2, 0.6),  # a nested jit traced inside the outer trace
            TimeSpan(EVENT_LOWER, 1.0, 1.5),
            TimeSpan(EVENT_BACKEND_COMPILE, 2.0, 3.0),
        ]
    )
    assert log.covered_s(EVENT_TRACE) == pytest.approx(1.0)
    assert log.covered_s(EVENT_TRACE, EVENT_LOWER, EVENT_BACKEND_COMPILE) == pytest.approx(2.5)


def test_ledger_partitions_the_wall_into_compile_and_a_named_residual() -> None:
    log = EventLog(
        events=compile_events("f", EVENT_CACHE_REQUEST),
        spans=[
            TimeSpan(EVENT_TRACE, 0.0, 0.1),
            TimeSpan(EVENT_LOWER, 0.1, 0.3),
            TimeSpan(EVENT_BACKEND_COMPILE, 0.3, 0.8),
        ],
    )
    ledger = build_ledger(log, "t.py::test_f", wall_s=2.0)
    assert ledger.compile_s == pytest.approx(0.8)
    assert ledger.execute_and_python_s == pytest.approx(1.2)
    assert ledger.compile_s + ledger.execute_and_python_s == pytest.approx(ledger.wall_s)
    assert ledger.compile_fraction == pytest.approx(0.4)
    assert (ledger.compiles, ledger.modules) == (1, {"jit(f)": 1})


@pytest.mark.parametrize(
    ("saved_by_module", "kept"),
    [
        ((2.7, -0.1), 2.6),  # a lower bound: JAX's figures, summed
        ((-0.17,), None),  # compiled in under a second: JAX stored 0 s, "saved" -retrieval
        ((0.6, -0.6), None),
    ],
)
def test_ledger_keeps_jaxs_cache_saving_only_when_it_says_something(
    saved_by_module: tuple[float, ...],
    kept: float | None,
) -> None:
    hits = [
        event
        for saved in saved_by_module
        for event in [
            *compile_events("f", EVENT_CACHE_REQUEST, EVENT_CACHE_HIT, duration=0.2),
            JaxEvent(EVENT_CACHE_RETRIEVAL, 0.17),
            JaxEvent(EVENT_CACHE_SAVED, saved),
        ]
    ]
    ledger = build_ledger(EventLog(hits), "t.py::test_f", wall_s=2.0)
    assert ledger.overlays["cache_retrieval_s"] == pytest.approx(0.17 * len(saved_by_module))
    assert ledger.overlays.get("cache_saved_s") == (None if kept is None else pytest.approx(kept))


def test_ledger_omits_the_fraction_when_the_wall_is_unknown() -> None:
    ledger = build_ledger(EventLog(compile_events("f")), "t.py::test_f", wall_s=None)
    assert ledger.compile_fraction is None
    assert ledger.execute_and_python_s is None
    assert ledger.compile_s > 0  # the compile seconds are kept


def test_recompile_message_lists_every_module_and_how_often() -> None:
    log = EventLog(
        compile_events("step") * 3 + compile_events("init", EVENT_CACHE_REQUEST, EVENT_CACHE_HIT)
    )
    problems = recompile_problems(1, log.module_compiles())
    assert problems[0].startswith("4 backend compiles in this test")
    assert "  jit(step): 3x (3 compiled by XLA, 0 from the persistent cache)" in problems
    assert "  jit(init): 1x (0 compiled by XLA, 1 from the persistent cache)" in problems
    assert "retraced" in problems[-1]
    assert recompile_problems(4, log.module_compiles()) == []
    assert recompile_problems(None, log.module_compiles()) == []


def eager_events(name: str, duration: float = 0.02) -> list[JaxEvent]:
    """A compile as JAX's eager dispatch fires it (the monitor marks it from the stack)."""
    return [
        JaxEvent(EVENT_TRACE, 0.001, name),
        JaxEvent(EVENT_LOWER, 0.002, f"jit({name})"),
        JaxEvent(EVENT_BACKEND_COMPILE, duration, f"jit({name})", eager=True),
    ]


def test_eager_dispatch_is_in_the_ledger_apart_from_the_tests_own_compiles() -> None:
    log = EventLog(
        eager_events("broadcast_in_dim")
        + compile_events("step")
        + eager_events("add")
        + eager_events("add")
        + [JaxEvent(NESTED_BEGIN), *compile_events("fixture"), JaxEvent(NESTED_END)]
        # the fixture's repeats of its measured compile (compile_repeat): no test's
        + [JaxEvent(REPEAT_BEGIN), *compile_events("fixture") * 2, JaxEvent(REPEAT_END)]
    )
    assert [m.fun_name for m in log.own_compiles()] == ["jit(step)"]
    assert [m.fun_name for m in log.measured_compiles()] == ["jit(fixture)"]
    assert [m.fun_name for m in log.eager_compiles()] == [
        "jit(broadcast_in_dim)",
        "jit(add)",
        "jit(add)",
    ]
    ledger = build_ledger(log, "t.py::test_f", wall_s=5.0)
    # The compile count is every compile the test triggered, the fixture's measurement too.
    assert (ledger.compiles, ledger.modules) == (2, {"jit(fixture)": 1, "jit(step)": 1})
    assert ledger.eager_compiles == 3
    assert ledger.eager_modules == {"jit(add)": 2, "jit(broadcast_in_dim)": 1}
    assert ledger.eager_compile_s == pytest.approx(3 * 0.023)
    # Eager time stays in the partition's compile time (its phases are JAX's events).
    assert ledger.backend_compile_s == pytest.approx(0.5 + 3 * 0.02 + 0.5 + 2 * 0.5)


def test_eager_dispatch_counts_against_max_compiles_only_when_asked() -> None:
    log = EventLog(
        compile_events("step") + eager_events("broadcast_in_dim") * 2 + eager_events("add")
    )
    own, eager = log.own_compiles(), log.eager_compiles()
    assert recompile_problems(1, own, eager) == []
    problems = recompile_problems(1, own, eager, count_eager=True)
    assert problems[0].startswith(
        "4 backend compiles, eager dispatch included, in this test, over its "
        "compile_budget(max_compiles=1)"
    )
    assert (
        "  eager dispatch (operations outside jit): 3x (counted): jit(add), "
        "jit(broadcast_in_dim) 2x" in problems
    )
    # Over budget on its own compiles: the eager ones are named, said not to count.
    problems = recompile_problems(0, own, eager)
    assert problems[0].startswith("1 backend compiles in this test")
    assert any(
        "3x (not counted, compile_budget(count_eager=True) counts them)" in line
        for line in problems
    )


def test_repeated_names_get_numbered() -> None:
    assert unique_names(["jit(f)", "jit(g)", "jit(f)", "jit(f)"]) == [
        "jit(f)",
        "jit(g)",
        "jit(f)#2",
        "jit(f)#3",
    ]


def test_a_function_compiled_for_several_signatures_is_named_by_each_in_any_order() -> None:
    compiles = [
        ("jit(f)", "f32[8]"),
        ("jit(g)", "f32[8]"),
        ("jit(f)", "f32[16]"),
        ("jit(f)", "f32[8]"),  # the same signature again: numbered
        ("jit(h)", "f32[2]"),
        ("jit(h)", "f32[2]"),
    ]
    named = signed_names(compiles)
    assert named == [
        "jit(f)[f32[8]]",
        "jit(g)",
        "jit(f)[f32[16]]",
        "jit(f)[f32[8]]#2",
        "jit(h)",
        "jit(h)#2",
    ]
    assert sorted(signed_names(compiles[::-1])) == sorted(named)


def test_a_long_signature_is_cut_and_ends_in_a_hash_of_the_whole() -> None:
    long_a, long_b = "f32[8]," * 20 + "f32[1]", "f32[8]," * 20 + "f32[2]"
    first, second = signed_names([("jit(f)", long_a), ("jit(f)", long_b)])
    assert first != second and len(first) == len(second) < len(long_a)
    assert first.startswith("jit(f)[f32[8],") and first.endswith("]")


def test_count_ops_counts_operations_not_attributes() -> None:
    text = """
    func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
      %0 = stablehlo.constant dense<1.0> : tensor<4xf32>
      %1 = stablehlo.compare  GT, %arg0, %0,  FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
      %2 = "stablehlo.dot_general"(%arg0, %arg0) {dot_dimension_numbers = #stablehlo.dot<>}
      return %2 : tensor<4xf32>
    }
    """
    assert ModuleText(text).op_count == 3


def test_trace_profile_groups_files_by_package(tmp_path: Path) -> None:
    stdlib = "/usr/lib/python3.11"
    site = "/venv/lib/python3.11/site-packages"
    assert group_of(f"{site}/jax/_src/core.py", tmp_path, stdlib) == GROUP_JAX
    assert group_of(f"{site}/numpy/core/x.py", tmp_path, stdlib) == GROUP_STDLIB_NUMPY
    assert group_of(f"{stdlib}/functools.py", tmp_path, stdlib) == GROUP_STDLIB_NUMPY
    assert group_of("~", tmp_path, stdlib) == GROUP_STDLIB_NUMPY
    assert group_of(str(tmp_path / "model.py"), tmp_path, stdlib) == GROUP_PROJECT
    assert group_of(f"{site}/flax/linen.py", tmp_path, stdlib) == GROUP_OTHER


def test_trace_files_are_named_where_they_live(tmp_path: Path) -> None:
    stdlib = "/usr/lib/python3.11"
    site = "/venv/lib/python3.11/site-packages"
    assert file_label(f"{site}/jax/_src/core.py", tmp_path, stdlib) == "jax/_src/core.py"
    assert file_label(f"{stdlib}/functools.py", tmp_path, stdlib) == "<stdlib>/functools.py"
    assert file_label("~", tmp_path, stdlib) == "<builtins>"
    assert file_label(str(tmp_path / "models" / "mlp.py"), tmp_path, stdlib) == "models/mlp.py"
    assert file_label("/elsewhere/x.py", tmp_path, stdlib) == "/elsewhere/x.py"


def test_trace_rollup_weighs_each_row_by_its_trace_seconds() -> None:
    slow = make_record(
        transform="slow",
        trace_s=3.0,
        trace_profile={"jax": 0.0, "stdlib_numpy": 0.0, "project": 1.0, "other": 0.0},
        trace_files={"models/mlp.py": 1.0},
    )
    quick = make_record(
        transform="quick",
        trace_s=1.0,
        trace_profile={"jax": 1.0, "stdlib_numpy": 0.0, "project": 0.0, "other": 0.0},
        trace_files={"jax/_src/core.py": 1.0},
    )
    unprofiled = make_record(transform="plain", trace_s=100.0)
    rollup = trace_rollup([quick, slow, unprofiled])
    assert rollup is not None and rollup.rows == 2 and rollup.trace_s == 4.0
    assert [(s.name, s.share, s.seconds) for s in rollup.groups] == [
        ("jax", 0.25, 1.0),
        ("stdlib+numpy", 0.0, 0.0),
        ("project", 0.75, 3.0),
        ("other", 0.0, 0.0),
    ]
    assert [s.name for s in rollup.files] == ["models/mlp.py", "jax/_src/core.py"]
    assert rollup.groups_text() == "jax 25%, stdlib+numpy 0%, project 75%, other 0%"
    assert trace_rollup([unprofiled]) is None
