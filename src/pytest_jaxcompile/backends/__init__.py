"""Measurement backends: the protocol every framework implements, and what they all share.

A backend (``backends/jax``, ``backends/torch``, each its own package) detects its
environment, measures compiles and turns each into a `CompileRecord` through `new_record`,
the one record builder. The session, the options and the gate reach a framework only
through the `Backend` protocol: `backend(framework)` (or `backend_of(record)`) finds the
package's ``BACKEND`` by the framework's name, so this module imports no backend and
every backend imports this module, never the other way round. What a backend knows alone
(XLA's flag rules and clobbers, JAX's cache-key parts, its in-process caches, its census)
stays in its package; what every backend's rows are held to is in `backends/settings.py`.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pytest_jaxcompile._io import atomic_write_text
from pytest_jaxcompile._numbers import NUMBER, finite_number
from pytest_jaxcompile.backends.hardware import Hardware, Host, usable_cpu_count
from pytest_jaxcompile.backends.settings import Clobber, Requirements
from pytest_jaxcompile.records import (
    CENSUS_SOURCE,
    FRAMEWORKS,
    CacheDetails,
    CacheState,
    CallLedger,
    CompileRecord,
    HostState,
)

if TYPE_CHECKING:
    import pytest

LOAD_OVERRIDE_ENV = "JAXCOMPILE_LOAD_PER_CORE"
STAGING = ".staged"  # under compile_artifacts_dir: every measured module's text


# The pinned instruction count of a row whose fingerprint, compile options digest and
# instrument identity (set on the record) equal its pin's, else None: the gate's
# `gate.instructions.carried_instructions`, handed in by the session (backends import no gate).
CarriedCount = Callable[[CompileRecord], "int | None"]
Say = Callable[[str], None]  # one line for the user, now (the terminal, while counting)


class Backend(Protocol):
    """What the session and the gate reach of one framework; stateless, one per framework."""

    @property
    def framework(self) -> str: ...

    @property
    def device(self) -> str:
        """What ran the compile, in messages: "JAX's default backend"."""
        ...

    @property
    def xla_rules(self) -> bool:
        """Whether required XLA flags and XLA_FLAGS clobbers apply to its rows."""
        ...

    @property
    def module_key_part(self) -> str | None:
        """The persistent-cache key part that hashes the module (a row and a pin with equal
        ones compiled the same module); None where the backend captures no key parts."""
        ...

    def session(
        self,
        hardware_override: str | None,
        instructions_timeout_s: float | None = None,
        stage_modules: bool = False,
    ) -> BackendSession:
        """The backend's state for one pytest process; `instructions_timeout_s`: count the
        measured rows' compile instructions (``--compile-instructions``), within that time;
        `stage_modules`: keep each measured row's module to store or pair it
        (``--compile-paired``)."""
        ...

    def requirement_problems(self, record: CompileRecord, requirements: Requirements) -> list[str]:
        """Why this row compiled without a required setting (flags, cache); empty if none."""
        ...

    def differing_parts(
        self, now: dict[str, str] | None, then: dict[str, str] | None
    ) -> list[str] | None:
        """Names of the persistent-cache key's parts that differ from the pin's; None
        when either side was not captured (or the backend captures none)."""
        ...

    def flag_changes(self, now: list[str] | None, then: list[str] | None) -> list[str]:
        """The compiler flags in the cache key added, removed or changed since the pin."""
        ...

    def never_persisted(self, record: CompileRecord) -> str | None:
        """Why this cold row's module is never written to the persistent cache whatever
        the settings, in a few words ("host callbacks": JAX before 0.11), as the backend
        reported it at the compile; None when it may be written."""
        ...


class BackendSession(Protocol):
    """A backend's state in one pytest process: its environment, listeners and settings."""

    def environment(self) -> Environment: ...

    def start(self, config: pytest.Config) -> None:
        """At session start: note the settings later compiles are compared with (some
        kept in `config.stash` from before any conftest.py ran)."""
        ...

    def probe(self, context: MeasureContext, sink: Callable[[CompileRecord], None]) -> Any:
        """The measuring fixture's value for one test; each row it makes goes to `sink`."""
        ...

    def census(self, request: CensusRequest) -> CallCensus | None:
        """A census of one test call, or None when the project does not use the framework."""
        ...

    def identity(self, measured: bool) -> tuple[str, str] | None:
        """(hardware, framework version) this process ran under, where the backend knows
        it; `measured`: this process has rows (a backend may then skip detecting it)."""
        ...

    def clobbers(
        self, records: Iterable[CompileRecord], requirements: Requirements
    ) -> list[Clobber]:
        """Settings that changed since `start`, each marked failing when it affects a
        requirement."""
        ...

    def settings_notes(self, records: Iterable[CompileRecord]) -> list[str]:
        """Settings the session set that are in force and no clobber (XLA flags added
        during start-up), each a sentence said once."""
        ...

    def finish(self, carry: CarriedCount | None = None, say: Say | None = None) -> None:
        """At session finish, before the rows leave this process: complete them (their
        compile instructions, where counted; `carry` gives the pinned count of a row whose
        module, options and instrument are its pin's, which is not counted again). `say`
        writes a line where the user sees it at once: what is being counted, each count."""
        ...

    def staged_module(self, record: CompileRecord) -> StagedModule | str | None:
        """The module a measured row compiled, as its backend got it, to store or pair;
        a string says why it cannot be; None: not staged (modules are not kept)."""
        ...

    def pair(self, jobs: list[PairJob], plan: PairingPlan, timeout_s: float) -> None:
        """Compile each job's pinned and new module again, alternately, in a child process,
        in the jobs' order, each until a look of `plan` decides it; fill each job's record's
        ``paired_*`` fields (or its ``paired_note`` saying why not), within `timeout_s`."""
        ...

    def profile(self, jobs: list[ProfileJob], timeout_s: float) -> None:
        """Compile each job's module (and its pin's, where given) once more in a child
        process with the compiler's pass timers on; fill each job's record's ``profile``
        (left None where the child did not profile it), within `timeout_s` in all."""
        ...

    def read_sources(self, records: list[CompileRecord], root: Path) -> None:
        """Fill each row's ``source_ops`` (its operations by source location) from the
        module it compiled, where this process staged it; after the tests, only for the
        rows the gate will explain (a pin update's, failing ones)."""
        ...

    def reproducer_files(self) -> dict[str, bytes]:
        """The framework's files of a reproducer bundle (gate/reproducer.py): a script that
        compiles the bundle's modules again with the framework alone, and the install's
        environment as the framework reports it; empty where it has none."""
        ...

    def close(self) -> None:
        """At the end of pytest: stop listening."""
        ...


def fingerprint_of(module_text: str) -> str:
    """A module's fingerprint: sha256 of its text (a row's ``fingerprint``)."""
    return "sha256:" + hashlib.sha256(module_text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class StagedModule:
    """What it takes to compile a row's module again, anywhere with the same platform."""

    text: str  # the lowered module's text: its sha256 is the row's fingerprint
    options: bytes  # the serialized compile options the framework handed its backend
    devices: int  # how many devices it compiles for
    platform: str  # the backend platform it compiled for: cpu, gpu, tpu


@dataclass(frozen=True)
class PairJob:
    """One row to pair: its pin's module (`base`) against its own (`new`)."""

    record: CompileRecord
    base: StagedModule
    new: StagedModule
    against: str  # the pin paired against, as the row's note names it


@dataclass(frozen=True)
class PairingPlan:
    """How the pairing child pairs each job: the sequential rule's looks ((pairs, Walsh
    rank) each, gate/sequential.py) with the tolerance and floor they judge at, and the
    wall-clock moment (``time.time()``) after which it starts no pair (the budget)."""

    looks: tuple[tuple[int, int], ...]
    tolerance: float
    floor_s: float
    deadline: float | None = None
    # Compile each module once untimed before its pairs: off, as the warm-up study found a
    # module's first compile after the child's throwaway one unbiased (docs/benchmarks.md).
    warm_up_each: bool = False

    def manifest(self) -> dict[str, object]:
        """The plan as the child's manifest holds it."""
        return {
            "looks": [list(look) for look in self.looks],
            "tolerance": self.tolerance,
            "floor_s": self.floor_s,
            "deadline": self.deadline,
            "warm_up_each": self.warm_up_each,
        }


@dataclass(frozen=True)
class ProfileJob:
    """One row to profile: its own module (`new`) and, where stored, its pin's (`base`)."""

    record: CompileRecord
    new: StagedModule
    base: StagedModule | None


@dataclass(frozen=True)
class CensusRequest:
    """What the session asks of a backend's census of one test call."""

    context: MeasureContext
    max_compiles: int | None  # the test's compile_budget(max_compiles=N)
    count_eager: bool  # eager dispatch counts against max_compiles
    explain: bool  # explain each recompile (a compile count is judged)
    clear_caches: str  # compile_clear_caches (_constants.py CLEAR_MODES)


class CallCensus(Protocol):
    """One backend's census of one test call: it listens from `start` to `stop`."""

    def start(self) -> None:
        """The call starts: listen."""
        ...

    def stop(self) -> None:
        """Stop listening (after `rows` and `ledger`, also when the call failed)."""
        ...

    def rows(self, memory: dict[str, Any]) -> list[CompileRecord]:
        """The call's own compiles as census rows (once, when the call ended); `memory`
        is the call's peak RSS (`RssPeak.figures`), shared by every row."""
        ...

    @property
    def compiled(self) -> bool:
        """Whether the call compiled anything of this framework (known after `rows`)."""
        ...

    def ledger(self, wall_s: float) -> CallLedger | None:
        """The call's wall time partitioned into compile and residual; None if nothing to
        account."""
        ...

    def problems(self) -> list[str]:
        """The compile_budget(max_compiles=N) failure of the call, if over."""
        ...


def backend(framework: str) -> Backend:
    """The backend of `framework`: ``BACKEND`` of its package, ``backends/<framework>/``."""
    if framework not in FRAMEWORKS:
        raise KeyError(f"no backend for framework {framework!r}")
    found: Backend = importlib.import_module(f"{__name__}.{framework}").BACKEND
    return found


def backend_of(record: CompileRecord) -> Backend:
    return backend(record.framework)


def all_backends() -> list[Backend]:
    """Every framework's backend, in `records.FRAMEWORKS` order (JAX first)."""
    return [backend(framework) for framework in FRAMEWORKS]


@dataclass(frozen=True)
class Classification:
    """What a backend concluded of one compile's cache use (`CompileRecord.cache_state`)."""

    cache_state: CacheState
    persisted: bool | None = None
    reason: str | None = None
    detail: str | None = None
    notes: tuple[str, ...] = ()


def unique_names(names: list[str]) -> list[str]:
    """``jit(f)``, ``jit(f)#2``, ...: the same function compiling again gets a new row."""
    seen: Counter[str] = Counter()
    unique = []
    for name in names:
        seen[name] += 1
        unique.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return unique


SIGNATURE_CHARS = 60  # a longer input signature is cut and ends in a hash of the whole


def signed_names(compiles: list[tuple[str, str | None]]) -> list[str]:
    """Row names of one test's compiles (function name, input signature) that do not depend
    on the order they compiled in: a function compiled for one input signature keeps its
    name (``jit(f)``, numbered ``#2`` when the same signature compiled again, a new function
    object or a changed static argument); one compiled for several is named by each
    signature (``jit(f)[f32[8,64]]``, ``jit(f)[f32[16,64]]``)."""
    signatures: dict[str, set[str | None]] = {}
    for name, signature in compiles:
        signatures.setdefault(name, set()).add(signature)
    named = [
        name
        if signature is None or len(signatures[name]) == 1
        else f"{name}[{_shortened(signature)}]"
        for name, signature in compiles
    ]
    return unique_names(named)


def _shortened(signature: str) -> str:
    if len(signature) <= SIGNATURE_CHARS:
        return signature
    digest = hashlib.sha256(signature.encode()).hexdigest()[:8]
    return f"{signature[: SIGNATURE_CHARS - 10]}..{digest}"


def artifact_name(cell: str, transform: str) -> str:
    """A file name for a cell and transform: readable, safe on every filesystem."""
    text = f"{cell}--{transform}"
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:200] + ".mlir"


def stage_module(directory: Path, cell: str, transform: str, module_text: str) -> None:
    """Keep a measured module's text in ``DIR/.staged/`` (``compile_artifacts_dir``); the
    controller keeps those of failing rows at the end (`output/artifacts.py`)."""
    atomic_write_text(directory / STAGING / artifact_name(cell, transform), module_text)


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
    budget_only: bool = False  # census rows: the test asked for no seconds (records.py)
    # Which twin compile a measured row needs ("cold": with the persistent cache bypassed;
    # "warm": from the cache), or None: the gate's `gate.twins.twin_wanted`, handed in by
    # the session (backends import no gate). None: no twin is ever compiled.
    twin_wanted: Callable[[CompileRecord], str | None] | None = None
    # The pinned module whose cache-key hash (the key's module part) this is, or None: a
    # row of that module takes the pin's figures of it, its own text never printed.
    pinned_module: Callable[[str], PinnedModule | None] | None = None
    # Whether the compiled executable's memory and cost analyses are read (tens of ms on a
    # large module): where a limit judges them, a pin keeps them or an output shows them.
    compiled_figures: bool = True


@dataclass(frozen=True)
class PinnedModule:
    """What a pin knows of its module: a row whose module has the same cache-key hash (so
    the same text) has the same fingerprint, op count and ops."""

    fingerprint: str
    op_count: int
    ops: dict[str, int] | None = None


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
        budget_only=context.budget_only and measured.source == CENSUS_SOURCE,
        max_ops_growth=context.max_ops_growth,
        max_memory_growth=context.max_memory_growth,
        max_flops_growth=context.max_flops_growth,
        location=context.location,
        timestamp=utc_now(),
        **measured.figures,
    )


def host_state(
    process_cpu_s: float | None = None,
    cpu_count: int | None = None,
    host: Host | None = None,
    load_avg: Callable[[], float] | None = None,
) -> HostState:
    """Cores, load and the process's CPU seconds; load per core may be set by env.

    ``load_per_core`` is the 1-minute load average over the usable CPUs recorded beside
    it (``cpu_count``: the affinity mask capped by the cgroup CPU quota, as the hardware
    identity counts them), not over every CPU of the host: XLA compiles on the usable ones.
    ``JAXCOMPILE_LOAD_PER_CORE`` replaces the measured load per core: for containers
    whose load average is the host's, and to exercise the load gate on purpose.
    `cpu_count`: the usable CPUs where the caller knows them (the session's hardware);
    reading them means reading cgroup files (on `host`, this machine by default), about
    half a millisecond. `load_avg`: the 1-minute load average (the system's by default).
    """
    cpu_count = usable_cpu_count(host) if cpu_count is None else cpu_count
    if load_avg is None:
        load_avg = _load_avg_1m
    try:
        load: float | None = float(load_avg())
    except (OSError, AttributeError):
        load = None
    per_core = None if load is None else load / max(cpu_count, 1)
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


def _load_avg_1m() -> float:
    """The 1-minute load average: the OS's own (what psutil returns where there is one,
    without importing psutil, about 35 ms of a session's start), else psutil's."""
    if hasattr(os, "getloadavg"):
        return float(os.getloadavg()[0])
    import psutil  # Windows: psutil computes one

    return float(psutil.getloadavg()[0])


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
