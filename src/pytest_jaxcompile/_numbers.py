"""The one check of a number, wherever it comes from.

Every figure and limit the plugin reads (an option or ini key, a ``compile_budget`` marker
argument, a pin file, a record, a JSON report) is "a finite number >= 0" or, where a count is
meant, "a whole number >= 0". ``nan`` and ``inf`` are refused everywhere: a comparison with
``nan`` is never true and one with ``inf`` never false, so either would switch the gate off
(``measured > pinned * (1 + nan)`` passes any slowdown). ``bool`` is not a number, although
Python counts it as one.

The check says what is wrong, never where: each caller names its place (the option, the
marker argument and its test, the pin file and line, the record file and line, the report
and its field).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math

NUMBER = "a finite number >= 0"


def percent(fraction: float) -> str:
    """A limit given as a fraction, in percent without losing its digits: ``0.015`` is
    ``1.5%`` (``{:.0%}`` would print ``2%``), ``0.75`` is ``75%``."""
    return f"{fraction * 100:.4g}%"


def giga(count: int) -> str:
    """An instruction count in billions, three digits or so: ``38.9 G``, ``0.86 G``; in
    millions below 0.1 G (``2.5 M``)."""
    if count < 100_000_000:
        return f"{count / 1e6:.1f} M"
    value = count / 1e9
    return f"{value:.2f} G" if value < 10 else f"{value:.1f} G"


def instructions_text(count: int, floor: int | None) -> str:
    """``38.9 G instructions (compiler floor 0.86 G)``: a count beside the compiler's floor
    (a trivial module's count in the same child), when it was counted."""
    return f"{giga(count)} instructions" + (
        "" if floor is None else f" (compiler floor {giga(floor)})"
    )


def whole(minimum: int = 0) -> str:
    """What a whole-number check expects: ``a whole number >= 0``."""
    return f"a whole number >= {minimum}"


class NumberError(ValueError):
    """A value that is not the number expected; ``str()`` is ``must be ..., got ...``."""

    def __init__(self, value: object, expected: str) -> None:
        self.value = value
        self.expected = expected
        super().__init__(f"must be {expected}, got {value!r}")


def finite_number(value: object) -> float:
    """`value` as a float when it is an int or float (not a bool), finite and >= 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise NumberError(value, NUMBER)
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float (10**400)
        raise NumberError(value, NUMBER) from None
    if not math.isfinite(number) or number < 0:
        raise NumberError(value, NUMBER)
    return number


def whole_number(value: object, minimum: int = 0) -> int:
    """`value` when it is an int (not a bool) >= `minimum`; ``2.0`` is not one."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise NumberError(value, whole(minimum))
    return value


def optional_number(value: object) -> float | None:
    """None stays None (not given); anything else is `finite_number`."""
    return None if value is None else finite_number(value)
