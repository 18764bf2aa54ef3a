"""Census, recompile budgets, the ledger and deterministic gates, end to end."""

from __future__ import annotations

import pytest
from conftest import JaxProject
from corpus_helpers import cli
from jax_behaviour import jax_logs_persistent_cache_keys

RETRACE_TEST = """
    import jax, jax.numpy as jnp, pytest

    X = jnp.ones(4)  # at import: not one of the test's compiles

    @pytest.mark.compile_budget(max_compiles=1)
    def test_retrace():
        x = X
        for step in range(3):
            scaled = jax.jit(lambda v: v * 2 + step)  # a fresh closure per call: retraces
            scaled(x).block_until_ready()
"""

IMPLICIT_TEST = """
    import jax, pytest
    from jaxmodels import mlp_example_args, mlp_loss

    ARGS = mlp_example_args()  # at import: its helper compiles are not the test's

    def train_step(params, x, y):
        return jax.value_and_grad(mlp_loss)(params, x, y)

    @pytest.mark.compile_budget(max_compiles=1)
    def test_step():
        loss, grads = jax.jit(train_step)(*ARGS)
        assert float(loss) > 0
"""


def test_fresh_closure_per_call_fails_max_compiles_naming_the_module(
    project: JaxProject,
) -> None:
    project.conftest(cache=False)
    project.tests(RETRACE_TEST)
    result = project.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*3 backend compiles in this test, over its compile_budget(max_compiles=1)*",
            "*jit(<lambda>): 3x (3 compiled by XLA, 0 from the persistent cache)",
            # jax 0.4.30 names the function by its qualname (test_retrace.<locals>.<lambda>)
            "*    compile 2: *<lambda> (test_models.py:*): a new function object, defined where "
            "an earlier one was: it is re-created*",
            "*    compile 3: *<lambda> (test_models.py:*): a new function object*",
        ]
    )
    rows = project.rows()
    assert {
        ("test_retrace", "jit(<lambda>)"),
        ("test_retrace", "jit(<lambda>)#2"),
        ("test_retrace", "jit(<lambda>)#3"),
    } <= set(rows)
    assert all(row["source"] == "census" for row in rows.values())
    (ledger,) = project.report()["ledgers"]
    assert ledger["outcome"] == "failed"  # the failing test keeps its ledger
    assert ledger["modules"]["jit(<lambda>)"] == 3


FIXTURE_BUDGET_TEST = """
    import jax, jax.numpy as jnp, pytest

    X = jnp.ones(4)  # at import: not one of the test's compiles

    def scaled(v):
        return jnp.tanh(v * 2).sum()

    @pytest.mark.compile_budget(max_compiles=0)
    def test_measured(jax_compile):
        jax_compile(jax.jit(scaled), X, transform="jit")

    @pytest.mark.compile_budget(max_compiles=1)
    def test_measured_once(jax_compile):
        jax_compile(jax.jit(scaled), X, transform="jit")
"""


def test_a_budget_counts_the_compiles_measured_through_the_fixture(project: JaxProject) -> None:
    """max_compiles=0 fails a test whose only compile is the jax_compile fixture's; the
    fixture's repeats (compile_repeat) are the setting's, not the test's: max_compiles=1
    still passes with three of them."""
    project.conftest(cache=False)
    project.tests(FIXTURE_BUDGET_TEST)
    result = project.run("-o", "compile_repeat=3", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_measured*",
            "*1 backend compiles in this test, over its compile_budget(max_compiles=0)*",
            "  jit(scaled): 1x (1 compiled by XLA, 0 from the persistent cache; "
            "1 measured by the jax_compile fixture)",
        ]
    )
    assert "test_measured_once" not in "".join(
        line for line in result.stdout.lines if line.startswith("FAILED")
    )


def test_census_rows_of_implicit_compiles_carry_their_cache_state(project: JaxProject) -> None:
    project.conftest()
    project.tests(IMPLICIT_TEST)
    project.run().assert_outcomes(passed=1)
    cold = project.rows()[("test_step", "jit(train_step)")]
    assert (cold["cache_state"], cold["cache"]["persisted"]) == ("cold", True)
    # The fingerprint is JAX's hash of the computation part of the key: not the whole key,
    # which a changed XLA flag changes too.
    computation = cold["cache_key_parts"]["computation"]
    assert cold["fingerprint"] == f"computation:{computation}"
    assert "xla flags" in {part.lower() for part in cold["cache_key_parts"]}
    if jax_logs_persistent_cache_keys():  # not by jax 0.4.30
        assert cold["module_name"] == "jit_train_step"
    else:  # a miss is not logged at all
        assert cold["module_name"] is None
    assert cold["compile_s"] == cold["backend_compile_s"] > 0
    project.run().assert_outcomes(passed=1)
    warm = project.rows()[("test_step", "jit(train_step)")]
    assert warm["cache_state"] == "warm"
    assert warm["fingerprint"] == cold["fingerprint"]
    assert warm["module_name"] == "jit_train_step"  # every version logs a hit's module


EAGER_AND_OWN_TEST = """
    import json, logging
    import jax, jax.numpy as jnp, pytest
    from jax._src import cache_key

    LOGGER = logging.getLogger("jax._src.cache_key")

    def double(v):
        return v * 2.0

    @pytest.mark.compile_budget()  # a census of this test only
    def test_mixed(monkeypatch):
        seen = {}
        original = cache_key.get

        def get(module, *args, **kwargs):  # whether JAX logs this key's parts
            name = str(module.operation.attributes["sym_name"]).strip('"')
            seen[name] = LOGGER.isEnabledFor(logging.DEBUG)
            return original(module, *args, **kwargs)

        monkeypatch.setattr(cache_key, "get", get)
        x = jnp.arange(5.0)  # eager dispatch
        y = (x + 1.0) * 3.0  # eager dispatch
        jax.jit(double)(y).block_until_ready()  # the program's own
        float(y.sum())  # eager dispatch
        with open("logged.json", "w") as out:
            json.dump(seen, out)

    def test_level_restored():  # after the census'd test
        assert LOGGER.level == logging.NOTSET
        assert not LOGGER.isEnabledFor(logging.DEBUG)
"""


def test_only_the_programs_compiles_pay_for_logging_their_key_parts(
    project: JaxProject,
) -> None:
    """JAX hashes every key part a second time to log it: eager dispatch's keys are not
    logged (nothing reads them), the program's are, and the logger's level is restored."""
    import json

    project.conftest()
    project.tests(EAGER_AND_OWN_TEST)
    project.run("-p", "no:randomly").assert_outcomes(passed=2)
    logged = json.loads((project.path / "logged.json").read_text())
    assert logged.pop("jit_double") is True
    assert logged and not any(logged.values()), logged  # jit_add, jit_multiply, ...
    row = project.rows()[("test_mixed", "jit(double)")]
    assert row["fingerprint"] == f"computation:{row['cache_key_parts']['computation']}"
    assert set(project.rows()) == {("test_mixed", "jit(double)")}


@pytest.mark.integration
def test_a_second_thread_reading_key_parts_gets_the_key_logger_at_debug() -> None:
    """The logger's level is process-wide: held quiet for one thread's eager compile, it is
    at DEBUG again as soon as another thread opens a capture that reads key parts."""
    import logging
    import threading

    from pytest_jaxcompile.backends.jax.keyparts import LOGGER
    from pytest_jaxcompile.backends.jax.monitor import CompileMonitor

    logger = logging.getLogger(LOGGER)
    monitor = CompileMonitor()
    seen: list[bool] = []

    def other_thread() -> None:
        with monitor.capture(key_parts=True):
            seen.append(logger.isEnabledFor(logging.DEBUG))

    try:
        with monitor.capture(key_parts=True):
            assert logger.isEnabledFor(logging.DEBUG)
            with monitor._lock:  # as the lowering of an eager compile on this thread does
                monitor._set_key_logger_quiet(True)
            assert not logger.isEnabledFor(logging.DEBUG)
            thread = threading.Thread(target=other_thread)
            thread.start()
            thread.join()
            assert logger.isEnabledFor(logging.DEBUG)
        assert seen == [True]
        assert logger.level == logging.NOTSET and not logger.isEnabledFor(logging.DEBUG)
    finally:
        monitor.uninstall()


def test_ledger_parts_add_up_to_the_wall_with_the_residual_named(project: JaxProject) -> None:
    project.conftest(cache=False)
    project.tests(IMPLICIT_TEST)
    result = project.run("-v")  # the ledger beside its test
    result.assert_outcomes(passed=1)
    (ledger,) = project.report()["ledgers"]
    assert ledger["compile_s"] + ledger["execute_and_python_s"] == pytest.approx(
        ledger["wall_s"], abs=1e-9
    )
    assert 0 < ledger["compile_fraction"] <= 1
    assert (
        ledger["compile_s"]
        <= ledger["trace_s"] + ledger["lower_s"] + ledger["backend_compile_s"] + 1e-9
    )
    assert ledger["compiles"] == 1
    result.stdout.fnmatch_lines(
        ["*test_step", "      wall * s = compile * s (*%) + running and Python * s; phases trace *"]
    )


def test_a_failing_test_keeps_its_census_rows_and_ledger(project: JaxProject) -> None:
    project.conftest(cache=False)
    project.tests(IMPLICIT_TEST.replace("float(loss) > 0", "float(loss) < 0, 'wrong sign'"))
    project.run().assert_outcomes(failed=1)
    row = project.rows()[("test_step", "jit(train_step)")]
    assert row["outcome"] == "failed"
    (ledger,) = project.report()["ledgers"]
    assert ledger["outcome"] == "failed" and ledger["wall_s"] > 0


def test_census_option_covers_unmarked_tests(project: JaxProject) -> None:
    project.conftest(cache=False)
    project.tests(IMPLICIT_TEST.replace("@pytest.mark.compile_budget(max_compiles=1)", ""))
    project.run().assert_outcomes(passed=1)
    assert project.report()["records"] == []
    project.run("--compile-census").assert_outcomes(passed=1)
    assert ("test_step", "jit(train_step)") in project.rows()


def test_census_with_the_plugin_disabled_records_nothing(project: JaxProject) -> None:
    project.conftest(cache=False)
    project.tests(
        IMPLICIT_TEST
        + """
    def test_no_listener_installed():
        from jax._src import monitoring
        assert not any("CompileMonitor" in repr(listener)
                       for listener in monitoring.get_event_listeners())
    """
    )
    result = project.pytester.runpytest_subprocess("-p", "no:jaxcompile", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert "jax compile times" not in result.stdout.str()
    assert not project.pins_dir.exists()


def _make_deeper(project: JaxProject, depth: int) -> None:
    project.tests(
        """
        import jax
        from jaxmodels import mlp_example_args, mlp_loss

        def test_mlp(jax_compile):
            args = mlp_example_args(DEPTH)
            jax_compile(jax.value_and_grad(mlp_loss), *args, transform="vag")
        """.replace("DEPTH", str(depth))
    )


def test_a_grown_module_is_named_in_the_drift_and_gated_deterministically(
    project: JaxProject,
) -> None:
    project.conftest(cache=False)
    _make_deeper(project, 2)
    project.pin_update()
    pinned = project.rows()[("test_mlp", "vag")]["op_count"]
    _make_deeper(project, 4)
    # Time drift (a tiny pin forced by hand) names what changed deterministically.
    (path,) = project.pins_dir.glob("*.toml")
    text = path.read_text()
    project.set_pin_field("compile_s", 0.0001)
    result = project.run("--compile-floor", "0")
    grown = project.rows()[("test_mlp", "vag")]["op_count"]
    assert grown > pinned
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"*module grew: {pinned} -> {grown} ops (+*%)*"])

    # The op-count gate alone: deterministic, fails even when time is only advisory.
    path.write_text(text)
    result = project.run("-o", "compile_time_advisory=true", "-o", "compile_max_ops_growth=0.10")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert project.verdicts()[("test_mlp", "vag")] == "GREW"
    result.stdout.fnmatch_lines(
        [
            "  GREW       test_models.py::test_mlp [[]vag[]]*",
            f"      module grew: {pinned} -> {grown} ops (+*%, limit +10%)*",
            "GREW: 1 row(s)*",
        ]
    )
    result = project.run("-o", "compile_max_ops_growth=5")
    assert project.verdicts()[("test_mlp", "vag")] != "GREW"


def test_time_advisory_reports_drift_without_failing(project: JaxProject) -> None:
    project.conftest(cache=False)
    _make_deeper(project, 2)
    project.pin_update()
    project.set_pin_field("compile_s", 0.0001)
    project.pytester.makeini("[pytest]\ncompile_time_advisory = true\n")
    result = project.run("--compile-floor", "0")
    assert result.ret == pytest.ExitCode.OK
    assert project.verdicts()[("test_mlp", "vag")] == "DRIFT"
    result.stdout.fnmatch_lines(["DRIFT: 1 row(s) *; reported only (time advisory)."])


def test_compile_count_is_pinned_and_a_change_is_reported(project: JaxProject) -> None:
    project.conftest(cache=False)
    project.tests(IMPLICIT_TEST)
    # Its max_compiles judges the budget-only test: no pin (docs/verdicts.md#budget-only-tests)
    project.pin_update()
    assert list(project.pins_dir.glob("*.toml")) == []
    # The session's census asks for every compile's seconds: pinned, and the test's count.
    project.run("--compile-census", "--compile-pin-update")
    (path,) = project.pins_dir.glob("*.toml")
    assert '[tests]\n"test_models.py::test_step" = { compiles = 1 }' in path.read_text()
    project.tests(
        IMPLICIT_TEST.replace("max_compiles=1", "max_compiles=5").replace(
            "assert float(loss) > 0",
            "jax.jit(lambda p: p)(ARGS[1])\n        assert float(loss) > 0",
        )
    )
    result = project.run("--compile-census")
    result.stdout.fnmatch_lines(
        ["compile count changed: test_models.py::test_step: 2 backend compile(s), pinned 1"]
    )


def test_trace_profile_attributes_trace_time_by_package(project: JaxProject) -> None:
    project.conftest(cache=False)
    project.tests(
        """
        import jax, jax.numpy as jnp

        def python_heavy(x):
            for _ in range(200):  # project-side Python work while tracing
                x = x + sum(range(50)) * 0.0
            total = 0
            for step in range(200_000):  # self time in this file: the project's
                total += step % 7
            return x + total * 0.0

        def test_profiled(jax_compile):
            jax_compile(python_heavy, jnp.ones(3), transform="heavy")
        """
    )
    result = project.run("-o", "compile_trace_profile=true", "--compile-record-dir", "records")
    result.assert_outcomes(passed=1)
    record = project.rows()[("test_profiled", "heavy")]
    profile = record["trace_profile"]
    assert set(profile) == {"jax", "stdlib_numpy", "project", "other"}
    assert sum(profile.values()) == pytest.approx(1.0, abs=0.01)
    assert profile["jax"] > 0 and profile["project"] > 0
    # The top files name the project's own file and JAX's, relative to where they live.
    assert "test_models.py" in record["trace_files"]
    assert any(name.startswith("jax/") for name in record["trace_files"])
    result.stdout.fnmatch_lines(
        [
            "trace profile*",
            "  session: 1 row(s), trace * s: jax *%, stdlib+numpy *%, project *%, other *%",
            "  top files: *test_models.py*",
            "  test_models.py::test_profiled [[]heavy[]] trace * s: jax *%, *",
        ]
    )
    # The session's rollup in the JSON report: one row, its shares weighted by its seconds.
    rollup = project.report()["trace_profile"]
    assert rollup["rows"] == 1
    assert rollup["trace_s"] == pytest.approx(record["trace_s"], abs=1e-6)
    shares = {group["name"]: group["share"] for group in rollup["groups"]}
    assert shares["project"] == pytest.approx(profile["project"], abs=1e-4)
    assert "test_models.py" in {item["name"] for item in rollup["files"]}
    # ... and in the dashboard made from the records corpus.
    assert cli(project.path, "report", "records", "--html", "compile.html").returncode == 0
    page = (project.path / "compile.html").read_text()
    assert '<h2 id="trace">Where tracing time goes</h2>' in page
    assert "<code>test_models.py</code>" in page
    project.run()
    assert project.rows()[("test_profiled", "heavy")]["trace_profile"] is None


SHAPES_TEST = """
    import os

    import jax, jax.numpy as jnp

    @jax.jit
    def scale(v):
        return v * 2.0

    def test_shapes():
        sizes = [int(size) for size in os.environ["SIZES"].split(",")]
        for size in sizes:
            scale(jnp.ones(size)).block_until_ready()
"""


def test_census_rows_of_one_function_are_named_by_signature_not_compile_order(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.conftest(cache=False)
    project.tests(SHAPES_TEST)
    names = []
    for sizes in ("3,5", "5,3"):
        monkeypatch.setenv("SIZES", sizes)
        project.run("--compile-census").assert_outcomes(passed=1)
        names.append({transform for _, transform in project.rows()})
    assert names[0] == names[1] == {"jit(scale)[f32[3]]", "jit(scale)[f32[5]]"}
