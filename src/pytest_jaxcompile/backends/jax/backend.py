"""The JAX backend behind the `Backend` protocol: what the session and the gate reach of JAX.

Nothing here imports JAX at load, nor the measuring modules: each is imported when the
session first needs it (a fixture, a census, the settings at session start).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_jaxcompile.backends import (
    Backend,
    CarriedCount,
    CensusRequest,
    MeasureContext,
    PairingPlan,
    PairJob,
    ProfileJob,
    Say,
    StagedModule,
)
from pytest_jaxcompile.backends.settings import Clobber, Requirements
from pytest_jaxcompile.records import CallLedger, CompileRecord

if TYPE_CHECKING:
    from pytest_jaxcompile.backends.jax.backendstart import FlagsChange, FlagsWatch
    from pytest_jaxcompile.backends.jax.instructions import InstructionStager
    from pytest_jaxcompile.backends.jax.measure import CacheEntries, JaxCompile, JaxEnvironment
    from pytest_jaxcompile.backends.jax.monitor import CompileMonitor, EventLog, ModuleCompile


def jax_imported() -> bool:
    """Whether the project imported JAX (asking must not import it)."""
    return "jax" in sys.modules


@dataclass(frozen=True)
class JaxBackend:
    """JAX's rows compile with XLA: its flag rules and ``XLA_FLAGS`` clobbers apply."""

    framework: str = "jax"
    device: str = "JAX's default backend"
    xla_rules: bool = True
    module_key_part: str | None = "computation"  # keyparts.COMPUTATION_PART

    def session(
        self,
        hardware_override: str | None,
        instructions_timeout_s: float | None = None,
        stage_modules: bool = False,
    ) -> JaxSession:
        return JaxSession(hardware_override, instructions_timeout_s, stage_modules)

    def requirement_problems(self, record: CompileRecord, requirements: Requirements) -> list[str]:
        from pytest_jaxcompile.backends.jax.guard import settings_problems

        return settings_problems(record, requirements)

    def differing_parts(
        self, now: dict[str, str] | None, then: dict[str, str] | None
    ) -> list[str] | None:
        from pytest_jaxcompile.backends.jax.keyparts import differing_parts

        return differing_parts(now, then)

    def flag_changes(self, now: list[str] | None, then: list[str] | None) -> list[str]:
        from pytest_jaxcompile.backends.jax.keyparts import flag_changes

        return flag_changes(now, then)

    def never_persisted(self, record: CompileRecord) -> str | None:
        # JAX logs why it wrote no entry; only host callbacks are the module's own
        # (jax 0.11 and later write those, and then log no such reason).
        from pytest_jaxcompile.backends.jax.classify import REASON_HOST_CALLBACKS

        if (
            record.cache_state == "cold"
            and record.cache.persisted is False
            and (record.cache.reason == REASON_HOST_CALLBACKS)
        ):
            return "host callbacks"
        return None


class JaxSession:
    """JAX in one pytest process: its environment, the compile monitor, the start settings."""

    def __init__(
        self,
        hardware_override: str | None,
        instructions_timeout_s: float | None = None,
        stage_modules: bool = False,
    ) -> None:
        self._hardware_override = hardware_override
        self._instructions_timeout_s = instructions_timeout_s  # None: not counted
        # The measured rows' modules are staged to count them or to store and pair them.
        self._staging = stage_modules or instructions_timeout_s is not None
        self._stager: InstructionStager | None = None  # the measured rows' staged modules
        self._monitor: CompileMonitor | None = None
        self._environment: JaxEnvironment | None = None
        self._tracing_warm = False  # warm_up_tracing ran in this process
        self._entries: CacheEntries | None = None  # cache entries counted, kept across tests
        self._start_settings: dict[str, Any] = {}
        self._flags_watch: FlagsWatch | None = None  # XLA_FLAGS from plugin load on

    @property
    def monitor(self) -> CompileMonitor:
        if self._monitor is None:
            from pytest_jaxcompile.backends.jax.monitor import CompileMonitor

            self._monitor = CompileMonitor()
        return self._monitor

    def environment(self) -> JaxEnvironment:
        if self._environment is None:
            from pytest_jaxcompile.backends.jax.measure import JaxEnvironment

            self._environment = JaxEnvironment.detect(self._hardware_override)
        return self._environment

    def start(self, config: pytest.Config) -> None:
        from pytest_jaxcompile.backends.jax.backendstart import (
            FLAGS_WATCH_KEY,
            XLA_FLAGS_ENV,
            watch,
        )
        from pytest_jaxcompile.backends.jax.guard import snapshot_settings
        from pytest_jaxcompile.backends.settings import parse_xla_flags

        # XLA_FLAGS as XLA reads them, when JAX's backend starts (usually already watched
        # from before conftest.py was loaded; a backend started before then is known by
        # its value now).
        watch()
        if self._instructions_timeout_s is not None:
            from pytest_jaxcompile.backends.jax.instrument import (
                InstrumentError,
                installed_valgrind,
            )

            # valgrind missing: said before any test runs. Whether it can run here is
            # found when a row is left to count: a session that carries every count
            # starts no valgrind.
            try:
                installed_valgrind()
            except InstrumentError as error:
                raise pytest.UsageError(f"pytest-jaxcompile: {error}") from None
        # Snapshot what later compiles are compared with; JAX's own settings only when
        # the project already imported JAX (reading them must not import it).
        self._start_settings = (
            snapshot_settings()
            if jax_imported()
            else {"xla_flags": parse_xla_flags(os.environ.get(XLA_FLAGS_ENV))}
        )
        # XLA_FLAGS are compared with their value before any conftest.py ran, where known
        self._flags_watch = config.stash.get(FLAGS_WATCH_KEY, None)
        if self._flags_watch is not None:
            self._start_settings["xla_flags"] = parse_xla_flags(self._flags_watch.at_load)
            self._start_settings["xla_flags_since"] = self._flags_watch.since

    def probe(self, context: MeasureContext, sink: Callable[[CompileRecord], None]) -> JaxCompile:
        from pytest_jaxcompile.backends.jax.measure import (
            CacheEntries,
            JaxCompile,
            warm_up_tracing,
        )

        environment = self.environment()
        if not self._tracing_warm:
            warm_up_tracing()
            self._tracing_warm = True
        if self._staging and self._stager is None:
            from pytest_jaxcompile.backends.jax.instructions import InstructionStager

            self._stager = InstructionStager(
                self._instructions_timeout_s or 0.0,
                counting=self._instructions_timeout_s is not None,
            )
        if self._entries is None:
            self._entries = CacheEntries()
        return JaxCompile(
            self.monitor, environment, context, sink, stager=self._stager, entries=self._entries
        )

    def census(self, request: CensusRequest) -> JaxCensus | None:
        # JAX's events only when the suite imported JAX: a torch-only census must not
        # pay for (or depend on) a JAX import.
        return JaxCensus(self, request) if jax_imported() else None

    def identity(self, measured: bool) -> tuple[str, str] | None:
        if self._environment is None and not measured and jax_imported():
            self.environment()  # jax is loaded anyway: the tests ran without measuring
        if self._environment is None:
            return None
        return self._environment.hardware.name, self._environment.jax_version

    def clobbers(
        self, records: Iterable[CompileRecord], requirements: Requirements
    ) -> list[Clobber]:
        from pytest_jaxcompile.backends.jax.guard import (
            clobber_affects_requirements,
            find_clobbers,
        )

        return [
            dataclasses.replace(clobber, fails=clobber_affects_requirements(clobber, requirements))
            for clobber in find_clobbers(self._start_settings, records, self._flag_changes())
        ]

    def settings_notes(self, records: Iterable[CompileRecord]) -> list[str]:
        from pytest_jaxcompile.backends.jax.guard import startup_notes

        return startup_notes(self._start_settings, records, self._flag_changes())

    def _flag_changes(self) -> list[FlagsChange]:
        return [] if self._flags_watch is None else list(self._flags_watch.changes)

    def finish(self, carry: CarriedCount | None = None, say: Say | None = None) -> None:
        # each xdist worker counts its own rows
        if self._stager is not None and self._instructions_timeout_s is not None:
            self._stager.count(self.environment().jaxlib_version, carry, say)

    def staged_module(self, record: CompileRecord) -> StagedModule | str | None:
        staged = None if self._stager is None else self._stager.staged_for(record)
        if staged is None:
            return None
        if staged.note is not None or staged.text is None or staged.options is None:
            return staged.note or "its module was not staged"
        if staged.callbacks:
            return "the module has host callbacks, which a compile in another process cannot hold"
        return StagedModule(staged.text, staged.options, staged.devices, staged.platform)

    def pair(self, jobs: list[PairJob], plan: PairingPlan, timeout_s: float) -> None:
        if jobs:
            from pytest_jaxcompile.backends.jax.paired import pair_modules

            pair_modules(jobs, plan, timeout_s)

    def profile(self, jobs: list[ProfileJob], timeout_s: float) -> None:
        if jobs:
            from pytest_jaxcompile.backends.jax.profile import profile_modules

            profile_modules(jobs, timeout_s)

    def read_sources(self, records: list[CompileRecord], root: Path) -> None:
        if self._stager is None:
            return
        from pytest_jaxcompile.backends.jax.locations import read_sources

        for record in records:
            staged = self._stager.staged_for(record)
            if staged is not None and staged.ir is not None and record.source_ops is None:
                record.source_ops = read_sources(staged.ir, root) or None

    def reproducer_files(self) -> dict[str, bytes]:
        from pytest_jaxcompile.backends.jax.reproduce_env import reproducer_files

        return reproducer_files()

    def close(self) -> None:
        if self._monitor is not None:
            self._monitor.uninstall()


class JaxCensus:
    """Every compile of one test call, from JAX's events (see `census`)."""

    def __init__(self, session: JaxSession, request: CensusRequest) -> None:
        from pytest_jaxcompile.backends.jax.residue import clear_before_census

        self._session = session
        self._request = request
        monitor = session.monitor
        # Each test compiles what it uses, whatever ran before it in this process.
        monitor.install()  # from now on, it notes what the program leaves
        self._cleared_because = clear_before_census(
            monitor.residue,
            request.clear_caches,
            eager_counted=request.count_eager and request.max_compiles is not None,
        )
        self._listening = ExitStack()
        self._log: EventLog | None = None
        self._compiles: list[ModuleCompile] = []

    def start(self) -> None:
        # JAX explains its recompiles only where a count is judged (it costs a diff of
        # cache keys per miss).
        self._log = self._listening.enter_context(
            self._session.monitor.capture(explain=self._request.explain, key_parts=True)
        )

    def stop(self) -> None:
        self._listening.close()

    @property
    def log(self) -> EventLog:
        assert self._log is not None, "the census is read after its call started"
        return self._log

    def rows(self, memory: dict[str, Any]) -> list[CompileRecord]:
        from pytest_jaxcompile.backends.jax.census import census_records
        from pytest_jaxcompile.backends.jax.measure import CacheSettings

        self._compiles = [m for m in self.log.module_compiles() if not m.nested]
        if not self._compiles:
            return []
        return census_records(
            self.log,
            self._request.context,
            self._session.environment(),
            CacheSettings.current(),
            memory,
        )

    @property
    def compiled(self) -> bool:
        return bool(self._compiles)

    def ledger(self, wall_s: float) -> CallLedger:
        from pytest_jaxcompile.backends.jax.census import build_ledger

        return build_ledger(self.log, self._request.context.cell, wall_s, self._cleared_because)

    def problems(self) -> list[str]:
        from pytest_jaxcompile.backends.jax.census import recompile_problems

        request = self._request
        return recompile_problems(
            request.max_compiles,
            self.log.counted_compiles(),
            self.log.eager_compiles(),
            request.count_eager,
            explained=request.explain,
        )


BACKEND: Backend = JaxBackend()  # checked against the protocol
