"""`pytest-jaxcompile merge`: reading reports, the CLI, and shards equal to one session."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    EXPECTED,
    PROFILE_FAILING,
    JaxProject,
    compile_summary,
    make_pinned_suite,
    mask_figures,
    report_shape,
)
from records_factory import make_record

from pytest_jaxcompile.cli import main
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.outcome import Outcome as SessionOutcome
from pytest_jaxcompile.gate.pins import PinStore
from pytest_jaxcompile.output.json_report import (
    ReportError,
    build_report,
    load_report,
    report_paths,
    write_report,
)
from pytest_jaxcompile.records import CompileRecord

# --- reading reports ------------------------------------------------------------------


def write_shard(path: Path, records: list[CompileRecord], **outcome: Any) -> Path:
    """A report as the plugin writes it, for the given records."""
    thresholds = outcome.pop("thresholds", Thresholds())
    if "fail_on_improvement" in outcome:
        thresholds = dataclasses.replace(
            thresholds, fail_on_improvement=outcome.pop("fail_on_improvement")
        )
    session = SessionOutcome(
        rootdir=path.parent,
        pins_dir=path.parent / "pins",
        thresholds=thresholds,
        pin_update=False,
    )
    for name, value in outcome.items():
        setattr(session, name, value)
    write_report(path, build_report(session, records, [], "0.1.0"))
    return path


def test_a_report_written_by_the_plugin_reads_back(tmp_path: Path) -> None:
    record = make_record(location=("tests/t.py", 4), trace_s=0.5)
    path = write_shard(
        tmp_path / "r.json",
        [record],
        ran_cells=[record.cell],
        environments=[("hw", "0.1")],
        lost=["gw1 went down"],
    )
    report = load_report(path)
    assert report.records == [record]
    assert report.ran_cells == [record.cell]
    assert report.environments == [("hw", "0.1")]
    assert report.lost == ["gw1 went down"]
    assert report.thresholds == Thresholds()
    assert report.fail_on_improvement is False
    assert report.rootdir == str(tmp_path)


def _report_with(tmp_path: Path, **changes: Any) -> Path:
    path = write_shard(tmp_path / "r.json", [make_record()])
    data = json.loads(path.read_text())
    for name, value in changes.items():
        if name.startswith("record_"):
            data["records"][0][name.removeprefix("record_")] = value
        else:
            data[name] = value
    path.write_text(json.dumps(data, indent=2))
    return path


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"report_kind": "other"}, "not a pytest-jaxcompile report (report_kind is 'other'"),
        (
            {"schema_version": 3},
            "report schema_version 3 was written by a newer "
            "pytest-jaxcompile (this one reads up to 2)",
        ),
        ({"schema_version": "1"}, "report schema_version must be a positive integer"),
        ({"records": {}}, "'records' must be a list of records"),
        (
            {"record_compile_s": -1},
            "records[0] (tests/test_models.py::test_mlp [vag]): "
            "'compile_s' must be a finite number >= 0, got -1",
        ),
        (
            {"record_cache_state": "tepid"},
            "records[0] (tests/test_models.py::test_mlp [vag]): cache_state 'tepid' is not one of",
        ),
        ({"record_mixed_precision": 1}, "'mixed_precision' must be true or false, got 1"),
        ({"record_location": ["t.py"]}, "'location' must be [file, line]"),
        ({"record_record_kind": "census"}, "record_kind 'census' is not 'compile_probe'"),
        ({"record_schema_version": 9}, "record schema_version 9 was written by a newer"),
        ({"record_cache": "x"}, "'cache' must be an object"),
        ({"ran_cells": [1]}, "'ran_cells' must be a list of strings"),
        ({"environments": [{"hardware": "x"}]}, "'environments' must be a list of"),
        ({"thresholds": {"tolerance": "a", "floor_s": 0}}, "thresholds 'tolerance' must be"),
    ],
)
def test_bad_reports_are_errors_naming_the_file(
    tmp_path: Path, changes: dict[str, Any], message: str
) -> None:
    path = _report_with(tmp_path, **changes)
    with pytest.raises(ReportError) as error:
        load_report(path)
    assert str(error.value).startswith(f"{path}: ")
    assert message in str(error.value)


def test_unreadable_files_are_errors_naming_the_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{\n  "report_kind": "jaxcompile_report",\n  "records": [,]\n}\n')
    with pytest.raises(ReportError, match=rf"^{broken}:3: not valid JSON"):
        load_report(broken)
    with pytest.raises(ReportError, match="no such file"):
        load_report(tmp_path / "missing.json")
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(ReportError, match="it has no report_kind"):
        load_report(tmp_path / "list.json")
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe")
    with pytest.raises(ReportError, match="not UTF-8"):
        load_report(tmp_path / "binary.json")


def test_a_directory_stands_for_its_json_files(tmp_path: Path) -> None:
    (tmp_path / "a" / "x").mkdir(parents=True)
    (tmp_path / "a" / "x" / "2.json").write_text("{}")
    (tmp_path / "a" / "1.json").write_text("{}")
    (tmp_path / "a" / "notes.txt").write_text("")
    (tmp_path / "empty").mkdir()
    assert report_paths([tmp_path / "a", tmp_path / "z.json"]) == [
        tmp_path / "a" / "1.json",
        tmp_path / "a" / "x" / "2.json",
        tmp_path / "z.json",
    ]
    with pytest.raises(ReportError, match="holds no"):
        report_paths([tmp_path / "empty"])


# --- the command ----------------------------------------------------------------------


@pytest.fixture
def shards(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Two shard reports and pins in tmp_path (the current directory): one DRIFT row."""
    monkeypatch.chdir(tmp_path)
    a = make_record(cell="tests/test_a.py::test_a", compile_s=1.0, location=("tests/test_a.py", 3))
    b = make_record(cell="tests/test_b.py::test_b", compile_s=1.0)
    PinStore.load(tmp_path / "pins").update([a, b])
    slow = make_record(cell=a.cell, compile_s=5.0, location=a.location)
    return (
        write_shard(tmp_path / "a.json", [slow], ran_cells=[a.cell]),
        write_shard(tmp_path / "b.json", [b], ran_cells=[b.cell, "tests/test_b.py::x"]),
    )


def test_merge_judges_all_rows_and_fails_on_drift(
    shards: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["merge", *map(str, shards)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == " jax compile times (merged from 2 reports) ".center(80, "=")
    assert out[1:3] == [f"  {shards[0]}: 1 row(s)", f"  {shards[1]}: 1 row(s)"]
    assert (
        "  DRIFT      tests/test_a.py::test_a [vag] 5.000 s, pin 1.000 s (5.00x, "
        "tolerance 75%)" in out
    )
    assert "  ok         1 row(s) within tolerance (-v lists them)" in out
    assert "compile rows: 1 DRIFT, 1 ok" in out
    assert out[-1] == (
        "If the change is intended, re-pin and commit the pin files: "
        "pytest --compile-pin-update tests/test_a.py::test_a"
    )
    # Raising the tolerance on the command line passes it.
    assert main(["merge", "--tolerance", "10", *map(str, shards)]) == 0


def test_merge_writes_a_report_that_merges_again_to_the_same_verdicts(
    shards: tuple[Path, Path], tmp_path: Path
) -> None:
    merged = tmp_path / "out" / "merged.json"
    assert main(["merge", "--write-report", str(merged), *map(str, shards)]) == 1
    report = json.loads(merged.read_text())
    assert report["gate"] == "fail"
    assert report["ran_cells"] == [
        "tests/test_a.py::test_a",
        "tests/test_b.py::test_b",
        "tests/test_b.py::x",
    ]
    assert [(v["cell"], v["status"]) for v in report["verdicts"]] == [
        ("tests/test_a.py::test_a", "DRIFT"),
        ("tests/test_b.py::test_b", "ok"),
    ]
    again = tmp_path / "again.json"
    assert main(["merge", "--write-report", str(again), str(merged)]) == 1
    assert json.loads(again.read_text())["verdicts"] == report["verdicts"]


def test_merge_repins_from_the_reports(shards: tuple[Path, Path], tmp_path: Path) -> None:
    assert main(["merge", "--pin-update", "--pins-dir", "fresh", *map(str, shards)]) == 0
    replay = tmp_path / "replay"
    PinStore.load(replay).update(
        [record for path in shards for record in load_report(path).records]
    )
    assert {p.name: p.read_bytes() for p in (tmp_path / "fresh").iterdir()} == {
        p.name: p.read_bytes() for p in replay.iterdir()
    }
    assert main(["merge", "--pins-dir", "fresh", *map(str, shards)]) == 0  # now within


def test_improvement_fails_only_with_the_flag_or_when_the_reports_say_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    PinStore.load(tmp_path / "pins").update([make_record(compile_s=5.0)])
    fast = write_shard(tmp_path / "fast.json", [make_record(compile_s=1.0)])
    assert main(["merge", str(fast)]) == 0
    assert main(["merge", "--fail-on-improvement", str(fast)]) == 1
    strict = write_shard(
        tmp_path / "strict.json", [make_record(compile_s=1.0)], fail_on_improvement=True
    )
    assert main(["merge", str(strict)]) == 1
    assert main(["merge", "--no-fail-on-improvement", str(strict)]) == 0


def test_disagreeing_thresholds_and_bad_input_exit_2_naming_the_problem(
    shards: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = write_shard(
        tmp_path / "c.json",
        [make_record(cell="tests/test_c.py::test_c")],
        thresholds=Thresholds(tolerance=0.2),
    )
    assert main(["merge", str(shards[0]), str(other)]) == 2
    assert "different thresholds" in capsys.readouterr().err
    assert main(["merge", "--tolerance", "0.5", "--floor", "0.25", str(shards[0]), str(other)]) == 1
    capsys.readouterr()

    assert main(["merge", "--write-report", str(tmp_path), *map(str, shards)]) == 2
    assert f"cannot write {tmp_path}: " in capsys.readouterr().err

    (tmp_path / "bad.json").write_text("{")
    assert main(["merge", str(shards[0]), str(tmp_path / "bad.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pytest-jaxcompile merge: error: {tmp_path / 'bad.json'}:1: ")

    (pin_file,) = (tmp_path / "pins").glob("*.toml")
    pin_file.write_text("[key\n")
    assert main(["merge", *map(str, shards)]) == 2
    assert f"cannot read pin file {pin_file}:1: not valid TOML" in capsys.readouterr().err
    assert pin_file.read_text() == "[key\n"


def test_the_same_row_in_two_reports_is_named(
    shards: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    main(["merge", str(shards[0]), str(shards[0])])
    assert (
        "warning: 1 row(s) measured under the same key in more than one report: "
        "tests/test_a.py::test_a [vag]"
    ) in capsys.readouterr().err


def test_merge_in_github_actions_summarizes_and_annotates(
    shards: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path))
    assert main(["merge", *map(str, shards)]) == 1
    assert summary.read_text().startswith(
        "## jax compile times (merged from 2 reports): FAIL (1 DRIFT)\n"
    )
    out = capsys.readouterr().out
    assert "::error file=tests/test_a.py,line=3,title=jax compile DRIFT%3A test_a [vag]::" in out
    assert main(["merge", "--github=off", *map(str, shards)]) == 1
    assert "::error" not in capsys.readouterr().out
    assert summary.read_text().count("## jax compile times") == 1


@pytest.mark.integration
def test_merge_does_not_import_jax(shards: tuple[Path, Path]) -> None:
    code = (
        "import sys; from pytest_jaxcompile.cli import main; "
        f"status = main(['merge', {str(shards[0])!r}]); "
        "print(status, 'jax' in sys.modules)"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert output.splitlines()[-1] == "1 False"


@pytest.mark.integration
def test_merge_is_a_registered_subcommand() -> None:
    for command in (
        [sys.executable, "-m", "pytest_jaxcompile", "merge", "--help"],
        [str(Path(sys.executable).parent / "pytest-jaxcompile"), "merge", "--help"],
    ):
        output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        assert "combine the JSON reports of several CI jobs" in output


# --- shards of a real suite -----------------------------------------------------------


def test_two_shards_merged_give_the_unsharded_verdict(project: JaxProject) -> None:
    make_pinned_suite(project)
    whole = project.run("-v", "--compile-floor", "0", *PROFILE_FAILING)
    assert whole.ret == pytest.ExitCode.TESTS_FAILED
    assert project.verdicts() == EXPECTED
    unsharded = project.report()

    selection = "drift or improved or test_ok"
    shard_paths, shard_summaries = [], []
    for name, expression in (("a", selection), ("b", f"not ({selection})")):
        shard = project.run("-v", "--compile-floor", "0", "-k", expression, *PROFILE_FAILING)
        shard_summaries.append(compile_summary(shard))
        shard_paths.append(project.path / f"shard-{name}.json")
        shutil.copy(project.path / "report.json", shard_paths[-1])
    assert [len(load_report(path).records) for path in shard_paths] == [4, 4]

    merged_path = project.path / "merged.json"
    merge = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_jaxcompile",
            "merge",
            "-v",
            f"--write-report={merged_path}",
            *map(str, shard_paths),
        ],
        cwd=project.path,
        capture_output=True,
        text=True,
    )
    assert merge.returncode == 1, merge.stderr
    merged = json.loads(merged_path.read_text())
    statuses = {(v["cell"], v["transform"]): v["status"] for v in merged["verdicts"]}
    assert statuses == {(v["cell"], v["transform"]): v["status"] for v in unsharded["verdicts"]}
    shape, expected = report_shape(merged), report_shape(unsharded)
    assert shape == expected  # records, verdicts, stale pins, ran cells, environments, gate
    # The same summary, line for line, as the unsharded session printed (the shards' wall
    # seconds add up to another share of the session than the unsharded one's).
    merged_lines = merge.stdout.splitlines()[1 + len(shard_paths) :]
    assert mask_figures(merged_lines) == mask_figures(compile_summary(whole))
    # A compile profile's phases are read from the shard's records: the merge words them as
    # that shard's session did, figures and all.
    (phases,) = [line for line in merged_lines if line.lstrip().startswith("phases of the ")]
    assert phases in shard_summaries[0]
