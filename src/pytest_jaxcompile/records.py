"""Compile records: one row per measured transform, and the key rows are compared under.

This module is the one home of the record's shape: its fields and the comparability key it
is judged under; `record_checks` holds the one validation every reader (JSON reports, the
records corpus) applies to a record that comes from a file.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

RECORD_KIND = "compile_probe"
LEDGER_KIND = "compile_ledger"
# A row's compile profile (`CompileRecord.profile`): beside the top passes, the rest summed
# and every pass summed.
PROFILE_OTHER_PASSES = "(other passes)"
PROFILE_ALL_PASSES = "(all passes)"
# ... and the compile's phases, from XLA's compiler timers: the HLO pass pipelines as a whole,
# the backend's code generation (which waits for LLVM), and LLVM's compiles of the kernel
# modules, summed over the threads they ran on (so more than wall time where they overlap).
PROFILE_PHASE_HLO = "(phase: HLO passes)"
PROFILE_PHASE_CODEGEN = "(phase: code generation)"
PROFILE_PHASE_LLVM = "(phase: LLVM modules)"
PROFILE_PHASES = (PROFILE_PHASE_HLO, PROFILE_PHASE_CODEGEN, PROFILE_PHASE_LLVM)
CENSUS_SOURCE = "census"  # a record's `source` when a census measured it (else "fixture")
# A record's `cache.reason` where its backend did not persist the module and cannot say why.
REASON_UNEXPLAINED = "unexplained"
REPORT_KIND = "jaxcompile_report"  # the JSON report (output/json_report.py) holding records
SCHEMA_VERSION = 1
RESIDUAL_NAME = "execute_and_python_s"  # the ledger's time outside any compile phase
FRAMEWORKS = ("jax", "torch")
# Where each framework's version is stored in records and pin keys (JAX's always was).
VERSION_FIELDS = {"jax": "jax_version", "torch": "torch_version"}
# What a record's peak RSS covers (`compile_rss_scope`): one compile() call (jax_compile
# rows), a test's whole call (census rows: every compile of the test shares it), and
# torch.compile's compile and first call (torch_compile rows).
SCOPE_COMPILE = "compile"
SCOPE_TEST = "test"
SCOPE_FIRST_CALL = "first_call"


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


STATES = frozenset(state.value for state in CacheState)


@dataclass(frozen=True, order=True)
class ComparabilityKey:
    """Rows and pins are only ever compared under exactly the same key."""

    hardware: str
    framework_version: str  # jax's version for JAX rows, torch's for torch rows
    mixed_precision: bool
    cache_state: str
    framework: str = "jax"  # "jax" or "torch": rows of the two are never compared

    @property
    def version_label(self) -> str:
        return f"{self.framework} {self.framework_version}"

    def describe(self) -> str:
        precision = "mixed precision" if self.mixed_precision else "full precision"
        return f"{self.hardware} | {self.version_label} | {precision} | {self.cache_state}"

    def to_dict(self) -> dict[str, Any]:
        """JAX keys in the layout they always had; other frameworks name themselves."""
        data: dict[str, Any] = {
            "hardware": self.hardware,
            VERSION_FIELDS[self.framework]: self.framework_version,
            "mixed_precision": self.mixed_precision,
            "cache_state": self.cache_state,
        }
        if self.framework != "jax":
            data = {"framework": self.framework, **data}
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
    load_per_core: float | None = None  # 1-minute load average / cpu_count (usable CPUs)
    process_cpu_s: float | None = None


@dataclass
class CompileRecord:
    """One measured transform of one test (the test's node id is the cell)."""

    cell: str
    transform: str
    hardware: str
    jax_version: str  # JAX rows; empty on torch rows
    jaxlib_version: str  # JAX rows; empty on torch rows
    mixed_precision: bool
    cache_state: str
    # wall seconds; with repeats, the fastest. None: the backend reported no compile time
    # (`missing_metrics` names what it left out); such a row is never judged nor pinned
    compile_s: float | None
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
    op_histogram: dict[str, int] | None = None  # those ops by name (fixture rows)
    # those ops by their innermost frame of the user's code ("model.py:41 (loss)"), the
    # largest: read after the tests for a pin update's rows and failing rows only
    source_ops: dict[str, int] | None = None
    # JAX's persistent-cache key, part by part (name -> sha256), and the XLA flags it
    # included: which part changed when a module compiles cold (fixture rows)
    cache_key_parts: dict[str, str] | None = None
    cache_key_flags: list[str] | None = None
    trace_profile: dict[str, float] | None = None  # share of trace time per package group
    trace_files: dict[str, float] | None = None  # share of trace time per file: the top ones
    xla_flags: str | None = None
    # The settings in force: parsed XLA flags, JAX cache settings, x64, matmul precision.
    settings: dict[str, Any] | None = None
    source: str = "fixture"
    tolerance: float | None = None  # per-test override from the compile_budget marker
    # A census row of a test that asked for no seconds (`session.census.budget_only`): its
    # compile_budget judges it; against a pin only for the growth limits it sets.
    budget_only: bool = False
    max_ops_growth: float | None = None  # per-test op-count gate from the marker
    location: tuple[str, int] | None = None  # test file and line, for annotations
    timestamp: str = ""
    outcome: str | None = None  # the test's outcome, filled in after the call
    # The error tracing, lowering or the compile raised ("XlaRuntimeError: ..."); such a row
    # keeps its seconds (no compile_s where no compile ran),
    # is shown as failed and is never judged nor pinned (None: it compiled).
    error: str | None = None
    # The commit measured (sha, ref, head_ref, base_ref, dirty): corpus/commit.py fills it
    # where records are written (report, record dir).
    commit: dict[str, Any] | None = None
    framework: str = "jax"
    torch_version: str | None = None  # torch rows: the framework version in the key
    # JAX rows: the backend's platform version, hashed into JAX's cache keys (None: unknown)
    platform_version: str | None = None
    # torch rows: the phases torch measured (dynamo, backend, inductor), and compile_other_s,
    # the part of the frame's compile time that none of them covers
    phases: dict[str, float] | None = None
    overlays: dict[str, float] | None = None  # inside the phases; never summed into them
    ledger: dict[str, Any] | None = None  # torch rows: the first call's partition
    # torch rows: the metrics torch did not report; their figures are None, never 0.0
    missing_metrics: list[str] | None = None
    # Compiled memory and cost, as the backend's compiled.memory_analysis() and
    # cost_analysis() report them (docs/memory.md); None where it reports nothing.
    compiled_temp_bytes: int | None = None  # scratch memory the executable needs
    compiled_argument_bytes: int | None = None
    compiled_output_bytes: int | None = None
    compiled_code_bytes: int | None = None  # generated code: 0 on JAX's CPU backend
    flops: float | None = None
    bytes_accessed: float | None = None
    # The process's resident memory: its peak over `compile_rss_scope` ("compile": the
    # compile() call; "test": the test's whole call, census rows; "first_call": torch's
    # compile and first call), and that peak's growth over the level before it.
    compile_rss_peak_mib: float | None = None
    compile_rss_growth_mib: float | None = None
    compile_rss_scope: str | None = None
    max_memory_growth: float | None = None  # per-test compiled temp bytes gate (marker)
    max_flops_growth: float | None = None  # per-test flops gate (marker)
    # --compile-instructions: the XLA compiler's instructions for this module, counted under
    # valgrind (backends/jax/instructions.py), the instrument's identity (counts are compared
    # only under an equal one), or why the row was not counted; and the compiler's floor: a
    # trivial module's count in the same child (what every compile costs, however small).
    compile_instructions: int | None = None
    compile_instructions_identity: str | None = None
    compile_instructions_note: str | None = None
    compile_instructions_floor: int | None = None
    # --compile-paired: this row's module and its pin's module compiled again, alternately,
    # in one child process at the session's end (docs/paired.md): each pair's process CPU
    # and wall seconds, what it was paired against (the pin file and key), the child's
    # seconds in all; or why the row was not paired.
    paired_base_cpu_s: list[float] | None = None
    paired_new_cpu_s: list[float] | None = None
    paired_base_wall_s: list[float] | None = None
    paired_new_wall_s: list[float] | None = None
    paired_against: str | None = None
    paired_cost_s: float | None = None
    paired_note: str | None = None
    # The row's twin: its module compiled once more in this session, in another cache state
    # (gate/twins.py): a row that hit a cache (warm, memory) though its module changed since
    # its pin, compiled with the persistent cache bypassed ("cold"; "none" where no cache is
    # configured), is judged on that compile; a pin update's cold row whose warm pin holds
    # another module, compiled again from the cache ("warm"), pins that state too.
    twin_cache_state: str | None = None
    twin_compile_s: float | None = None
    twin_compile_cpu_s: float | None = None
    # A compile added to measure the row (a compile_repeat repeat, the twin) that raised:
    # which, after how long, and its error (backends/jax/recompile.py: "its compile with the
    # persistent cache bypassed (its twin) raised after 0.012 s: ..."). The row keeps what
    # its own compile measured, and its test does not fail for it. None: none raised.
    added_compile_error: str | None = None
    # The compile profile (a failing row's, every row's with --compile-profile; docs/
    # profile.md): the row's module ("new") and, where the module store holds it, its pin's
    # module ("base") compiled again in a child with XLA's pass timers on: seconds per HLO
    # pass (each pass's least over the child's compiles), the top ones, the rest
    # (PROFILE_OTHER_PASSES) and all (PROFILE_ALL_PASSES), and the phases (PROFILE_PHASES)
    # where XLA's compiler logged them.
    profile: dict[str, dict[str, float]] | None = None
    # A digest of the serialized compile options the count was (or would be) made with: a
    # count is carried from the pin while module, options and instrument are the pin's.
    compile_options_digest: str | None = None
    # The settings in the cache key that change the compiled program (XLA flags, compile
    # options), as ``name=value,...``; "" for the default settings. Rows of one cell and
    # transform that differ only in it are variants, judged and pinned apart under one key.
    variant: str = ""
    record_kind: str = RECORD_KIND
    schema_version: int = SCHEMA_VERSION

    @property
    def framework_version(self) -> str:
        return (self.torch_version or "") if self.framework == "torch" else self.jax_version

    @property
    def key(self) -> ComparabilityKey:
        return ComparabilityKey(
            hardware=self.hardware,
            framework_version=self.framework_version,
            mixed_precision=self.mixed_precision,
            cache_state=self.cache_state,
            framework=self.framework,
        )

    @property
    def row_id(self) -> tuple[str, str, str]:
        """The row's identity inside its key: (cell, transform, variant)."""
        return (self.cell, self.transform, self.variant)

    @property
    def name(self) -> str:
        """``cell [transform]``, with the variant where it is not the default's."""
        return row_name(self.cell, self.transform, self.variant)

    @property
    def unmeasured(self) -> str | None:
        """Why the row has no compile figure (None: it has one); such a row is never
        judged nor pinned."""
        if self.compile_s is not None:
            return None
        missing = ", ".join(self.missing_metrics or []) or "compile_s"
        return f"no compile time: {self.framework} reported no {missing}"

    @property
    def state(self) -> CacheState:
        return CacheState(self.cache_state)

    def twin(self) -> CompileRecord | None:
        """The row as its twin compile measured it (`twin_cache_state`): the same module,
        key and figures but the compile's seconds and what the cache did; None without one."""
        if self.twin_cache_state is None or self.twin_compile_s is None:
            return None
        return dataclasses.replace(
            self,
            cache_state=self.twin_cache_state,
            compile_s=self.twin_compile_s,
            compile_cpu_s=self.twin_compile_cpu_s,
            compile_samples_s=None,
            compile_spread_s=None,
            backend_compile_s=None,
            cache_retrieval_s=None,
            cache=dataclasses.replace(self.cache, persisted=None, reason=None, notes=[]),
            compile_rss_peak_mib=None,
            compile_rss_growth_mib=None,
            compile_rss_scope=None,
            twin_cache_state=None,
            twin_compile_s=None,
            twin_compile_cpu_s=None,
        )

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
        for name in ("jax_version", "jaxlib_version", "timestamp", "variant"):
            if not isinstance(values.get(name), str):
                values[name] = ""  # variant: records of earlier releases are the default
        values.setdefault("mixed_precision", False)  # corpora from before it was recorded
        values["cache"] = CacheDetails(**_only_fields(CacheDetails, values.get("cache") or {}))
        values["host_state"] = HostState(**_only_fields(HostState, values.get("host_state") or {}))
        location = values.get("location")
        values["location"] = tuple(location) if location else None
        return cls(**values)


def transform_label(transform: str, variant: str = "") -> str:
    """``transform``, or ``transform | variant`` for a settings variant."""
    return f"{transform} | {variant}" if variant else transform


def row_name(cell: str, transform: str, variant: str = "") -> str:
    """``cell [transform]``, or ``cell [transform | variant]`` for a settings variant."""
    return f"{cell} [{transform_label(transform, variant)}]"


def _only_fields(cls: type[Any], data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {name: value for name, value in data.items() if name in names}


@dataclass
class CallLedger:
    """One test call's wall time, partitioned honestly into compile and a named residual.

    ``wall_s = compile_s + execute_and_python_s``. ``compile_s`` is the time covered by
    the backend's measured compile phases (JAX: its trace, lowering and backend-compile
    events, nested ones counted once); the phase figures and the overlays are reported
    beside it and never summed into it. A phase the backend does not measure is None;
    compile time no measured phase covers is ``compile_other_s``, never put under a
    measured phase's name.
    """

    cell: str
    wall_s: float | None
    compile_s: float
    trace_s: float | None
    lower_s: float | None
    backend_compile_s: float | None  # None: a compile's was not reported (torch)
    execute_and_python_s: float | None
    compile_fraction: float | None  # omitted (None) when the wall could not be measured
    compiles: int  # backend compiles (XLA compiles and persistent-cache hits)
    persistent_cache_hits: int
    modules: dict[str, int] = field(default_factory=dict)  # compiles per function name
    overlays: dict[str, float] = field(default_factory=dict)
    outcome: str | None = None
    framework: str = "jax"
    compile_other_s: float | None = None  # compile time outside every measured phase
    # JAX's eager dispatch (operations outside jit): inside compile_s, never in `compiles`
    # or `modules`; its seconds are the modules' trace, lowering and backend compile.
    eager_compiles: int = 0
    eager_compile_s: float = 0.0
    eager_modules: dict[str, int] = field(default_factory=dict)  # by JAX function name
    # Why each compile of a function after its first happened, in the backend's words
    # (JAX's tracing-cache miss explanations, torch's recompile reasons); None when the
    # test was not asked (no max_compiles budget or pinned compile count).
    recompiles: list[str] | None = None
    # Why the test started with JAX's in-process caches cleared (a function an earlier test
    # compiled was still in memory, ...); None when it did not.
    caches_cleared_because: str | None = None
    record_kind: str = LEDGER_KIND
    schema_version: int = SCHEMA_VERSION

    @classmethod
    def partition(
        cls,
        cell: str,
        wall_s: float | None,
        compile_s: float,
        *,
        trace_s: float | None,
        lower_s: float | None,
        backend_compile_s: float | None,
        compiles: int,
        persistent_cache_hits: int,
        modules: dict[str, int],
        overlays: dict[str, float],
        framework: str = "jax",
        compile_other_s: float | None = None,
        eager_compiles: int = 0,
        eager_compile_s: float = 0.0,
        eager_modules: dict[str, int] | None = None,
        recompiles: list[str] | None = None,
        caches_cleared_because: str | None = None,
    ) -> CallLedger:
        """The one ledger builder: compile is capped at the wall (the phases and the wall
        come from different clocks), and the rest of the wall is the residual."""
        measured = wall_s is not None and wall_s > 0
        if measured and wall_s is not None:
            compile_s = min(compile_s, wall_s)
        return cls(
            cell=cell,
            wall_s=wall_s if measured else None,
            compile_s=compile_s,
            trace_s=trace_s,
            lower_s=lower_s,
            backend_compile_s=backend_compile_s,
            execute_and_python_s=(wall_s - compile_s) if measured and wall_s is not None else None,
            compile_fraction=(compile_s / wall_s) if measured and wall_s else None,
            compiles=compiles,
            persistent_cache_hits=persistent_cache_hits,
            modules=modules,
            overlays=overlays,
            framework=framework,
            compile_other_s=compile_other_s,
            eager_compiles=eager_compiles,
            eager_compile_s=eager_compile_s,
            eager_modules=dict(eager_modules or {}),
            recompiles=recompiles,
            caches_cleared_because=caches_cleared_because,
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CallLedger:
        return cls(**_only_fields(cls, data))
