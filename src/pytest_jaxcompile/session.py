"""The session collector: rows measured while tests run, the gate's conclusion at the end.

`SessionCollector` is registered for every session. It owns what the session measured
(records, ledgers, the tests that ran, xdist workers' payloads), runs the census and the
per-test checks around each test call, and in ``pytest_sessionfinish`` asks the gate for the
`Outcome`, which it keeps in ``config.stash[OUTCOME_KEY]`` for the outputs to render.
Nothing here imports jax or torch: they are imported when a fixture or census first needs
them, or read only when the project already imported them.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Generator
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import pytest

from pytest_jaxcompile.gate.budget import MARKER_NAME, CompileBudget, budget_of, over_budget
from pytest_jaxcompile.gate.conclude import GateSettings, conclude
from pytest_jaxcompile.gate.outcome import Identity, Outcome
from pytest_jaxcompile.gate.pins import PinFileError, PinStore
from pytest_jaxcompile.options import Settings
from pytest_jaxcompile.output.junit import junit_properties
from pytest_jaxcompile.records import CENSUS_SOURCE, SCOPE_TEST, CallLedger, CompileRecord

if TYPE_CHECKING:
    from pytest_jaxcompile.backends import MeasureContext
    from pytest_jaxcompile.backends.jax.guard import Clobber
    from pytest_jaxcompile.backends.jax.instructions import InstructionStager
    from pytest_jaxcompile.backends.jax.measure import JaxCompile, JaxEnvironment
    from pytest_jaxcompile.backends.jax.monitor import CompileMonitor, EventLog
    from pytest_jaxcompile.backends.torch.measure import (
        FrameCompile,
        TorchCompile,
        TorchEnvironment,
    )

WORKER_OUTPUT_KEY = "jaxcompile"
# What the controller tells each xdist worker: the tests with a pinned compile count.
WORKER_INPUT_COUNTED_KEY = "jaxcompile_counted_cells"
COLLECTOR_KEY = pytest.StashKey["SessionCollector"]()
OUTCOME_KEY = pytest.StashKey[Outcome]()
TORCH_PROBE_KEY = pytest.StashKey["TorchCompile"]()


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
        self.start_settings: dict[str, Any] = {}
        self._records_by_cell: dict[str, list[CompileRecord]] = {}
        self._monitor: CompileMonitor | None = None
        self._jax_environment: JaxEnvironment | None = None
        self._torch_environment: TorchEnvironment | None = None
        self._started = time.perf_counter()
        self._tracing_warm = False  # warm_up_tracing ran in this process
        self._stager: InstructionStager | None = None  # --compile-instructions

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

    @property
    def monitor(self) -> CompileMonitor:
        if self._monitor is None:
            from pytest_jaxcompile.backends.jax.monitor import CompileMonitor

            self._monitor = CompileMonitor()
        return self._monitor

    def jax_environment(self) -> JaxEnvironment:
        if self._jax_environment is None:
            from pytest_jaxcompile.backends.jax.measure import JaxEnvironment

            self._jax_environment = JaxEnvironment.detect(self.settings.hardware_override)
        return self._jax_environment

    def torch_environment(self) -> TorchEnvironment:
        if self._torch_environment is None:
            from pytest_jaxcompile.backends.torch.measure import TorchEnvironment

            self._torch_environment = TorchEnvironment.detect(self.settings.hardware_override)
        return self._torch_environment

    def platform_problem(self, environment: JaxEnvironment | TorchEnvironment) -> str | None:
        """compile_expected_platform against the device that will compile."""
        from pytest_jaxcompile.backends import BACKENDS
        from pytest_jaxcompile.backends.jax.guard import platform_problem

        return platform_problem(
            self.settings.requirements.platform, environment.hardware.platform,
            BACKENDS[environment.framework].device,
        )

    def context_for(self, item: pytest.Item) -> MeasureContext:
        from pytest_jaxcompile.backends import MeasureContext

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

    def jax_probe(self, item: pytest.Item) -> JaxCompile:
        from pytest_jaxcompile.backends.jax.measure import JaxCompile, warm_up_tracing

        environment = self.jax_environment()
        problem = self.platform_problem(environment)
        if problem is not None:  # every measurement fails, before it makes a row
            pytest.fail(problem, pytrace=False)
        if not self._tracing_warm:
            warm_up_tracing()
            self._tracing_warm = True
        if self.settings.instructions and self._stager is None:
            from pytest_jaxcompile.backends.jax.instructions import InstructionStager

            self._stager = InstructionStager(self.settings.instructions_timeout_s)
        return JaxCompile(
            self.monitor, environment, self.context_for(item),
            lambda record: self.measured(item, record), stager=self._stager,
        )

    def torch_probe(self, item: pytest.Item) -> TorchCompile:
        from pytest_jaxcompile.backends.torch.measure import TorchCompile

        environment = self.torch_environment()
        problem = self.platform_problem(environment)
        if problem is not None:
            pytest.fail(problem, pytrace=False)
        probe = TorchCompile(
            environment, self.context_for(item), lambda record: self.measured(item, record)
        )
        item.stash[TORCH_PROBE_KEY] = probe
        return probe

    # ----------------------------------------------------------------------- hooks

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        from pytest_jaxcompile.backends.jax.backendstart import XLA_FLAGS_ENV, watch
        from pytest_jaxcompile.backends.jax.guard import parse_xla_flags, snapshot_settings

        # XLA_FLAGS as XLA reads them, when JAX's backend starts (usually already watched
        # from before conftest.py was loaded; a backend started before then is known by
        # its value now).
        watch()
        # Snapshot what later compiles are compared with; JAX's own settings only when
        # the project already imported JAX (reading them must not import it).
        self.start_settings = (
            snapshot_settings()
            if "jax" in sys.modules
            else {"xla_flags": parse_xla_flags(os.environ.get(XLA_FLAGS_ENV))}
        )
        if self.settings.instructions and not self.is_xdist_worker:
            from pytest_jaxcompile.backends.jax.instructions import (
                InstrumentError,
                valgrind_version,
            )

            try:
                valgrind_version()
            except InstrumentError as error:
                raise pytest.UsageError(f"pytest-jaxcompile: {error}") from None
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
            from pytest_jaxcompile.backends.jax.census import recompile_problems
            from pytest_jaxcompile.backends.memory import TEST_INTERVAL_S, RssSampler
            from pytest_jaxcompile.backends.torch.measure import (
                now_us,
            )
            from pytest_jaxcompile.backends.torch.measure import (
                recompile_problems as torch_recompile_problems,
            )

            torch_since = now_us()
            count_eager = (
                self.settings.count_eager if budget.count_eager is None else budget.count_eager
            )
            # JAX's events only when the suite imported JAX: a torch-only census must not
            # pay for (or depend on) a JAX import.
            uses_jax = "jax" in sys.modules
            cleared_because = None
            if uses_jax:
                from pytest_jaxcompile.backends.jax.residue import clear_before_census

                # Each test compiles what it uses, whatever ran before it in this process.
                self.monitor.install()  # from now on, it notes what the program leaves
                cleared_because = clear_before_census(
                    self.monitor.residue, self.settings.clear_caches,
                    eager_counted=count_eager and budget.max_compiles is not None,
                )
            # JAX explains its recompiles only where a count is judged (it costs a diff of
            # cache keys per miss).
            explain = budget.max_compiles is not None or item.nodeid in self.counted_cells
            capture = (
                self.monitor.capture(explain=explain, key_parts=True)
                if uses_jax else nullcontext(None)
            )
            sampler = RssSampler(TEST_INTERVAL_S)  # census rows: the test call's peak RSS
            with capture as log, sampler:
                start = time.perf_counter()
                try:
                    result = yield
                finally:  # a failing test keeps its census rows and its seconds
                    wall_s = time.perf_counter() - start
                    memory = sampler.stop().figures(SCOPE_TEST)
                    torch_frames = self._torch_census(item, torch_since, memory)
                    self._jax_census(item, log, wall_s, torch_frames, memory, cleared_because)
            problems = over_budget(budget, self.records_of(item.nodeid))
            if log is not None:
                problems += recompile_problems(
                    budget.max_compiles, log.own_compiles(), log.eager_compiles(), count_eager,
                    explained=explain,
                )
            problems += torch_recompile_problems(budget.max_compiles, torch_frames)
        problems += self._requirement_problems(item, budget)
        if problems:
            pytest.fail("\n".join(problems), pytrace=False)
        return result

    def _requirement_problems(self, item: pytest.Item, budget: CompileBudget) -> list[str]:
        """Required settings and cacheability, for every compile of this test."""
        records = self.records_of(item.nodeid)
        if not records:
            return []
        from pytest_jaxcompile.backends.jax.guard import settings_problems, uncacheable_reason

        requirements = self.settings.requirements
        cacheable = requirements.cacheable if budget.cacheable is None else budget.cacheable
        problems = []
        for record in records:
            problems += settings_problems(record, requirements)
            reason = uncacheable_reason(record) if cacheable else None
            if reason is not None:
                problems.append(
                    f"transform {record.transform!r} can never be served from the persistent "
                    f"cache: {reason} (compile_budget(cacheable=True) / compile_require_cacheable)"
                )
        return problems

    def _torch_census(
        self, item: pytest.Item, since_us: int, memory: dict[str, Any]
    ) -> list[FrameCompile]:
        """torch frame compiles of the test, when the test used torch (never imported here)."""
        if "torch" not in sys.modules:
            return []
        from pytest_jaxcompile.backends.jax.census import unique_names
        from pytest_jaxcompile.backends.torch.measure import frame_records, frames_since

        probe = item.stash.get(TORCH_PROBE_KEY, None)
        measured = probe.frame_starts if probe is not None else set()
        frames = [f for f in frames_since(since_us) if f.start_time_us not in measured]
        if frames:
            names = unique_names([frame.name for frame in frames])
            for record in frame_records(
                frames, names, self.context_for(item), self.torch_environment(), CENSUS_SOURCE,
                memory=memory,
            ):
                self.measured(item, record)
        return frames

    def _jax_census(
        self, item: pytest.Item, log: EventLog | None, wall_s: float,
        torch_frames: list[FrameCompile], memory: dict[str, Any], cleared_because: str | None,
    ) -> None:
        """JAX census rows, and the test's ledger (torch's when only torch compiled)."""
        from pytest_jaxcompile.backends.jax.census import build_ledger, census_records
        from pytest_jaxcompile.backends.jax.measure import CacheSettings
        from pytest_jaxcompile.backends.torch.measure import build_ledger as torch_ledger

        jax_compiles = [m for m in log.module_compiles() if not m.nested] if log else []
        if log is not None and jax_compiles:
            environment = self.jax_environment()
            for record in census_records(
                log, self.context_for(item), environment, CacheSettings.current(), memory
            ):
                self.measured(item, record)
        if torch_frames and not jax_compiles:
            self.ledgers[item.nodeid] = torch_ledger(torch_frames, item.nodeid, wall_s)
        elif log is not None:
            self.ledgers[item.nodeid] = build_ledger(log, item.nodeid, wall_s, cleared_because)

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
        if self._stager is not None:  # each xdist worker counts its own rows
            self._stager.count(self.jax_environment().jaxlib_version)
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
        from pytest_jaxcompile.backends.jax.guard import (
            clobber_affects_requirements,
            find_clobbers,
        )

        return [
            dataclasses.replace(
                clobber,
                fails=clobber_affects_requirements(clobber, self.settings.requirements),
            )
            for clobber in find_clobbers(self.start_settings, self.records)
        ]

    def measured_identities(self) -> set[Identity]:
        """(hardware, version) this process ran under, also when it measured nothing."""
        identities = {(record.hardware, record.framework_version) for record in self.records}
        if self._jax_environment is None and not identities and "jax" in sys.modules:
            self.jax_environment()  # jax is loaded anyway: the tests ran without measuring
        if self._jax_environment is not None:
            environment = self._jax_environment
            identities.add((environment.hardware.name, environment.jax_version))
        return identities

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self._monitor is not None:
            self._monitor.uninstall()


def fail_session(session: pytest.Session, failed: bool) -> None:
    """Raise the exit status to "tests failed"; never lower it, never OR codes."""
    if failed and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def outcome_of(config: pytest.Config) -> Outcome | None:
    return config.stash.get(OUTCOME_KEY, None)


SECTION_KEY = pytest.StashKey[bool]()


def summary_section(terminalreporter: pytest.TerminalReporter) -> None:
    """The plugin's section header, written once however many outputs have lines."""
    config = terminalreporter.config
    if not config.stash.get(SECTION_KEY, False):
        config.stash[SECTION_KEY] = True
        terminalreporter.write_sep("=", "jax compile times")
