"""A re-pin keeps figures that barely moved: an unchanged project's pin update is no diff."""

from __future__ import annotations

import dataclasses
import re
import shlex
import shutil
from pathlib import Path

import pytest
from conftest import DEEPENING_MODEL, INTENDED, JaxProject, printed_repin
from records_factory import make_record

from pytest_jaxcompile.backends import StagedModule, fingerprint_of
from pytest_jaxcompile.gate.conclude import GateSettings, conclude
from pytest_jaxcompile.gate.dropping import dropped_figures
from pytest_jaxcompile.gate.limits import Limits, Thresholds, limits_for
from pytest_jaxcompile.gate.modules import ModuleStore
from pytest_jaxcompile.gate.outcome import Outcome
from pytest_jaxcompile.gate.pins import (
    Pin,
    PinStore,
    kept_figures,
    within_repin_margin,
)
from pytest_jaxcompile.gate.view import BlockKind, Repin, repin_command, session_view

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


def _drifted(tmp_path: Path, hardware: str = "gha-ubuntu-latest") -> tuple[PinStore, Outcome]:
    """Pins holding a count and a stored module (made with --compile-instructions and
    --compile-paired); a plain session whose changed module drifted in one test of the
    file, while another test of it is unchanged and a third file's test pinned plainly."""
    modules = ModuleStore(tmp_path / "pins" / "modules")
    old = _stored_module(modules, "module @jit_f {}\n")
    counted = {"compile_instructions": 5_000_000, "compile_instructions_identity": "id"}
    drift = make_record(hardware=hardware, fingerprint=old, hardware_detail=CPU, **counted)
    same = dataclasses.replace(drift, cell="tests/test_models.py::test_same")
    plain = make_record(hardware=hardware, cell="tests/test_other.py::test_plain")
    PinStore.load(tmp_path / "pins").update([drift, same, plain])
    store = PinStore.load(tmp_path / "pins")
    changed = dataclasses.replace(
        drift, fingerprint="sha256:" + "1" * 64, compile_s=5.0, **dict.fromkeys(counted)
    )
    unchanged = dataclasses.replace(same, **dict.fromkeys(counted))
    outcome = conclude(
        [changed, unchanged, plain],
        [changed.cell, unchanged.cell, plain.cell],
        [],
        store,
        GateSettings(Thresholds(), pin_update=False, unstored_modules_dir=modules.directory),
        rootdir=tmp_path,
    )
    return store, outcome


def test_a_failing_sessions_repin_keeps_what_its_pins_hold_and_is_not_refused(
    tmp_path: Path,
) -> None:
    """The printed re-pin adds what the gate's refusal would name, decided from the pins of
    the tests it re-pins: run as printed (counting, storing modules), nothing is dropped."""
    store, outcome = _drifted(tmp_path)
    outcome.repin_environment = ("JAXCOMPILE_HARDWARE=gha-ubuntu-latest",)
    assert outcome.repin_keeps == {
        "tests/test_models.py::test_mlp": ("--compile-instructions", "--compile-paired")
    }
    (drift,) = session_view(outcome).blocks_of(BlockKind.STATUS)
    assert drift.command == (
        "JAXCOMPILE_HARDWARE=gha-ubuntu-latest pytest --compile-pin-update "
        "--compile-instructions --compile-paired tests/test_models.py::test_mlp"
    )
    # The re-pin as printed: it counts the rows and stores their modules, so its update
    # keeps every figure; without the options it is the refusal the issue met.
    words = drift.command.split()
    records = [verdict.record for verdict in outcome.verdicts]
    counting = "--compile-instructions" in words
    repin = [
        dataclasses.replace(record, compile_instructions=6_000_000) if counting else record
        for record in records
        if record.cell in words
    ]
    stores = "--compile-paired" in words
    modules_dir = None if stores else tmp_path / "pins" / "modules"
    assert not dropped_figures(
        repin, store, modules=None if modules_dir is None else ModuleStore(modules_dir)
    )
    assert len(dropped_figures(repin, store, modules=ModuleStore(tmp_path / "pins" / "modules")))
    # A command naming a file keeps what any of its tests' pins hold; one naming only
    # tests whose pins lose nothing adds nothing.
    repin_of = Repin.of(outcome)
    assert repin_of.command(["tests/test_other.py::test_plain"]) == (
        "JAXCOMPILE_HARDWARE=gha-ubuntu-latest pytest --compile-pin-update "
        "tests/test_other.py::test_plain"
    )
    many = [f"tests/test_models.py::test_{name}" for name in ("mlp", "a", "b", "c")]
    assert repin_of.command(many).endswith(
        "--compile-instructions --compile-paired tests/test_models.py"
    )
    assert repin_of.command(["tests/test_models.py::test_same"]).endswith(
        "--compile-pin-update tests/test_models.py::test_same"
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


PAIRED = ("--compile-paired", "-o", "compile_paired_max_pairs=12")


def test_the_printed_repin_after_a_paired_drift_keeps_the_next_regression_paired(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.conftest(cache=False)
    project.tests(DEEPENING_MODEL)
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


REPIN_LINE = re.compile(r"((?:[A-Z_]+=\S+ )*pytest --compile-pin-update .*)$")


def test_the_printed_repin_after_paired_pins_works_as_printed_on_a_warm_and_an_empty_cache(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pins made with --compile-paired (stored modules) under a hardware name from the
    environment; a regression fails a plain run, whose printed re-pin, run literally from a
    shell without that variable, succeeds; the next plain run passes, warm and cold."""
    project.conftest()
    project.tests(DEEPENING_MODEL)
    monkeypatch.setenv("JAXCOMPILE_HARDWARE", "gha-ubuntu-latest")
    assert project.run("--compile-pin-update", "--compile-paired").ret == pytest.ExitCode.OK
    assert list(project.pins_dir.glob("modules/*"))

    monkeypatch.setenv("MODEL_DEPTH", "24")
    failing = project.run("--compile-floor", "0")
    assert failing.ret == pytest.ExitCode.TESTS_FAILED
    (command,) = {
        match.group(1)
        for line in failing.stdout.lines
        if (match := REPIN_LINE.search(line)) is not None
    }
    words = shlex.split(command)
    monkeypatch.delenv("JAXCOMPILE_HARDWARE")  # another shell: only what the command says
    for word in words[: words.index("pytest")]:
        monkeypatch.setenv(*word.split("=", 1))
    repinned = project.run(*words[words.index("pytest") + 1 :])
    assert "pins NOT updated" not in repinned.stdout.str(), command  # the refusal before
    assert repinned.ret == pytest.ExitCode.OK, repinned.stdout.str()
    assert words[0] == "JAXCOMPILE_HARDWARE=gha-ubuntu-latest"  # the key it was judged under
    assert "--compile-paired" in words  # the pins hold stored modules

    for cache in ("warm", "cold"):
        if cache == "cold":
            shutil.rmtree(project.cache_dir)
        # a plain run; its tolerance wide, so that only the pins, not a busy machine's
        # seconds, decide it (a row under a key the re-pin missed is unpinned, not ok)
        again = project.run("--compile-tolerance", "10")
        assert again.ret == pytest.ExitCode.OK, (cache, again.stdout.str())
        assert set(project.verdicts().values()) == {"ok"}, cache
        (record,) = project.report()["records"]
        assert (record["cache_state"], record["hardware"]) == (cache, "gha-ubuntu-latest")
