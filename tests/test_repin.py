"""A re-pin keeps figures that barely moved: an unchanged project's pin update is no diff."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from conftest import INTENDED, JaxProject, printed_repin
from records_factory import make_record

from pytest_jaxcompile.backends import StagedModule, fingerprint_of
from pytest_jaxcompile.gate.dropping import dropped_figures
from pytest_jaxcompile.gate.limits import Limits, Thresholds, limits_for
from pytest_jaxcompile.gate.modules import ModuleStore
from pytest_jaxcompile.gate.pins import (
    Pin,
    PinStore,
    kept_figures,
    within_repin_margin,
)
from pytest_jaxcompile.gate.view import repin_command

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
    # Floors far above any jitter of these small compiles (seconds, and the RSS a compile's
    # threads happen to touch): every figure is within a third of its margin, so only the
    # rule decides whether the timestamps and loads are rewritten.
    project.pytester.makeini("[pytest]\ncompile_floor = 30\ncompile_rss_floor_mib = 1000\n")
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


# ------------------------------------------------------ a re-pin keeps every kind of figure

CPU = {"platform": "cpu", "device_kind": "cpu"}


def _stored_module(modules: ModuleStore, text: str) -> str:
    fingerprint = fingerprint_of(text)
    modules.write(fingerprint, StagedModule(text, b"options", 1, "cpu"))
    return fingerprint


def test_a_repin_that_would_drop_a_count_or_a_stored_module_names_the_option(
    tmp_path: Path,
) -> None:
    modules = ModuleStore(tmp_path / "modules")
    old = _stored_module(modules, "module @jit_f {}\n")
    counted = {"compile_instructions": 5_000_000, "compile_instructions_identity": "id"}
    PinStore.load(tmp_path).update([make_record(fingerprint=old, hardware_detail=CPU, **counted)])
    store = PinStore.load(tmp_path)
    changed = make_record(fingerprint="sha256:" + "1" * 64, hardware_detail=CPU)

    (count, module) = dropped_figures([changed], store, modules=modules)
    assert (count.option, module.option) == ("--compile-instructions", "--compile-paired")
    assert count.names == (changed.name,) == module.names
    assert count.text().endswith("; re-pin with --compile-instructions")
    # A session that stores modules drops none; one that counted drops no count.
    assert dropped_figures([changed], store, modules=None) == [count]
    recounted = dataclasses.replace(changed, compile_instructions=6_000_000)
    assert dropped_figures([recounted], store, modules=None) == []
    # An unchanged module keeps its pinned count (carried) and its stored module.
    assert (
        dropped_figures([make_record(fingerprint=old, hardware_detail=CPU)], store, modules=modules)
        == []
    )


def test_the_repin_command_repeats_the_sessions_options_before_the_tests() -> None:
    command = repin_command(
        ["tests/a.py::test_x"], ("--compile-paired", "--compile-hardware=ci runner")
    )
    assert command == (
        "pytest --compile-pin-update --compile-paired '--compile-hardware=ci runner' "
        "tests/a.py::test_x"
    )
    assert (
        repin_command(["t.py::a"], ("--compile-paired", "--compile-paired")).count(
            "--compile-paired"
        )
        == 1
    )


def test_the_repin_command_names_files_where_node_ids_would_run_long() -> None:
    """Three tests of one file with long node ids: their file, not a 200-character line;
    short ids stay named one by one."""
    cells = [
        "tests/integration/test_solver_adjoint.py::test_adjoint_matches_finite_differences[rk4]",
        "tests/integration/test_solver_adjoint.py::test_adjoint_gradient_of_long_horizon",
        "tests/integration/test_solver_adjoint.py::test_checkpointed_adjoint_memory",
    ]
    assert repin_command(cells, ("--compile-paired",)) == (
        "pytest --compile-pin-update --compile-paired tests/integration/test_solver_adjoint.py"
    )
    assert (
        repin_command(["a.py::t1", "a.py::t2"]) == "pytest --compile-pin-update a.py::t1 a.py::t2"
    )


PAIRED_MODEL = """
    import os
    import jax
    import jax.numpy as jnp

    DEPTH = int(os.environ.get("MODEL_DEPTH", "4"))

    def loss(ws, x):
        for i, w in enumerate(ws):
            x = jnp.tanh(x @ w) + jnp.sin(x) * (i + 1)
        return jnp.sum(x)

    def test_model(jax_compile):
        ws = [jnp.ones((128, 128)) * 0.01 for _ in range(DEPTH)]
        jax_compile(jax.jit(jax.grad(loss)), ws, jnp.ones((16, 128)), transform="grad")
"""
PAIRED = ("--compile-paired", "-o", "compile_paired_max_pairs=12")


def test_the_printed_repin_after_a_paired_drift_keeps_the_next_regression_paired(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.conftest(cache=False)
    project.tests(PAIRED_MODEL)
    assert (
        project.run("--compile-pin-update", "--compile-paired", "--compile-hardware", "laptop").ret
        == 0
    )

    # Another hardware name, no pin of its own: paired with the laptop's module.
    monkeypatch.setenv("MODEL_DEPTH", "12")
    drift = project.run(*PAIRED, "--compile-hardware", "ci-runner", "-o", "compile_pins_dir=pins")
    assert drift.ret == pytest.ExitCode.TESTS_FAILED
    (verdict,) = project.report()["verdicts"]
    assert (verdict["status"], verdict["metric"]) == ("DRIFT", "paired cpu")
    printed = printed_repin(drift.stdout.str(), INTENDED)
    assert "--compile-paired" in printed and "--compile-hardware=ci-runner" in printed
    assert "--override-ini=compile_pins_dir=pins" in printed  # an ini key given with -o

    # The same re-pin without --compile-paired would leave pins the next session cannot
    # pair with: refused, naming the option, nothing written.
    refused = project.run("--compile-pin-update", "--compile-hardware", "ci-runner")
    assert refused.ret == pytest.ExitCode.TESTS_FAILED
    refused.stdout.fnmatch_lines(
        [
            "pins NOT updated: 1 row(s) would lose their pin's stored module "
            "(test_models.py::test_model [[]grad[]]); re-pin with --compile-paired. "
            "Nothing was written",
            "Re-pin with: pytest --compile-pin-update --compile-hardware=ci-runner "
            "--compile-paired test_models.py::test_model",
        ]
    )
    assert not list(project.pins_dir.glob("ci-runner*"))

    assert project.run(*printed).ret == pytest.ExitCode.OK  # as printed
    (ci_pins,) = project.pins_dir.glob("ci-runner*")

    monkeypatch.setenv("MODEL_DEPTH", "24")
    again = project.run(*PAIRED, "--compile-hardware", "ci-runner")
    assert again.ret == pytest.ExitCode.TESTS_FAILED
    (verdict,) = project.report()["verdicts"]
    assert (verdict["status"], verdict["metric"]) == ("DRIFT", "paired cpu")
    assert f"paired with pins/{ci_pins.name}" in verdict["note"]  # its own key's pin now
