"""The torch backend behind the `Backend` protocol: what the session and the gate reach of torch.

torch is never imported here: the measuring module imports it when a fixture or a census of
a test that used torch first needs it.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    unique_names,
)
from pytest_jaxcompile.backends.settings import Clobber, Requirements, cache_problem
from pytest_jaxcompile.records import CENSUS_SOURCE, CallLedger, CompileRecord

if TYPE_CHECKING:
    import pytest

    from pytest_jaxcompile.backends.torch.measure import (
        FrameCompile,
        TorchCompile,
        TorchEnvironment,
    )


@dataclass(frozen=True)
class TorchBackend:
    """torch's rows: no XLA flag rules, no cache-key parts."""

    framework: str = "torch"
    device: str = "torch's device"
    xla_rules: bool = False
    module_key_part: str | None = None

    def session(
        self,
        hardware_override: str | None,
        instructions_timeout_s: float | None = None,
        stage_modules: bool = False,
    ) -> TorchSession:
        # torch's compiler is not counted: --compile-instructions covers XLA's CPU compiler,
        # and --compile-paired the modules JAX hands XLA
        return TorchSession(hardware_override)

    def requirement_problems(self, record: CompileRecord, requirements: Requirements) -> list[str]:
        problem = cache_problem(record, requirements)
        return [] if problem is None else [problem]

    def differing_parts(
        self, now: dict[str, str] | None, then: dict[str, str] | None
    ) -> list[str] | None:
        return None  # torch's rows carry no cache-key parts

    def flag_changes(self, now: list[str] | None, then: list[str] | None) -> list[str]:
        return []

    def never_persisted(self, record: CompileRecord) -> str | None:
        return None  # torch's rows name no such reason


@dataclass
class TorchSession:
    """torch in one pytest process: its environment, and the frames its fixture measured."""

    hardware_override: str | None
    _environment: TorchEnvironment | None = None
    # Per test: the start times of the frames the torch_compile fixture measured, which
    # its census skips.
    _measured_frames: dict[str, set[int]] = field(default_factory=dict)

    def environment(self) -> TorchEnvironment:
        if self._environment is None:
            from pytest_jaxcompile.backends.torch.measure import TorchEnvironment

            self._environment = TorchEnvironment.detect(self.hardware_override)
        return self._environment

    def start(self, config: pytest.Config) -> None:
        pass  # torch's settings are not guarded

    def probe(self, context: MeasureContext, sink: Callable[[CompileRecord], None]) -> TorchCompile:
        from pytest_jaxcompile.backends.torch.measure import TorchCompile

        probe = TorchCompile(self.environment(), context, sink)
        self._measured_frames[context.cell] = probe.frame_starts
        return probe

    def census(self, request: CensusRequest) -> TorchCensus:
        return TorchCensus(self, request)

    def identity(self, measured: bool) -> tuple[str, str] | None:
        return None  # known from its rows only

    def clobbers(
        self, records: Iterable[CompileRecord], requirements: Requirements
    ) -> list[Clobber]:
        return []

    def settings_notes(self, records: Iterable[CompileRecord]) -> list[str]:
        return []

    def finish(self, carry: CarriedCount | None = None, say: Say | None = None) -> None:
        pass

    def staged_module(self, record: CompileRecord) -> StagedModule | str | None:
        return "--compile-paired covers JAX's modules; torch's frames are not staged"

    def pair(self, jobs: list[PairJob], plan: PairingPlan, timeout_s: float) -> None:
        pass  # no torch row is ever staged, so none is a job

    def profile(self, jobs: list[ProfileJob], timeout_s: float) -> None:
        pass  # no torch row is ever staged, so none is a job

    def read_sources(self, records: list[CompileRecord], root: Path) -> None:
        pass  # torch's frames carry no per-operation locations here

    def reproducer_files(self) -> dict[str, bytes]:
        return {}  # no torch row is ever staged, so none has a bundle

    def close(self) -> None:
        pass

    def measured_frames(self, cell: str) -> set[int]:
        """The frames the fixture measured in this test (forgotten once asked)."""
        return self._measured_frames.pop(cell, set())


class TorchCensus:
    """torch frame compiles of one test call, when the test used torch (never imported here)."""

    def __init__(self, session: TorchSession, request: CensusRequest) -> None:
        from pytest_jaxcompile.backends.torch.measure import now_us

        self._session = session
        self._request = request
        self._since_us = now_us()
        self._frames: list[FrameCompile] = []

    def start(self) -> None:
        pass  # torch keeps its compilation metrics itself: read them since `_since_us`

    def stop(self) -> None:
        pass

    def rows(self, memory: dict[str, Any]) -> list[CompileRecord]:
        if "torch" not in sys.modules:
            return []
        from pytest_jaxcompile.backends.torch.measure import frame_records, frames_since

        context = self._request.context
        measured = self._session.measured_frames(context.cell)
        self._frames = [f for f in frames_since(self._since_us) if f.start_time_us not in measured]
        if not self._frames:
            return []
        names = unique_names([frame.name for frame in self._frames])
        return frame_records(
            self._frames,
            names,
            context,
            self._session.environment(),
            CENSUS_SOURCE,
            memory=memory,
        )

    @property
    def compiled(self) -> bool:
        return bool(self._frames)

    def ledger(self, wall_s: float) -> CallLedger | None:
        from pytest_jaxcompile.backends.torch.measure import build_ledger

        if not self._frames:
            return None
        return build_ledger(self._frames, self._request.context.cell, wall_s)

    def problems(self) -> list[str]:
        from pytest_jaxcompile.backends.torch.measure import recompile_problems

        return recompile_problems(self._request.max_compiles, self._frames)


BACKEND: Backend = TorchBackend()  # checked against the protocol
