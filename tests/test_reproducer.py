"""Reproducer bundles (compile_reproducer, docs/reproducer.md): which rows get one, the texts
each holds, the folder written whole, every output naming it, and, end to end, a bundle
whose script reproduces a grown module's verdict with jax alone."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DEEPENING_MODEL, JaxProject
from records_factory import make_record

from pytest_jaxcompile.backends import StagedModule, fingerprint_of
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.modules import ModuleStore
from pytest_jaxcompile.gate.nearest import UPGRADE, NearestPin
from pytest_jaxcompile.gate.outcome import Outcome
from pytest_jaxcompile.gate.pins import Pin
from pytest_jaxcompile.gate.reproducer import (
    BundleRow,
    bundle_rows,
    folder_name,
    manifest,
    readme_text,
    verdict_text,
)
from pytest_jaxcompile.gate.status import Status, Verdict
from pytest_jaxcompile.gate.upgrades import UpgradeReport
from pytest_jaxcompile.gate.view import session_view
from pytest_jaxcompile.output.github import pr_comment, step_summary
from pytest_jaxcompile.output.json_report import build_report, load_report, write_report
from pytest_jaxcompile.output.terminal import summary_lines
from pytest_jaxcompile.records import ComparabilityKey
from pytest_jaxcompile.session.reproducer import write_reproducers

THRESHOLDS = Thresholds(paired_tolerance=0.05, floor_s=0.01, paired_floor_s=0.01)
ROW_TEXT = "module @jit_loss { func.func public @main() { return } }\n"
PIN_TEXT = "module @jit_loss { }\n"


def _module(text: str) -> StagedModule:
    return StagedModule(text, b"\x08\x01options", 1, "cpu")


def _outcome(tmp_path: Path, verdicts: list[Verdict], **fields: object) -> Outcome:
    values: dict[str, object] = {
        "rootdir": tmp_path,
        "pins_dir": tmp_path / "pins",
        "thresholds": THRESHOLDS,
        "pin_update": False,
        "verdicts": verdicts,
        "failed": True,
    }
    return Outcome(**(values | fields))  # type: ignore[arg-type]


def _drift(**overrides: object) -> Verdict:
    values: dict[str, object] = {
        "fingerprint": fingerprint_of(ROW_TEXT),
        "paired_base_cpu_s": [1.0] * 6,
        "paired_new_cpu_s": [3.0, 3.1, 2.9, 3.0, 3.2, 3.05],
        "paired_base_wall_s": [1.0] * 6,
        "paired_new_wall_s": [3.0] * 6,
        "paired_against": "pins/laptop.toml (laptop | jax 0.10.2 | full precision | cold)",
        "compile_s": 3.0,
        "op_count": 900,
    }
    record = make_record(**(values | overrides))
    pin = Pin(compile_s=1.0, fingerprint=fingerprint_of(PIN_TEXT), op_count=300)
    return Verdict(record, Status.DRIFT, pin=pin, tolerance=0.75, note="module grew: 300 -> 900")


def _upgrade_verdict() -> tuple[Verdict, UpgradeReport]:
    record = make_record(cell="tests/t.py::test_up", jax_version="0.10.3", compile_s=2.0)
    old_key = ComparabilityKey(record.hardware, "0.10.2", False, "cold")
    pin = Pin(compile_s=1.0, fingerprint=fingerprint_of(PIN_TEXT), op_count=300)
    verdict = Verdict(record, Status.UNPINNED, nearest=NearestPin(old_key, pin, UPGRADE, ratio=2.0))
    upgrade = UpgradeReport("jax", record.hardware, "0.10.2", "0.10.3", (verdict,))
    return verdict, upgrade


# ----------------------------------------------------------------------- which rows


def test_failing_rows_and_a_failing_upgrades_slowest_rows_are_bundled_and_no_others(
    tmp_path: Path,
) -> None:
    drift = _drift()
    ok = Verdict(make_record(cell="tests/t.py::test_ok"), Status.OK, pin=Pin(compile_s=1.0))
    upgraded, upgrade = _upgrade_verdict()
    outcome = _outcome(tmp_path, [drift, ok, upgraded], upgrades=[upgrade])
    # The upgrade block reports only: not bundled under "failing".
    assert [row.verdict for row in bundle_rows(outcome, "failing")] == [drift]
    assert [row.verdict for row in bundle_rows(outcome, "always")] == [drift, ok, upgraded]
    assert bundle_rows(outcome, "never") == []
    gated = _outcome(
        tmp_path,
        [drift, ok, upgraded],
        upgrades=[upgrade],
        thresholds=Thresholds(max_upgrade_slowdown=0.5),
    )
    rows = bundle_rows(gated, "failing")
    assert [row.verdict for row in rows] == [drift, upgraded]
    assert rows[1].upgrade is upgrade and rows[0].upgrade is None
    assert bundle_rows(_outcome(tmp_path, [drift], pin_update=True), "always") == []


def test_a_folder_is_named_by_test_transform_and_variant_safely() -> None:
    record = make_record(cell="tests/test_m.py::test_x[a/b c]", transform="grad")
    assert folder_name(record) == "tests_test_m.py_test_x_a_b_c_--grad"
    variant = make_record(transform="jit", variant="xla_cpu_fast=1")
    assert folder_name(variant) == "tests_test_models.py_test_mlp--jit--xla_cpu_fast_1"


# ----------------------------------------------------------------------- the texts


def test_the_verdict_text_has_the_figures_the_pairs_and_the_interval(tmp_path: Path) -> None:
    text = verdict_text(BundleRow(_drift()), THRESHOLDS, tmp_path)
    lines = text.splitlines()
    assert lines[0] == "tests/test_models.py::test_mlp [vag]: DRIFT"
    assert "key: cpu:cpu @ Test CPU x2 | jax 0.10.2 | full precision | cold" in lines
    pairs = next(line for line in lines if line.startswith("pairs: "))
    assert pairs.startswith("pairs: 6 (6 made), cpu seconds 1.000 s -> 3.025 s (medians)")
    assert re.search(r"pairs' ratio 3\.0\dx, 95% sequential interval 2\.\d\dx-3\.\d\dx", pairs)
    assert f"row's module: {fingerprint_of(ROW_TEXT)}" in lines
    assert "module grew: 300 -> 900" in lines
    never_paired = {
        name: None
        for name in (
            "paired_base_cpu_s",
            "paired_new_cpu_s",
            "paired_base_wall_s",
            "paired_new_wall_s",
        )
    }
    unpaired = verdict_text(BundleRow(_drift(**never_paired)), THRESHOLDS, tmp_path)
    assert "pairs: " not in unpaired


def test_the_readme_says_how_to_run_it_and_an_upgrade_says_both_versions(
    tmp_path: Path,
) -> None:
    readme = readme_text(BundleRow(_drift()), pinned=True, pinned_missing=None)
    assert readme.startswith("# Compile-time reproducer: tests/test_models.py::test_mlp [vag]")
    assert "needs only jax and jaxlib (no pytest, no plugin, no project code)" in readme
    assert "python reproduce.py --dump dumps" in readme
    assert "pip install" not in readme
    alone = readme_text(
        BundleRow(_drift()), pinned=False, pinned_missing="its pin's module is not stored"
    )
    assert "The pinned module is not in this bundle: its pin's module is not stored." in alone
    verdict, upgrade = _upgrade_verdict()
    row = BundleRow(verdict, upgrade)
    upgraded = readme_text(row, pinned=True, pinned_missing=None)
    assert "The cause is the jax upgrade 0.10.2 -> 0.10.3" in upgraded
    assert "pip install jax==0.10.2 jaxlib==0.10.2 && python reproduce.py" in upgraded
    assert "pip install jax==0.10.3 jaxlib==0.10.3 && python reproduce.py" in upgraded
    text = verdict_text(row, THRESHOLDS, tmp_path)
    assert "pinned under jax 0.10.2: compile 1.000 s, 300 ops, module sha256:" in text
    assert "this row under jax 0.10.3: compile 2.000 s (2.00x)" in text


def test_the_manifest_names_each_modules_devices_and_the_rows_identity() -> None:
    data = json.loads(manifest(BundleRow(_drift()), _module(ROW_TEXT), _module(PIN_TEXT)))
    assert data["devices"] == {"row": 1, "pinned": 1} and data["platform"] == "cpu"
    assert data["pinned_fingerprint"] == fingerprint_of(PIN_TEXT)
    assert data["status"] == "DRIFT" and data["key"]["jax_version"] == "0.10.2"
    alone = json.loads(manifest(BundleRow(_drift()), _module(ROW_TEXT), None))
    assert alone["devices"] == {"row": 1} and alone["pinned_fingerprint"] is None


# ----------------------------------------------------------------------- written, shown


def test_bundles_are_written_whole_replace_old_ones_and_every_output_names_them(
    tmp_path: Path,
) -> None:
    store = ModuleStore(tmp_path / "pins" / "modules")
    store.write(fingerprint_of(PIN_TEXT), _module(PIN_TEXT))
    drift = _drift()
    unstaged = Verdict(
        make_record(cell="tests/t.py::test_census"), Status.DRIFT, pin=Pin(compile_s=1.0)
    )
    outcome = _outcome(tmp_path, [drift, unstaged])
    directory = tmp_path / "repro"
    stale = directory / "old-row"
    stale.mkdir(parents=True)
    (stale / "bundle.json").write_text("{}")
    (directory / "mine.txt").write_text("not a bundle")
    write_reproducers(
        outcome,
        "failing",
        directory,
        store.directory,
        lambda record: _module(ROW_TEXT) if record is drift.record else None,
        lambda framework: {"reproduce.py": b"# script\n", "environment.txt": b"jax: 0.10.2\n"},
    )
    folder = directory / "tests_test_models.py_test_mlp--vag"
    assert sorted(path.name for path in directory.iterdir()) == ["mine.txt", folder.name]
    assert sorted(path.name for path in folder.iterdir()) == [
        "README.md",
        "bundle.json",
        "environment.txt",
        "pinned.mlir",
        "pinned.options.pb",
        "reproduce.py",
        "row.mlir",
        "row.options.pb",
        "verdict.txt",
    ]
    assert (folder / "pinned.mlir").read_text() == PIN_TEXT
    assert (folder / "row.options.pb").read_bytes() == b"\x08\x01options"
    assert outcome.reproducers == {(drift.record.key, drift.record.row_id): folder}

    view = session_view(outcome)
    line = (
        "reproducer bundles of 1 row(s) in repro (python reproduce.py in each; docs/reproducer.md)"
    )
    assert view.reproducers == line
    assert {row.cell: row.reproducer for row in view.rows} == {
        drift.record.cell: "repro/" + folder.name,
        unstaged.record.cell: None,
    }
    assert line in [text for text, _ in summary_lines(outcome, verbose=False)]
    assert "Reproducer bundles of 1 row(s) in repro" in step_summary(outcome)
    comment = pr_comment(outcome, "jaxcompile-report")
    assert "docs/reproducer.md) (the `jaxcompile-report` artifact of this run)." in comment
    report = build_report(outcome, [v.record for v in outcome.verdicts], [], "0.1.0")
    assert report["reproducers"] == {"dir": "repro", "rows": 1, "text": line}
    assert sorted(v["reproducer"] or "" for v in report["verdicts"]) == ["", "repro/" + folder.name]
    write_report(tmp_path / "r.json", report)
    loaded = load_report(tmp_path / "r.json")
    assert loaded.reproducers_dir == "repro" and list(loaded.reproducers.values()) == [
        "repro/" + folder.name
    ]

    # merge names them again, from the report, on the rows they were written for
    from pytest_jaxcompile.cli.merge import _reproducers

    merged = _outcome(tmp_path, [drift, unstaged])
    _reproducers(merged, [loaded], tmp_path)
    assert merged.reproducers == outcome.reproducers
    assert session_view(merged).reproducers == line

    # Its pin's module not stored: the bundle holds the row's and says why.
    store.prune([])
    again = _outcome(tmp_path, [drift])
    write_reproducers(
        again, "failing", directory, store.directory, lambda r: _module(ROW_TEXT), lambda f: {}
    )
    assert not (folder / "pinned.mlir").exists()
    assert "its pin's module is not stored" in (folder / "README.md").read_text()
    # never: nothing written, nothing named
    nothing = _outcome(tmp_path, [drift])
    write_reproducers(
        nothing, "never", tmp_path / "none", store.directory, lambda r: None, lambda f: {}
    )
    assert not (tmp_path / "none").exists() and session_view(nothing).reproducers is None


# ----------------------------------------------------------------------- end to end


# Runs a bundle's script with pytest and the plugin made unimportable: it needs jax alone.
ALONE = (
    "import runpy, sys\n"
    "for name in ('pytest', '_pytest', 'pytest_jaxcompile', 'jaxmodels'):\n"
    "    sys.modules[name] = None\n"
    "sys.argv = sys.argv[1:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


def test_a_grown_models_bundle_reproduces_its_verdict_with_jax_alone(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.conftest(cache=False)
    project.tests(DEEPENING_MODEL)
    monkeypatch.setenv("JAXCOMPILE_HARDWARE", "laptop")
    assert project.run("--compile-pin-update", "--compile-paired").ret == 0
    assert not (project.path / "jaxcompile-reproducers").exists()  # a pin update: none
    monkeypatch.setenv("MODEL_DEPTH", "12")
    # Under pytest-xdist: the worker sends its failing row's module, the controller writes.
    grown = project.run("-n", "2", "--compile-paired", "-o", "compile_paired_floor=0.01")
    assert grown.ret == pytest.ExitCode.TESTS_FAILED
    out = " ".join(grown.stdout.str().split())
    assert (
        "reproducer bundles of 1 row(s) in jaxcompile-reproducers (python reproduce.py in "
        "each; docs/reproducer.md)" in out
    )
    report = project.report()
    (verdict,) = report["verdicts"]
    assert verdict["status"] == "DRIFT"
    folder = project.path / verdict["reproducer"]
    assert folder == project.path / "jaxcompile-reproducers" / "test_models.py_test_model--grad"
    assert report["reproducers"]["rows"] == 1
    (row,) = report["records"]
    assert fingerprint_of((folder / "row.mlir").read_text()) == row["fingerprint"]
    assert (folder / "pinned.options.pb").stat().st_size > 0
    environment = (folder / "environment.txt").read_text()
    assert "jax:" in environment and "XLA_FLAGS: " in environment and "CPU: " in environment
    text = (folder / "verdict.txt").read_text()
    assert text.startswith("test_models.py::test_model [grad]: DRIFT")
    assert "pairs: " in text and "sequential interval" in text

    dumps = project.path / "dumps"
    alone = {name: value for name, value in os.environ.items() if not name.startswith("PYTHON")}
    ran = subprocess.run(
        [sys.executable, "-I", "-c", ALONE, "reproduce.py", "--pairs", "3", "--dump", str(dumps)],
        cwd=folder,
        env=alone,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert ran.returncode == 0, ran.stderr
    ratio = re.search(r"ratio \(row / pinned\): ([\d.]+)x wall, ([\d.]+)x CPU", ran.stdout)
    assert ratio is not None, ran.stdout
    assert float(ratio.group(2)) > 1.0  # the grown module compiles slower: DRIFT's direction
    assert "pinned module: median " in ran.stdout and "row module:" in ran.stdout
    for side in ("pinned", "row"):
        dumped = {path.name.split(".")[1] for path in (dumps / side).glob("*.txt")}
        assert dumped == {"jit_loss"}, f"XLA's dumps of the {side} module: {dumped}"

    # The model back as pinned: no failing row, and the earlier bundle is gone.
    monkeypatch.setenv("MODEL_DEPTH", "4")
    assert project.run("--compile-paired").ret == 0
    assert not folder.exists()
