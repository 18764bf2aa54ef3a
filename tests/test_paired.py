"""--compile-paired: the statistic, the module store, which rows are paired and against
which pin, the verdict, and the gate end to end with real JAX compiled in the real child."""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import re
import shutil
import statistics
from pathlib import Path

import pytest
from conftest import PROFILE_FAILING, JaxProject
from hypothesis import given, settings
from hypothesis import strategies as st
from records_factory import make_record

from pytest_jaxcompile._constants import (
    DEFAULT_PAIRED_FLOOR_S,
    DEFAULT_PAIRED_TOLERANCE,
    PAIRED_PHASE,
)
from pytest_jaxcompile.backends import StagedModule, fingerprint_of
from pytest_jaxcompile.gate.judging import judge
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.modules import ModuleStore, StoredModuleProblem
from pytest_jaxcompile.gate.paired import (
    CENSUS_NOT_PAIRED,
    PairedComparison,
    PairingTarget,
    pairing_cost,
    pairing_target,
)
from pytest_jaxcompile.gate.pins import PinStore
from pytest_jaxcompile.gate.sequential import LOOKS, judge_look, judge_pairs
from pytest_jaxcompile.gate.status import Status
from pytest_jaxcompile.gate.view import row_view
from pytest_jaxcompile.output.json_report import load_report
from pytest_jaxcompile.record_checks import check_record_data
from pytest_jaxcompile.records import CompileRecord

CPU = {"platform": "cpu", "device_kind": "cpu"}
THRESHOLDS = Thresholds(paired_tolerance=0.05, floor_s=0.01, paired_floor_s=0.01)


def paired(base: list[float], new: list[float], **overrides: object) -> CompileRecord:
    values: dict[str, object] = {
        "fingerprint": "sha256:new",
        "paired_base_cpu_s": base,
        "paired_new_cpu_s": new,
        "paired_base_wall_s": base,
        "paired_new_wall_s": new,
        "paired_against": "pins/x.toml (laptop | jax 0.10.2 | full precision | cold)",
        "paired_cost_s": 12.5,
        "hardware_detail": CPU,
    }
    return make_record(**(values | overrides))


# ----------------------------------------------------------------------- the statistic
# The rule itself (its looks, its error over them, how soon it decides): tests/test_sequential.py.


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(min_value=-0.2, max_value=0.2, allow_nan=False), min_size=8, max_size=40),
    st.floats(min_value=0.5, max_value=2.0),
)
def test_a_look_holds_its_estimate_and_moves_with_a_slowdown(
    noise: list[float], scale: float
) -> None:
    """The estimate lies within its interval, and a module slower by a factor moves the
    estimate and both ends by exactly that factor (the statistic is of ratios)."""
    base = [scale] * len(noise)
    new = [scale * math.exp(value) for value in noise]
    look = judge_look(base, new, 1, 0.03, 0.0)
    slower = judge_look(base, [1.25 * value for value in new], 1, 0.03, 0.0)
    assert look.low <= look.ratio <= look.high
    assert slower.ratio == pytest.approx(1.25 * look.ratio)
    assert slower.low == pytest.approx(1.25 * look.low)
    assert slower.high == pytest.approx(1.25 * look.high)


def test_a_comparison_is_the_first_look_that_decides_its_pairs() -> None:
    base = [1.0] * 10
    new = [1.10, 1.12, 1.15, 1.18, 1.2, 1.2, 1.22, 1.25, 1.3, 1.5]
    comparison = PairedComparison.of(paired(base, new), THRESHOLDS)
    assert comparison is not None
    assert comparison.metric == "cpu" and comparison.status is Status.DRIFT
    # Six pairs all above +5 %: the first look decides; the four more made do not count.
    assert (comparison.pairs, comparison.made) == (6, 10)
    assert comparison.low == pytest.approx(1.10) and comparison.high == pytest.approx(1.2)
    loose = PairedComparison.of(
        paired(base, new), dataclasses.replace(THRESHOLDS, paired_tolerance=0.15)
    )
    # Not decided against +15 % (1.10x-1.20x), and the looks left could not: stopped.
    assert loose is not None and loose.status is None and loose.futile and loose.pairs == 6
    floor = dataclasses.replace(THRESHOLDS, paired_floor_s=1.0)
    within = PairedComparison.of(paired(base, new), floor)
    assert within is not None and within.status is Status.OK  # within the floor
    assert PairedComparison.of(make_record(), THRESHOLDS) is None  # never paired
    too_few = paired(base[:5], new[:5])
    assert PairedComparison.of(too_few, THRESHOLDS) is None  # fewer than the first look


def test_not_decided_says_the_runners_noise_and_what_would_decide_it() -> None:
    undecided = paired([1.0] * 10, [0.98, 1.0, 1.02, 1.04, 1.06, 1.07, 1.08, 1.1, 1.12, 1.2])
    comparison = PairedComparison.of(undecided, THRESHOLDS)
    assert comparison is not None and comparison.status is None
    assert comparison.noise == pytest.approx(0.03, abs=0.005)  # its ratios' spread, per compile
    text = comparison.undecided_text(0.05)
    assert text.startswith(
        "not decided within 20 pairs: this runner's noise (3.0% per compile, measured) is too "
        "large to judge 1.04x against the 5% tolerance (it resolves about 4% in 20 pairs); "
    )
    assert text.endswith(
        "; to decide it: a quieter runner, more pairs or a wider compile_paired_tolerance"
    )
    near = PairedComparison.of(
        paired([1.0] * 10, [1.06, 1.07, 1.08, 1.1, 1.12, 1.04, 1.09, 1.11, 1.1, 1.08]),
        dataclasses.replace(THRESHOLDS, paired_tolerance=0.06, paired_max_pairs=10),
    )
    assert near is not None and near.status is None
    needed = near.pairs_to_decide()
    assert needed is not None and 10 < needed <= 60
    assert f"more pairs (about {needed}: compile_paired_max_pairs = " in near.undecided_text(0.06)


def test_wall_seconds_are_used_where_cpu_seconds_are_missing() -> None:
    record = paired([1.0] * 6, [2.0] * 6, paired_base_cpu_s=None, paired_new_cpu_s=None)
    comparison = PairedComparison.of(record, THRESHOLDS)
    assert comparison is not None and comparison.metric == "wall"


def test_the_pairing_cost_counts_each_row_against_its_pins_compile() -> None:
    rows = [
        paired([2.0] * 6, [2.6] * 6, paired_cost_s=36.0),  # 6 pairs of 2 s + 2.6 s: 18 plain
        paired([2.0] * 16, [2.0] * 16, paired_cost_s=68.0),  # 34 plain
        make_record(paired_note="not paired: the pairing budget ran out before this row"),
    ]
    cost = pairing_cost(rows, THRESHOLDS)
    assert cost is not None
    assert (cost.rows, cost.pairs, cost.seconds) == (2, (6, 16), 104.0)
    assert cost.plain_compiles == pytest.approx(26.0)  # the median of 18 and 34
    assert (cost.not_decided, cost.by_floor, cost.noise) == (0, 0, 0.0)
    assert cost.describe() == (
        "paired 2 changed rows in 104 s: 26 plain compiles a row (6 and 16 pairs); noise "
        "0.0% per compile: this runner resolves under 1% in 20 pairs"
    )
    noisy = [
        paired([1.0] * 8, [0.9, 1.1, 0.92, 1.12, 0.95, 1.08, 0.9, 1.1], paired_cost_s=20.0),
        paired([0.3] * 6, [0.31, 0.3, 0.32, 0.3, 0.31, 0.3], paired_cost_s=4.0),
    ]
    cost = pairing_cost(noisy, dataclasses.replace(THRESHOLDS, paired_floor_s=0.05))
    assert cost is not None and (cost.not_decided, cost.by_floor) == (1, 1)
    assert cost.noise is not None and cost.resolves is not None and cost.resolves > 0.05
    assert ", 1 ok by the floor, 1 not decided; noise " in cost.describe()
    assert f"resolves about {cost.resolves:.0%} in 20 pairs" in cost.describe()
    assert pairing_cost([make_record()], THRESHOLDS) is None


# ----------------------------------------------------------------------- the verdict


def _store_with_pin(tmp_path: Path, **overrides: object) -> PinStore:
    values: dict[str, object] = {"fingerprint": "sha256:old", "hardware_detail": CPU}
    PinStore.load(tmp_path).update([make_record(**(values | overrides))])
    return PinStore.load(tmp_path)


def test_a_paired_slowdown_is_drift_whatever_the_seconds_said(tmp_path: Path) -> None:
    store = _store_with_pin(tmp_path)
    # Within the seconds tolerance (1.0 s against 1.0 s), but 20 % slower beside its pin.
    # Decided at the first look: the child stops there, so six pairs were made.
    record = paired([1.0] * 6, [1.15, 1.18, 1.19, 1.2, 1.2, 1.21])
    verdict = judge(record, store, THRESHOLDS)
    assert verdict.status is Status.DRIFT and verdict.phase == PAIRED_PHASE
    assert verdict.note is not None and verdict.note.startswith("DRIFT paired with pins/x.toml")
    assert (
        "6 pairs, cpu 1.000 s -> 1.195 s (medians), pairs' ratio 1.19x (95% sequential interval "
        "1.15x-1.21x, paired tolerance 5%)" in verdict.note
    )
    assert "cost 12.5 s" in verdict.note
    view = row_view(verdict, THRESHOLDS)
    assert view.fails
    # The figures are the pairs' (medians, compiled beside the pin's module at the end); the
    # ratio is the pairs' own, not 1.195 / 1.000; the tolerance is named with its gate.
    assert view.figures.text() == (
        "paired: 1.195 s cpu, pinned module 1.000 s cpu (pairs' ratio 1.19x, paired tolerance 5%)"
    )
    # The short line names the pin it was paired with: its key and cache state.
    assert view.cause is not None and view.cause.startswith(
        "6 pairs beside the pinned module of laptop, jax 0.10.2 (cold pin): 95% interval"
    )
    assert "beside them on this machine" in view.meaning


def test_an_equal_pair_is_ok_even_where_the_seconds_drifted(tmp_path: Path) -> None:
    store = _store_with_pin(tmp_path, compile_s=0.5, compile_cpu_s=0.5)
    record = paired(
        [1.0] * 10, [0.97, 0.98, 0.99, 1.0, 1.0, 1.0, 1.01, 1.02, 1.03, 1.04], compile_s=2.0
    )
    verdict = judge(record, store, THRESHOLDS)
    assert verdict.status is Status.OK and verdict.phase == PAIRED_PHASE


def test_a_row_the_pairs_do_not_decide_passes_as_noisy_unless_required(tmp_path: Path) -> None:
    store = _store_with_pin(tmp_path)
    record = paired([1.0] * 8, [0.9, 1.1, 0.92, 1.12, 0.95, 1.08, 0.9, 1.1])
    verdict = judge(record, store, THRESHOLDS)
    assert verdict.status is Status.NOISY and verdict.paired_not_decided
    assert verdict.note is not None
    assert "not decided within 20 pairs: this runner's noise (" in verdict.note
    assert not verdict.fails(THRESHOLDS)
    view = row_view(verdict, THRESHOLDS)
    assert not view.fails and "the pairs did not decide it" in view.meaning
    required = dataclasses.replace(THRESHOLDS, paired_required=True)
    assert verdict.fails(required) and row_view(verdict, required).fails
    assert not verdict.fails(dataclasses.replace(required, time_advisory=True))


def test_compile_paired_required_fails_the_session_on_its_paired_line(tmp_path: Path) -> None:
    from pytest_jaxcompile.gate.conclude import GateSettings, conclude
    from pytest_jaxcompile.gate.view import BlockKind, session_view

    store = _store_with_pin(tmp_path)
    record = paired([1.0] * 8, [0.9, 1.1, 0.92, 1.12, 0.95, 1.08, 0.9, 1.1])
    for required in (False, True):
        thresholds = dataclasses.replace(THRESHOLDS, paired_required=required)
        outcome = conclude(
            [record], [record.cell], [], store, GateSettings(thresholds, False), rootdir=tmp_path
        )
        assert outcome.failed is required
        (line,) = session_view(outcome).blocks_of(BlockKind.PAIRED)
        assert line.fails is required and ", 1 not decided; noise " in line.text
        assert line.text.endswith(" (compile_paired_required: fails)") is required


def test_a_row_the_floor_decided_says_so(tmp_path: Path) -> None:
    store = _store_with_pin(tmp_path)
    record = paired([0.3] * 6, [0.31, 0.3, 0.32, 0.3, 0.31, 0.3])  # 3-7 % of 0.3 s: 0.02 s
    verdict = judge(record, store, dataclasses.replace(THRESHOLDS, paired_floor_s=0.05))
    assert verdict.status is Status.OK and verdict.note is not None
    assert "interval 1.00x-1.07x, paired floor 0.05 s: 17%)" in verdict.note
    assert "ok by the floor: its whole interval is under 0.05 s slower (compile_paired_floor)" in (
        verdict.note
    )
    assert judge(record, store, THRESHOLDS).status is Status.NOISY  # 1 % floor: not decided


def test_a_row_the_floor_bounded_names_the_floor_in_every_output(tmp_path: Path) -> None:
    """docs/paired.md#not-decided: a small module's change about as large as the floor's
    share of it: undecided against the floor, not the tolerance, and every output says so."""
    from pytest_jaxcompile.gate.view.meaning import meaning

    store = _store_with_pin(tmp_path)
    floor = dataclasses.replace(THRESHOLDS, paired_floor_s=0.05)
    ratios = [1.1, 1.3, 1.12, 1.28, 1.16, 1.26, 1.18, 1.24, 1.2, 1.22]
    record = paired([0.25] * 10, [0.25 * ratio for ratio in ratios])
    verdict = judge(record, store, floor)
    assert verdict.status is Status.NOISY and verdict.paired_not_decided
    assert verdict.note is not None
    assert "is too large to judge 1.20x against the 0.05 s floor (20%)" in verdict.note
    assert verdict.note.endswith("a quieter runner, more pairs or a lower compile_paired_floor")
    view = row_view(verdict, floor)
    assert view.figures.text().endswith("(pairs' ratio 1.20x, paired floor 0.05 s: 20%)")
    assert view.figures.limit == pytest.approx(0.2)  # the JSON report's limit: the bound
    assert "too large for the 0.05 s paired floor within the pairs allowed" in view.meaning

    # DRIFTs: by the floor on a small module, by the tolerance on a large one.
    small = judge(paired([0.25] * 6, [0.75] * 6), store, floor)
    large = judge(paired([5.0] * 6, [15.0] * 6), store, floor)
    assert (small.status, large.status) == (Status.DRIFT, Status.DRIFT)
    by = "beside them on this machine, by more than {} with confidence"
    assert by.format("the 0.05 s paired floor") in meaning(Status.DRIFT, [small], floor)
    assert by.format("5%") in meaning(Status.DRIFT, [large], floor)
    assert by.format("5% or the 0.05 s paired floor") in meaning(
        Status.DRIFT, [small, large], floor
    )
    assert row_view(large, floor).figures.text().endswith("paired tolerance 5%)")


def test_a_deterministic_verdict_is_kept_and_noted(tmp_path: Path) -> None:
    store = _store_with_pin(tmp_path, op_count=10)
    record = paired([1.0] * 10, [1.0] * 10, op_count=100)
    verdict = judge(record, store, dataclasses.replace(THRESHOLDS, max_ops_growth=0.1))
    assert verdict.status is Status.GREW
    assert verdict.note is not None and "paired with pins/x.toml" in verdict.note


def test_a_row_not_paired_keeps_its_seconds_verdict_and_says_why(tmp_path: Path) -> None:
    store = _store_with_pin(tmp_path)
    record = make_record(fingerprint="sha256:new", paired_note="not paired: gone")
    verdict = judge(record, store, THRESHOLDS)
    assert verdict.status is Status.OK
    assert verdict.note == "not paired: gone; judged on seconds alone"


def test_paired_fields_are_checked_where_records_are_read() -> None:
    data = paired([1.0], [1.0]).to_dict()
    check_record_data(data)
    data["paired_new_cpu_s"] = [float("nan")]
    with pytest.raises(ValueError, match="paired_new_cpu_s"):
        check_record_data(data)


PASS_LOG = """\
@@jaxcompile-profile 0 base start
I1202 hlo_pass_pipeline.cc:303] Running HLO pass pipeline on module jit_loss: simplification
I1202 hlo_pass_pipeline.cc:176] HLO pass: algsimp time: 170 us (170 us) (cumulative: 1 ms)
I1202 hlo_pass_pipeline.cc:176] HLO pass: fusion time: 2 ms (2 ms) (cumulative: 2 ms)
I1202 hlo_pass_pipeline.cc:176] HLO pass: algsimp time: 30 us (30 us) (cumulative: 1 ms)
@@jaxcompile-profile 0 base end
I1202 hlo_pass_pipeline.cc:176] HLO pass: fusion time: 9 s (outside any marker)
@@jaxcompile-profile 0 new start
I1202 hlo_pass_pipeline.cc:176] HLO pass: algsimp time: 1 ms (1 ms) (cumulative: 1 ms)
I1202 hlo_pass_pipeline.cc:176] HLO pass: fusion time: 40 ms (40 ms) (cumulative: 40 ms)
@@jaxcompile-profile 0 new end
"""


def test_pass_times_are_read_between_the_markers_per_side() -> None:
    from pytest_jaxcompile.backends.jax.profile import pass_times

    profile = pass_times(PASS_LOG)[0]
    assert profile["base"]["algsimp"] == pytest.approx(0.0002)
    assert profile["base"]["fusion"] == pytest.approx(0.002)
    assert profile["new"]["fusion"] == pytest.approx(0.04)
    assert profile["new"]["(all passes)"] == pytest.approx(0.041)
    assert profile["base"]["(other passes)"] == 0.0


def test_a_paired_drift_names_the_passes_that_grew_most(tmp_path: Path) -> None:
    from pytest_jaxcompile.backends.jax.profile import pass_times

    store = _store_with_pin(tmp_path)
    record = paired([1.0] * 10, [2.0] * 10, profile=pass_times(PASS_LOG)[0])
    verdict = judge(record, store, THRESHOLDS)
    assert verdict.status is Status.DRIFT and verdict.note is not None
    assert (
        "grew most of XLA's HLO passes: fusion 2.0 ms -> 40.0 ms, algsimp 0.2 ms -> 1.0 ms; "
        "all HLO passes 2.2 ms -> 41.0 ms of the compile's 1.000 s -> 2.000 s" in verdict.note
    )


# ----------------------------------------------------------------------- which rows


def test_a_changed_row_is_paired_with_its_own_keys_pin(tmp_path: Path) -> None:
    store = _store_with_pin(tmp_path)
    target = pairing_target(make_record(fingerprint="sha256:new", hardware_detail=CPU), store)
    assert isinstance(target, PairingTarget) and target.own_key
    assert pairing_target(make_record(fingerprint="sha256:old"), store) is None  # unchanged
    # A census row holds no module: changed, it says why it is not paired (never silent)
    census = make_record(fingerprint="sha256:new", source="census")
    assert pairing_target(census, store) == CENSUS_NOT_PAIRED
    unchanged_census = make_record(fingerprint="sha256:old", source="census")
    assert pairing_target(unchanged_census, store) is None
    # A cache hit measured no compile, but the pairs compile both modules afresh: a
    # changed warm row is paired as a cold one is (gate/twins.py); an unchanged one is not.
    warm = make_record(fingerprint="sha256:new", cache_state="warm", hardware_detail=CPU)
    target = pairing_target(warm, store)
    assert isinstance(target, PairingTarget) and target.key.cache_state == "cold"
    assert pairing_target(dataclasses.replace(warm, fingerprint="sha256:old"), store) is None


def test_a_warm_re_pin_on_this_runner_is_the_cold_rows_base_not_another_machines_pin(
    tmp_path: Path,
) -> None:
    """After a DRIFT the persistent cache holds the new module, so the printed re-pin pins
    it warm: the runner's cold rows are then paired with that module, not with the
    laptop's older cold pin (which would call the accepted change DRIFT again)."""
    _store_with_pin(tmp_path, hardware="laptop", cache_state="cold")
    store = _store_with_pin(
        tmp_path, hardware="ci-runner", cache_state="warm", fingerprint="sha256:accepted"
    )
    again = make_record(
        fingerprint="sha256:accepted", hardware="ci-runner", cache_state="cold", hardware_detail=CPU
    )
    assert pairing_target(again, store) is None  # the module the runner's re-pin stored
    changed = dataclasses.replace(again, fingerprint="sha256:next")
    target = pairing_target(changed, store)
    assert isinstance(target, PairingTarget) and target.own_key
    assert (target.key.hardware, target.key.cache_state) == ("ci-runner", "warm")
    assert target.pin.fingerprint == "sha256:accepted"


def test_a_row_without_a_pin_is_paired_with_the_nearest_key_on_its_device(tmp_path: Path) -> None:
    store = _store_with_pin(tmp_path, hardware="laptop")
    runner = make_record(fingerprint="sha256:new", hardware="ci-runner", hardware_detail=CPU)
    target = pairing_target(runner, store)
    assert isinstance(target, PairingTarget) and not target.own_key
    assert target.key.hardware == "laptop"
    assert "laptop | jax 0.10.2" in target.describe(tmp_path)
    gpu = {"platform": "gpu", "device_kind": "NVIDIA A100"}
    accelerator = make_record(fingerprint="sha256:new", hardware="a100", hardware_detail=gpu)
    assert pairing_target(accelerator, store) is None  # never across platforms


def test_a_pin_without_device_is_never_the_nearest_of_a_hand_named_runner(tmp_path: Path) -> None:
    store = _store_with_pin(tmp_path, hardware="laptop", hardware_detail={})
    runner = make_record(fingerprint="sha256:new", hardware="ci-runner", hardware_detail=CPU)
    verdict = judge(dataclasses.replace(runner, compile_s=40.0), store, THRESHOLDS)
    assert verdict.status is Status.UNPINNED and verdict.nearest is None


# ----------------------------------------------------------------------- the module store


def _module(text: str = "module @jit_f {}\n") -> StagedModule:
    return StagedModule(text, b"\x08\x01options", 1, "cpu")


def test_the_module_store_round_trips_checks_and_prunes(tmp_path: Path) -> None:
    store = ModuleStore(tmp_path / "modules", tmp_path)
    module = _module()
    fingerprint = fingerprint_of(module.text)
    (path,) = store.write_all({fingerprint: module})
    assert path.name == f"sha256-{fingerprint[7:]}.module.gz"
    assert store.write(fingerprint, module) is None  # the same bytes: nothing rewritten
    assert store.read(fingerprint) == module
    path.write_bytes(gzip.compress(b'{"format": 1}\nmodule @jit_g {}\n'))
    with pytest.raises(StoredModuleProblem, match=r"modules/sha256-.*\.module\.gz is damaged"):
        store.read(fingerprint)
    path.write_bytes(b"not gzip")
    with pytest.raises(StoredModuleProblem, match="cannot be read"):
        store.read(fingerprint)
    with pytest.raises(StoredModuleProblem, match="is not stored"):
        store.read("sha256:" + "0" * 64)
    other = _module("module @jit_h {}\n")
    store.write(fingerprint_of(other.text), other)
    assert store.prune([fingerprint]) == [store.path_for(fingerprint_of(other.text))]
    assert set(store.stored()) == {fingerprint}


def test_a_module_whose_text_does_not_match_is_never_stored(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not match"):
        ModuleStore(tmp_path).write("sha256:" + "0" * 64, _module())


# ----------------------------------------------------------------------- end to end

MODEL = """
    import os
    import jax
    import jax.numpy as jnp

    DEPTH = int(os.environ.get("MODEL_DEPTH", "4"))

    def {name}(ws, x):
        for i, w in enumerate(ws):
            x = jnp.tanh(x @ w) + jnp.sin(x) * (i + 1)
        return jnp.sum(x)

    def test_model(jax_compile):
        ws = [jnp.ones((128, 128)) * 0.01 for _ in range(DEPTH)]
        jax_compile(jax.jit(jax.grad({name})), ws, jnp.ones((16, 128)), transform="grad")
"""


def test_pins_travel_a_bigger_module_fails_paired_an_equal_one_passes_a_lost_one_is_named(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.conftest(cache=False)
    project.tests(MODEL.format(name="loss"))
    monkeypatch.setenv("JAXCOMPILE_HARDWARE", "laptop")
    pinned = project.run("--compile-pin-update", "--compile-paired")
    assert pinned.ret == 0
    assert "pinned modules (--compile-paired, --compile-profile): 1 stored in pins/modules" in (
        pinned.stdout.str()
    )
    (stored,) = (project.pins_dir / "modules").iterdir()
    header = json.loads(gzip.decompress(stored.read_bytes()).partition(b"\n")[0])
    assert header["platform"] == "cpu" and header["devices"] == 1

    # Another runner, with no pin of its own: judged beside the laptop's module, here.
    monkeypatch.setenv("JAXCOMPILE_HARDWARE", "ci-runner")
    monkeypatch.setenv("MODEL_DEPTH", "12")
    # A paired floor below the default (0.05 s, half of this module's compile on some jax
    # versions): the first look needs each of its pairs past the bound, and one pair whose
    # base compile waited for a core must not push the decision to a later look.
    bigger = project.run(
        "--compile-paired", "-v", "-o", "compile_paired_floor=0.01", *PROFILE_FAILING
    )  # -v: the whole note
    assert bigger.ret == pytest.ExitCode.TESTS_FAILED
    out = bigger.stdout.str()
    assert "DRIFT      test_models.py::test_model [grad]" in out
    assert "DRIFT paired with pins/laptop--jax-" in out
    assert "(laptop | jax " in out  # the nearest key, named
    assert "grew most of XLA's HLO passes: " in out  # where inside XLA the time went
    report = project.report()
    (row,) = report["records"]
    # Three times the layers: decided at the first look, where the child stopped.
    assert len(row["paired_new_cpu_s"]) == LOOKS[0] == len(row["paired_base_cpu_s"])
    (verdict,) = report["verdicts"]
    assert verdict["status"] == "DRIFT" and verdict["metric"] == "paired cpu"
    assert "grew most of XLA's HLO passes: " in verdict["note"]
    assert row["profile"]["new"]["(all passes)"] > row["profile"]["base"]["(all passes)"]
    assert report["paired"]["rows"] == 1 and report["paired"]["pairs"] == [LOOKS[0]]
    assert report["paired"]["text"] in out  # the session says once what pairing cost

    # The same computation lowered again under another name: a new fingerprint, equal work.
    monkeypatch.setenv("MODEL_DEPTH", "4")
    project.tests(MODEL.format(name="renamed_loss"))
    equal = project.run("--compile-paired", "-o", "compile_paired_max_pairs=16", "-v")
    assert equal.ret == 0, equal.stdout.str()
    (verdict,) = project.report()["verdicts"]
    assert verdict["status"] in ("ok", "noisy"), verdict  # ok, or not decided: never DRIFT
    assert "paired with pins/laptop--jax-" in verdict["note"]
    # Paired look by look until one decided it (or found the looks left up to 16 could
    # not), or up to 16 pairs: the child stopped at the look the gate reads again.
    report = project.report()
    (row,) = report["records"]
    pairs = len(row["paired_new_cpu_s"])
    assert pairs in LOOKS and pairs <= 16 and pairs == len(row["paired_base_wall_s"])
    look = judge_pairs(
        row["paired_base_cpu_s"],
        row["paired_new_cpu_s"],
        DEFAULT_PAIRED_TOLERANCE,
        DEFAULT_PAIRED_FLOOR_S,
        max_pairs=16,
    )
    assert look is not None and look.pairs == pairs and (look.ends or pairs == 16)
    assert (look.status is not None) == (verdict["status"] == "ok")
    # The noise it measured, in the session's paired line and the report.
    assert report["paired"]["noise"] == pytest.approx(look.noise)
    assert report["paired"]["not_decided"] == (look.status is None)
    assert "per compile: this runner resolves about " in report["paired"]["text"]
    assert f"in {16} pairs" in report["paired"]["text"]
    assert " ".join(report["paired"]["text"].split()) in " ".join(equal.stdout.str().split())

    # Its stored module gone: named on the row and in a warning, the seconds still judged.
    shutil.rmtree(project.pins_dir / "modules")
    lost = project.run("--compile-paired")
    assert lost.ret == 0
    out = lost.stdout.str()
    assert "1 changed row(s) not paired (--compile-paired)" in out
    words = " ".join(out.split())  # the terminal wraps long lines
    assert "its pin's module is not stored (pins/modules/sha256-" in words
    (verdict,) = project.report()["verdicts"]
    assert verdict["status"] == "unpinned"


def test_without_the_option_nothing_is_paired_or_stored(project: JaxProject) -> None:
    project.conftest(cache=False)
    project.tests(MODEL.format(name="loss"))
    assert project.run("--compile-pin-update").ret == 0
    assert not (project.pins_dir / "modules").exists()
    project.tests(MODEL.format(name="other_loss"))
    project.run()  # its seconds are judged as ever (a busy machine may make that DRIFT)
    (row,) = project.report()["records"]
    assert all(row[name] is None for name in row if name.startswith("paired_"))


def test_under_xdist_workers_pair_their_rows_and_the_controller_stores_the_modules(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.conftest(cache=False)
    project.tests(MODEL.format(name="loss"), name="test_one")
    project.tests(MODEL.format(name="loss"), name="test_two")
    pinned = project.run("-n", "2", "--compile-pin-update", "--compile-paired")
    assert pinned.ret == 0
    # Two rows of one computation: one module, stored once, by the controller.
    assert len(list((project.pins_dir / "modules").iterdir())) == 1
    monkeypatch.setenv("MODEL_DEPTH", "12")
    bigger = project.run("-n", "2", "--compile-paired")
    assert bigger.ret == pytest.ExitCode.TESTS_FAILED
    verdicts = project.report()["verdicts"]
    assert [verdict["status"] for verdict in verdicts] == ["DRIFT", "DRIFT"]
    # Each worker paired its row (a 3x deeper model may also have drifted on its lowering
    # time, which the pairs do not decide: the verdict is then that one, noted with the pairs).
    assert all("paired with pins/" in verdict["note"] for verdict in verdicts)
    assert all(len(row["paired_new_cpu_s"]) >= 6 for row in project.report()["records"])
    # A pin update of the changed rows stores the new module and removes the old one.
    project.run("-n", "2", "--compile-pin-update", "--compile-paired")
    (stored,) = (project.pins_dir / "modules").iterdir()
    (row, _) = project.report()["records"]
    assert stored.name == f"sha256-{row['fingerprint'][7:]}.module.gz"


# Three tests of one model, each its own depth and function name (a new name: a new
# fingerprint, equal work), to pair several changed rows in one session.
THREE_ROWS = """
    import os
    import jax
    import jax.numpy as jnp

    def model(name):
        depth = int(os.environ.get(f"DEPTH_{name}", "5"))

        def loss(ws, x):
            for i, w in enumerate(ws):
                x = jnp.tanh(x @ w) + jnp.sin(x) * (i + 1)
            return jnp.sum(x)

        loss.__name__ = os.environ.get(f"NAME_{name}", "loss")
        ws = [jnp.ones((128, 128)) * 0.01 for _ in range(depth)]
        return jax.jit(jax.grad(loss)), ws, jnp.ones((16, 128))

    def test_deep(jax_compile):
        jax_compile(*model("deep"), transform="grad")

    def test_a(jax_compile):
        jax_compile(*model("a"), transform="grad")

    def test_b(jax_compile):
        jax_compile(*model("b"), transform="grad")
"""


def test_a_budget_pairs_the_likeliest_regression_first_and_names_the_rows_it_left(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.conftest(cache=False)
    project.tests(THREE_ROWS)
    assert project.run("--compile-pin-update", "--compile-paired").ret == 0
    monkeypatch.setenv("DEPTH_deep", "15")  # three times the layers: the likeliest regression
    monkeypatch.setenv("NAME_a", "renamed")
    monkeypatch.setenv("NAME_b", "renamed")
    summary = project.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(project.path.parent))
    # A budget spent before the child starts: the likeliest row still gets its first look.
    result = project.run(
        "--compile-paired",
        "-o",
        "compile_paired_budget=0.001",
        "-o",
        "compile_paired_floor=0.01",  # each of the first look's pairs past the bound
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    rows = project.rows()
    deep = rows[("test_deep", "grad")]
    assert len(deep["paired_new_cpu_s"]) == LOOKS[0] and deep["paired_note"] is None
    assert project.verdicts()[("test_deep", "grad")] == "DRIFT"
    left = "not paired: the pairing budget (compile_paired_budget) ran out before this row"
    for cell in ("test_a", "test_b"):
        assert rows[(cell, "grad")]["paired_note"] == left
        assert rows[(cell, "grad")]["paired_new_cpu_s"] is None
    out = result.stdout.str()
    assert "2 changed row(s) not paired (--compile-paired)" in out
    assert f"test_models.py::test_a [grad]: {left}" in out
    assert f"test_models.py::test_b [grad]: {left}" in out
    report = project.report()
    assert report["paired"]["rows"] == 1
    assert any("2 changed row(s) not paired" in warning for warning in report["warnings"])
    shown = summary.read_text()
    assert "2 changed row(s) not paired" in shown and "test_a [grad]" in shown
    assert report["paired"]["text"] in shown


def _one_way_back_in_every_output(project: JaxProject, terminal: str, summary: str) -> None:
    """Under GitHub Actions the terminal, its step summary, its annotations and the
    pull-request comment that `merge` writes from its report give one way back, the CI's
    (a command would pin the laptop it is run on), and say what the gate itself spent after
    the tests."""
    from pytest_jaxcompile.cli import main

    annotations = "\n".join(line for line in terminal.splitlines() if line.startswith("::"))
    printed = terminal.split("\n::", 1)[0]  # the summary, before the workflow commands
    comment = project.path / "comment.md"
    report = project.path / "report.json"
    assert main(["merge", str(report), "--github=off", f"--pr-comment={comment}"]) == 1
    # One sentence per status with advice (a loaded machine may add an improved row's).
    ways = [line for line in printed.splitlines() if "with the re-pin workflow" in line]
    assert any(way.startswith("If the change is intended, re-pin on ") for way in ways), ways
    for way in ways:
        assert way in annotations
        for output in (summary, comment.read_text()):
            assert way.replace(">", "&gt;") in output, output
    for output in (printed, summary, annotations, comment.read_text()):
        assert "--compile-pin-update" not in output, output
    # What the gate itself spent after the tests, apart from the tests' compile time: in
    # the terminal, and from the report in the step summary and the comment alike.
    (own,) = [line for line in printed.splitlines() if line.startswith("after the tests, ")]
    assert own.startswith("after the tests, the gate itself spent ") and "pairing " in own
    assert re.search(r"profiling \d+ row\(s\) [\d.]+ s \(", own) and "profile_failing=never" in own
    gate_s = json.loads(report.read_text())["gate_s"]
    assert gate_s["pairing"] > 0 and gate_s["profiling"] > 0
    for output in (summary, comment.read_text()):
        assert "After the tests, the gate itself spent " in output, output
    # An annotation stays short: its row's line of cause and the command; the rest is in
    # the step summary.
    (error,) = [
        line
        for line in annotations.splitlines()
        if line.startswith("::error") and "test_deep [grad]" in line
    ]
    # the whole note made it about 1,500; the cause line now names the source lines that grew
    assert len(error) < 1100, error
    assert "sequential interval" not in error and "paired with pins/" not in error
    assert "Details: the job's step summary." in error and "sequential interval" in summary


def test_small_modules_are_judged_a_deeper_one_drifts_an_equal_one_passes_at_little_cost(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sub-second modules under the seconds gate's 0.25 s floor: the pairs measure the
    difference directly, with the paired gate's own floor (0.05 s). One row deeper and
    one equal row, paired together, cost a few dozen compiles of the pinned module."""
    project.conftest(cache=False)
    project.tests(THREE_ROWS)
    assert project.run("--compile-pin-update", "--compile-paired").ret == 0
    # Three times the layers: its compile grows well past the paired floor (0.05 s) on
    # every supported jax (jax 0.4.30 compiles 40 % more layers only 0.04 s slower), and a
    # DRIFT needs the whole interval past the floor in seconds, on a busy runner too
    monkeypatch.setenv("DEPTH_deep", "15")
    monkeypatch.setenv("NAME_a", "renamed")
    # As on GitHub Actions: the step summary and annotations come from this session too.
    summary = project.path / "step_summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_WORKSPACE", str(project.path))
    result = project.run("--compile-paired", *PROFILE_FAILING)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    _one_way_back_in_every_output(project, result.stdout.str(), summary.read_text())
    verdicts = project.verdicts()
    assert verdicts[("test_deep", "grad")] == "DRIFT"
    # The equal row passes: ok, or on a noisy runner not decided by the pairs allowed
    # (noisy, docs/paired.md; the newest matrix session saw it): never DRIFT.
    assert verdicts[("test_a", "grad")] in ("ok", "noisy"), verdicts
    rows = project.rows()
    assert rows[("test_b", "grad")]["paired_new_cpu_s"] is None  # unchanged
    report = project.report()
    assert report["paired"]["rows"] == 2
    # What the pairing cost, as the rows hold it and the paired line says it: each row
    # within the pairs allowed, the report's cost the one `pairing_cost` makes of the
    # report's own rows (as merge reads them back). How many compiles a runner needs
    # follows its noise: benchmarks/paired_gate.py measures it (docs/benchmarks.md), no
    # bound here.
    pairs = {
        cell: len(rows[(cell, "grad")]["paired_new_wall_s"]) for cell in ("test_deep", "test_a")
    }
    cost = report["paired"]
    assert sorted(cost["pairs"]) == sorted(pairs.values())
    assert all(LOOKS[0] <= count <= cost["max_pairs"] for count in pairs.values()), pairs
    loaded = load_report(project.path / "report.json")
    derived = pairing_cost(loaded.records, loaded.thresholds)
    assert derived is not None
    assert cost["plain_compiles"] == pytest.approx(derived.plain_compiles)
    # A pair compiles both modules, the new one no faster than half the pinned one.
    for cell, count in pairs.items():
        row = rows[(cell, "grad")]
        assert row["paired_cost_s"] > count * statistics.median(row["paired_base_wall_s"]), cell
    assert f"{cost['plain_compiles']:.0f} plain compiles a row" in result.stdout.str()
