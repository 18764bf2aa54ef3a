"""`benchmarks/paired_gate.py --report`: over the committed sessions it prints the table
docs/benchmarks.md shows; over hand-edited results files, a row whose plain seconds would not
judge anything is named by file and line, and a base without its equal row prints no figure
rather than "nan". A subprocess, as the script sets its own sys.path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import regenerating_docs

from pytest_jaxcompile._io import atomic_write_text

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "paired_gate.py"
RESULTS = REPO / "benchmarks" / "results" / "paired_large.jsonl"
RESULTS_FILES = sorted((REPO / "benchmarks" / "results").glob("paired_*.jsonl"))
LARGE_TABLE_INTRO = "Every recorded session, replayed through the sequential rule"
WARM_UP_STUDY_PRINTED = "warm-up study:"
WARM_UP_STUDY_INTRO = "The warm-up study"


def committed_row(variant: str) -> dict[str, Any]:
    for line in RESULTS.read_text().splitlines():
        row: dict[str, Any] = json.loads(line)
        if row["variant"] == variant:
            return row
    raise AssertionError(f"{RESULTS} has no {variant} row")


def report(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--report", *map(str, paths)],
        capture_output=True,
        text=True,
    )


@pytest.mark.parametrize(
    ("printed_after", "page_intro"),
    [
        ("", LARGE_TABLE_INTRO),
        (WARM_UP_STUDY_PRINTED, WARM_UP_STUDY_INTRO),
    ],
    ids=["sequential-rule", "warm-up-study"],
)
def test_the_paired_tables_in_benchmarks_md_are_what_the_report_prints(
    printed_after: str, page_intro: str
) -> None:
    """The recorded sessions replayed through the sequential rule, at the default floor:
    the table and the figures under it (false DRIFTs, changes caught, pairs used); and the
    warm-up study of the `--fixed-pairs` sessions. Sessions appended to the results files
    fail this until the page is brought up to date, which `JAXCOMPILE_REGENERATE_DOCS=1`
    (as for tests/test_docs.py's samples) does in place."""
    result = report(*RESULTS_FILES)

    assert result.returncode == 0, result.stderr
    out = result.stdout.splitlines(keepends=True)
    start_out = next((i for i, line in enumerate(out) if line.startswith(printed_after)), None)
    assert start_out is not None, f"--report printed no line starting {printed_after!r}"
    printed = "".join(out[slice(*_table_span(out, start_out, "--report's output"))])
    page = REPO / "docs" / "benchmarks.md"
    lines = page.read_text().splitlines(keepends=True)
    after = next((i for i, line in enumerate(lines) if line.startswith(page_intro)), None)
    assert after is not None, (
        f"{page.name} has no line starting {page_intro!r}: if the text before the "
        "table was reworded, update the test's intro to match"
    )
    start, end = _table_span(lines, after, page.name)
    shown = "".join(lines[start:end])
    if shown != printed and regenerating_docs():
        atomic_write_text(page, "".join(lines[:start]) + printed + "".join(lines[end:]))
        shown = printed
    assert shown == printed, f"{page.name} shows, after {page_intro!r}:\n{shown}\n" + (
        f"where the report prints (JAXCOMPILE_REGENERATE_DOCS=1 rewrites it):\n{printed}"
    )


def _table_span(lines: list[str], after: int, source: str) -> tuple[int, int]:
    """Where the first `| module |` table of `source` at or after line `after` starts and
    ends, with the rule's figures printed under it (`- equal rows: ...`)."""
    start = next((i for i in range(after, len(lines)) if lines[i].startswith("| module |")), None)
    assert start is not None, f"{source} has no `| module |` table at or after line {after + 1}"
    end = next(
        (
            i
            for i in range(start, len(lines))
            if not lines[i].startswith(("|", "- equal rows", "- changed rows"))
        ),
        len(lines),
    )
    return start, end


@pytest.mark.parametrize("field", ["plain_s", "base_plain_s"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -4.5, 0.0])
def test_a_row_without_usable_plain_seconds_is_named_by_line(
    tmp_path: Path, field: str, value: float
) -> None:
    good = committed_row("equal")
    bad = {**good, field: value}
    path = tmp_path / "sessions.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")

    result = report(path)

    assert result.returncode != 0
    assert f"{path}:2: not a session row of --json" in result.stderr
    assert "| module |" not in result.stdout


def test_a_base_without_its_equal_row_shows_no_plain_figure(tmp_path: Path) -> None:
    row = committed_row("+10%")
    path = tmp_path / "sessions.jsonl"
    path.write_text(json.dumps(row) + "\n")

    result = report(path)

    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith(f"| {row['base']} "))
    cells = [cell.strip() for cell in line.strip("|").split("|")]
    assert cells[1] == "-"
    assert cells[2] == "+10%"
    assert "nan" not in result.stdout
    assert cells[-1].endswith(" s)")  # costs without a plain figure to set them against
