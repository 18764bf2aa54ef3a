"""Measurement backends: what each framework contributes, and what every backend shares.

A backend (``backends/jax``, ``backends/torch``) detects its environment, measures compiles
and turns each into a `CompileRecord` through `new_record`, the one record builder. `Backend`
says which of the gate's rules apply to its rows: XLA's settings guard (required flags,
clobbered ``XLA_FLAGS``) judges only rows of backends that compile with XLA.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from pytest_jaxcompile._numbers import NUMBER, finite_number
from pytest_jaxcompile.backends.hardware import Hardware, usable_cpu_count
from pytest_jaxcompile.records import CacheDetails, CompileRecord, HostState

LOAD_OVERRIDE_ENV = "JAXCOMPILE_LOAD_PER_CORE"


@dataclass(frozen=True)
class Backend:
    """What the gate needs to know about a framework's rows."""

    framework: str
    xla_rules: bool  # required XLA flags and XLA_FLAGS clobbers apply to its rows
    device: str  # what ran the compile, in messages: "JAX's default backend"


BACKENDS: dict[str, Backend] = {
    "jax": Backend("jax", xla_rules=True, device="JAX's default backend"),
    "torch": Backend("torch", xla_rules=False, device="torch's device"),
}


def backend_of(record: CompileRecord) -> Backend:
    return BACKENDS[record.framework]


@dataclass(frozen=True)
class Recompile:
    """A compile of a function after its first in a test, with the backend's reason."""

    function: str  # the module (JAX) or frame (torch) name, as the rows name it
    ordinal: int  # 2 for the function's second compile in the test
    why: str

    def line(self) -> str:
        """``jit(f) compile 2: f (test_x.py:6): different input types: ...``"""
        return f"{self.function} compile {self.ordinal}: {self.why}"


def recompile_lines_by_function(found: Iterable[Recompile]) -> dict[str, list[str]]:
    """``    compile 2: why`` lines per function, for a budget failure that lists functions."""
    lines: dict[str, list[str]] = {}
    for recompile in found:
        lines.setdefault(recompile.function, []).append(
            f"    compile {recompile.ordinal}: {recompile.why}"
        )
    return lines


def recompiles(compiles: Iterable[tuple[str, str | None]], unexplained: str) -> list[Recompile]:
    """Each compile after a function's first, in order, from ``(name, reason or None)``
    per compile; `unexplained` stands where the backend gave no reason."""
    seen: Counter[str] = Counter()
    found = []
    for function, why in compiles:
        seen[function] += 1
        if seen[function] > 1:
            found.append(Recompile(function, seen[function], why or unexplained))
    return found


class Environment(Protocol):
    """A backend's facts about the install, read once per session."""

    @property
    def hardware(self) -> Hardware: ...

    @property
    def framework(self) -> str: ...

    @property
    def versions(self) -> dict[str, str]:
        """The record fields naming versions: jax_version, jaxlib_version and, where
        known, platform_version (JAX); torch_version (torch)."""
        ...


class DuplicateTransformError(ValueError):
    """The same transform name was measured twice in one test."""


@dataclass(frozen=True)
class MeasureContext:
    """What the test declared (cell, precision, tolerance) and how to measure it."""

    cell: str
    mixed_precision: bool
    tolerance: float | None
    location: tuple[str, int] | None
    max_ops_growth: float | None = None
    max_memory_growth: float | None = None
    max_flops_growth: float | None = None
    project_root: Path | None = None
    trace_profile: bool = False
    repeat: int = 1
    artifacts_dir: Path | None = None  # where measured module texts are staged


@dataclass
class Measured:
    """What a backend measured of one compile, before it becomes a record."""

    transform: str
    cache_state: str
    compile_s: float | None  # None: not reported (torch)
    cache: CacheDetails
    host_state: HostState
    source: str = "fixture"
    mixed_precision: bool | None = None  # None: the test's
    figures: dict[str, Any] = field(default_factory=dict)  # any other CompileRecord field


def new_record(
    context: MeasureContext, environment: Environment, measured: Measured
) -> CompileRecord:
    """The one place a CompileRecord is made, for fixture, census and torch rows alike."""
    mixed = measured.mixed_precision
    versions = environment.versions
    return CompileRecord(
        cell=context.cell,
        transform=measured.transform,
        framework=environment.framework,
        hardware=environment.hardware.name,
        hardware_detail=environment.hardware.detail(),
        jax_version=versions.get("jax_version", ""),
        jaxlib_version=versions.get("jaxlib_version", ""),
        torch_version=versions.get("torch_version"),
        platform_version=versions.get("platform_version"),
        mixed_precision=context.mixed_precision if mixed is None else mixed,
        cache_state=measured.cache_state,
        compile_s=measured.compile_s,
        cache=measured.cache,
        host_state=measured.host_state,
        source=measured.source,
        tolerance=context.tolerance,
        max_ops_growth=context.max_ops_growth,
        max_memory_growth=context.max_memory_growth,
        max_flops_growth=context.max_flops_growth,
        location=context.location,
        timestamp=utc_now(),
        **measured.figures,
    )


def host_state(process_cpu_s: float | None = None) -> HostState:
    """Cores, load and the process's CPU seconds; load per core may be set by env.

    ``JAXCOMPILE_LOAD_PER_CORE`` replaces the measured load per core: for containers
    whose load average is the host's, and to exercise the load gate on purpose.
    """
    cpu_count = usable_cpu_count()
    import psutil  # only when measuring: plugin start-up does not pay for it

    try:
        load: float | None = psutil.getloadavg()[0]
    except (OSError, AttributeError):
        load = None
    per_core = None if load is None else load / max(psutil.cpu_count() or cpu_count, 1)
    override = os.environ.get(LOAD_OVERRIDE_ENV, "").strip()
    if override:
        try:
            per_core = finite_number(float(override))
        except ValueError:  # not a number, or nan, inf or negative (a NumberError)
            raise ValueError(f"{LOAD_OVERRIDE_ENV}={override!r} is not {NUMBER}") from None
    return HostState(
        cpu_count=cpu_count,
        load_avg_1m=None if load is None else round(load, 2),
        load_per_core=None if per_core is None else round(per_core, 3),
        process_cpu_s=None if process_cpu_s is None else round(process_cpu_s, 6),
    )


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
