"""The ``pytest-jaxcompile`` command line (also ``python -m pytest_jaxcompile``).

Each subcommand lives in its own module exposing ``HELP``, ``add_arguments(parser)`` and
``run(args) -> int``; this module only dispatches.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from pytest_jaxcompile._version import __version__

# name -> module implementing it (imported only when that subcommand runs)
COMMANDS: dict[str, str] = {
    "backfill": "pytest_jaxcompile.cli.backfill",
    "budgets": "pytest_jaxcompile.cli.budgets",
    "check": "pytest_jaxcompile.cli.check",
    "pin": "pytest_jaxcompile.cli.pin",
    "report": "pytest_jaxcompile.cli.report",
    "merge": "pytest_jaxcompile.cli.merge",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pytest-jaxcompile",
        description="Work with pytest-jaxcompile reports, records and pins outside pytest.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        sub = subparsers.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
        sub.set_defaults(run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "run", None) is None:
        parser.print_help(sys.stderr)
        return 2
    status: int = args.run(args)
    return status
