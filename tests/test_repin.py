"""A re-pin keeps figures that barely moved: an unchanged project's pin update is no diff."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import JaxProject
from records_factory import make_record

from pytest_jaxcompile.gate.limits import Limits, Thresholds, limits_for
from pytest_jaxcompile.gate.pins import Pin, PinStore, kept_figures, within_repin_margin

CELL = "tests/test_models.py::test_mlp"


def _limits(tolerance: float = 0.75, floor_s: float = 0.0, rss_floor: float = 0.0) -> Limits:
    return limits_for(
        make_record(),
        None,
        Thresholds(tolerance=tolerance, floor_s=floor_s, rss_floor_mib=rss_floor),
    )


def test_a_figure_within_a_third_of_its_margin_is_kept_and_one_beyond_is_rewritten() -> None:
    # tolerance 75 % of 1.0 s: a margin of 0.75 s, a third of it 0.25 s
    assert within_repin_margin(1.0, 1.25, 0.75, 0.0)
    assert within_repin_margin(1.0, 0.75, 0.75, 0.0)
    assert not within_repin_margin(1.0, 1.26, 0.75, 0.0)
    assert not within_repin_margin(1.0, 0.74, 0.75, 0.0)
    # the floor widens a small figure's margin, as the gate's does
    assert within_repin_margin(0.01, 0.08, 0.75, 0.25)
    assert not within_repin_margin(0.01, 0.1, 0.75, 0.25)


def test_kept_figures_keep_the_old_figure_and_its_provenance_only_when_all_are_kept() -> None:
    old = Pin(
        compile_s=1.0,
        compile_cpu_s=1.2,
        fingerprint="sha256:abc",
        op_count=70,
        pinned_at="then",
        load_avg_1m=0.4,
        trace_s=0.5,
    )
    new = Pin(
        compile_s=1.1,
        compile_cpu_s=1.3,
        fingerprint="sha256:abc",
        op_count=71,
        pinned_at="now",
        load_avg_1m=1.9,
        trace_s=0.55,
    )
    kept = kept_figures(new, old, _limits())
    assert (kept.compile_s, kept.compile_cpu_s, kept.trace_s) == (1.0, 1.2, 0.5)
    assert (kept.pinned_at, kept.load_avg_1m) == ("then", 0.4)
    assert kept.op_count == 71  # deterministic figures are always rewritten

    moved = kept_figures(Pin(**{**vars(new), "compile_s": 2.0}), old, _limits())
    assert (moved.compile_s, moved.compile_cpu_s) == (2.0, 1.2)  # only the one that moved
    assert (moved.pinned_at, moved.load_avg_1m) == ("now", 1.9)  # a new figure: new provenance

    other_module = Pin(**{**vars(new), "fingerprint": "sha256:def"})
    assert kept_figures(other_module, old, _limits()) == other_module
    assert kept_figures(new, None, _limits()) == new


def test_the_margin_is_the_gates_a_hand_set_tolerance_first() -> None:
    old = Pin(compile_s=1.0, fingerprint="sha256:abc", tolerance=0.3)
    new = Pin(compile_s=1.2, fingerprint="sha256:abc", tolerance=0.3)
    session = Thresholds(tolerance=0.75, floor_s=0.0)
    # the session's 75 % would keep 1.0 (0.2 <= 0.25); the pin's own 30 % does not (0.1)
    assert kept_figures(new, old, limits_for(make_record(), old, session)).compile_s == 1.2


def test_a_repin_through_the_store_counts_the_pins_it_kept(tmp_path: Path) -> None:
    store = PinStore.load(tmp_path)
    first = [make_record(transform=name, compile_s=1.0) for name in ("vag", "jit")]
    store.update(first)
    before = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    again = [
        make_record(transform="vag", compile_s=1.1, timestamp="2026-12-01T00:00:00+00:00"),
        make_record(transform="jit", compile_s=3.0, timestamp="2026-12-01T00:00:00+00:00"),
    ]
    update = PinStore.load(tmp_path).repin(
        again, limits_of=lambda record, pin: limits_for(record, pin, Thresholds(floor_s=0.0))
    )
    assert update.kept == 1 and len(update.written) == 1
    key = make_record().key
    reloaded = PinStore.load(tmp_path)
    vag, jit = reloaded.get(key, CELL, "vag"), reloaded.get(key, CELL, "jit")
    assert vag is not None and (vag.compile_s, vag.pinned_at) == (1.0, "2026-11-30T00:00:00+00:00")
    assert jit is not None and (jit.compile_s, jit.pinned_at) == (3.0, "2026-12-01T00:00:00+00:00")
    # without limits (`update`) every figure is rewritten, as before
    PinStore.load(tmp_path).update(again)
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} != before


MODEL_TESTS = """
    import jax
    from jaxmodels import mlp_example_args, mlp_loss

    def test_mlp(jax_compile):
        args = mlp_example_args()
        jax_compile(jax.value_and_grad(mlp_loss), *args, transform="vag")
        jax_compile(jax.jit(mlp_loss), *args, transform="jit")
"""


def test_pinning_an_unchanged_project_twice_changes_no_pin_file_byte(
    project: JaxProject,
) -> None:
    project.conftest(cache=False)
    project.tests(MODEL_TESTS)
    # A floor far above any jitter of these small compiles: every figure is within a third
    # of its margin, so only the rule decides whether the timestamps and loads are rewritten.
    project.pytester.makeini("[pytest]\ncompile_floor = 30\n")
    first = project.run("--compile-pin-update")
    assert first.ret == pytest.ExitCode.OK
    pinned = project.pin_files()
    assert len(pinned) == 1 and "pinned_at" in next(iter(pinned.values())).decode()

    second = project.run("--compile-pin-update")
    assert second.ret == pytest.ExitCode.OK
    assert project.pin_files() == pinned
    second.stdout.fnmatch_lines(
        [
            "pins updated: nothing changed (2 pin(s) kept as they were: every figure within "
            "a third of its tolerance)"
        ]
    )
