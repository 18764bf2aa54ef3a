"""The ``compile_budget`` marker: parsing and checking, without pytest hooks."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_jaxcompile.records import CompileRecord

MARKER_NAME = "compile_budget"
MARKER_HELP = (
    "compile_budget(seconds=None, *, tolerance=None, mixed_precision=None): "
    "a ceiling on any transform's compile_s in this test, a drift tolerance for its pins, "
    "and whether it runs in mixed precision (part of the comparability key)"
)


@dataclass(frozen=True)
class CompileBudget:
    seconds: float | None = None
    tolerance: float | None = None
    mixed_precision: bool | None = None


def _signature(
    seconds: float | None = None,
    *,
    tolerance: float | None = None,
    mixed_precision: bool | None = None,
) -> None:
    """The marker's signature; arguments are bound against it to reject typos."""


def parse_budget(args: Sequence[Any], kwargs: Mapping[str, Any]) -> CompileBudget:
    """Validate marker arguments; a ValueError says exactly what is wrong."""
    try:
        bound = inspect.signature(_signature).bind(*args, **kwargs)
    except TypeError as error:
        raise ValueError(f"@pytest.mark.{MARKER_NAME}: {error}") from None
    values = dict(bound.arguments)
    for name in ("seconds", "tolerance"):
        value = values.get(name)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0
        ):
            raise ValueError(
                f"@pytest.mark.{MARKER_NAME}: {name} must be a non-negative number, got {value!r}"
            )
    precision = values.get("mixed_precision")
    if precision is not None and not isinstance(precision, bool):
        raise ValueError(
            f"@pytest.mark.{MARKER_NAME}: mixed_precision must be True or False, "
            f"got {precision!r}"
        )
    return CompileBudget(
        seconds=None if values.get("seconds") is None else float(values["seconds"]),
        tolerance=None if values.get("tolerance") is None else float(values["tolerance"]),
        mixed_precision=precision,
    )


def merge_budgets(budgets: Iterable[CompileBudget]) -> CompileBudget:
    """Closest marker first (function, then class, then module): its values win."""
    seconds = tolerance = precision = None
    for budget in budgets:
        seconds = budget.seconds if seconds is None else seconds
        tolerance = budget.tolerance if tolerance is None else tolerance
        precision = budget.mixed_precision if precision is None else precision
    return CompileBudget(seconds=seconds, tolerance=tolerance, mixed_precision=precision)


def over_budget(budget: CompileBudget, records: Iterable[CompileRecord]) -> list[str]:
    """One message per transform whose compile_s exceeds the budget's ceiling."""
    if budget.seconds is None:
        return []
    return [
        f"transform {record.transform!r} compiled in {record.compile_s:.3f} s, over its "
        f"compile_budget of {budget.seconds:g} s (cache_state {record.cache_state})"
        for record in records
        if record.compile_s > budget.seconds
    ]
