"""torch rows from torch's compilation metrics, without torch: runs in every matrix session.

The metrics are frozen: plain dicts of the fields the plugin reads, captured once from
``torch._dynamo.utils.get_compilation_metrics()`` under torch 2.13.0 (CPU build), for a
cold compile, an FX-graph cache hit, a graph break, a recompile, the eager backend and a
compile that failed. A metric torch left None (inductor's spans on a cache hit, all of
them under the eager backend) stays None here, as torch gave it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from records_factory import make_record

from pytest_jaxcompile.backends.torch.measure import (
    FrameCompile,
    build_ledger,
    classify_frame,
    frames_from_metrics,
    recompile_problems,
)
from pytest_jaxcompile.gate.budget import CompileBudget, over_budget
from pytest_jaxcompile.gate.judging import judge
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.outcome import Outcome
from pytest_jaxcompile.gate.pins import PinStore
from pytest_jaxcompile.gate.status import Status
from pytest_jaxcompile.output.github import step_summary
from pytest_jaxcompile.output.json_report import build_report
from pytest_jaxcompile.output.junit import junit_properties
from pytest_jaxcompile.output.terminal import summary_lines
from pytest_jaxcompile.record_checks import RecordDataError, check_record_data
from pytest_jaxcompile.records import CacheState, CompileRecord

NO_CACHE_LOOKUPS = {
    "inductor_fx_local_cache_hit_count": 0,
    "inductor_fx_local_cache_miss_count": 0,
    "inductor_fx_remote_cache_hit_count": 0,
    "inductor_fx_remote_cache_miss_count": 0,
    "aotautograd_local_cache_hit_count": 0,
    "aotautograd_local_cache_miss_count": 0,
    "aotautograd_remote_cache_hit_count": 0,
    "aotautograd_remote_cache_miss_count": 0,
}
COLD_LOOKUPS = {
    **NO_CACHE_LOOKUPS,
    "inductor_fx_local_cache_miss_count": 1,
    "aotautograd_local_cache_miss_count": 1,
}
WARM_LOOKUPS = {
    **NO_CACHE_LOOKUPS,
    "inductor_fx_local_cache_hit_count": 1,
    "aotautograd_local_cache_hit_count": 1,
}


def metrics(
    name: str,
    line: int,
    start_us: int,
    times: tuple[Any, ...],
    lookups: dict[str, int],
    ops: int = 4,
    reason: str | None = None,
) -> dict[str, Any]:
    frame, backend, inductor, code_gen, triton_us = times
    return {
        "co_name": name,
        "co_filename": "models.py",
        "co_firstlineno": line,
        "entire_frame_compile_time_s": frame,
        "backend_compile_time_s": backend,
        "inductor_compile_time_s": inductor,
        "code_gen_time_s": code_gen,
        "triton_compile_time_us": triton_us,
        **lookups,
        "graph_op_count": ops,
        "recompile_reason": reason,
        "fail_reason": None,
        "start_time_us": start_us,
    }


# (sin(x) * 2 + 1).sum() compiled cold, then again in a fresh dynamo (an FX-graph hit)
COLD = metrics(
    "scaled_sum",
    9,
    1796140924910725,
    (35.903705, 35.652257, 34.360002, 34.271256, 2285508),
    COLD_LOOKUPS,
)
WARM = metrics(
    "scaled_sum", 9, 1796140960822981, (0.102153, 0.029299, None, None, 110), WARM_LOOKUPS
)
# a print() in the middle: two frames, the second dynamo's resume function
BREAK = [
    metrics(
        "broken",
        11,
        1796140960932967,
        (2.242676, 2.15677, 2.108311, 2.06136, 2008915),
        COLD_LOOKUPS,
        ops=2,
    ),
    metrics(
        "torch_dynamo_resume_in_broken_at_13",
        13,
        1796140963182614,
        (1.612373, 1.538605, 1.4862, 1.453158, 1403625),
        COLD_LOOKUPS,
        ops=2,
    ),
]
# dynamic=False, called with a new shape: a guard failure recompiles
RECOMPILE = [
    metrics("scaled_sum", 9, 1796140964807326, (0.063213, 0.006097, None, None, 85), WARM_LOOKUPS),
    metrics(
        "scaled_sum",
        9,
        1796140964875822,
        (1.784705, 1.723505, 1.670403, 1.643643, 1603993),
        COLD_LOOKUPS,
        reason="0/0: tensor 'x' size mismatch at index 0. expected 8, actual 9",
    ),
]
EAGER = metrics(
    "scaled_sum", 9, 1796140966666824, (0.06108, 0.000125, None, None, None), NO_CACHE_LOOKUPS
)
# docs/torch.md's two-layer MLP (Linear(16, 32), relu, Linear(32, 4)) on 8x16 inputs: the
# first call in a process with an empty TORCHINDUCTOR_CACHE_DIR, then in a second process
# with the same one (an FX-graph hit, AOTAutograd missed), with each first call's wall
# seconds, on 2 shared AMD EPYC cores at a load of about 2 per core.
MLP_COLD = metrics(
    "forward",
    20,
    1796249021632582,
    (24.629764, 24.38975, 23.171964, 23.014435, 1098498),
    COLD_LOOKUPS,
    ops=3,
)
MLP_COLD_WALL_S = 24.659895
MLP_WARM = metrics(
    "forward",
    20,
    1796249053992826,
    (3.274475, 3.040966, 1.965691, None, 1900),
    {
        **NO_CACHE_LOOKUPS,
        "inductor_fx_local_cache_hit_count": 1,
        "aotautograd_local_cache_miss_count": 1,
    },
    ops=3,
)
MLP_WARM_WALL_S = 3.294791
MISSING_FRAME_TIME = {**COLD, "entire_frame_compile_time_s": None}
# x.view(3) of 8 elements: dynamo fails before the backend runs
FAILED = {
    **metrics("broken", 6, 1796141321423640, (0.067403, None, None, None, None), NO_CACHE_LOOKUPS),
    "graph_op_count": None,
    "fail_reason": "RuntimeError when making fake tensor call\n  Explanation: Dynamo failed "
    "to run FX node with fake tensors: call_method view(*(FakeTensor(..., size=(8,)), 3), "
    "**{}): got RuntimeError(\"shape '[3]' is invalid for input of size 8\")",
}


def test_a_cold_frame_keeps_every_figure_torch_measured() -> None:
    frame = FrameCompile.from_metrics(COLD)
    assert (frame.name, frame.location, frame.graph_op_count) == ("scaled_sum", "models.py:9", 4)
    assert (frame.compile_s, frame.backend_compile_s) == (35.903705, 35.652257)
    assert frame.phases == {
        "backend_compile_s": 35.652257,
        "compile_other_s": pytest.approx(0.251448),
    }
    assert frame.overlays == {
        "inductor_s": 34.360002,
        "inductor_code_gen_s": 34.271256,
        "triton_s": 2.285508,
    }
    assert frame.missing == () and frame.missing_note is None
    assert classify_frame(frame, caches_enabled=True).cache_state is CacheState.COLD


def test_a_cache_hit_leaves_inductors_spans_null_never_zero() -> None:
    frame = FrameCompile.from_metrics(WARM)
    assert (frame.inductor_s, frame.code_gen_s) == (None, None)
    assert frame.overlays == {"triton_s": 0.00011}  # no inductor_s: 0 would be a lie
    assert frame.missing == ("inductor_compile_time_s", "code_gen_time_s")
    assert frame.missing_note == (
        "torch reported no inductor_compile_time_s, code_gen_time_s: null, not 0"
    )
    assert frame.phases == {
        "backend_compile_s": 0.029299,
        "compile_other_s": pytest.approx(0.072854),
    }
    assert classify_frame(frame, caches_enabled=True).cache_state is CacheState.WARM


def test_the_eager_backend_measures_no_inductor_span() -> None:
    frame = FrameCompile.from_metrics(EAGER)
    assert frame.missing == ("inductor_compile_time_s", "code_gen_time_s", "triton_compile_time_us")
    assert frame.overlays == {}
    assert classify_frame(frame, caches_enabled=True).cache_state is CacheState.UNKNOWN


def test_a_missing_frame_compile_time_is_null_and_leaves_no_partial_ledger() -> None:
    frame = FrameCompile.from_metrics(MISSING_FRAME_TIME)
    assert (frame.compile_s, frame.compile_other_s, frame.phases) == (None, None, {})
    assert frame.missing == ("entire_frame_compile_time_s",)
    assert build_ledger([frame], "t.py::test_x", 40.0) is None
    whole = FrameCompile.from_metrics(
        {k: v for k, v in COLD.items() if k != "entire_frame_compile_time_s"}
    )
    assert whole.missing == ("entire_frame_compile_time_s",)  # absent reads as missing too


def test_a_compile_that_failed_before_its_backend_keeps_its_seconds_unsplit() -> None:
    frame = FrameCompile.from_metrics(FAILED)
    assert frame.missing == (
        "backend_compile_time_s",
        "inductor_compile_time_s",
        "code_gen_time_s",
        "triton_compile_time_us",
    )
    assert (frame.compile_s, frame.backend_compile_s, frame.phases) == (0.067403, None, {})
    ledger = build_ledger([frame], "t.py::test_raises", 0.5)
    assert ledger is not None  # the wall and the compile are known: the partition holds
    assert (ledger.compile_s, ledger.backend_compile_s, ledger.compile_other_s) == (
        0.067403,
        None,
        None,
    )
    assert ledger.execute_and_python_s == pytest.approx(0.5 - 0.067403)
    assert ledger.overlays == {}


def test_a_graph_break_is_two_frames_in_one_ledger() -> None:
    frames = frames_from_metrics([COLD, *BREAK], start_time_us=BREAK[0]["start_time_us"])
    assert [frame.name for frame in frames] == ["broken", "torch_dynamo_resume_in_broken_at_13"]
    ledger = build_ledger(frames, "t.py::test_break", 4.0)
    assert ledger is not None
    assert ledger.compile_s == pytest.approx(2.242676 + 1.612373)
    assert ledger.backend_compile_s == pytest.approx(2.15677 + 1.538605)
    assert ledger.wall_s == pytest.approx(ledger.compile_s + (ledger.execute_and_python_s or 0))
    assert ledger.overlays["inductor_code_gen_s"] == pytest.approx(2.06136 + 1.453158)
    assert ledger.compiles == 2 and ledger.persistent_cache_hits == 0


def test_an_overlay_one_frame_lacks_is_left_out_of_the_ledger() -> None:
    frames = frames_from_metrics(RECOMPILE, start_time_us=0)
    ledger = build_ledger(frames, "t.py::test_recompile", 2.0)
    assert ledger is not None
    assert set(ledger.overlays) == {"triton_s"}  # inductor_s of the hit is not known
    assert ledger.persistent_cache_hits == 1


def test_a_recompile_names_torchs_reason() -> None:
    frames = frames_from_metrics(RECOMPILE, start_time_us=0)
    assert recompile_problems(1, frames) == [
        "2 torch.compile frame compiles in this test, over its compile_budget(max_compiles=1):",
        "  scaled_sum at models.py:9: 2x",
        "    compile 2: recompile: 0/0: tensor 'x' size mismatch at index 0. expected 8, actual 9",
    ]


def unmeasured_row() -> CompileRecord:
    return make_record(
        framework="torch",
        jax_version="",
        jaxlib_version="",
        torch_version="2.13.0+cpu",
        transform="scaled_sum",
        compile_s=None,
        fingerprint=None,
        missing_metrics=["entire_frame_compile_time_s"],
    )


def test_a_row_without_a_compile_time_is_not_judged_and_says_why(tmp_path: Path) -> None:
    record = unmeasured_row()
    store = PinStore.load(tmp_path / "pins")
    pinned = make_record(
        **{
            **record.to_dict(),
            "compile_s": 0.5,
            "missing_metrics": None,
            "cache": record.cache,
            "host_state": record.host_state,
        }
    )
    store.update([pinned])
    verdict = judge(record, PinStore.load(tmp_path / "pins"), Thresholds())
    assert verdict.status is Status.NOT_JUDGED  # not ok, not drift: nothing to compare
    assert verdict.note == (
        "not judged: no compile time: torch reported no entire_frame_compile_time_s"
    )
    assert store.update([record]) == []  # never pinned
    assert over_budget(CompileBudget(seconds=5.0), [record]) == [
        "transform 'scaled_sum': no compile time: torch reported no "
        "entire_frame_compile_time_s, so its compile_budget of 5 s cannot be checked"
    ]


def test_records_validation_takes_a_null_compile_time_only_with_its_reason() -> None:
    data = unmeasured_row().to_dict()
    check_record_data(data)
    assert CompileRecord.from_dict(data).compile_s is None
    with pytest.raises(RecordDataError, match="'compile_s' is null but the record names no"):
        check_record_data({**data, "missing_metrics": None})
    with pytest.raises(RecordDataError, match="'missing_metrics' must be a list of names"):
        check_record_data({**data, "missing_metrics": [0]})


def test_every_output_renders_a_row_without_a_compile_time(tmp_path: Path) -> None:
    """The terminal summary (with durations), the JSON report, JUnit, the GitHub summary:
    a null compile time shows as none, never as 0 and never as a crash."""
    record = unmeasured_row()
    timed = make_record(cell="tests/t.py::test_timed", compile_s=2.0)
    thresholds = Thresholds()
    store = PinStore.load(tmp_path / "pins")
    outcome = Outcome(
        rootdir=tmp_path,
        pins_dir=tmp_path,
        thresholds=thresholds,
        pin_update=False,
        verdicts=[judge(record, store, thresholds), judge(timed, store, thresholds)],
        failed=False,
    )
    text = "\n".join(line for line, _ in summary_lines(outcome, verbose=True, durations=0))
    assert "not judged: no compile time: torch reported no entire_frame_compile_time_s" in text
    assert "0.000 s" not in text
    report = build_report(outcome, [record, timed], [], "0.1.0")
    assert report["records"][0]["compile_s"] is None
    assert report["records"][0]["missing_metrics"] == ["entire_frame_compile_time_s"]
    assert not any(name.endswith(".compile_s") for name, _ in junit_properties(record))
    assert "| not judged | `tests/test_models.py::test_mlp` | scaled_sum | - |" in (
        step_summary(outcome)
    )
