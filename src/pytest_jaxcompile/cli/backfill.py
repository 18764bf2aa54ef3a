"""``pytest-jaxcompile backfill``: give old compile records a cache_state.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_jaxcompile._io import relative
from pytest_jaxcompile.cli._args import cell_fields, error
from pytest_jaxcompile.corpus.backfill import (
    DEFAULT_CACHE_DIR_FIELDS,
    DEFAULT_TAG_FIELD,
    Rules,
    apply,
    plan_corpus,
    summary_lines,
)
from pytest_jaxcompile.corpus.store import CorpusError

HELP = (
    "migrate records that have compile_s but no cache_state: none where the recorded "
    "cache dir is empty, cold/warm only from a tag ending in the marker, else unknown"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="JSON lines or JSON list files, or directories (walked for *.jsonl and *.json)",
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--check",
        action="store_true",
        help="print the split and write nothing; exit 1 when records need migrating",
    )
    mode.add_argument(
        "--write", action="store_true", help="apply the migration, atomically file by file"
    )
    parser.add_argument(
        "--tag-field",
        default=DEFAULT_TAG_FIELD,
        metavar="NAME",
        help=f"the free-text run tag (default: {DEFAULT_TAG_FIELD})",
    )
    parser.add_argument(
        "--cache-dir-fields",
        type=cell_fields,
        default=DEFAULT_CACHE_DIR_FIELDS,
        metavar="A,B",
        help="fields holding the recorded cache dir, the first present one decides "
        f"(default: {','.join(DEFAULT_CACHE_DIR_FIELDS)})",
    )


def run(args: argparse.Namespace) -> int:
    rules = Rules(tag_field=args.tag_field, cache_dir_fields=tuple(args.cache_dir_fields))
    try:
        plans = plan_corpus(args.paths, rules)  # every file is read before any is written
    except CorpusError as problem:
        return error("backfill", f"{problem}. Nothing was written.")
    root = Path.cwd()
    for line in summary_lines(plans, root):
        print(line)
    pending = [plan for plan in plans if plan.new_text is not None]
    if args.check:
        print(
            "--check: nothing written"
            + (f"; {len(pending)} file(s) would change (run with --write)" if pending else "")
        )
        return 1 if pending else 0
    try:
        written = apply(plans)
    except OSError as problem:
        return error("backfill", f"{problem.filename}: {problem.strerror or problem}")
    print(
        "written: " + ", ".join(relative(path, root) for path in written)
        if written
        else "written: nothing to migrate"
    )
    return 0
