"""Every option, declared once: pytest's flags and ini keys and the CLI's options come from here.

`table.OPTIONS` is the one table; `values.parse_value` the one validator of option values;
`pytest_options` makes pytest's flags and ini keys from the table and reads a session's value
of each; `subcommands` gives the ``pytest-jaxcompile`` subcommands the verdict options (not
imported here: pytest's load does not need it).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from pytest_jaxcompile.options.pytest_options import add_pytest_options, given, resolve
from pytest_jaxcompile.options.table import (
    BY_NAME,
    GITHUB_MODES,
    OPTIONS,
    THRESHOLD_OPTIONS,
    Option,
)
from pytest_jaxcompile.options.values import OptionError, argparse_type, implausible, parse_value

__all__ = [
    "BY_NAME",
    "GITHUB_MODES",
    "OPTIONS",
    "THRESHOLD_OPTIONS",
    "Option",
    "OptionError",
    "add_pytest_options",
    "argparse_type",
    "given",
    "implausible",
    "parse_value",
    "resolve",
]
