"""The session collector: rows measured while tests run, the gate's conclusion at the end.

`SessionCollector` is registered for every session. It owns what the session measured
(records, ledgers, the tests that ran, xdist workers' payloads), runs the census and the
per-test checks around each test call, and in ``pytest_sessionfinish`` asks the gate for the
`Outcome`, which it keeps in ``config.stash[OUTCOME_KEY]`` for the outputs to render.
Each framework is reached through the `Backend` protocol (`backends.all_backends`), never by
importing a backend's modules; none imports jax or torch until a fixture or census first
needs it, or reads it only when the project already imported it.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from contextlib import ExitStack
from typing import Any

import pytest

from pytest_jaxcompile.backends import (
    BackendSession,
    CallCensus,
    CensusRequest,
    MeasureContext,
    all_backends,
    backend,
    backend_of,
)
from pytest_jaxcompile.backends.memory import TEST_INTERVAL_S, RssSampler
from pytest_jaxcompile.backends.settings import Clobber, platform_problem, uncacheable_problem
from pytest_jaxcompile.gate.budget import MARKER_NAME, CompileBudget, budget_of, over_budget
from pytest_jaxcompile.gate.conclude import GateSettings, conclude
from pytest_jaxcompile.gate.outcome import Identity
from pytest_jaxcompile.gate.pins import PinFileError, PinStore
from pytest_jaxcompile.options import Settings
from pytest_jaxcompile.output import OUTCOME_KEY, fail_session
from pytest_jaxcompile.output.junit import junit_properties
from pytest_jaxcompile.records import SCOPE_TEST, CallLedger, CompileRecord

WORKER_OUTPUT_KEY = "jaxcompile"
# What the controller tells each xdist worker: the tests with a pinned compile count.
WORKER_INPUT_COUNTED_KEY = "jaxcompile_counted_cells"
COLLECTOR_KEY = pytest.StashKey["SessionCollector"]()


class SessionCollector:
    """Everything one pytest process measured, and (on the controller) the verdict."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.records: list[CompileRecord] = []
        self.ledgers: dict[str, CallLedger] = {}
        self.ran_cells: set[str] = set()
        self.store: PinStore | None = None
        # Tests whose compile count is pinned: JAX explains their recompiles (as for a
        # max_compiles budget), so that a changed count names its cause.
        self.counted_cells: set[str] = set()
        self.worker_identities: set[Identity] = set()  # environments xdist workers ran in
        self.workers_merged: set[str] = set()
        self.workers_lost: set[str] = set()
        self.lost: list[str] = []
        self._records_by_cell: dict[str, list[CompileRecord]] = {}
        # Each framework's state in this process, by framework, in records.FRAMEWORKS order.
        self.backends: dict[str, BackendSession] = {
            each.framework: each.session(settings.hardware_override) for each in all_backends()
        }
        self._started = time.perf_counter()

    @property
    def is_xdist_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    # ----------------------------------------------------------------------- rows

    def add_record(self, record: CompileRecord) -> None:
        self.records.append(record)
        self._records_by_cell.setdefault(record.cell, []).append(record)

    def records_of(self, cell: str) -> list[CompileRecord]:
        return self._records_by_cell.get(cell, [])

    def measured(self, item: pytest.Item, record: CompileRecord) -> None:
        self.add_record(record)
        # Appended as soon as the row exists, so a test that fails later keeps it;
        # junitxml writes them as <property> elements (also from xdist workers).
        item.user_properties.extend(junit_properties(record))

    # ----------------------------------------------------------------------- backends

    def probe(self, framework: str, item: pytest.Item) -> Any:
        """The measuring fixture's value (``jax_compile``, ``torch_compile``) for a test."""
        session = self.backends[framework]
        # compile_expected_platform against the device that will compile: every
        # measurement fails, before it makes a row.
        problem = platform_problem(
            self.settings.requirements.platform, session.environment().hardware.platform,
            backend(framework).device,
        )
        if problem is not None:
            pytest.fail(problem, pytrace=False)
        return session.probe(self.context_for(item), lambda record: self.measured(item, record))

    def context_for(self, item: pytest.Item) -> MeasureContext:
        budget = budget_of(item)
        path, line, _ = item.location
        mixed = budget.mixed_precision
        return MeasureContext(
            cell=item.nodeid,
            mixed_precision=self.settings.mixed_precision_default if mixed is None else mixed,
            tolerance=budget.tolerance,
            max_ops_growth=budget.max_ops_growth,
            max_memory_growth=budget.max_memory_growth,
            max_flops_growth=budget.max_flops_growth,
            location=(path, (line or 0) + 1),
            project_root=self.config.rootpath,
            trace_profile=self.settings.trace_profile,
            repeat=self.settings.repeat,
            artifacts_dir=self.settings.artifacts_dir,
        )

    # ----------------------------------------------------------------------- hooks

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        for each in self.backends.values():
            each.start()  # the settings later compiles are compared with
        if self.is_xdist_worker:
            workerinput = getattr(self.config, "workerinput", {})
            self.counted_cells = set(workerinput.get(WORKER_INPUT_COUNTED_KEY, ()))
            return
        try:
            self.store = PinStore.load(self.settings.pins_dir)
        except PinFileError as error:
            raise pytest.UsageError(
                f"pytest-jaxcompile: cannot read pin file {error}\n"
                "Fix the file by hand or restore it from version control "
                "(it was left as it is)."
            ) from None
        self.counted_cells = self.store.cells_with_compile_counts()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        budget = budget_of(item)
        if not (self.settings.census or item.get_closest_marker(MARKER_NAME)):
            result = yield
            problems = over_budget(budget, self.records_of(item.nodeid))
        else:
            count_eager = (
                self.settings.count_eager if budget.count_eager is None else budget.count_eager
            )
            request = CensusRequest(
                self.context_for(item), budget.max_compiles, count_eager,
                # Recompiles are explained only where a count is judged (it costs a diff of
                # cache keys per miss).
                explain=budget.max_compiles is not None or item.nodeid in self.counted_cells,
                clear_caches=self.settings.clear_caches,
            )
            censuses = [
                census for each in self.backends.values()
                if (census := each.census(request)) is not None
            ]
            sampler = RssSampler(TEST_INTERVAL_S)  # census rows: the test call's peak RSS
            with ExitStack() as listening:
                for census in censuses:
                    listening.enter_context(census)
                listening.enter_context(sampler)
                start = time.perf_counter()
                try:
                    result = yield
                finally:  # a failing test keeps its census rows and its seconds
                    wall_s = time.perf_counter() - start
                    memory = sampler.stop().figures(SCOPE_TEST)
                    self._census_rows(item, censuses, wall_s, memory)
            problems = over_budget(budget, self.records_of(item.nodeid))
            for census in censuses:
                problems += census.problems()
        problems += self._requirement_problems(item, budget)
        if problems:
            pytest.fail("\n".join(problems), pytrace=False)
        return result

    def _requirement_problems(self, item: pytest.Item, budget: CompileBudget) -> list[str]:
        """Required settings and cacheability, for every compile of this test."""
        requirements = self.settings.requirements
        cacheable = requirements.cacheable if budget.cacheable is None else budget.cacheable
        problems = []
        for record in self.records_of(item.nodeid):
            problems += backend_of(record).requirement_problems(record, requirements)
            uncacheable = uncacheable_problem(record) if cacheable else None
            if uncacheable is not None:
                problems.append(uncacheable)
        return problems

    def _census_rows(
        self, item: pytest.Item, censuses: list[CallCensus], wall_s: float,
        memory: dict[str, Any],
    ) -> None:
        """Each framework's census rows, and the test's ledger: that of the first framework
        that compiled (JAX's, when both did), else of the first that keeps one."""
        for census in censuses:
            for record in census.rows(memory):
                self.measured(item, record)
        ranked = sorted(censuses, key=lambda census: not census.compiled)
        ledger = next(
            (found for census in ranked if (found := census.ledger(wall_s)) is not None), None
        )
        if ledger is not None:
            self.ledgers[item.nodeid] = ledger

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if report.when == "call" and not report.skipped:
            self.ran_cells.add(item.nodeid)
        if report.when == "call":
            outcome: str | None = report.outcome
        else:
            outcome = "error" if report.failed else None
        if outcome is not None:
            # A failure or error is never overwritten by a later passing phase.
            for record in self.records_of(item.nodeid):
                if record.outcome in (None, "passed"):
                    record.outcome = outcome
            ledger = self.ledgers.get(item.nodeid)
            if ledger is not None and ledger.outcome in (None, "passed"):
                ledger.outcome = outcome
        return report

    # ----------------------------------------------------------------------- xdist

    def worker_payload(self) -> dict[str, Any]:
        """What an xdist worker sends to the controller (plain JSON-able data)."""
        return {
            "records": [record.to_dict() for record in self.records],
            "ledgers": [ledger.to_dict() for ledger in self.ledgers.values()],
            "ran_cells": sorted(self.ran_cells),
            "identities": [list(identity) for identity in sorted(self.measured_identities())],
        }

    def merge_worker_output(self, worker: str, output: dict[str, Any]) -> None:
        """Take one worker's rows, once (xdist may report a node down twice)."""
        if worker in self.workers_merged:
            return
        payload = output.get(WORKER_OUTPUT_KEY)
        if payload is None:
            return
        self.workers_merged.add(worker)
        for data in payload.get("records", []):
            self.add_record(CompileRecord.from_dict(data))
        for data in payload.get("ledgers", []):
            ledger = CallLedger.from_dict(data)
            self.ledgers[ledger.cell] = ledger
        self.ran_cells.update(payload.get("ran_cells", []))
        self.worker_identities.update(
            (str(hardware), str(version)) for hardware, version in payload.get("identities", [])
        )

    def worker_lost(self, worker: str, error: object) -> None:
        if worker not in self.workers_merged and worker not in self.workers_lost:
            self.workers_lost.add(worker)
            self.lost.append(
                f"pytest-xdist worker {worker} went down ({error}) before it sent its compile "
                "rows; rows of the tests it ran are not judged"
            )

    # ----------------------------------------------------------------------- the end

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """The gate's conclusion (before the outputs, which render it)."""
        if self.is_xdist_worker:
            workeroutput: dict[str, Any] = self.config.workeroutput  # type: ignore[attr-defined]
            workeroutput[WORKER_OUTPUT_KEY] = self.worker_payload()
            return
        if self.store is None:  # the session ended before it started (e.g. usage error)
            return
        outcome = conclude(
            self.records,
            self.ran_cells,
            self.measured_identities() | self.worker_identities,
            self.store,
            GateSettings(self.settings.thresholds, self.settings.pin_update),
            rootdir=self.config.rootpath,
            ledgers=self.ledgers.values(),
            clobbers=self.clobbers(),
        )
        outcome.lost = list(self.lost)
        outcome.session_s = time.perf_counter() - self._started
        if self.records and (
            self.settings.report_path is not None or self.settings.record_dir is not None
        ):  # one git call at most, and only in sessions that write records
            from pytest_jaxcompile.corpus.commit import session_commit, stamp

            stamp(self.records, session_commit(self.config.rootpath))
        self.config.stash[OUTCOME_KEY] = outcome
        fail_session(session, outcome.failed)

    def clobbers(self) -> list[Clobber]:
        """Settings that changed during the session; those affecting a requirement fail."""
        if not self.records:
            return []
        return [
            clobber
            for each in self.backends.values()
            for clobber in each.clobbers(self.records, self.settings.requirements)
        ]

    def measured_identities(self) -> set[Identity]:
        """(hardware, version) this process ran under, also when it measured nothing."""
        identities = {(record.hardware, record.framework_version) for record in self.records}
        measured = bool(identities)
        for each in self.backends.values():
            identity = each.identity(measured)
            if identity is not None:
                identities.add(identity)
        return identities

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        for each in self.backends.values():
            each.close()
