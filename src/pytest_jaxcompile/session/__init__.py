"""The session collector: rows measured while tests run, the gate's conclusion at the end.

`SessionCollector` is registered once the session uses the plugin (`activation`); its pytest
hooks pass the data along, one module per step:

- `rows`: what this process measured (records, ledgers, the tests that ran), from the
  measuring fixtures (`SessionCollector.probe`) and from each test's census;
- `census`: around a census'd test's call, every framework's census and the checks of the
  test's rows;
- `xdist`: what each pytest-xdist worker sends the controller, merged into its rows;
- `conclusion`: on the controller, the rows handed to the gate; the `Outcome` is kept in
  ``config.stash`` (`output.OUTCOME_KEY`) for the outputs to render.

Each framework is reached through the `Backend` protocol (`backends.all_backends`), never
by importing a backend's modules; none imports jax or torch until a fixture or census
first needs it, or reads it only when the project already imported it.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Generator
from typing import Any

import pytest

from pytest_jaxcompile._constants import MARKER_NAME
from pytest_jaxcompile.backends import BackendSession, PinnedModule, Say, all_backends, backend
from pytest_jaxcompile.backends.memory import TEST_INTERVAL_S, RssWatch
from pytest_jaxcompile.backends.settings import platform_problem
from pytest_jaxcompile.gate.budget import budget_of, over_budget
from pytest_jaxcompile.gate.instructions import carried_instructions
from pytest_jaxcompile.gate.judging import judge
from pytest_jaxcompile.gate.limits import most_specific
from pytest_jaxcompile.gate.pins import PinFileError, PinStore
from pytest_jaxcompile.gate.twins import pinned_modules, twin_wanted
from pytest_jaxcompile.gate.view import row_view
from pytest_jaxcompile.gate.view.spend import COUNTING, PAIRING, PROFILING
from pytest_jaxcompile.output import OUTCOME_KEY, fail_session
from pytest_jaxcompile.output.junit import verdict_properties
from pytest_jaxcompile.records import VERSION_FIELDS
from pytest_jaxcompile.resolved import Settings
from pytest_jaxcompile.session.census import (
    CensusedCall,
    census_request,
    measure_context,
    requirement_problems,
)
from pytest_jaxcompile.session.conclusion import (
    conclude_session,
    measured_identities,
    repin_arguments,
    repin_environment,
)
from pytest_jaxcompile.session.paired import pair_changed_rows, staged_modules, store_modules
from pytest_jaxcompile.session.profile import profile_rows
from pytest_jaxcompile.session.reproducer import module_getter, worker_modules, write_reproducers
from pytest_jaxcompile.session.rows import SessionRows
from pytest_jaxcompile.session.sources import read_sources
from pytest_jaxcompile.session.xdist import (
    WORKER_INPUT_COUNTED_KEY,
    WORKER_OUTPUT_KEY,
    Workers,
    payload,
)

__all__ = [
    "COLLECTOR_KEY",
    "WORKER_INPUT_COUNTED_KEY",
    "WORKER_OUTPUT_KEY",
    "SessionCollector",
]

COLLECTOR_KEY = pytest.StashKey["SessionCollector"]()


class SessionCollector:
    """Everything one pytest process measured, and (on the controller) the verdict."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.rows = SessionRows()
        self.workers = Workers()
        self.store: PinStore | None = None
        self._modules: dict[str, dict[str, PinnedModule]] = {}  # `_pinned_modules`
        # Tests whose compile count is pinned: their recompiles are explained (as for a
        # max_compiles budget), so that a changed count names its cause.
        self.counted_cells: set[str] = set()
        # Each framework's state in this process, by framework, in records.FRAMEWORKS order.
        self.backends: dict[str, BackendSession] = {
            each.framework: each.session(
                settings.hardware_override,
                settings.instructions_timeout_s if settings.instructions else None,
                # every row's: a failing row is profiled, its module compiled once more
                stage_modules=True,
            )
            for each in all_backends()
        }
        # The peak RSS of each census'd test call, sampled by one thread for the session.
        self.rss = RssWatch(TEST_INTERVAL_S)
        self._started = time.perf_counter()

    @property
    def is_xdist_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    def probe(self, framework: str, item: pytest.Item) -> Any:
        """The measuring fixture's value (``jax_compile``, ``torch_compile``) for a test."""
        session = self.backends[framework]
        # compile_expected_platform against the device that will compile: every
        # measurement fails, before it makes a row.
        problem = platform_problem(
            self.settings.requirements.platform,
            session.environment().hardware.platform,
            backend(framework).device,
        )
        if problem is not None:
            pytest.fail(problem, pytrace=False)
        context = measure_context(item, self.settings)
        store, pin_update = self.store, self.settings.pin_update
        if store is not None:  # a changed module that hit the cache is compiled afresh
            context = dataclasses.replace(
                context,
                twin_wanted=lambda record: twin_wanted(record, store, pin_update),
                pinned_module=self._pinned_modules(framework, store).get,
            )
        return session.probe(context, lambda record: self.rows.measured(item, record))

    def _pinned_modules(self, framework: str, store: PinStore) -> dict[str, PinnedModule]:
        """The modules the pins of this framework's version hold, by their cache-key hash
        (`gate.twins.pinned_modules`): read from the store once, at the first measurement."""
        if framework not in self._modules:
            part = backend(framework).module_key_part
            version = self.backends[framework].environment().versions[VERSION_FIELDS[framework]]
            self._modules[framework] = (
                {} if part is None else pinned_modules(store, framework, version, part)
            )
        return self._modules[framework]

    # ----------------------------------------------------------------------- hooks

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        for each in self.backends.values():
            each.start(self.config)  # the settings later compiles are compared with
        if self.is_xdist_worker:
            workerinput = getattr(self.config, "workerinput", {})
            self.counted_cells = set(workerinput.get(WORKER_INPUT_COUNTED_KEY, ()))
        try:  # workers read the pins too: each test's JUnit verdict is judged where it ran
            self.store = PinStore.load(self.settings.pins_dir)
        except PinFileError as error:
            raise pytest.UsageError(
                f"pytest-jaxcompile: cannot read pin file {error}\n"
                "Fix the file by hand or restore it from version control "
                "(it was left as it is)."
            ) from None
        if not self.is_xdist_worker:
            self.counted_cells = self.store.cells_with_compile_counts()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        budget = budget_of(item)
        cell = item.nodeid
        if not (self.settings.census or item.get_closest_marker(MARKER_NAME)):
            result = yield
            problems = over_budget(budget, self.rows.of(cell))
        else:
            request = census_request(item, budget, self.settings, cell in self.counted_cells)
            call = CensusedCall(self.backends.values(), request, item, self.rows, self.rss)
            with call.listening():
                result = yield
            problems = over_budget(budget, self.rows.of(cell)) + call.problems()
        requirements = self.settings.requirements
        cacheable = most_specific(budget.cacheable, default=requirements.cacheable)
        problems += requirement_problems(self.rows.of(cell), requirements, cacheable, self.store)
        if problems:
            pytest.fail("\n".join(problems), pytrace=False)
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if report.when == "teardown" and self.store is not None and not (self.settings.pin_update):
            report.user_properties.extend(self._verdict_properties(item.nodeid))
        self.rows.phase_ended(item.nodeid, report)
        return report

    def _verdict_properties(self, cell: str) -> list[tuple[str, str]]:
        """The verdicts of a test's rows as JUnit properties, judged where the test ran
        (against the pins as the session started: the same verdicts the gate concludes)."""
        assert self.store is not None
        thresholds = self.settings.thresholds
        return [
            prop
            for record in self.rows.of(cell)
            for prop in verdict_properties(
                row_view(judge(record, self.store, thresholds), thresholds)
            )
        ]

    # ----------------------------------------------------------------------- xdist

    def merge_worker_output(self, worker: str, output: dict[str, Any]) -> None:
        """Take one worker's rows, once (xdist may report a node down twice)."""
        self.workers.merge(worker, output, self.rows)

    def worker_lost(self, worker: str, error: object) -> None:
        self.workers.lost_worker(worker, error)

    # ----------------------------------------------------------------------- the end

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """The gate's conclusion (before the outputs, which render it)."""
        self.rss.close()
        backends = self.backends.values()
        store = self.store
        carry = (
            None
            if store is None or self.settings.instructions_recount
            else lambda record: carried_instructions(record, store)
        )
        say = self._say()
        # What the gate itself spends after the tests: each work that ran, its seconds.
        gate_s: dict[str, float] = {}
        started = time.perf_counter()
        for each in backends:
            each.finish(carry, say)
        if self.settings.instructions:
            gate_s[COUNTING] = time.perf_counter() - started
        paired = self.settings.paired and self.store is not None
        if paired and not self.settings.pin_update:
            assert self.store is not None
            started = time.perf_counter()
            pair_changed_rows(
                self.rows.records, self.backends, self.store, self.settings, self.config.rootpath
            )
            gate_s[PAIRING] = time.perf_counter() - started
        profiled = 0
        if self.store is not None and not self.settings.pin_update:
            started = time.perf_counter()
            profiled = profile_rows(self.rows.records, self.backends, self.store, self.settings)
            if profiled:
                gate_s[PROFILING] = time.perf_counter() - started
        if self.store is not None:  # where in the code: the rows the gate will explain
            read_sources(
                self.rows.records,
                self.backends,
                self.store,
                self.settings.thresholds,
                self.settings.pin_update,
                self.config.rootpath,
            )
        storing = self.settings.paired or self.settings.profile
        modules = (
            staged_modules(self.rows.records, self.backends)
            if storing and self.store is not None and self.settings.pin_update
            else {}
        )
        if self.is_xdist_worker:
            workeroutput: dict[str, Any] = self.config.workeroutput  # type: ignore[attr-defined]
            workeroutput[WORKER_OUTPUT_KEY] = payload(
                self.rows,
                measured_identities(self.rows, backends, self.store, self.settings),
                modules,
                gate_s,
                profiled,
                reproducer_modules=(
                    worker_modules(
                        self.rows.records,
                        self.backends,
                        self.store,
                        self.settings.thresholds,
                        self.settings.reproducer,
                    )
                    if self.store is not None and not self.settings.pin_update
                    else {}
                ),
            )
            return
        if self.store is None:  # the session ended before it started (e.g. usage error)
            return
        outcome = conclude_session(
            self.rows,
            self.workers,
            backends,
            self.store,
            self.settings,
            rootdir=self.config.rootpath,
            started=self._started,
        )
        if modules or self.workers.modules:
            if outcome.pin_error is None:
                outcome.modules_written, outcome.modules_removed = store_modules(
                    {**self.workers.modules, **modules}, self.store, self.settings
                )
            outcome.modules_dir = self.settings.module_store_dir
        if self.settings.reproducer_dir is not None:
            try:
                write_reproducers(
                    outcome,
                    self.settings.reproducer,
                    self.settings.reproducer_dir,
                    self.settings.module_store_dir,
                    module_getter(self.backends, self.workers.reproducer_modules),
                    lambda framework: self.backends[framework].reproducer_files(),
                )
            except OSError as error:  # the verdicts stand; the bundles are said missing
                say(f"reproducer bundles not written (compile_reproducer_dir): {error}")
        outcome.repin_arguments = repin_arguments(self.config)
        outcome.repin_environment = repin_environment(self.config)
        for work, seconds in self.workers.gate_s.items():  # the workers' own, summed
            gate_s[work] = gate_s.get(work, 0.0) + seconds
        outcome.gate_s = gate_s
        outcome.profiled_rows = profiled + self.workers.profiled_rows
        self.config.stash[OUTCOME_KEY] = outcome
        fail_session(session, outcome.failed)

    def _say(self) -> Say:
        """Where a line said during sessionfinish (the instruction gate's progress) goes at
        once: the terminal reporter's own line; an xdist worker's, which the controller
        never shows, to its stderr, named by the worker (each worker counts its own rows)."""
        if self.is_xdist_worker:
            worker = getattr(self.config, "workerinput", {}).get("workerid", "worker")
            said: list[str] = []  # the first line starts after the controller's dots

            def to_stderr(line: str) -> None:
                start = "" if said else "\n"
                said.append(line)
                print(f"{start}[{worker}] pytest-jaxcompile: {line}", file=sys.stderr, flush=True)

            return to_stderr
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")

        def to_terminal(line: str) -> None:
            if reporter is not None:
                reporter.write_line(f"pytest-jaxcompile: {line}")
                reporter.flush()

        return to_terminal

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        for each in self.backends.values():
            each.close()
