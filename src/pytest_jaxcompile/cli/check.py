"""``pytest-jaxcompile check``: judge a records corpus against the pins, offline.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

from pytest_jaxcompile._io import atomic_write_text
from pytest_jaxcompile.cli._args import (
    add_corpus_arguments,
    add_pins_argument,
    corpus_from,
    error,
)
from pytest_jaxcompile.cli._trend import add_trend_arguments, trend_settings_from
from pytest_jaxcompile.corpus.check import judge_corpus
from pytest_jaxcompile.corpus.store import CorpusError
from pytest_jaxcompile.corpus.trend import TrendCollector, trend_lines, trend_to_dict
from pytest_jaxcompile.gate.pins import PinFileError, PinStore
from pytest_jaxcompile.gate.view import session_view
from pytest_jaxcompile.options.subcommands import add_threshold_arguments, thresholds_from
from pytest_jaxcompile.output.json_report import verdict_to_dict
from pytest_jaxcompile.output.terminal import summary_lines

HELP = (
    "judge the latest row per cell, transform and key of a records corpus against the "
    "pins, as the plugin would judge the last session (rows older than their pin, and cold "
    "rows a newer warm row superseded, are passed over), with the plugin's verdict rules; "
    "exit 1 on DRIFT (and, with --trend, on a sustained rise over the history)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_corpus_arguments(parser)
    add_pins_argument(parser)
    add_threshold_arguments(parser)
    parser.add_argument(
        "--json",
        type=Path,
        metavar="FILE",
        help="also write the verdicts as JSON (the shape of the plugin report's 'verdicts')",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="list ok rows too")
    parser.add_argument(
        "--trend",
        action="store_true",
        help="also look for sustained rises in each series' history (creep that re-derived "
        "pins hide); exit 1 when one rose by more than --trend-threshold. Without pin files, "
        "only trends are checked",
    )
    add_trend_arguments(parser)


def run(args: argparse.Namespace) -> int:
    collector = TrendCollector(trend_settings_from(args)) if args.trend else None
    try:
        store = PinStore.load(args.pins_dir)
        pinned = next(store.groups(), None) is not None
        if not pinned and collector is None:
            return error(
                "check",
                f"no pin files in {args.pins_dir}: nothing to judge against "
                "(give the pins directory with --pins-dir)",
            )
        corpus = corpus_from(args)
        outcome, judged = judge_corpus(
            corpus,
            store,
            thresholds_from(args),
            Path.cwd(),
            on_row=None if collector is None else collector.add,
        )
        trends = [] if collector is None else collector.trends()
    except (CorpusError, PinFileError) as problem:
        return error("check", problem)
    if not outcome.verdicts and (judged.older_than_pin or judged.superseded):
        print(f"nothing to judge in {corpus.describe()}{judged.describe()}")
        return 0
    if not outcome.verdicts:
        return error(
            "check",
            f"no compile records to check in {' '.join(map(str, args.paths))} "
            f"({corpus.describe()})",
        )
    root = outcome.rootdir
    if pinned:
        print(
            f"checked the latest row per cell, transform and key: {len(outcome.verdicts)} "
            f"row(s) from {corpus.describe()}{judged.describe()}"
        )
        for text, _markup in summary_lines(outcome, args.verbose):
            print(text)
    else:
        print(f"no pin files in {args.pins_dir}: trends only, from {corpus.describe()}")
        outcome.failed = False
    rising = [trend for trend in trends if trend.rising]
    if collector is not None:
        for line in trend_lines(trends, collector.settings, collector.stats):
            print(line)
    if args.json is not None:
        document: dict[str, Any] = {
            "gate": "fail" if outcome.failed or rising else "pass",
            "thresholds": dataclasses.asdict(outcome.thresholds),
            "verdicts": [
                {**verdict_to_dict(row, root), "timestamp": row.record.timestamp}
                for row in session_view(outcome).rows
            ]
            if pinned
            else [],
        }
        if collector is not None:
            document["trends"] = [trend_to_dict(trend) for trend in rising]
        try:
            atomic_write_text(args.json, json.dumps(document, indent=2, sort_keys=True) + "\n")
        except OSError as problem:
            return error("check", f"{args.json}: {problem.strerror or problem}")
    return 1 if outcome.failed or rising else 0
