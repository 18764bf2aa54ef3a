"""The ``compile_budget`` marker: parsing and checking, without pytest hooks.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_jaxcompile._constants import MARKER_NAME
from pytest_jaxcompile._numbers import NumberError, finite_number, whole_number

if TYPE_CHECKING:  # the plugin reads the marker at load: no records
    from pytest_jaxcompile.records import CallLedger, CompileRecord


@dataclass(frozen=True)
class CompileBudget:
    seconds: float | None = None
    tolerance: float | None = None
    mixed_precision: bool | None = None
    max_compiles: int | None = None
    max_ops_growth: float | None = None
    cacheable: bool | None = None
    max_memory_growth: float | None = None  # compiled temp bytes over the pin
    max_flops_growth: float | None = None
    count_eager: bool | None = None  # None: the session's compile_count_eager

    @property
    def limits_only(self) -> bool:
        """The marker sets a limit (max_compiles, max_ops_growth, max_memory_growth or
        max_flops_growth) and asks for no seconds: neither ``seconds`` nor ``tolerance``.

        Such a test's census rows are judged by the budget only, unless the test asks for
        seconds another way (`session.census.budget_only`; docs/verdicts.md#budget-only-tests).
        A marker without a limit (bare, or only mixed_precision, cacheable, count_eager)
        asks for a census of the test, every compile pinned.
        """
        limits = (
            self.max_compiles,
            self.max_ops_growth,
            self.max_memory_growth,
            self.max_flops_growth,
        )
        asks_seconds = self.seconds is not None or self.tolerance is not None
        return not asks_seconds and any(limit is not None for limit in limits)


# The number arguments (finite, >= 0); max_compiles is a whole number.
NUMBER_ARGUMENTS = (
    "seconds",
    "tolerance",
    "max_ops_growth",
    "max_memory_growth",
    "max_flops_growth",
)


def _signature(
    seconds: float | None = None,
    *,
    tolerance: float | None = None,
    mixed_precision: bool | None = None,
    max_compiles: int | None = None,
    max_ops_growth: float | None = None,
    max_memory_growth: float | None = None,
    max_flops_growth: float | None = None,
    cacheable: bool | None = None,
    count_eager: bool | None = None,
) -> None:
    """The marker's signature; arguments are bound against it to reject typos."""


def parse_budget(args: Sequence[Any], kwargs: Mapping[str, Any]) -> CompileBudget:
    """Validate marker arguments; a ValueError says exactly what is wrong."""
    try:
        bound = inspect.signature(_signature).bind(*args, **kwargs)
    except TypeError as error:
        raise ValueError(f"@pytest.mark.{MARKER_NAME}: {error}") from None
    values = dict(bound.arguments)
    numbers: dict[str, Any] = {}
    for name in (*NUMBER_ARGUMENTS, "max_compiles"):
        value = values.get(name)
        if value is None:
            continue
        try:
            numbers[name] = whole_number(value) if name == "max_compiles" else finite_number(value)
        except NumberError as error:
            raise ValueError(f"@pytest.mark.{MARKER_NAME}: {name} {error}") from None
    for name in ("mixed_precision", "cacheable", "count_eager"):
        flag = values.get(name)
        if flag is not None and not isinstance(flag, bool):
            raise ValueError(
                f"@pytest.mark.{MARKER_NAME}: {name} must be True or False, got {flag!r}"
            )
    return CompileBudget(
        **numbers,
        mixed_precision=values.get("mixed_precision"),
        cacheable=values.get("cacheable"),
        count_eager=values.get("count_eager"),
    )


def merge_budgets(budgets: Iterable[CompileBudget]) -> CompileBudget:
    """Closest marker first (function, then class, then module): per field, its value wins."""
    merged: dict[str, Any] = {}
    for budget in budgets:
        for name, value in dataclasses.asdict(budget).items():
            if merged.get(name) is None:
                merged[name] = value
    return CompileBudget(**merged)


def over_budget(budget: CompileBudget, records: Iterable[CompileRecord]) -> list[str]:
    """One message per transform whose compile_s exceeds the budget's ceiling."""
    if budget.seconds is None:
        return []
    return [
        f"transform {record.transform!r}: {record.unmeasured}, so its compile_budget of "
        f"{budget.seconds:g} s cannot be checked"
        if record.compile_s is None
        else f"transform {record.transform!r} compiled in {record.compile_s:.3f} s, over its "
        f"compile_budget of {budget.seconds:g} s (cache_state {record.cache_state})"
        for record in records
        if record.compile_s is None or record.compile_s > budget.seconds
    ]


def budget_of(node: Any) -> CompileBudget:
    """The merged ``compile_budget`` markers of a test item (closest last)."""
    return merge_budgets(
        parse_budget(marker.args, marker.kwargs) for marker in node.iter_markers(MARKER_NAME)
    )


def suggested_budgets(ledgers: Iterable[CallLedger], count_eager: bool = False) -> list[str]:
    """Each census'd test's observed compile count as the marker line to paste above it:
    ``@pytest.mark.compile_budget(max_compiles=3)  # tests/test_x.py::test_y``, by test.

    With `count_eager` (the session's compile_count_eager), JAX's eager dispatch is in the
    count, as the marker will then count it. `--compile-suggest-budgets` and the ``budgets``
    subcommand both print these lines.
    """
    counts: dict[str, int] = {}
    for ledger in ledgers:
        count = ledger.compiles + (ledger.eager_compiles if count_eager else 0)
        counts[ledger.cell] = max(count, counts.get(ledger.cell, 0))
    return [
        f"@pytest.mark.{MARKER_NAME}(max_compiles={count})  # {cell}"
        for cell, count in sorted(counts.items())
    ]
