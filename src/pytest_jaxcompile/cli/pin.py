"""``pytest-jaxcompile pin``: derive pins from a records corpus.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_jaxcompile._io import relative
from pytest_jaxcompile.cli._args import (
    add_corpus_arguments,
    add_pins_argument,
    corpus_from,
    error,
)
from pytest_jaxcompile.corpus.store import CorpusError, latest_rows
from pytest_jaxcompile.gate.limits import limits_for
from pytest_jaxcompile.gate.pins import PinFileError, PinLockTimeout, PinStore
from pytest_jaxcompile.options.subcommands import add_threshold_arguments, thresholds_from

HELP = (
    "pin the most recent row per cell, transform and key of a records corpus "
    "(unknown and memory rows never pin)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_corpus_arguments(parser)
    add_pins_argument(parser)
    parser.add_argument(
        "--dry-run", action="store_true", help="list what would be pinned; write nothing"
    )
    parser.add_argument(
        "--exact",
        action="store_true",
        help="write every figure as measured; by default a re-pinned unchanged module keeps "
        "each figure that moved by less than a third of its tolerance (the verdict "
        "options below set the tolerances), so re-pinning an unchanged project changes no file",
    )
    add_threshold_arguments(parser)


def run(args: argparse.Namespace) -> int:
    corpus = corpus_from(args)
    try:
        store = PinStore.load(args.pins_dir)
        records = latest_rows(corpus).records()
    except (CorpusError, PinFileError) as problem:
        return error("pin", problem)
    judged = [record for record in records if record.state.judged]
    pinnable = [record for record in judged if record.unmeasured is None]
    skipped, untimed = len(records) - len(judged), len(judged) - len(pinnable)
    print(
        f"{len(pinnable)} row(s) to pin: the latest per cell, transform and key of "
        f"{corpus.describe()}"
        + (f"; {skipped} unknown/memory row(s) never pin" if skipped else "")
        + (f"; {untimed} row(s) without a compile time never pin" if untimed else "")
    )
    if args.dry_run:
        for record in pinnable:
            print(
                f"  {record.key.describe()}: {record.name} "
                f"{record.compile_s:.4f} s ({record.timestamp or 'no timestamp'})"
            )
        return 0
    thresholds = thresholds_from(args)
    try:
        update = store.repin(
            pinnable,
            limits_of=None if args.exact else lambda row, pin: limits_for(row, pin, thresholds),
        )
    except (PinFileError, PinLockTimeout) as problem:
        return error("pin", f"{problem}. Nothing was written.")
    root = Path.cwd()
    kept = (
        f" ({update.kept} pin(s) kept as they were: every figure within a third of its "
        "tolerance; --exact rewrites them)"
        if update.kept
        else ""
    )
    if update.written:
        print("pins updated: " + ", ".join(relative(path, root) for path in update.written) + kept)
    else:
        print("pins updated: nothing changed" + kept)
    return 0
