"""Every output renders every status, and reads what the previous release wrote.

One `Outcome` holding a row of each `Status` goes through every renderer: the terminal
summary (which `merge` and `check` print too), the JSON report, JUnit properties, the GitHub
step summary and annotations, and the dashboard's Markdown and HTML. A new status that one
renderer does not know fails here, not in a user's CI.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from corpus_helpers import cli, write_lines
from records_factory import make_record

from pytest_jaxcompile.gate.judging import RSS_PHASE
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.outcome import Outcome
from pytest_jaxcompile.gate.pins import Pin, PinStore
from pytest_jaxcompile.gate.status import Status, Tone, Verdict, row_fails
from pytest_jaxcompile.gate.view import BlockKind, session_view
from pytest_jaxcompile.output.charts import Trends
from pytest_jaxcompile.output.dashboard import html_page, markdown, table_rows
from pytest_jaxcompile.output.github import (
    annotation_commands,
    pr_comment,
    record_path_resolver,
    step_summary,
)
from pytest_jaxcompile.output.json_report import build_report, load_report, write_report
from pytest_jaxcompile.output.junit import junit_properties, verdict_properties
from pytest_jaxcompile.output.terminal import summary_lines
from pytest_jaxcompile.records import CallLedger

RELEASE = Path(__file__).parent / "data" / "release-0.1.0"


def outcome_with(statuses: list[Status], tmp_path: Path, failed: bool = True) -> Outcome:
    verdicts = []
    for index, status in enumerate(statuses):
        record = make_record(
            cell=f"tests/t.py::test_{index}",
            location=("tests/t.py", index + 1),
            compile_s=2.0,
        )
        pin = None if status is Status.UNPINNED else Pin(compile_s=1.0)
        verdicts.append(
            Verdict(
                record,
                status,
                pin=pin,
                pin_file=tmp_path / "p.toml",
                tolerance=0.75,
                note=f"note of {status.value}",
            )
        )
    return Outcome(
        rootdir=tmp_path,
        pins_dir=tmp_path,
        thresholds=Thresholds(),
        pin_update=False,
        verdicts=verdicts,
        failed=failed,
    )


@pytest.mark.parametrize("status", list(Status), ids=lambda status: status.name)
def test_every_renderer_shows_every_status(status: Status, tmp_path: Path) -> None:
    outcome = outcome_with([status], tmp_path, failed=row_fails(status, Thresholds()))
    row = next(
        text
        for text, _ in summary_lines(outcome, verbose=True)
        if text.strip().startswith(status.value)
    )
    assert "tests/t.py::test_0 [vag]" in row

    report = build_report(outcome, [v.record for v in outcome.verdicts], [], "0.1.0")
    assert report["verdicts"][0]["status"] == status.value
    write_report(tmp_path / "r.json", report)
    assert load_report(tmp_path / "r.json").records == [outcome.verdicts[0].record]

    assert report["verdicts"][0]["fails"] is row_fails(status, Thresholds())
    assert ("jaxcompile.vag.compile_s", "2.0") in junit_properties(outcome.verdicts[0].record)
    (row,) = session_view(outcome).rows
    junit = dict(verdict_properties(row))
    assert junit["jaxcompile.vag.status"] == status.value
    assert junit["jaxcompile.vag.fails"] == str(row_fails(status, Thresholds())).lower()

    summary = step_summary(outcome)
    assert f"| {status.value} |" in summary or f"| **{status.value}** |" in summary
    headline = summary.splitlines()[0]
    assert headline.endswith("FAIL (1 " + status.value + ")") is row_fails(status, Thresholds())

    comment = pr_comment(outcome)
    assert ("| `tests/t.py::test_0` |" in comment) is (status.tone in (Tone.BAD, Tone.GOOD))

    annotations = annotation_commands(outcome, record_path_resolver(tmp_path, None), None)
    assert len(annotations) == (1 if status.tone in (Tone.BAD, Tone.GOOD) else 0)
    if annotations:
        level = "::error" if row_fails(status, Thresholds()) else "::warning"
        assert annotations[0].startswith(level)


def test_a_session_of_every_status_renders_most_severe_first(tmp_path: Path) -> None:
    outcome = outcome_with(list(reversed(Status)), tmp_path)
    rows = [
        text.split()[0]
        for text, _ in summary_lines(outcome, verbose=True)
        if text.startswith("  ") and text.split()[0] in {s.value.split()[0] for s in Status}
    ]
    assert rows == [
        "MISS",
        "GREW",
        "DRIFT",
        "failed",
        "improved",
        "unpinned",
        "noisy",
        "not",
        "budget",
        "ok",
    ]
    closing = [text for text, _ in summary_lines(outcome, verbose=True)]
    assert (
        "compile rows: 1 MISS, 1 GREW, 1 DRIFT, 1 failed, 1 improved, 1 unpinned, 1 noisy, "
        "1 not judged, 1 budget, 1 ok" in closing
    )
    assert step_summary(outcome).splitlines()[0] == (
        "## jax compile times: FAIL (1 MISS, 1 GREW, 1 DRIFT)"
    )


def test_the_drift_sentence_names_the_kinds_of_drift_its_rows_have(tmp_path: Path) -> None:
    outcome = outcome_with([Status.DRIFT, Status.DRIFT], tmp_path)
    slower, memory = outcome.verdicts
    on_memory = dataclasses.replace(memory, phase=RSS_PHASE)

    def sentence(verdicts: list[Verdict]) -> str:
        view = session_view(dataclasses.replace(outcome, verdicts=verdicts))
        block = next(b for b in view.blocks_of(BlockKind.STATUS) if b.status is Status.DRIFT)
        return block.text

    assert "slower" in sentence([slower]) and "memory" not in sentence([slower])
    assert "memory" in sentence([on_memory]) and "slower" not in sentence([on_memory])
    assert sentence([slower, on_memory]).startswith(
        "DRIFT: 2 row(s) compiled slower than their pin by more than the tolerance and by more "
        "than 0.25 s, or grew the process's memory during the compile"
    )
    closing = [text for text, _ in summary_lines(outcome, verbose=False)]
    assert any(text.startswith("DRIFT: 2 row(s) compiled slower") for text in closing)
    assert not any("memory" in text for text in closing if text.startswith("DRIFT:"))


def test_a_row_its_pin_no_longer_judges_says_so_and_names_the_re_pin_everywhere(
    tmp_path: Path,
) -> None:
    """A pin hand-edited to 50 s for a 0.012 s row: every output says the pin no longer
    judges the row and gives the one re-pin command; under compile_strict it fails in each."""
    from pytest_jaxcompile.gate.conclude import GateSettings, conclude

    location = ("tests/test_models.py", 3)
    PinStore.load(tmp_path).update([make_record(compile_s=50.0, location=location)])
    row = make_record(compile_s=0.012, location=location)
    repin = "pytest --compile-pin-update tests/test_models.py::test_mlp"
    for strict in (False, True):
        outcome = conclude(
            [row],
            [row.cell],
            [],
            PinStore.load(tmp_path),
            GateSettings(Thresholds(strict=strict), pin_update=False),
            rootdir=tmp_path,
        )
        assert outcome.failed is strict
        closing = [text for text, _ in summary_lines(outcome, verbose=False)]
        sentence = (
            "improved: 1 row(s) compiled faster than their pin by more than 10x: their pin "
            "no longer judges them"
        )
        assert sentence + ("; the session fails." if strict else ".") in closing, closing
        assert f"Re-pin and commit the pin files, so that a pin judges them again: {repin}" in (
            closing
        )
        assert any(text.strip().startswith("its pin no longer judges it: ") for text in closing)
        (verdict,) = build_report(outcome, [row], [], "0.1.0")["verdicts"]
        assert (verdict["status"], verdict["pin_outrun"], verdict["fails"]) == (
            "improved",
            True,
            strict,
        )
        assert "no longer judges" in step_summary(outcome) and repin in step_summary(outcome)
        assert repin in pr_comment(outcome)
        (annotation,) = annotation_commands(outcome, record_path_resolver(tmp_path, None), None)
        assert annotation.startswith("::error" if strict else "::warning"), annotation
        assert "its pin no longer judges it" in annotation and repin in annotation


def test_the_key_header_says_when_its_pin_file_does_not_exist_yet(tmp_path: Path) -> None:
    outcome = outcome_with([Status.UNPINNED], tmp_path, failed=False)
    outcome.pin_files = {outcome.verdicts[0].record.key: tmp_path / "p.toml"}
    header = summary_lines(outcome, verbose=False)[1][0]
    assert header.endswith("  (no pin file yet: p.toml)")
    (tmp_path / "p.toml").write_text("")
    assert summary_lines(outcome, verbose=False)[1][0].endswith("  (p.toml)")


def test_the_key_header_names_its_own_keys_pin_file_not_the_pin_compared(
    tmp_path: Path,
) -> None:
    """A MISS row's pin file is set by the verdict; its header is always its own key's."""
    from pytest_jaxcompile.gate.pins import pin_file_name

    outcome = outcome_with([Status.MISS], tmp_path)
    key = outcome.verdicts[0].record.key
    assert key.cache_state == "cold"
    outcome.verdicts[0] = dataclasses.replace(outcome.verdicts[0], pin_file=tmp_path / "warm.toml")
    header = summary_lines(outcome, verbose=False)[1][0]
    assert header.endswith(f"  (no pin file yet: {pin_file_name(key)})"), header


def test_eager_dispatch_that_the_clearing_makes_costly_names_why_it_cleared(
    tmp_path: Path,
) -> None:
    def ledger(number: int, cleared_because: str | None) -> CallLedger:
        return CallLedger.partition(
            f"tests/t.py::test_{number}",
            2.0,
            1.0,
            trace_s=0.2,
            lower_s=0.3,
            backend_compile_s=0.5,
            compiles=1,
            persistent_cache_hits=1,
            modules={"jit(f)": 1},
            overlays={},
            eager_compiles=40,
            eager_compile_s=0.4,
            caches_cleared_because=cleared_because,
        )

    still_there = "train_step (models) is still in memory"
    outcome = outcome_with([Status.OK], tmp_path, failed=False)
    outcome.ledgers = [
        ledger(0, "the first census'd test"),
        ledger(1, still_there),
        ledger(2, still_there),
        ledger(3, None),
    ]
    outcome.session_s = 8.0

    def hint() -> list[str]:
        """The hint, its lines (wrapped past 200 characters) joined again."""
        texts = [text for text, _ in summary_lines(outcome, verbose=False)]
        found = [i for i, text in enumerate(texts) if "caches cleared" in text]
        joined = []
        for start in found:
            end = start + 1
            while end < len(texts) and texts[end].startswith("    "):
                end += 1
            assert all(len(text) <= 200 for text in texts[start:end])
            joined.append(" ".join(text.strip() for text in texts[start:end]))
        return joined

    assert hint() == [
        "15% of the session in 3 census'd test(s) that started with JAX's in-process "
        "caches cleared and compiled their eager operations again, 2 of them because "
        "train_step (models) is still in memory "
        "(docs/census.md#each-test-compiles-what-it-uses)"
    ]
    outcome.session_s = 100.0
    assert hint() == []  # a small share is not worth a line
    outcome.session_s = 8.0
    outcome.ledgers = [ledger(0, None)]
    assert hint() == []  # nothing cleared: nothing to explain


def test_the_dashboard_renders_every_status(tmp_path: Path) -> None:
    store = PinStore.load(tmp_path / "pins")
    outcome = outcome_with(list(Status), tmp_path)
    rows = table_rows([v.record for v in outcome.verdicts], store, Thresholds())
    assert markdown(rows, Thresholds()).count("tests/t.py::test_") == len(Status)
    page = html_page(rows, Trends(), store, Thresholds(), "a corpus")
    for index, status in enumerate(Status):  # every row in the table of its key
        row = f'<tr data-test="tests/t.py::test_{index}"><td><code>tests/t.py::test_{index}'
        assert row in page, status


def test_files_written_by_the_previous_release_load_and_judge(tmp_path: Path) -> None:
    """Pins, a JSON report and a records corpus of 0.1.0 (a JAX fixture row, census rows
    and a torch row), read by this release."""
    store = PinStore.load(RELEASE / "pins")
    keys = sorted((group.key.framework, group.key.framework_version) for group in store.groups())
    assert keys == [("jax", "0.10.2"), ("torch", "2.13.0+cpu")]
    report = load_report(RELEASE / "report.json")
    torch_row = next(r for r in report.records if r.framework == "torch")
    assert torch_row.key.framework_version == "2.13.0+cpu"
    assert torch_row.jax_version == ""  # no JAX-named field holds torch's version
    assert report.thresholds == Thresholds()
    shutil.copytree(RELEASE, tmp_path / "release")
    result = cli(tmp_path / "release", "check", "records", "-v")
    assert result.returncode in (0, 1), result.stderr
    assert "torch 2.13.0+cpu" in result.stdout
    assert result.stdout.count("unpinned") <= 1  # census rows of 0.1.0 found their pins


def test_check_prints_the_terminals_verdict_lines(tmp_path: Path) -> None:
    """`check` renders with the terminal's own functions: the same rows, the same lines."""
    store = PinStore(tmp_path / "pins")
    before = "2026-10-31T10:00:00Z"  # pinned before the rows were measured
    store.update(
        [
            make_record(cell="t.py::test_a", compile_s=1.0, timestamp=before),
            make_record(cell="t.py::test_b", compile_s=1.0, timestamp=before),
        ]
    )
    rows = [
        make_record(cell="t.py::test_a", compile_s=3.0, timestamp="2026-11-01T10:00:00Z"),
        make_record(cell="t.py::test_b", compile_s=1.1, timestamp="2026-11-01T10:00:00Z"),
    ]
    write_lines(tmp_path / "r.jsonl", [r.to_dict() for r in rows])
    from pytest_jaxcompile.gate.conclude import GateSettings, conclude

    outcome = conclude(
        rows,
        (),
        (),
        PinStore.load(tmp_path / "pins"),
        GateSettings(Thresholds(), False),
        rootdir=tmp_path,
    )
    terminal = [text for text, _ in summary_lines(outcome, verbose=True)]
    result = cli(tmp_path, "check", "r.jsonl", "-v")
    assert result.returncode == 1
    assert result.stdout.splitlines()[1:] == terminal


def test_thresholds_in_a_report_are_validated_like_options(tmp_path: Path) -> None:
    outcome = outcome_with([Status.OK], tmp_path, failed=False)
    report = build_report(outcome, [v.record for v in outcome.verdicts], [], "0.1.0")
    report["thresholds"]["tolerance"] = float("inf")
    (tmp_path / "r.json").write_text(json.dumps(report))
    result = cli(tmp_path, "merge", "r.json")
    assert result.returncode == 2
    assert "thresholds 'tolerance' must be a finite number >= 0, got inf" in result.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["check", "r.jsonl", "--tolerance", "nan"],
        ["report", "r.jsonl", "--floor", "-1"],
        ["merge", "r.json", "--tolerance", "inf"],
        ["check", "r.jsonl", "--max-load", "abc"],
    ],
)
def test_bad_numbers_are_usage_errors_naming_the_option(command: list[str], tmp_path: Path) -> None:
    result = cli(tmp_path, *command)
    assert result.returncode == 2
    option = command[2]
    assert f"argument {option}: " in result.stderr


def test_merge_names_the_threshold_that_differs(tmp_path: Path) -> None:
    outcome = outcome_with([Status.OK], tmp_path, failed=False)
    records = [v.record for v in outcome.verdicts]
    write_report(tmp_path / "a.json", build_report(outcome, records, [], "0.1.0"))
    strict = dataclasses.replace(outcome, thresholds=Thresholds(strict=True))
    write_report(tmp_path / "b.json", build_report(strict, records, [], "0.1.0"))
    result = cli(tmp_path, "merge", "a.json", "b.json")
    assert result.returncode == 2
    assert "a.json: strict False" in result.stderr
    assert "b.json: strict True" in result.stderr
    assert "tolerance" not in result.stderr.split("(", 1)[1]
    assert "give --strict" in result.stderr
    assert cli(tmp_path, "merge", "a.json", "b.json", "--no-strict").returncode == 0


def test_a_pr_comment_lists_only_what_changed_and_fits_any_suite(tmp_path: Path) -> None:
    from pytest_jaxcompile.output.github import COMMENT_BUDGET, COMMENT_MARKER, pr_comment

    outcome = outcome_with([Status.OK] * 500 + [Status.DRIFT, Status.UNPINNED], tmp_path)
    comment = pr_comment(outcome)
    assert comment.startswith(
        COMMENT_MARKER + "\n### jax compile times: FAIL (1 DRIFT)\n\nCompile time: "
    )
    assert "| **DRIFT** | `tests/t.py::test_500` |" in comment
    assert "test_0`" not in comment and "test_499`" not in comment  # no ok row
    assert "1 unpinned row(s): tests/t.py 1" in comment
    assert "-v" not in comment and "the session fails" not in comment
    assert "DRIFT: 1 row(s) compiled slower" in comment and "; this run fails." in comment
    assert "pytest --compile-pin-update tests/t.py::test_500" in comment
    assert "artifact" not in comment  # no workflow said it uploads one
    named = pr_comment(outcome, "jaxcompile-report")
    assert "The full report: the `jaxcompile-report` artifact of this run." in named

    huge = outcome_with([Status.DRIFT] * 3000, tmp_path)
    assert len(pr_comment(huge)) <= COMMENT_BUDGET


def test_report_writes_the_pr_comment_of_a_corpus(tmp_path: Path) -> None:
    store = PinStore(tmp_path / "pins")
    store.update([make_record(cell=f"t.py::test_{n}", compile_s=1.0) for n in range(500)])
    rows = [make_record(cell=f"t.py::test_{n}", compile_s=1.0) for n in range(499)]
    rows.append(make_record(cell="t.py::test_499", compile_s=9.0))
    write_lines(tmp_path / "r.jsonl", [r.to_dict() for r in rows])
    result = cli(tmp_path, "report", "r.jsonl", "--pr-comment", "comment.md")
    assert result.returncode == 0, result.stderr
    comment = (tmp_path / "comment.md").read_text()
    assert "| **DRIFT** | `t.py::test_499` |" in comment
    assert comment.count("| ok |") == 0 and "t.py::test_0`" not in comment


def test_the_dashboard_finds_failing_and_unpinned_rows_by_verdict_not_label(
    tmp_path: Path,
) -> None:
    """An unpinned row after an upgrade is labelled so, yet counted as unpinned; under
    compile_require_pinned unpinned rows fail, and the page lists them as failing."""
    from pytest_jaxcompile.output.attention import coverage

    PinStore(tmp_path / "pins").update(
        [make_record(cell="t.py::test_up", jax_version="0.10.1", jaxlib_version="0.10.1")]
    )
    store = PinStore.load(tmp_path / "pins")
    thresholds = Thresholds(require_pinned=True)
    rows = table_rows(
        [make_record(cell="t.py::test_up"), make_record(cell="t.py::test_new")], store, thresholds
    )
    measured = [row for row in rows if row.key.framework_version == "0.10.2"]
    assert {row.cell: row.label for row in measured} == {
        "t.py::test_new": "unpinned",
        "t.py::test_up": "unpinned (upgrade from jax 0.10.1)",
    }
    (table,) = [item for item in coverage(rows) if item.key.framework_version == "0.10.2"]
    assert (table.unpinned, table.failing) == (2, 2)
    page = html_page(rows, Trends(), store, thresholds, "a corpus")
    assert "Failing: 2 row(s)" in page
