"""``pytest-jaxcompile budgets``: each test's observed compile count as the marker to paste.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse

from pytest_jaxcompile.cli._args import add_reports_argument, error
from pytest_jaxcompile.gate.budget import suggested_budgets
from pytest_jaxcompile.options import BY_NAME
from pytest_jaxcompile.output.json_report import ReportError, load_report, report_paths

HELP = (
    "print each census'd test's observed compile count in JSON reports (--compile-report) "
    "as the compile_budget(max_compiles=N) marker line to paste above it"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_reports_argument(parser, "; a test in several reports gets its highest count")
    eager = BY_NAME["compile_count_eager"]
    parser.add_argument(eager.short_flag, action="store_true", help=eager.help_text())


def run(args: argparse.Namespace) -> int:
    try:
        reports = [load_report(path) for path in report_paths(args.reports)]
    except ReportError as problem:
        return error("budgets", problem)
    lines = suggested_budgets(
        (ledger for report in reports for ledger in report.ledgers), args.count_eager
    )
    if not lines:
        return error(
            "budgets",
            "the reports hold no census'd test (run pytest with --compile-census "
            "or the compile_budget marker, and --compile-report)",
        )
    for line in lines:
        print(line)
    return 0
