"""``pytest-jaxcompile report``: the dashboard of a records corpus against the pins.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_jaxcompile._io import atomic_write_text
from pytest_jaxcompile.cli._args import (
    add_corpus_arguments,
    add_pins_argument,
    add_pr_comment_arguments,
    corpus_from,
    error,
)
from pytest_jaxcompile.cli._trend import add_trend_arguments, trend_settings_from
from pytest_jaxcompile.corpus.check import judged_rows
from pytest_jaxcompile.corpus.store import CorpusError, LatestRows
from pytest_jaxcompile.corpus.trend import TrendCollector, TrendReport
from pytest_jaxcompile.gate.conclude import GateSettings, conclude
from pytest_jaxcompile.gate.pins import PinFileError, PinStore
from pytest_jaxcompile.gate.view import trace_rollup
from pytest_jaxcompile.options.subcommands import add_threshold_arguments, thresholds_from
from pytest_jaxcompile.output.changes import Changes
from pytest_jaxcompile.output.charts import Trends
from pytest_jaxcompile.output.dashboard import (
    DashboardError,
    html_page,
    markdown,
    read_text_exact,
    replace_region,
    table_rows,
)
from pytest_jaxcompile.output.github import pr_comment

HELP = (
    "per comparability key, a Markdown table of the latest figures against the pins, and "
    "the series that rose over their history; "
    "into a README region (--readme) and/or a self-contained HTML page with trend charts "
    "(--html)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_corpus_arguments(parser)
    add_pins_argument(parser)
    add_threshold_arguments(parser)
    parser.add_argument(
        "--readme",
        type=Path,
        metavar="FILE",
        help="rewrite the region between '<!-- BEGIN jaxcompile -->' and "
        "'<!-- END jaxcompile -->' of FILE (the rest is left byte for byte)",
    )
    parser.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="write a self-contained HTML page with a trend chart per cell and transform",
    )
    add_pr_comment_arguments(
        parser,
        "write a short Markdown comment for a pull request: the verdict of the latest "
        "rows and only the rows that fail or changed",
    )
    add_trend_arguments(parser)
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 when the --readme region or the --html page is out of date",
    )


def run(args: argparse.Namespace) -> int:
    if args.check and args.readme is None and args.html is None:
        return error("report", "--check needs --readme FILE and/or --html FILE to compare")
    try:
        return _run(args)
    except (CorpusError, PinFileError, DashboardError) as problem:
        return error("report", problem)
    except OSError as problem:
        return error("report", f"{problem.filename}: {problem.strerror or problem}")


def _run(args: argparse.Namespace) -> int:
    corpus = corpus_from(args)
    store = PinStore.load(args.pins_dir)
    thresholds = thresholds_from(args)
    latest = LatestRows()
    trends = Trends() if args.html is not None else None
    changes = Changes(store, thresholds) if args.html is not None else None
    collector = TrendCollector(trend_settings_from(args))
    for row in corpus.rows():
        latest.add(row)
        collector.add(row)
        if trends is not None and changes is not None:
            trends.add(row)
            changes.add(row)
    judged = judged_rows(latest, store)  # the rows `check` judges: they agree
    records = judged.records()
    rows = table_rows(
        records, store, thresholds, passed_over=judged.passed_over(), execute_s=corpus.execute_s
    )
    trend_report = TrendReport.of(collector)
    table = markdown(rows, thresholds, trend_report)
    if args.pr_comment is not None:
        outcome = conclude(
            records,
            (),
            (),
            store,
            GateSettings(thresholds, pin_update=False),
            rootdir=Path.cwd(),
        )
        atomic_write_text(args.pr_comment, pr_comment(outcome, args.report_artifact))
        print(f"{args.pr_comment}: written")
    if args.readme is None and args.html is None:
        if args.pr_comment is not None:
            return 0
        print(table, end="")
        return 0

    outputs: list[tuple[Path, str, str]] = []  # path, current text, new text
    if args.readme is not None:
        current = read_text_exact(args.readme)
        outputs.append((args.readme, current, replace_region(current, table, args.readme)))
    if args.html is not None:
        assert trends is not None
        page = html_page(
            rows,
            trends,
            store,
            thresholds,
            corpus.describe(),
            trend_report,
            trace=trace_rollup(records),
            changes=changes,
        )
        try:
            current = read_text_exact(args.html)
        except DashboardError:
            current = ""  # missing (or unreadable, which the write reports)
        outputs.append((args.html, current, page))

    stale = [path for path, current, new in outputs if current != new]
    if args.check:
        for path, current, new in outputs:
            state = "out of date" if current != new else "up to date"
            print(f"{path}: {state}")
        if stale:
            print("run the same command without --check to update it")
            return 1
        return 0
    for path, current, new in outputs:
        if current != new:
            atomic_write_text(path, new)
            print(f"{path}: updated")
        else:
            print(f"{path}: unchanged")
    return 0
