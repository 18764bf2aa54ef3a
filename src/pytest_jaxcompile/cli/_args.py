"""Arguments and error handling shared by the subcommands.

The verdict options (``--tolerance`` ...) come from the option table in `options`, the same
declarations pytest's ``--compile-*`` options come from.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pytest_jaxcompile.corpus.store import Corpus, parse_cell_fields, parse_timestamp

USAGE_ERROR = 2  # bad input or options; 1 is kept for findings (DRIFT, out of date)


def cell_fields(text: str) -> tuple[str, ...]:
    try:
        return parse_cell_fields(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def timestamp(text: str) -> float:
    try:
        return parse_timestamp(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO 8601 date or time (e.g. 2026-11-30 or "
            "2026-11-30T12:00:00+00:00)"
        ) from None


def add_corpus_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="records: JSON lines or JSON list files, or directories (walked for "
        "*.jsonl and *.json, e.g. a --compile-record-dir tree)",
    )
    parser.add_argument(
        "--cell-fields",
        type=cell_fields,
        default=(),
        metavar="A,B,C",
        help="build each record's cell from these fields, joined by '::' (dotted names "
        "reach into objects); records lacking one keep their own 'cell'",
    )
    parser.add_argument(
        "--since",
        type=timestamp,
        default=None,
        metavar="TIME",
        help="only rows measured at or after TIME (ISO 8601; a time without offset is UTC); "
        "rows without a timestamp are left out too",
    )


def add_reports_argument(parser: argparse.ArgumentParser, more: str = "") -> None:
    """The JSON reports a subcommand reads (`output.json_report.report_paths` walks them)."""
    parser.add_argument(
        "reports",
        nargs="+",
        type=Path,
        metavar="REPORT",
        help="JSON reports written by pytest --compile-report; a directory stands for every "
        "*.json file below it" + more,
    )


def add_pins_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--pins-dir",
        type=Path,
        default=Path("pins"),
        metavar="DIR",
        help="directory of pin files (default: ./pins)",
    )


REPORT_ARTIFACT_ENV = "JAXCOMPILE_REPORT_ARTIFACT"


def add_pr_comment_arguments(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--pr-comment FILE`` and ``--report-artifact NAME`` (what the comment points at)."""
    parser.add_argument("--pr-comment", type=Path, default=None, metavar="FILE", help=help_text)
    parser.add_argument(
        "--report-artifact",
        default=os.environ.get(REPORT_ARTIFACT_ENV) or None,
        metavar="NAME",
        help="the workflow artifact that holds the full report, named in the comment; without "
        f"it (or ${REPORT_ARTIFACT_ENV}) the comment names no artifact",
    )


def corpus_from(args: argparse.Namespace) -> Corpus:
    return Corpus(paths=list(args.paths), cell_fields=tuple(args.cell_fields), since=args.since)


def error(command: str, message: object) -> int:
    print(f"pytest-jaxcompile {command}: error: {message}", file=sys.stderr)
    return USAGE_ERROR
