"""The subcommands' side of the table: the verdict options by their short names.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from pytest_jaxcompile.options.table import THRESHOLD_OPTIONS
from pytest_jaxcompile.options.values import argparse_type, implausible

if TYPE_CHECKING:
    from pytest_jaxcompile.gate.limits import Thresholds


def add_threshold_arguments(parser: argparse.ArgumentParser, *, inherit: bool = False) -> None:
    """The verdict options, by their names without the ``compile-`` prefix.

    With `inherit` (``merge``) every default is "not given": the reports' own values apply,
    and flags take a ``--no-`` form to turn a report's setting off.
    """
    for option in THRESHOLD_OPTIONS:
        if option.kind == "flag":
            parser.add_argument(
                option.short_flag,
                dest=option.threshold,
                action=argparse.BooleanOptionalAction if inherit else "store_true",
                default=None if inherit else False,
                help=(option.help + (" (default: as the reports say)" if inherit else "")).replace(
                    "%", "%%"
                ),
            )
        else:
            parser.add_argument(
                option.short_flag,
                dest=option.threshold,
                default=None,
                type=argparse_type(option),
                metavar=option.metavar,
                choices=None if option.kind != "choice" else option.choices,
                help=(option.help + " (default: as the reports say)").replace("%", "%%")
                if inherit
                else option.help_text(),
            )


def given_thresholds(args: argparse.Namespace) -> dict[str, Any]:
    """The verdict options given on a subcommand's command line, by Thresholds field;
    a value most likely mistaken (a percentage for a fraction) is warned of on stderr,
    as pytest warns of it."""
    given, by_name = {}, {}
    for option in THRESHOLD_OPTIONS:
        assert option.threshold is not None
        value = getattr(args, option.threshold, None)
        if value is not None:
            given[option.threshold] = value
            by_name[option.name] = value
    for message in implausible(by_name, subcommand=True):
        print(f"pytest-jaxcompile: warning: {message}", file=sys.stderr)
    return given


def thresholds_from(args: argparse.Namespace) -> Thresholds:
    """A subcommand's thresholds: what was given, the table's defaults for the rest."""
    from pytest_jaxcompile.gate.limits import Thresholds

    return Thresholds(**given_thresholds(args))
