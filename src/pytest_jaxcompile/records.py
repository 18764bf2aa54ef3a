"""Compile records: one row per measured transform, and the key rows are compared under."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

RECORD_KIND = "compile_probe"
LEDGER_KIND = "compile_ledger"
SCHEMA_VERSION = 1
RESIDUAL_NAME = "execute_and_python_s"


class CacheState(str, Enum):
    """What the persistent compilation cache did for one compile."""

    COLD = "cold"  # persistent-cache miss: XLA compiled
    WARM = "warm"  # persistent-cache hit
    NONE = "none"  # no persistent cache configured
    MEMORY = "memory"  # served from JAX's in-process cache: nothing compiled
    UNKNOWN = "unknown"  # the evidence does not decide; never guessed

    @property
    def judged(self) -> bool:
        """Whether rows in this state are compared with pins at all."""
        return self not in (CacheState.MEMORY, CacheState.UNKNOWN)


@dataclass(frozen=True, order=True)
class ComparabilityKey:
    """Rows and pins are only ever compared under exactly the same key."""

    hardware: str
    jax_version: str  # the framework's version: jax's, or torch's for torch rows
    mixed_precision: bool
    cache_state: str
    framework: str = "jax"  # "jax" or "torch": rows of the two are never compared

    @property
    def version_label(self) -> str:
        return f"{self.framework} {self.jax_version}"

    def describe(self) -> str:
        precision = "mixed precision" if self.mixed_precision else "full precision"
        return f"{self.hardware} | {self.version_label} | {precision} | {self.cache_state}"

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        if self.framework == "jax":  # the layout JAX keys always had
            del data["framework"]
        return data


@dataclass
class CacheDetails:
    """What the persistent cache looked like around the compile."""

    dir: str | None = None
    enabled: bool = False
    entries_before: int | None = None
    entries_after: int | None = None
    persisted: bool | None = None
    reason: str | None = None  # machine-readable code, e.g. "host_callbacks"
    reason_detail: str | None = None  # the human sentence
    notes: list[str] = field(default_factory=list)


@dataclass
class HostState:
    """The host the compile ran on: XLA compiles on these cores, even for GPU jobs."""

    cpu_count: int | None = None
    load_avg_1m: float | None = None
    load_per_core: float | None = None  # 1-minute load average / logical cores
    process_cpu_s: float | None = None


@dataclass
class CompileRecord:
    """One measured transform of one test (the test's node id is the cell)."""

    cell: str
    transform: str
    hardware: str
    jax_version: str
    jaxlib_version: str
    mixed_precision: bool
    cache_state: str
    compile_s: float  # wall seconds; with repeats, the fastest
    cache: CacheDetails = field(default_factory=CacheDetails)
    compile_cpu_s: float | None = None  # process CPU seconds of the compile (fastest repeat)
    compile_samples_s: list[float] | None = None  # every repeat's wall seconds
    compile_spread_s: float | None = None  # slowest minus fastest repeat
    host_state: HostState = field(default_factory=HostState)
    hardware_detail: dict[str, Any] = field(default_factory=dict)
    trace_s: float | None = None
    lower_s: float | None = None
    backend_compile_s: float | None = None  # JAX's own backend_compile_duration event
    cache_retrieval_s: float | None = None  # overlay: inside backend_compile_s on a hit
    module_name: str | None = None
    fingerprint: str | None = None  # sha256 of the lowered module (census: JAX's cache key)
    op_count: int | None = None  # StableHLO ops in the lowered module
    trace_profile: dict[str, float] | None = None  # share of trace time per package group
    xla_flags: str | None = None
    # The settings in force: parsed XLA flags, JAX cache settings, x64, matmul precision.
    settings: dict[str, Any] | None = None
    source: str = "fixture"
    tolerance: float | None = None  # per-test override from the compile_budget marker
    max_ops_growth: float | None = None  # per-test op-count gate from the marker
    location: tuple[str, int] | None = None  # test file and line, for annotations
    timestamp: str = ""
    outcome: str | None = None  # the test's outcome, filled in after the call
    # The commit measured (sha, ref, head_ref, base_ref, dirty): corpus/commit.py fills it
    # where records are written (report, record dir).
    commit: dict[str, Any] | None = None
    framework: str = "jax"
    torch_version: str | None = None  # torch rows: the framework version in the key
    phases: dict[str, float] | None = None  # torch rows: dynamo / aot_autograd / inductor
    overlays: dict[str, float] | None = None  # inside the phases; never summed into them
    ledger: dict[str, Any] | None = None  # torch rows: the first call's partition
    record_kind: str = RECORD_KIND
    schema_version: int = SCHEMA_VERSION

    @property
    def key(self) -> ComparabilityKey:
        return ComparabilityKey(
            hardware=self.hardware,
            jax_version=(self.torch_version or "") if self.framework == "torch"
            else self.jax_version,
            mixed_precision=self.mixed_precision,
            cache_state=self.cache_state,
            framework=self.framework,
        )

    @property
    def state(self) -> CacheState:
        return CacheState(self.cache_state)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        if self.location is not None:
            data["location"] = list(self.location)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompileRecord:
        """Rebuild a record from `to_dict` output; unknown fields are ignored."""
        known = {f.name for f in dataclasses.fields(cls)}
        values = {name: value for name, value in data.items() if name in known}
        values["cache"] = CacheDetails(**_only_fields(CacheDetails, values.get("cache") or {}))
        values["host_state"] = HostState(
            **_only_fields(HostState, values.get("host_state") or {})
        )
        location = values.get("location")
        values["location"] = tuple(location) if location else None
        return cls(**values)


def _only_fields(cls: type[Any], data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {name: value for name, value in data.items() if name in names}


@dataclass
class CallLedger:
    """One test call's wall time, partitioned honestly into compile and a named residual.

    ``wall_s = compile_s + execute_and_python_s``. ``compile_s`` is the time covered by
    JAX's trace, lowering and backend-compile events (nested ones counted once);
    the phase figures and the overlays are reported beside it and never summed into it.
    """

    cell: str
    wall_s: float | None
    compile_s: float
    trace_s: float
    lower_s: float
    backend_compile_s: float
    execute_and_python_s: float | None
    compile_fraction: float | None  # omitted (None) when the wall could not be measured
    compiles: int  # backend compiles (XLA compiles and persistent-cache hits)
    persistent_cache_hits: int
    modules: dict[str, int] = field(default_factory=dict)  # compiles per JAX function name
    overlays: dict[str, float] = field(default_factory=dict)
    outcome: str | None = None
    # "torch": trace_s, lower_s and backend_compile_s hold dynamo, AOTAutograd and inductor.
    framework: str = "jax"
    record_kind: str = LEDGER_KIND
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CallLedger:
        return cls(**_only_fields(cls, data))
