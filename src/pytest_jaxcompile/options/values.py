"""The one validator of option values, wherever they were typed.

`parse_value` reads a value as its option's kind: a bad value is an `OptionError` naming the
option and where it came from, whether it was typed on pytest's command line, in an ini file or
to one of the ``pytest-jaxcompile`` subcommands. Numbers are checked by `_numbers`, as
everywhere else a number is read: finite and non-negative (``nan`` would switch a comparison
off, ``x > nan`` is never true; ``inf`` likewise).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from pytest_jaxcompile.options.table import OPTIONS, Option


class OptionError(ValueError):
    """A bad option value; the message names the option and where the value came from."""


def parse_value(option: Option, raw: object, source: str) -> Any:
    """The one validator: `raw` (text, or a TOML value from an ini file) as `option`'s kind.

    `source` says where the value came from, for the message: "ini option", "option", ...
    """
    from pytest_jaxcompile._numbers import NumberError, finite_number, whole, whole_number

    text = str(raw).strip()
    where = f"{source} {option.name if source.startswith('ini') else option.flag} = {text!r}"
    if option.kind == "number":
        try:
            value = float(text)
        except ValueError:
            raise OptionError(f"{where} is not a number") from None
        try:
            return finite_number(value)
        except NumberError as error:  # "1e999" reads as inf: refused with nan and inf
            raise OptionError(f"{where} must be {error.expected}") from None
    if option.kind == "count":
        try:
            count = whole_number(int(text), option.minimum)
        except ValueError:
            raise OptionError(f"{where}: expected {whole(option.minimum)}") from None
        if option.maximum is not None and count > option.maximum:
            expected = f"{whole(option.minimum)}, at most {option.maximum}"
            raise OptionError(f"{where}: expected {expected}")
        return count
    if option.kind == "choice":
        value_text = text.lower() if option.name == "compile_expected_platform" else text
        if value_text not in option.choices:
            raise OptionError(f"{where} must be one of {', '.join(option.choices)}")
        return value_text
    if option.kind == "flag":
        if isinstance(raw, bool):
            return raw
        if text.lower() in ("true", "1", "yes", "on"):
            return True
        if text.lower() in ("false", "0", "no", "off", ""):
            return False
        raise OptionError(f"{where} must be true or false")
    return text


def implausible(values: Mapping[str, Any], subcommand: bool = False) -> list[str]:
    """A warning for each value over its option's `implausible_above`, naming the option
    as pytest (flag and ini key) or as a subcommand (its short flag) takes it."""
    from pytest_jaxcompile._numbers import percent

    messages = []
    for option in OPTIONS:
        value = values.get(option.name)
        if option.implausible_above is None or value is None or value <= option.implausible_above:
            continue
        if subcommand:
            named = option.short_flag
        elif option.on_command_line:
            named = f"{option.flag} (ini {option.name})"
        else:
            named = f"ini {option.name}"
        messages.append(
            f"{named} = {value:g} allows +{percent(value)} over the pin: "
            f"a row is DRIFT only when {1 + value:g}x slower, which turns the gate almost off. "
            f"It is a fraction (0.75 = +75%); over {option.implausible_above:g} "
            f"(+{percent(option.implausible_above)}) it is most likely a percentage."
        )
    return messages


def argparse_type(option: Option, short: bool = False) -> Any:
    """An argparse ``type=`` that runs `parse_value`; argparse names the option itself."""

    def convert(text: str) -> Any:
        try:
            return parse_value(option, text, "option")
        except OptionError as error:
            reason = str(error).split(" = ", 1)[-1]
            raise argparse.ArgumentTypeError(reason) from None

    convert.__name__ = option.kind  # what argparse calls the type in its messages
    return convert
