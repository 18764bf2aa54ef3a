"""The census of a test call, and the checks every test's rows get when its call ends.

`CensusedCall.listening` wraps a census'd test's call: every framework the project uses
listens through its `CallCensus` (`backends.BackendSession.census`), the call's peak RSS is
sampled, and when the call ends (failing or not) each framework's rows and the call's
ledger go to the session's rows. `requirement_problems` checks every row of a test against
the required settings. Nothing here knows a framework: each is reached through the
`Backend` protocol.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest

from pytest_jaxcompile._constants import FIXTURES
from pytest_jaxcompile.backends import (
    BackendSession,
    CallCensus,
    CensusRequest,
    MeasureContext,
    backend_of,
)
from pytest_jaxcompile.backends.memory import RssWatch
from pytest_jaxcompile.backends.settings import Requirements, uncacheable_problem
from pytest_jaxcompile.gate.always_cold import always_cold
from pytest_jaxcompile.gate.budget import CompileBudget, budget_of
from pytest_jaxcompile.gate.limits import judges_compiled, most_specific
from pytest_jaxcompile.gate.pins import PinStore
from pytest_jaxcompile.records import SCOPE_TEST, CompileRecord
from pytest_jaxcompile.resolved import Settings
from pytest_jaxcompile.session.rows import SessionRows


def measure_context(item: pytest.Item, settings: Settings) -> MeasureContext:
    """What the test declared (its compile_budget marker) and how to measure it."""
    budget = budget_of(item)
    path, line, _ = item.location
    return MeasureContext(
        cell=item.nodeid,
        mixed_precision=most_specific(
            budget.mixed_precision, default=settings.mixed_precision_default
        ),
        tolerance=budget.tolerance,
        max_ops_growth=budget.max_ops_growth,
        max_memory_growth=budget.max_memory_growth,
        max_flops_growth=budget.max_flops_growth,
        location=(path, (line or 0) + 1),
        project_root=item.config.rootpath,
        trace_profile=settings.trace_profile,
        repeat=settings.repeat,
        artifacts_dir=settings.artifacts_dir,
        compiled_figures=settings.compiled_figures or judges_compiled(budget),
    )


def budget_only(item: pytest.Item, budget: CompileBudget, settings: Settings) -> bool:
    """Whether the test's census rows are judged by its compile_budget only: its marker
    sets a limit and asks for no seconds (`CompileBudget.limits_only`), and seconds are
    not asked for another way, neither by the test (it requests no measuring fixture,
    ``jax_compile`` or ``torch_compile``) nor by the session (its census, compile_census,
    is off: that census pins every compile). docs/verdicts.md#budget-only-tests."""
    fixtures = getattr(item, "fixturenames", ())
    return budget.limits_only and not settings.census and FIXTURES.isdisjoint(fixtures)


def census_request(
    item: pytest.Item, budget: CompileBudget, settings: Settings, counted: bool
) -> CensusRequest:
    """What each framework's census of the test's call is asked; `counted`: the test's
    compile count is pinned."""
    count_eager = most_specific(budget.count_eager, default=settings.count_eager)
    return CensusRequest(
        dataclasses.replace(
            measure_context(item, settings), budget_only=budget_only(item, budget, settings)
        ),
        budget.max_compiles,
        count_eager,
        # Recompiles are explained only where a count is judged (it costs a diff of cache
        # keys per miss).
        explain=budget.max_compiles is not None or counted,
        clear_caches=settings.clear_caches,
    )


class CensusedCall:
    """Every framework's census of one test call: its rows and ledger go to the session's
    `rows` when the call ends (also when it fails)."""

    def __init__(
        self,
        backends: Iterable[BackendSession],
        request: CensusRequest,
        item: pytest.Item,
        rows: SessionRows,
        rss: RssWatch,
    ) -> None:
        self.censuses: list[CallCensus] = [
            census for each in backends if (census := each.census(request)) is not None
        ]
        self._item = item
        self._rows = rows
        self._rss = rss

    @contextmanager
    def listening(self) -> Iterator[None]:
        """Around the test call: every census listens, the call's peak RSS is sampled."""
        sampler = self._rss.block()  # census rows: the call's peak RSS
        with ExitStack() as listening:
            for census in self.censuses:
                census.start()
                listening.callback(census.stop)
            listening.enter_context(sampler)
            start = time.perf_counter()
            try:
                yield
            finally:  # a failing test keeps its census rows and its seconds
                wall_s = time.perf_counter() - start
                memory = sampler.stop().figures(SCOPE_TEST)
                self._collect(wall_s, memory)

    def _collect(self, wall_s: float, memory: dict[str, Any]) -> None:
        """Each framework's rows, and the call's ledger: that of the first framework that
        compiled (JAX's, when both did), else of the first that keeps one."""
        for census in self.censuses:
            for record in census.rows(memory):
                self._rows.measured(self._item, record)
        ranked = sorted(self.censuses, key=lambda census: not census.compiled)
        ledger = next(
            (found for census in ranked if (found := census.ledger(wall_s)) is not None), None
        )
        if ledger is not None:
            self._rows.add_ledger(ledger)

    def problems(self) -> list[str]:
        """Each framework's compile_budget(max_compiles=N) failure of the call."""
        return [line for census in self.censuses for line in census.problems()]


def requirement_problems(
    records: Iterable[CompileRecord],
    requirements: Requirements,
    cacheable: bool,
    store: PinStore | None = None,
) -> list[str]:
    """Required settings and, with `cacheable`, cacheability, for every compile of a test
    (a key that changes in every process is found against the `store`'s pins)."""
    problems = []
    for record in records:
        problems += backend_of(record).requirement_problems(record, requirements)
        # The backend's own reason first (in JAX's words); else a key new in every process.
        cold = always_cold(record, store) if cacheable and store is not None else None
        uncacheable = (
            uncacheable_problem(
                record, cold.describe() if cold is not None and cold.new_key else None
            )
            if cacheable
            else None
        )
        if uncacheable is not None:
            problems.append(uncacheable)
    return problems
