"""Arguments and error handling shared by the corpus subcommands (report, check, pin)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_jaxcompile.corpus.store import Corpus, parse_cell_fields, parse_timestamp
from pytest_jaxcompile.gate.verdicts import (
    DEFAULT_FLOOR_S,
    DEFAULT_MAX_LOAD,
    DEFAULT_TOLERANCE,
    METRIC_CPU,
    METRIC_WALL,
    Thresholds,
)

USAGE_ERROR = 2  # bad input or options; 1 is kept for findings (DRIFT, out of date)


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must not be negative")
    return value


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
        "paths", nargs="+", type=Path, metavar="PATH",
        help="records: JSON lines or JSON list files, or directories (walked for "
        "*.jsonl and *.json, e.g. a --compile-record-dir tree)",
    )
    parser.add_argument(
        "--cell-fields", type=cell_fields, default=(), metavar="A,B,C",
        help="build each record's cell from these fields, joined by '::' (dotted names "
        "reach into objects); records lacking one keep their own 'cell'",
    )
    parser.add_argument(
        "--since", type=timestamp, default=None, metavar="TIME",
        help="only rows measured at or after TIME (ISO 8601; a time without offset is UTC); "
        "rows without a timestamp are left out too",
    )


def add_pins_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--pins-dir", type=Path, default=Path("pins"), metavar="DIR",
        help="directory of pin files (default: ./pins)",
    )


def add_threshold_arguments(parser: argparse.ArgumentParser) -> None:
    """The plugin's verdict settings, by the names of its --compile-* options without the prefix."""
    parser.add_argument(
        "--tolerance", type=non_negative_float, default=DEFAULT_TOLERANCE, metavar="FRACTION",
        help=f"relative slowdown over the pin that counts as DRIFT (default {DEFAULT_TOLERANCE})",
    )
    parser.add_argument(
        "--floor", type=non_negative_float, default=DEFAULT_FLOOR_S, metavar="SECONDS",
        help=f"absolute slowdown a row must also exceed (default {DEFAULT_FLOOR_S} s)",
    )
    parser.add_argument(
        "--metric", choices=(METRIC_WALL, METRIC_CPU), default=METRIC_WALL,
        help="what verdicts compare: wall seconds (default) or process CPU seconds",
    )
    parser.add_argument(
        "--max-load", type=non_negative_float, default=DEFAULT_MAX_LOAD, metavar="LOAD",
        help="rows measured above this 1-minute load per core are 'noisy' and not judged "
        f"(default {DEFAULT_MAX_LOAD})",
    )
    parser.add_argument("--strict", action="store_true", help="judge noisy rows too")
    parser.add_argument(
        "--max-ops-growth", type=non_negative_float, default=None, metavar="FRACTION",
        help="rows whose module grew beyond this fraction over the pinned op count are GREW",
    )
    parser.add_argument(
        "--expect-warm", action="store_true",
        help="a cold row of a module unchanged since its warm pin is a MISS",
    )
    parser.add_argument(
        "--time-advisory", action="store_true",
        help="DRIFT (and improvement) is reported but does not fail",
    )


def corpus_from(args: argparse.Namespace) -> Corpus:
    return Corpus(paths=list(args.paths), cell_fields=tuple(args.cell_fields), since=args.since)


def thresholds_from(args: argparse.Namespace) -> Thresholds:
    return Thresholds(
        tolerance=args.tolerance,
        floor_s=args.floor,
        max_ops_growth=args.max_ops_growth,
        time_advisory=args.time_advisory,
        expect_warm=args.expect_warm,
        metric=args.metric,
        max_load=args.max_load,
        strict=args.strict,
    )


def error(command: str, message: object) -> int:
    print(f"pytest-jaxcompile {command}: error: {message}", file=sys.stderr)
    return USAGE_ERROR
