"""pytest's side of the table: its flags and ini keys, and a session's value of each.

`resolve` reads one option's value (command line, then environment, then ini, then default);
`resolved.Settings` holds a session's values, resolved once. `given` says which options a
session was given at all (`activation`).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, Literal

import pytest

from pytest_jaxcompile.options.table import OPTIONS, Option
from pytest_jaxcompile.options.values import argparse_type, parse_value


def add_pytest_options(parser: pytest.Parser) -> None:
    """Every option under one group, and every ini key, from the table."""
    group = parser.getgroup(
        "jaxcompile",
        "compile-time gate for JAX/XLA (pytest-jaxcompile); every other setting is an ini key "
        "(compile_*, under [pytest] ini-options; docs/options.md)",
    )
    for option in OPTIONS:
        if option.on_command_line:
            if option.kind == "flag":
                group.addoption(
                    option.flag,
                    action="store_true",
                    default=None,
                    dest=option.name,
                    help=option.help_text(),
                )
            else:
                group.addoption(
                    option.flag,
                    dest=option.name,
                    default=None,
                    metavar=option.metavar,
                    type=None if option.kind in ("path", "text") else argparse_type(option),
                    choices=option.choices or None,
                    help=option.help_text(),
                )
        if option.in_ini:
            ini_type: Literal["linelist", "bool"] | None = (
                "linelist" if option.kind == "lines" else None
            )
            parser.addini(
                option.name,
                option.help_text(for_argparse=False),
                type=ini_type,
                default=[] if option.kind == "lines" else "",
            )


def resolve(config: pytest.Config, option: Option) -> Any:
    """Command line, then the environment variable, then the ini key, then the default."""
    if option.on_command_line:
        value = config.getoption(option.name)
        if value is not None and value != "":
            return _path(config.invocation_params.dir, value) if option.kind == "path" else value
    if option.env and os.environ.get(option.env, "").strip():
        return parse_value(option, os.environ[option.env], f"environment variable {option.env}")
    if option.in_ini:
        raw = config.getini(option.name)
        if option.kind == "lines":
            return list(raw)
        if str(raw).strip():
            value = parse_value(option, raw, "ini option")
            return _path(config.rootpath, value) if option.kind == "path" else value
    if option.kind == "path" and option.default is not None:
        return _path(config.rootpath, option.default)
    if option.kind == "flag":
        return False
    return option.default


def given(config: pytest.Config, namespace: argparse.Namespace | None = None) -> list[str]:
    """The options this session was given, by ini key: on the command line (``namespace``:
    pytest's early parse, before ``config.option`` is filled), in the environment or in the
    ini file. Defaults are not given: a project that sets none does not use the plugin."""
    in_ini = _given_in_ini(config)
    found = []
    for option in OPTIONS:
        if option.on_command_line:
            value = getattr(namespace if namespace is not None else config.option, option.name)
            if value is not None and value != "":
                found.append(option.name)
                continue
        if option.name in in_ini or (option.env and os.environ.get(option.env, "").strip()):
            found.append(option.name)
    return found


_GIVEN_IN_INI_KEY = pytest.StashKey[frozenset[str]]()


def _given_in_ini(config: pytest.Config) -> frozenset[str]:
    """The ini keys of the table the ini file (or ``-o``) sets, read once per config: the
    plugin asks at start-up and again at configuration, after the conftest.py files."""
    if _GIVEN_IN_INI_KEY not in config.stash:
        config.stash[_GIVEN_IN_INI_KEY] = frozenset(
            option.name for option in OPTIONS if option.in_ini and _in_ini(config, option)
        )
    return config.stash[_GIVEN_IN_INI_KEY]


def _in_ini(config: pytest.Config, option: Option) -> bool:
    raw = config.getini(option.name)
    return bool(raw) if option.kind == "lines" else bool(str(raw).strip())


def _path(base: Path, value: str) -> Path:
    return Path(base, value).resolve()
