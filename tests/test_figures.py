"""No figure misleads: every compile the gate adds is in the session's figures, said as what it
is (summed over pytest-xdist's workers, or the wall); a row is shown under the key and cache
state of the pin that judged it; no line claims a pin that was not written."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from records_factory import make_record

from pytest_jaxcompile.gate.conclude import GateSettings, conclude
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.outcome import Outcome
from pytest_jaxcompile.gate.paired import pairing_cost
from pytest_jaxcompile.gate.pins import PinStore
from pytest_jaxcompile.gate.status import Status
from pytest_jaxcompile.gate.view import BlockKind, session_view
from pytest_jaxcompile.gate.view.spend import PAIRING, PROFILING
from pytest_jaxcompile.output.github import step_summary
from pytest_jaxcompile.output.json_report import build_report
from pytest_jaxcompile.output.terminal import summary_lines
from pytest_jaxcompile.records import CompileRecord

CPU = {"platform": "cpu", "device_kind": "cpu"}
THRESHOLDS = Thresholds()


def _pins(tmp_path: Path) -> PinStore:
    """A test's cold pin (0.335 s) and warm pin (0.04 s) of the module it had then."""
    for state, seconds in (("cold", 0.335), ("warm", 0.04)):
        PinStore.load(tmp_path).update(
            [
                make_record(
                    cache_state=state,
                    compile_s=seconds,
                    compile_cpu_s=seconds,
                    fingerprint="sha256:old",
                    hardware_detail=CPU,
                )
            ]
        )
    return PinStore.load(tmp_path)


def _changed_hit(**overrides: object) -> CompileRecord:
    """A warm hit of a changed module, compiled afresh with the cache bypassed (its twin)."""
    values: dict[str, object] = {
        "cache_state": "warm",
        "compile_s": 0.05,
        "compile_cpu_s": 0.05,
        "fingerprint": "sha256:new",
        "hardware_detail": CPU,
        "twin_cache_state": "cold",
        "twin_compile_s": 3.25,
        "twin_compile_cpu_s": 3.2,
    }
    return make_record(**(values | overrides))


def _conclude(
    tmp_path: Path, records: list[CompileRecord], pin_update: bool = False, **outcome: object
) -> Outcome:
    store = PinStore.load(tmp_path)
    concluded = conclude(
        records,
        [record.cell for record in records],
        [],
        store,
        GateSettings(THRESHOLDS, pin_update=pin_update),
        rootdir=tmp_path,
    )
    return dataclasses.replace(concluded, **outcome)  # type: ignore[arg-type]


def _text(outcome: Outcome, verbose: bool = False) -> list[str]:
    return [text for text, _ in summary_lines(outcome, verbose)]


# --- every compile the gate adds is in the figures --------------------------------------


def test_the_fresh_compiles_of_changed_modules_are_in_the_compile_time_and_the_gates_cost(
    tmp_path: Path,
) -> None:
    _pins(tmp_path)
    hits = [
        _changed_hit(cell=f"tests/test_models.py::test_{name}") for name in ("a", "b", "c", "d")
    ]
    outcome = _conclude(tmp_path, hits, session_s=20.6)
    compile_line, gate_line = _text(outcome)[:2]
    # The tests' 0.2 s and the gate's 13.0 s: 13.2 s of the session's 20.6 s, said apart
    assert compile_line == (
        "compile time: 13.2 s of the session's 20.6 s (64%), 4 compile row(s): 4 warm; "
        "of it, the gate's fresh compiles of 4 changed module(s) 13.0 s "
        "(the persistent cache bypassed)"
    )
    assert gate_line == (
        "the gate itself spent 13.0 s: fresh compiles of 4 changed module(s) in their tests 13.0 s"
    )
    spend = session_view(outcome).spend
    assert spend is not None and (spend.fresh_rows, spend.fresh_s) == (4, 13.0)
    # With works after the tests, each is said after the fresh compiles
    both = dataclasses.replace(outcome, gate_s={PAIRING: 17.5})
    assert _text(both)[1] == (
        "the gate itself spent 30.5 s: fresh compiles of 4 changed module(s) in their tests "
        "13.0 s; after the tests, pairing 17.5 s"
    )
    # The JSON report and the step summary say the same figures, from the one view
    report = build_report(both, hits, [], "0.1.0")
    assert report["spend"]["fresh_compiles"] == {"rows": 4, "seconds": 13.0}
    assert report["spend"]["gate_total_s"] == 30.5
    assert report["spend"]["lines"] == _text(both)[:2]
    summary = step_summary(both)
    assert "Of it, the gate's fresh compiles of 4 changed module(s) 13.0 s" not in summary
    assert "the gate's fresh compiles of 4 changed module(s) 13.0 s" in summary
    assert "The gate itself spent 30.5 s: fresh compiles of 4 changed module(s)" in summary


def test_under_xdist_the_gates_seconds_are_said_summed_over_the_workers(tmp_path: Path) -> None:
    """`session 16.0 s wall` beside `the gate itself spent 21.4 s` read as a gate slower than
    its session: the workers' seconds are said summed, beside the wall."""
    paired = make_record(
        paired_base_wall_s=[0.5] * 6,
        paired_new_wall_s=[0.5] * 6,
        paired_base_cpu_s=[0.5] * 6,
        paired_new_cpu_s=[0.5] * 6,
        paired_cost_s=7.5,
    )
    rows = [paired, dataclasses.replace(paired, cell="tests/test_models.py::test_b")]
    outcome = _conclude(
        tmp_path,
        rows,
        session_s=16.0,
        workers=2,
        gate_s={PAIRING: 17.5, PROFILING: 3.9},
        profiled_rows=1,
    )
    compile_line, gate_line = _text(outcome)[:2]
    assert compile_line.startswith("compile time: 2.0 s summed over 2 workers, session 16.0 s wall")
    assert gate_line.startswith(
        "after the tests, the gate itself spent 21.4 s summed over 2 workers "
        "(session 16.0 s wall): pairing 17.5 s, profiling 1 row(s) 3.9 s"
    )
    (paired_block,) = session_view(outcome).blocks_of(BlockKind.PAIRED)
    assert paired_block.text.startswith("paired 2 changed rows in 15 s summed over 2 workers: ")
    cost = pairing_cost(rows, THRESHOLDS, workers=2)
    report = build_report(outcome, rows, [], "0.1.0")
    assert cost is not None and report["paired"]["text"] == cost.describe() == paired_block.text
    assert report["spend"]["summed_over_workers"] == 2
    # One process: the share of the session, as before
    serial = dataclasses.replace(outcome, workers=1)
    assert _text(serial)[1].startswith("after the tests, the gate itself spent 21.4 s: pairing")


# --- a row is shown under the pin that judged it ----------------------------------------


def test_a_changed_cache_hit_is_shown_under_the_cold_key_whose_pin_judged_it(
    tmp_path: Path,
) -> None:
    _pins(tmp_path)
    outcome = _conclude(tmp_path, [_changed_hit()])
    (verdict,) = outcome.verdicts
    assert verdict.twin and verdict.status is Status.DRIFT
    view = session_view(outcome)
    (group,) = view.groups
    assert group.key.cache_state == "cold" and group.key == verdict.judged.key
    assert group.pin_file is not None and "--cold--" in group.pin_file.name
    (row,) = group.rows
    assert row.key == group.key
    assert row.figures.text().startswith("3.250 s, pin 0.335 s")  # the cold pin's figure
    lines = _text(outcome)
    header = next(line for line in lines if line.startswith(group.key.hardware))
    assert header.startswith(group.key.describe()) and "| cold" in header
    assert not any("| warm" in line for line in lines)
    assert f"### {group.key.describe()}" in step_summary(outcome)
    # The JSON report names the key it was judged under beside the row's own
    (judged,) = build_report(outcome, [verdict.record], [], "0.1.0")["verdicts"]
    assert judged["key"]["cache_state"] == "warm"
    assert judged["judged_key"]["cache_state"] == "cold"


# --- no line claims a pin that was not written ------------------------------------------


def test_a_pin_update_claims_only_the_pins_it_wrote(tmp_path: Path) -> None:
    """A failed row (its cache state unknown) pins nothing: its key's group says so, names
    no pin file; a changed hit pins its twin cold beside itself warm: both are said."""
    _pins(tmp_path)
    failed = make_record(
        cell="tests/test_models.py::test_broken",
        cache_state="unknown",
        compile_s=0.2,
        error="XlaRuntimeError: out of memory",
        hardware_detail=CPU,
    )
    outcome = _conclude(tmp_path, [failed, _changed_hit()], pin_update=True)
    assert outcome.pin_error is None and len(outcome.pins_written) == 2
    lines = _text(outcome)
    at = next(i for i, line in enumerate(lines) if line.endswith("| unknown"))
    assert lines[at + 1] == "  not pinned 1 row(s) (failed)"
    assert sum(1 for line in lines if line == "  pinned     1 row(s)") == 2
    groups = {group.key.cache_state: group for group in session_view(outcome).groups}
    assert set(groups) == {"cold", "warm", "unknown"}
    unknown = groups["unknown"]
    assert (unknown.pinned_rows, unknown.not_pinned, unknown.pin_file) == (
        0,
        (("failed", 1),),
        None,
    )
    assert [group.pinned_rows for group in (groups["cold"], groups["warm"])] == [1, 1]
    written = {path.name for path in outcome.pins_written}
    assert {
        group.pin_file.name for group in (groups["cold"], groups["warm"]) if group.pin_file
    } == written
    summary = step_summary(outcome)
    assert "1 row(s) not pinned (failed)." in summary
    assert summary.count("1 row(s) pinned.") == 2
