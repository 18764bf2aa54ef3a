"""Verdict rules: strictly within one key, tolerance and floor, notes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from records_factory import make_record

from pytest_jaxcompile.gate.judging import judge, judge_all
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.nearest import OTHER_HARDWARE, UPGRADE, nearest_pin
from pytest_jaxcompile.gate.paired import pairing_target
from pytest_jaxcompile.gate.pins import OWN_KEY, PinStore
from pytest_jaxcompile.gate.stale import find_stale
from pytest_jaxcompile.gate.status import Status, session_failed
from pytest_jaxcompile.gate.upgrades import upgrade_reports
from pytest_jaxcompile.gate.view import figures
from pytest_jaxcompile.records import HostState

THRESHOLDS = Thresholds(tolerance=0.5, floor_s=0.25)


@pytest.fixture
def store(tmp_path: Path) -> PinStore:
    store = PinStore.load(tmp_path)
    store.update([make_record(compile_s=1.0)])
    return PinStore.load(tmp_path)


@pytest.mark.parametrize(
    ("compile_s", "status"),
    [
        (1.0, Status.OK),
        # Within the tolerance, and under the undecided band (1.5x / 1.35 = 1.11x)
        (1.11, Status.OK),
        (1.49, Status.NOISY),  # near the tolerance, either side: not decided on one compile
        (1.6, Status.NOISY),
        (2.02, Status.NOISY),  # under the band's upper edge (1.5x * 1.35 = 2.025x)
        (2.03, Status.DRIFT),
        (0.5, Status.IMPROVED),
        (0.7, Status.OK),  # faster, but not beyond 1/(1+tolerance)
    ],
)
def test_relative_tolerance(store: PinStore, compile_s: float, status: Status) -> None:
    assert judge(make_record(compile_s=compile_s), store, THRESHOLDS).status is status


def test_floor_keeps_small_jitter_from_failing(tmp_path: Path) -> None:
    store = PinStore.load(tmp_path)
    store.update([make_record(compile_s=0.05)])
    # 4x slower, but only 0.15 s slower: under the floor.
    assert judge(make_record(compile_s=0.2), store, THRESHOLDS).status is Status.OK
    assert judge(make_record(compile_s=0.31), store, THRESHOLDS).status is Status.DRIFT


def test_never_compared_across_keys(store: PinStore) -> None:
    for other in (
        make_record(compile_s=50.0, cache_state="warm"),
        make_record(compile_s=50.0, hardware="gpu:NVIDIA A100 @ X x32"),
        make_record(compile_s=50.0, mixed_precision=True),
    ):
        assert judge(other, store, THRESHOLDS).status is Status.UNPINNED


def test_version_bump_is_unpinned_and_compared_with_the_previous_version(
    store: PinStore,
) -> None:
    verdict = judge(make_record(compile_s=50.0, jax_version="0.11.0"), store, THRESHOLDS)
    assert verdict.status is Status.UNPINNED
    assert verdict.nearest is not None and verdict.nearest.relation == UPGRADE
    assert verdict.nearest.ratio == 50.0
    assert verdict.note is not None and "jax 0.10.2" in verdict.note and "50.00x" in verdict.note
    assert not verdict.fails(THRESHOLDS)
    assert verdict.fails(dataclasses.replace(THRESHOLDS, require_pinned=True))


def test_the_nearest_pin_is_the_latest_earlier_version_then_other_hardware(
    tmp_path: Path,
) -> None:
    store = PinStore.load(tmp_path)
    store.update(
        [
            make_record(compile_s=1.0, jax_version="0.9.2"),
            make_record(compile_s=2.0, jax_version="0.10.0"),
            make_record(compile_s=3.0, jax_version="0.10.0", hardware="cpu:cpu @ Other CPU x4"),
            make_record(compile_s=4.0, jax_version="0.10.2", hardware="gpu:H200 @ Other CPU x4"),
            make_record(
                compile_s=5.0,
                jax_version="0.10.2",
                hardware="runner-a",
                hardware_detail={"platform": "cpu", "device_kind": "cpu"},
            ),
            make_record(compile_s=7.0, jax_version="0.10.2", hardware="runner-c"),
            make_record(compile_s=6.0, jax_version="0.10.2", cache_state="warm"),
        ]
    )
    store = PinStore.load(tmp_path)
    upgrade = nearest_pin(make_record(compile_s=4.0, jax_version="0.10.2"), store)
    assert upgrade is not None and upgrade.relation == UPGRADE
    assert (upgrade.key.framework_version, upgrade.ratio) == ("0.10.0", 2.0)
    # A new runner: the same version elsewhere; never a GPU's pin for a CPU row. A pin under
    # a hand-set hardware name is a candidate by the device it recorded (runner-a's CPU),
    # never when it recorded none (runner-c, an earlier release's pin: it might be a GPU's).
    elsewhere = nearest_pin(make_record(hardware="cpu:cpu @ New CPU x2"), store)
    assert elsewhere is not None and elsewhere.relation == OTHER_HARDWARE
    assert elsewhere.key.hardware == "runner-a"
    # A row that says nothing of its device either is compared with nothing.
    assert nearest_pin(make_record(hardware="runner-b", jax_version="0.10.2"), store) is None
    # A row named by hand (a CI runner class) is compared by the device it measured: a CPU
    # row with the detected CPU pins (the laptop's), never with the GPU's.
    cpu = {"platform": "cpu", "device_kind": "cpu"}
    hosted = nearest_pin(
        make_record(hardware="gha-ubuntu-latest", jax_version="0.10.0", hardware_detail=cpu),
        store,
    )
    assert hosted is not None and hosted.relation == OTHER_HARDWARE
    assert hosted.key.hardware == "cpu:cpu @ Test CPU x2"
    assert "nearest pin cpu:cpu @ Test CPU x2 | jax 0.10.0" in hosted.describe()
    gpu_row = make_record(
        hardware="gha-gpu",
        jax_version="0.10.0",
        hardware_detail={"platform": "gpu", "device_kind": "H100"},
    )
    assert nearest_pin(gpu_row, store) is None
    # Other cache states and precisions are never compared.
    assert nearest_pin(make_record(cache_state="warm", hardware="x"), store) is None
    assert nearest_pin(make_record(mixed_precision=True), store) is None


def test_only_pins_of_the_rows_platform_and_device_judge_it_nearest_first(
    tmp_path: Path,
) -> None:
    """`PinStore.judging`: one hand-set name for a GPU and a CPU runner. The GPU's pins
    judge no CPU row: not its own key's (the row says why), not an upgrade's (no upgrade
    block), not the paired gate's target."""
    gpu = {"platform": "gpu", "device_kind": "NVIDIA A100-SXM4-80GB"}
    cpu = {"platform": "cpu", "device_kind": "cpu"}
    store = PinStore.load(tmp_path)
    store.update(
        [
            make_record(hardware="runner", hardware_detail=gpu, compile_s=0.5),
            make_record(hardware="runner", hardware_detail=gpu, jax_version="0.9.2", compile_s=0.5),
            make_record(
                cell="t.py::test_up", hardware="runner", hardware_detail=gpu, jax_version="0.9.2"
            ),
        ]
    )
    store = PinStore.load(tmp_path)
    row = make_record(hardware="runner", hardware_detail=cpu, compile_s=2.0, fingerprint="x")
    pins = store.judging(row)
    assert (pins.own, pins.nearest, pins.candidates) == (None, None, ())
    assert pins.refused is not None and pins.refused.key.framework_version == "0.10.2"
    verdict = judge(row, store, THRESHOLDS)
    assert (verdict.status, verdict.pin, verdict.nearest) == (Status.UNPINNED, None, None)
    assert verdict.note == (
        "pin recorded on gpu NVIDIA A100-SXM4-80GB; this row ran on cpu: not compared"
    )
    assert pairing_target(row, store) is None
    upgraded = make_record(
        cell="t.py::test_up", hardware="runner", hardware_detail=cpu, compile_s=9.0
    )
    assert upgrade_reports(judge_all([upgraded], store, THRESHOLDS)) == []
    # The same device under the same name: its own pin first, then the upgrade's.
    on_gpu = make_record(hardware="runner", hardware_detail=gpu, compile_s=0.5)
    relations = [each.relation for each in store.judging(on_gpu).candidates]
    assert relations == [OWN_KEY, UPGRADE]
    assert judge(on_gpu, store, THRESHOLDS).status is Status.OK


def test_a_pin_of_release_0_1_0_under_a_hand_set_name_never_judges_a_row_on_a_known_device(
    tmp_path: Path,
) -> None:
    """Release 0.1.0 recorded no platform or device kind: its pin file, under a hardware
    name set by hand (JAXCOMPILE_HARDWARE), says nothing of what it was measured on. A row
    whose device is known is not judged by it (not DRIFT, whatever the device), and its note
    says why and names the re-pin that records the device; a row that says nothing of its
    device still takes it."""
    release = Path(__file__).parent / "data" / "release-0.1.0" / "pins"
    text = (release / "cpu-cpu-amd-epyc-x2--jax-0.10.2--full--cold--b62bed79.toml").read_text()
    assert "platform" not in text and "device_kind" not in text
    pins = tmp_path / "pins"
    pins.mkdir()
    (pins / "runner.toml").write_text(
        text.replace('hardware = "cpu:cpu @ AMD EPYC x2"', 'hardware = "gha-ubuntu-latest"')
    )
    store = PinStore.load(pins)
    cell, transform = "test_old.py::test_fixture", "jit(broadcast_in_dim)"
    gpu = {"platform": "gpu", "device_kind": "NVIDIA H100 80GB HBM3"}
    row = make_record(
        cell=cell,
        transform=transform,
        hardware="gha-ubuntu-latest",
        hardware_detail=gpu,
        compile_s=30.0,  # 260x the pin's seconds: DRIFT, were it judged
    )
    verdict = judge(row, store, THRESHOLDS)
    assert (verdict.status, verdict.pin) == (Status.UNPINNED, None)
    assert verdict.note is not None and verdict.note.startswith(
        "its pin recorded no device (pins of release 0.1.0 do not); this row ran on gpu NVIDIA "
        "H100 80GB HBM3: not compared. A re-pin on this device (pytest --compile-pin-update)"
    )
    assert pairing_target(row, store) is None
    unknown = make_record(cell=cell, transform=transform, hardware="gha-ubuntu-latest")
    assert judge(unknown, store, THRESHOLDS).status is Status.DRIFT  # nothing to tell apart


def test_an_upgrade_report_gates_on_the_median_slowdown(tmp_path: Path) -> None:
    store = PinStore.load(tmp_path)
    store.update(
        [make_record(cell=f"t.py::test_{n}", compile_s=1.0, jax_version="0.9.2") for n in range(3)]
    )
    store = PinStore.load(tmp_path)
    rows = [
        make_record(cell=f"t.py::test_{n}", compile_s=s, jax_version="0.10.2")
        for n, s in enumerate((1.2, 1.5, 4.0))
    ]
    (report,) = upgrade_reports(judge_all(rows, store, THRESHOLDS))
    assert (report.old, report.new, len(report.verdicts)) == ("0.9.2", "0.10.2", 3)
    assert report.median_ratio == 1.5
    assert [v.record.cell for v in report.worst(1)] == ["t.py::test_2"]
    assert not report.fails(THRESHOLDS)
    assert report.fails(dataclasses.replace(THRESHOLDS, max_upgrade_slowdown=0.4))
    assert not report.fails(dataclasses.replace(THRESHOLDS, max_upgrade_slowdown=0.6))


def test_trace_and_lower_time_are_judged_like_compile_time(tmp_path: Path) -> None:
    store = PinStore.load(tmp_path)
    store.update([make_record(compile_s=0.01, trace_s=0.05, lower_s=0.02)])
    store = PinStore.load(tmp_path)
    slow_trace = judge(make_record(compile_s=0.01, trace_s=0.65, lower_s=0.02), store, THRESHOLDS)
    assert (slow_trace.status, slow_trace.phase) == (Status.DRIFT, "trace_s")
    assert slow_trace.note is not None and "trace time drifted: 0.650 s, pin 0.050 s" in (
        slow_trace.note
    )
    assert figures(slow_trace, THRESHOLDS).ratio == pytest.approx(13.0)
    under_floor = judge(make_record(compile_s=0.01, trace_s=0.2, lower_s=0.02), store, THRESHOLDS)
    assert under_floor.status is Status.OK
    # A pin of an earlier release has no trace figure: trace time is not judged.
    old = PinStore.load(tmp_path / "old")
    old.update([make_record(compile_s=0.01, trace_s=None, lower_s=None)])
    assert (
        judge(
            make_record(compile_s=0.01, trace_s=9.0), PinStore.load(tmp_path / "old"), THRESHOLDS
        ).status
        is Status.OK
    )


def test_a_cold_row_of_an_unchanged_module_is_never_silent(tmp_path: Path) -> None:
    store = PinStore.load(tmp_path)
    store.update(
        [
            make_record(cache_state="warm", compile_s=0.01, fingerprint="sha256:m"),
            make_record(cache_state="cold", compile_s=1.0, fingerprint="sha256:m"),
        ]
    )
    store = PinStore.load(tmp_path)
    cold = make_record(cache_state="cold", compile_s=1.0, fingerprint="sha256:m")
    warned = judge(cold, store, THRESHOLDS)
    assert (warned.status, warned.cache_lost) == (Status.OK, True)
    assert warned.note is not None and "warm pin" in warned.note
    assert judge(cold, store, dataclasses.replace(THRESHOLDS, expect_warm=True)).status is (
        Status.MISS
    )
    changed = dataclasses.replace(cold, fingerprint="sha256:other")
    assert not judge(changed, store, THRESHOLDS).cache_lost


def test_loaded_accelerator_rows_are_judged_on_wall_seconds(tmp_path: Path) -> None:
    gpu = "gpu:NVIDIA H200 @ AMD EPYC x16"
    store = PinStore.load(tmp_path)
    store.update([make_record(hardware=gpu, compile_s=10.0, compile_cpu_s=2.0)])
    store = PinStore.load(tmp_path)
    loaded = HostState(load_per_core=3.0)
    # Autotuning on the device got 5x slower; the host CPU seconds did not change.
    slower = make_record(hardware=gpu, compile_s=50.0, compile_cpu_s=2.0, host_state=loaded)
    verdict = judge(slower, store, THRESHOLDS)
    assert verdict.status is Status.DRIFT
    assert verdict.tolerance == THRESHOLDS.loaded_accelerator_tolerance
    assert verdict.note is not None and "accelerator" in verdict.note
    # 2.2x: within +200%, and under its undecided band (3x / 1.35 = 2.22x)
    busy = make_record(hardware=gpu, compile_s=22.0, compile_cpu_s=2.0, host_state=loaded)
    assert judge(busy, store, THRESHOLDS).status is Status.OK


def test_other_cache_state_only_is_unpinned_with_an_explanation(store: PinStore) -> None:
    verdict = judge(make_record(compile_s=0.01, cache_state="warm"), store, THRESHOLDS)
    assert verdict.status is Status.UNPINNED
    assert verdict.note is not None and "pinned only as cold" in verdict.note


@pytest.mark.parametrize("state", ["unknown", "memory"])
def test_unknown_and_memory_are_never_judged(store: PinStore, state: str) -> None:
    assert judge(make_record(cache_state=state), store, THRESHOLDS).status is Status.NOT_JUDGED


def test_tolerance_precedence_pin_then_marker_then_global(tmp_path: Path) -> None:
    store = PinStore.load(tmp_path)
    (path,) = store.update([make_record(compile_s=1.0)])
    marker_loose = make_record(compile_s=2.2, tolerance=2.0)  # under the band's 2.22x
    assert judge(marker_loose, PinStore.load(tmp_path), THRESHOLDS).status is Status.OK
    path.write_text(path.read_text().replace("compile_s = 1.0", "compile_s = 1.0\ntolerance = 0.1"))
    verdict = judge(marker_loose, PinStore.load(tmp_path), THRESHOLDS)
    assert (verdict.status, verdict.tolerance) == (Status.DRIFT, 0.1)


def test_drift_notes_whether_the_module_changed(store: PinStore) -> None:
    same = judge(make_record(compile_s=3.0), store, THRESHOLDS)
    changed = judge(make_record(compile_s=3.0, fingerprint="sha256:def"), store, THRESHOLDS)
    assert same.note is not None and "module unchanged" in same.note
    assert changed.note is not None and "module changed" in changed.note


def test_session_fails_on_drift_and_on_improvement_only_when_asked(store: PinStore) -> None:
    drift = [judge(make_record(compile_s=3.0), store, THRESHOLDS)]
    improved = [judge(make_record(compile_s=0.1), store, THRESHOLDS)]
    assert session_failed(drift, Thresholds())
    assert not session_failed(improved, Thresholds())
    assert session_failed(improved, Thresholds(fail_on_improvement=True))


def test_a_pin_far_above_its_row_no_longer_judges_it_and_strict_fails_it(tmp_path: Path) -> None:
    """A pin hand-edited to 50 s for a 0.012 s row: improved, said to judge nothing (the
    seconds a regression back could reach and still pass), and failing under compile_strict
    (reported only when time is advisory); a row within compile_max_speedup of its pin, or
    within the floor of it, is what it was."""
    pins = [
        make_record(compile_s=50.0),
        make_record(transform="jit", compile_s=0.5),
        make_record(transform="small", compile_s=0.2),
    ]
    PinStore.load(tmp_path).update(pins)
    store = PinStore.load(tmp_path)
    outrun = judge(make_record(compile_s=0.012), store, Thresholds())
    faster = judge(make_record(transform="jit", compile_s=0.1), store, Thresholds())  # 5x
    floored = judge(make_record(transform="small", compile_s=0.012), store, Thresholds())
    assert (outrun.status, outrun.pin_outrun) == (Status.IMPROVED, True)
    assert outrun.note is not None
    assert outrun.note.startswith(
        "its pin no longer judges it: 0.012 s against the pin's 50.000 s, faster by more than "
        "compile_max_speedup (10x), so a regression up to 87.500 s would pass; "
    )
    assert (faster.status, faster.pin_outrun) == (Status.IMPROVED, False)
    assert (floored.status, floored.pin_outrun) == (Status.OK, False)  # 17x, within 0.25 s
    assert not session_failed([outrun, faster, floored], Thresholds())
    assert session_failed([outrun], Thresholds(strict=True))
    assert not session_failed([faster, floored], Thresholds(strict=True))
    assert not session_failed([outrun], Thresholds(strict=True, time_advisory=True))
    assert not judge(make_record(compile_s=0.012), store, Thresholds(max_speedup=5000)).pin_outrun


def test_stale_pins_are_those_of_tests_that_ran_without_measuring(store: PinStore) -> None:
    record = make_record()
    ran = {record.cell}
    assert find_stale(store, ran, {(record.cell, "vag", "")}, record.hardware, "0.10.2") == []
    stale = find_stale(store, ran, set(), record.hardware, "0.10.2")
    assert [(s.cell, s.transform) for s in stale] == [(record.cell, "vag")]
    assert find_stale(store, set(), set(), record.hardware, "0.10.2") == []  # did not run
    assert find_stale(store, ran, set(), "other hardware", "0.10.2") == []


def test_torch_rows_are_never_compared_with_jax_pins(store: PinStore) -> None:
    # Same cell, transform, hardware and even version string: another framework.
    torch_row = make_record(framework="torch", torch_version="0.10.2", compile_s=50.0)
    verdict = judge(torch_row, store, THRESHOLDS)
    assert verdict.status is Status.UNPINNED
    assert torch_row.key.framework == "torch"
    assert torch_row.key != make_record().key


def test_op_count_gate_applies_to_rows_measured_under_load(tmp_path: Path) -> None:
    store = PinStore.load(tmp_path)
    store.update([make_record(compile_s=1.0, op_count=100)])
    store = PinStore.load(tmp_path)
    busy = HostState(cpu_count=2, load_avg_1m=8.0, load_per_core=4.0, process_cpu_s=1.0)
    thresholds = Thresholds(max_ops_growth=0.1)
    grown = make_record(compile_s=1.0, op_count=200, fingerprint="sha256:def", host_state=busy)
    # The op count is deterministic: host load cannot excuse it.
    verdict = judge(grown, store, thresholds)
    assert verdict.status is Status.GREW
    assert verdict.note is not None and "module grew: 100 -> 200 ops" in verdict.note
    # Time under load stays unjudged: a slow row of an unchanged module is noisy.
    slow = make_record(compile_s=5.0, op_count=100, host_state=busy)
    assert judge(slow, store, thresholds).status is Status.NOISY


BUSY = HostState(cpu_count=2, load_avg_1m=6.0, load_per_core=3.0, process_cpu_s=1.0)


@pytest.mark.parametrize(
    ("compile_cpu_s", "status"),
    [
        (0.55, Status.NOISY),  # CPU within tolerance: the slow wall was waiting for a core
        (2.0, Status.DRIFT),  # CPU seconds drifted too: more work, whatever the load
        (0.1, Status.IMPROVED),
        (None, Status.NOISY),  # no CPU figure: not judged at all
    ],
)
def test_rows_above_max_load_are_judged_on_cpu_seconds(
    tmp_path: Path, compile_cpu_s: float | None, status: Status
) -> None:
    store = PinStore.load(tmp_path)
    store.update([make_record(compile_s=1.0, compile_cpu_s=0.5)])
    store = PinStore.load(tmp_path)
    row = make_record(compile_s=5.0, compile_cpu_s=compile_cpu_s, host_state=BUSY)
    verdict = judge(row, store, THRESHOLDS)
    assert verdict.status is status
    assert verdict.note is not None and "measured at load 3.00 per core" in verdict.note
    if compile_cpu_s is not None:
        assert verdict.metric == "cpu" and verdict.tolerance == 0.5
        assert "judged on CPU seconds" in verdict.note
        assert figures(verdict, THRESHOLDS).ratio == pytest.approx(compile_cpu_s / 0.5)
    else:
        assert "not judged" in verdict.note
    # --compile-strict judges the wall seconds, whatever the load.
    strict = judge(row, store, Thresholds(tolerance=0.5, floor_s=0.25, strict=True))
    assert (strict.status, strict.metric) == (Status.DRIFT, "wall")
    assert session_failed([verdict], Thresholds()) is (status is Status.DRIFT)


def test_cpu_judged_rows_obey_the_floor(tmp_path: Path) -> None:
    store = PinStore.load(tmp_path)
    store.update([make_record(compile_s=0.2, compile_cpu_s=0.1)])
    store = PinStore.load(tmp_path)
    # 3x the pin's CPU seconds, but only 0.2 s more: under the floor.
    row = make_record(compile_s=0.9, compile_cpu_s=0.3, host_state=BUSY)
    assert judge(row, store, THRESHOLDS).status is Status.NOISY


def test_unpinned_rows_are_counted_by_what_they_are_pinned_under_instead(
    tmp_path: Path,
) -> None:
    from pytest_jaxcompile.gate.outcome import Outcome, coverage
    from pytest_jaxcompile.gate.view import coverage_text

    laptop = "cpu:cpu @ Laptop CPU x8"
    store = PinStore.load(tmp_path)
    store.update(
        [
            make_record(cell="t.py::test_a", hardware=laptop),
            make_record(cell="t.py::test_b", hardware=laptop, jax_version="0.9.2"),
            make_record(cell="t.py::test_c", hardware=laptop, cache_state="warm"),
            make_record(cell="t.py::test_d", hardware=laptop),
        ]
    )
    store = PinStore.load(tmp_path)
    rows = [
        make_record(cell="t.py::test_a", hardware="gha-ubuntu-latest"),  # a new runner
        make_record(cell="t.py::test_b", hardware=laptop),  # an upgrade from 0.9.2
        make_record(cell="t.py::test_c", hardware=laptop),  # pinned warm only
        make_record(cell="t.py::test_d", hardware=laptop),  # pinned: ok
        make_record(cell="t.py::test_new", hardware=laptop),  # a new test
    ]
    outcome = Outcome(rootdir=tmp_path, pins_dir=tmp_path, thresholds=THRESHOLDS, pin_update=False)
    outcome.verdicts = judge_all(rows, store, THRESHOLDS)
    outcome.coverage = coverage(outcome.verdicts, store)
    counted = outcome.coverage
    assert (
        counted.judged,
        counted.new_tests,
        counted.new_runner,
        counted.upgrade,
        counted.other,
    ) == (5, 1, 1, 1, 1)
    # 2 of the 4 rows that have pins anywhere are pinned only elsewhere: not most of them.
    assert not outcome.mostly_unpinned() and coverage_text(outcome) is None

    rows.append(make_record(cell="t.py::test_d", hardware="gha-ubuntu-latest"))
    outcome.verdicts = judge_all(rows[:3] + rows[4:], store, THRESHOLDS)
    outcome.coverage = coverage(outcome.verdicts, store)
    text = coverage_text(outcome)
    warning = None if text is None else f"warning: {text}."  # as the terminal says it
    assert warning is not None
    assert warning.startswith("warning: 5 of 5 row(s) have no pin under their key: ")
    for cause in (
        "2 pinned only under other hardware (new runner)",
        "1 pinned only under another jax version (upgrade)",
        "1 not pinned under any key (new tests)",
        "1 pinned only under another precision or cache state",
    ):
        assert cause in warning


def test_new_tests_alone_never_warn_of_a_runner(tmp_path: Path) -> None:
    from pytest_jaxcompile.gate.outcome import Outcome, coverage

    store = PinStore.load(tmp_path)
    store.update([make_record(cell="t.py::test_a")])
    store = PinStore.load(tmp_path)
    rows = [make_record(cell="t.py::test_a")] + [
        make_record(cell=f"t_new.py::test_{n}") for n in range(5)
    ]
    outcome = Outcome(rootdir=tmp_path, pins_dir=tmp_path, thresholds=THRESHOLDS, pin_update=False)
    outcome.verdicts = judge_all(rows, store, THRESHOLDS)
    outcome.coverage = coverage(outcome.verdicts, store)
    assert outcome.coverage.new_tests == 5
    assert not outcome.mostly_unpinned()


def test_repin_command_collapses_to_files_then_directories_then_one_directory() -> None:
    from pytest_jaxcompile.gate.view import repin_command

    few = ["tests/a/test_x.py::test_1", "tests/a/test_x.py::test_2"]
    assert repin_command(few) == f"pytest --compile-pin-update {' '.join(few)}"
    files = [f"tests/a/test_x.py::test_{i}" for i in range(5)] + ["tests/b/test_y.py::test_1"]
    assert repin_command(files) == (
        "pytest --compile-pin-update tests/a/test_x.py tests/b/test_y.py"
    )
    directories = [f"tests/{d}/test_{i}.py::test" for d in "ab" for i in range(3)]
    assert repin_command(directories) == "pytest --compile-pin-update tests/a tests/b"
    many = [f"tests/{d}/test_{i}.py::test" for d in "abcde" for i in range(2)]
    assert repin_command(many) == "pytest --compile-pin-update tests"
    top = [f"test_{i}.py::test" for i in range(22)]  # 22 files at the root: the root
    assert repin_command(top) == "pytest --compile-pin-update ."


def test_a_noisy_row_the_floor_kept_from_drift_names_the_floor(tmp_path: Path) -> None:
    from pytest_jaxcompile.gate.view import row_view

    store = PinStore.load(tmp_path)
    store.update([make_record(compile_s=0.2, compile_cpu_s=0.1)])
    store = PinStore.load(tmp_path)
    # 3x its pin's CPU seconds, 0.2 s more: the floor (0.25 s) decided, not the tolerance.
    floored = judge(
        make_record(compile_s=0.9, compile_cpu_s=0.3, host_state=BUSY), store, THRESHOLDS
    )
    assert floored.status is Status.NOISY
    assert (
        floored.note is not None
        and "judged on CPU seconds, within the 0.25 s floor" in floored.note
    )
    assert "stayed within the 0.25 s floor on CPU seconds" in row_view(floored, THRESHOLDS).meaning
    # Within the tolerance itself: said as before.
    within = judge(
        make_record(compile_s=0.9, compile_cpu_s=0.12, host_state=BUSY), store, THRESHOLDS
    )
    assert within.note is not None and "judged on CPU seconds, within tolerance" in within.note
    assert "stayed within tolerance on CPU seconds" in row_view(within, THRESHOLDS).meaning
    # A block holding both: each reason counted.
    from pytest_jaxcompile.gate.view.meaning import meaning

    both = meaning(Status.NOISY, [within, floored, within], THRESHOLDS)
    assert "stayed on CPU seconds within tolerance (2) or within the 0.25 s floor (1)" in both


def test_rows_the_paired_gate_stands_for_are_no_reason_to_say_it_judges_almost_nothing(
    tmp_path: Path,
) -> None:
    from pytest_jaxcompile.gate.outcome import Outcome, coverage
    from pytest_jaxcompile.gate.view import coverage_text

    cpu = {"platform": "cpu", "device_kind": "cpu"}
    store = PinStore.load(tmp_path)
    store.update(
        [make_record(cell=f"t.py::test_{n}", hardware="laptop", hardware_detail=cpu) for n in "abc"]
    )
    store = PinStore.load(tmp_path)
    # A CI runner's rows, their modules those the laptop pinned (the same fingerprint).
    rows = [
        make_record(cell=f"t.py::test_{n}", hardware="ci-runner", hardware_detail=cpu)
        for n in "abc"
    ]
    outcome = Outcome(rootdir=tmp_path, pins_dir=tmp_path, thresholds=THRESHOLDS, pin_update=False)
    outcome.verdicts = judge_all(rows, store, THRESHOLDS)
    outcome.coverage = coverage(outcome.verdicts, store)
    text = coverage_text(outcome)
    assert text is not None and "The gate judges almost nothing" in text  # seconds alone
    outcome.paired = True  # a changed module would have been paired with the laptop's
    assert coverage_text(outcome) is None
    # Changed modules the pairs did not judge (not paired): the warning stands.
    changed = [dataclasses.replace(row, fingerprint="sha256:new") for row in rows[:2]]
    outcome.verdicts = judge_all([*changed, rows[2]], store, THRESHOLDS)
    outcome.coverage = coverage(outcome.verdicts, store)
    assert coverage_text(outcome) is not None
