"""Measure one transform's compile: phases, cache_state, host state, the record.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_jaxcompile.backends import (
    DuplicateTransformError,
    MeasureContext,
    Measured,
    host_state,
    new_record,
    stage_module,
)
from pytest_jaxcompile.backends.hardware import Hardware, detect_hardware
from pytest_jaxcompile.backends.jax.backendstart import XLA_FLAGS_ENV
from pytest_jaxcompile.backends.jax.classify import CompileEvidence, classify
from pytest_jaxcompile.backends.jax.guard import snapshot_settings
from pytest_jaxcompile.backends.jax.instructions import InstructionStager
from pytest_jaxcompile.backends.jax.instructions import capture as capture_compile
from pytest_jaxcompile.backends.jax.keyparts import (
    COMPUTATION_PART,
    KeyParts,
    compiler_options_of,
    flags_in_force,
    variant_of,
)
from pytest_jaxcompile.backends.jax.moduletext import ModuleText
from pytest_jaxcompile.backends.jax.monitor import (
    EVENT_BACKEND_COMPILE,
    EVENT_CACHE_HIT,
    EVENT_CACHE_REQUEST,
    EVENT_CACHE_RETRIEVAL,
    EVENT_CACHE_WRITE,
    CompileMonitor,
)
from pytest_jaxcompile.backends.jax.recompile import cpu_seconds, repeat_compiles, twin_compile
from pytest_jaxcompile.backends.jax.residue import clear_in_process_caches
from pytest_jaxcompile.backends.memory import RssSampler
from pytest_jaxcompile.records import SCOPE_COMPILE, CacheDetails, CacheState, CompileRecord

# jax/_src/lru_cache.py names entries "<key>-cache" next to "<key>-atime" files from jax
# 0.4.31 on; jax 0.4.30 names them "<key>". Both keep a ".lockfile" there, and the remote
# cache writes "_temp_<key>" first.
_NOT_AN_ENTRY_SUFFIX = "-atime"
_NOT_AN_ENTRY_PREFIXES = (".", "_temp_")


@dataclass(frozen=True)
class JaxEnvironment:
    """Facts about the JAX install, read once per session."""

    hardware: Hardware
    jax_version: str
    jaxlib_version: str
    framework: str = "jax"
    # The default backend's platform version: JAX's persistent-cache key hashes it (and
    # jaxlib's version) beside the module, so a change recompiles. None where not available.
    platform_version: str | None = None

    @property
    def versions(self) -> dict[str, str]:
        versions = {"jax_version": self.jax_version, "jaxlib_version": self.jaxlib_version}
        if self.platform_version is not None:
            versions["platform_version"] = self.platform_version
        return versions

    @classmethod
    def detect(cls, hardware_override: str | None) -> JaxEnvironment:
        import jax
        import jaxlib

        return cls(
            hardware=detect_hardware(hardware_override),
            jax_version=jax.__version__,
            jaxlib_version=getattr(jaxlib, "__version__", "unknown"),
            platform_version=backend_platform_version(),
        )


def backend_platform_version() -> str | None:
    """The default backend's ``platform_version``, as JAX's cache key hashes it, or None."""
    import jax

    try:
        version = jax.devices()[0].client.platform_version
    except (AttributeError, IndexError, RuntimeError):
        return None
    return version if isinstance(version, str) and version else None


@dataclass(frozen=True)
class CacheSettings:
    dir: str | None
    enabled: bool

    @property
    def configured(self) -> bool:
        return bool(self.dir) and self.enabled

    @classmethod
    def current(cls) -> CacheSettings:
        import jax

        # Attribute reads give the value in force, context managers included.
        cache_dir = getattr(jax.config, "jax_compilation_cache_dir", None)
        enabled = bool(getattr(jax.config, "jax_enable_compilation_cache", True))
        return cls(dir=str(cache_dir) if cache_dir else None, enabled=enabled)


def is_cache_entry(name: str) -> bool:
    """Whether a file name in a persistent cache dir is a compiled entry, in any jax layout."""
    return not name.startswith(_NOT_AN_ENTRY_PREFIXES) and not name.endswith(_NOT_AN_ENTRY_SUFFIX)


def count_cache_entries(cache_dir: str | None) -> int | None:
    """Entry files in a local cache dir; tolerant of entries appearing and vanishing."""
    if not cache_dir or "://" in cache_dir:
        return None
    try:
        with os.scandir(cache_dir) as entries:
            return sum(1 for entry in entries if is_cache_entry(entry.name))
    except FileNotFoundError:
        return 0
    except OSError:
        return None


class CacheEntries:
    """A process's counts of its cache dirs' entries (`count_cache_entries`), each kept while
    the directory has not changed since it was counted, so that a warm session scans its cache
    once rather than twice a row: a cache of 10,000 entries took 20-40 ms a scan. An entry
    added or removed changes the directory's mtime; a count is kept only where that mtime
    was older than the count by more than a timestamp tick, so no change can hide in it (JAX
    rewrites a hit's ``-atime`` file in place, which leaves the directory as it was)."""

    SETTLED_NS = 100_000_000  # 0.1 s: far beyond a filesystem timestamp's tick

    def __init__(self) -> None:
        self._counted: dict[str, tuple[int, int]] = {}  # dir -> (its mtime then, the count)

    def count(self, cache_dir: str | None) -> int | None:
        """`count_cache_entries`, from the kept count where the directory is unchanged."""
        if not cache_dir or "://" in cache_dir:
            return None
        try:
            changed = os.stat(cache_dir).st_mtime_ns
        except OSError:
            return count_cache_entries(cache_dir)  # missing: 0; not readable: None
        kept = self._counted.get(cache_dir)
        if kept is not None and kept[0] == changed:
            return kept[1]
        started = time.time_ns()
        count = count_cache_entries(cache_dir)
        if count is not None and started - changed > self.SETTLED_NS:
            self._counted[cache_dir] = (changed, count)
        return count


_EXPECTED = (
    "it expects a function JAX can trace (a jax.numpy one, or a function of yours) with its "
    "arguments, a jax.jit-wrapped function, or a jax.stages.Lowered"
)


def _named(target: Any) -> str:
    """``numpy.linalg.svd``: how a callable reads in a message."""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None)
    module = getattr(target, "__module__", None)
    if name is None:
        return repr(target)
    return f"{module}.{name}" if module else str(name)


def _not_measurable(target: Any) -> str | None:
    """What is wrong with a target the fixture cannot measure (the message's tail), or None.

    Said before JAX's own errors would be: a Compiled (what the fixture returns) has no
    compile left to measure, and NumPy's functions cannot be traced by JAX.
    """
    import jax

    if isinstance(target, jax.stages.Compiled):
        return (
            " got a jax.stages.Compiled (what jax_compile returns): it is compiled already, so "
            "there is no compile left to measure. Call it to run it; to measure, pass the "
            "function and its arguments, jax_compile(fn, *args), or a jax.stages.Lowered"
        )
    if not callable(target):
        return f" got {type(target).__name__} {target!r:.80}, which is not callable; {_EXPECTED}"
    module = getattr(target, "__module__", None) or type(target).__module__ or ""
    if module == "numpy" or module.startswith("numpy."):
        name = _named(target)
        return (
            f" got NumPy's {name}, which JAX cannot trace; {_EXPECTED}. Here: "
            f"{name.replace('numpy.', 'jax.numpy.', 1)}, or a function of yours calling it"
        )
    return None


def transform_from_module(module_name: str | None) -> str:
    if not module_name:
        return "compile"
    return module_name[4:] if module_name.startswith("jit_") else module_name


class JaxCompile:
    """The `jax_compile` fixture's value: measure a compile, return the Compiled."""

    def __init__(
        self,
        monitor: CompileMonitor,
        environment: JaxEnvironment,
        context: MeasureContext,
        sink: Callable[[CompileRecord], None],
        stager: InstructionStager | None = None,
        entries: CacheEntries | None = None,
    ) -> None:
        self._monitor = monitor
        self._entries = entries or CacheEntries()  # the process's, kept across its tests
        self._stager = stager  # --compile-instructions: stages each row's module
        self._environment = environment
        self._context = context
        self._sink = sink
        self.records: list[CompileRecord] = []

    def __call__(
        self,
        target: Any,
        *args: Any,
        transform: str | None = None,
        fresh: bool = True,
        mixed_precision: bool | None = None,
        **kwargs: Any,
    ) -> Any:
        """Measure `target`: a `jax.stages.Lowered`, or a function with its arguments.

        A function is jitted (unless it already is), then traced, lowered and compiled
        as separate timed phases. With ``fresh=True`` (the default) JAX's in-process
        caches are cleared first, so the figure is what a new process pays.
        """
        import jax

        is_lowered = isinstance(target, jax.stages.Lowered)
        if is_lowered and (args or kwargs):
            raise TypeError(
                "jax_compile(lowered, ...) takes no call arguments: the Lowered already "
                "holds them; pass a function to have it traced and lowered"
            )
        if not is_lowered:
            refused = _not_measurable(target)
            if refused is not None:
                raise TypeError(f"jax_compile{refused}")
        if fresh:
            clear_in_process_caches()

        trace_s = lower_s = None
        if is_lowered:
            lowered = target
        else:
            try:
                jitted = target if hasattr(target, "lower") else jax.jit(target)
            except TypeError as error:  # e.g. a builtin or C function jax.jit cannot wrap
                raise TypeError(
                    f"jax_compile cannot jit {_named(target)} ({error}); {_EXPECTED}"
                ) from None
            start = time.perf_counter()
            try:
                if hasattr(jitted, "trace"):
                    start = time.perf_counter()
                    traced = jitted.trace(*args, **kwargs)
                    trace_s = time.perf_counter() - start
                    start = time.perf_counter()
                    lowered = traced.lower()
                    lower_s = time.perf_counter() - start
                else:  # older jax: tracing is inside lower()
                    start = time.perf_counter()
                    lowered = jitted.lower(*args, **kwargs)
                    lower_s = time.perf_counter() - start
            except Exception as error:  # a failed row with its seconds; the test fails
                failed_s = round(time.perf_counter() - start, 6)
                if trace_s is None and hasattr(jitted, "trace"):
                    trace_s = failed_s
                else:
                    lower_s = failed_s
                name = transform or getattr(target, "__name__", None) or _named(target)
                self._failed_before_compile(name, error, trace_s, lower_s, mixed_precision)
                raise

        trace_profile = trace_files = None
        if self._context.trace_profile and not is_lowered and hasattr(jitted, "trace"):
            from pytest_jaxcompile.backends.jax.traceprofile import profile_trace

            clear_in_process_caches()
            trace_profile, trace_files = profile_trace(
                lambda: jitted.trace(*args, **kwargs), self._context.project_root or Path.cwd()
            )
        module = ModuleText.of(lowered)  # printed and read once each, only when needed
        module_name = module.name
        name = (
            transform
            or (getattr(target, "__name__", None) if not is_lowered else None)
            or transform_from_module(module_name)
        )
        variant = variant_of(flags_in_force(), compiler_options_of(lowered))
        if any(record.transform == name and record.variant == variant for record in self.records):
            raise DuplicateTransformError(
                f"transform {name!r} was already measured in {self._context.cell}; "
                "give each jax_compile call its own transform= name"
            )
        if self._context.artifacts_dir is not None:
            stage_module(self._context.artifacts_dir, self._context.cell, name, module.text)

        environment = self._environment
        settings = CacheSettings.current()
        in_force = snapshot_settings()
        entries_before = self._entries.count(settings.dir)
        cpu_before = cpu_seconds()
        staging = capture_compile() if self._stager is not None else contextlib.nullcontext()
        start = time.perf_counter()
        try:
            with (
                self._monitor.capture(key_parts=True) as events,
                RssSampler() as rss,
                staging as staged,
            ):
                start = time.perf_counter()
                # A Lowered caches its executable on itself; passing (empty) compiler options
                # bypasses that without changing the cache key, so fresh means fresh.
                compiled = lowered.compile(compiler_options={}) if fresh else lowered.compile()
                compile_s = time.perf_counter() - start
        except Exception as error:  # the row keeps its seconds; the test fails with `error`
            failed_s = time.perf_counter() - start
            record = new_record(
                self._context,
                environment,
                Measured(
                    transform=name,
                    cache_state=CacheState.UNKNOWN.value,
                    compile_s=round(failed_s, 6),
                    cache=CacheDetails(
                        dir=settings.dir,
                        enabled=settings.enabled,
                        entries_before=entries_before,
                        entries_after=self._entries.count(settings.dir),
                        reason_detail="the compile raised: nothing to classify",
                    ),
                    host_state=host_state(
                        cpu_seconds() - cpu_before, cpu_count=environment.hardware.cpu_count
                    ),
                    mixed_precision=mixed_precision,
                    figures=dict(
                        trace_s=trace_s,
                        lower_s=lower_s,
                        module_name=module_name,
                        fingerprint=module.fingerprint,
                        variant=variant,
                        xla_flags=os.environ.get(XLA_FLAGS_ENV),
                        settings=in_force,
                        error=f"{type(error).__name__}: {error}".strip()[:2000],
                    ),
                ),
            )
            self.records.append(record)
            self._sink(record)
            raise
        memory = rss.stop()
        # The sampling thread's own CPU seconds are the plugin's, not the compile's.
        cpu_after = cpu_seconds() - memory.sampler_cpu_s
        entries_after = self._entries.count(settings.dir)
        samples = [(compile_s, cpu_after - cpu_before)]

        verdict = classify(
            CompileEvidence(
                cache_configured=settings.configured,
                fresh=fresh,
                backend_compiles=events.count(EVENT_BACKEND_COMPILE),
                cache_requests=events.count(EVENT_CACHE_REQUEST),
                cache_hits=events.count(EVENT_CACHE_HIT),
                cache_writes=events.count(EVENT_CACHE_WRITE),
                skip_reasons=events.skip_reasons(),
                entries_before=entries_before,
                entries_after=entries_after,
            )
        )
        repeat_error = None  # a repeat that raised: the row keeps the compiles that ran
        if fresh and self._context.repeat > 1 and verdict.cache_state is not CacheState.MEMORY:
            bypass = verdict.cache_state is CacheState.COLD and settings.configured
            repeated, repeat_error = repeat_compiles(
                self._monitor, lowered, self._context.repeat - 1, bypass
            )
            samples += repeated
        walls = [wall for wall, _ in samples]
        key_parts = events.key_parts()
        record = new_record(
            self._context,
            environment,
            Measured(
                transform=name,
                cache_state=verdict.cache_state.value,
                compile_s=min(walls),
                cache=CacheDetails(
                    dir=settings.dir,
                    enabled=settings.enabled,
                    entries_before=entries_before,
                    entries_after=entries_after,
                    persisted=verdict.persisted,
                    reason=verdict.reason,
                    reason_detail=verdict.detail,
                    notes=list(verdict.notes),
                ),
                host_state=host_state(
                    cpu_after - cpu_before, cpu_count=environment.hardware.cpu_count
                ),
                mixed_precision=mixed_precision,
                figures=dict(
                    compile_cpu_s=round(min(cpu for _, cpu in samples), 6),
                    compile_samples_s=walls if len(walls) > 1 else None,
                    compile_spread_s=(max(walls) - min(walls)) if len(walls) > 1 else None,
                    trace_s=trace_s,
                    lower_s=lower_s,
                    backend_compile_s=events.total(EVENT_BACKEND_COMPILE),
                    cache_retrieval_s=events.total(EVENT_CACHE_RETRIEVAL),
                    module_name=module_name,
                    **self._module_figures(module, key_parts),
                    **key_parts.record_fields(),
                    trace_profile=trace_profile or None,
                    trace_files=trace_files or None,
                    variant=variant,
                    xla_flags=os.environ.get(XLA_FLAGS_ENV),
                    settings=in_force,
                    **(compiled_figures(compiled) if self._context.compiled_figures else {}),
                    **memory.figures(SCOPE_COMPILE),
                    added_compile_error=repeat_error,
                ),
            ),
        )
        wanted = None if self._context.twin_wanted is None else self._context.twin_wanted(record)
        if wanted is not None:
            twin_compile(self._monitor, record, lowered, wanted, settings.configured)
        self.records.append(record)
        if self._stager is not None and staged is not None:
            self._stager.add(record, staged, module)
        self._sink(record)
        return compiled

    def _module_figures(self, module: ModuleText, key_parts: KeyParts) -> dict[str, Any]:
        """The row's fingerprint, op count and ops: its pinned module's where JAX's cache
        key hashed the same module as a pin's (nothing printed, hashed or scanned), else
        read from its text."""
        computation = key_parts.parts.get(COMPUTATION_PART)
        lookup = self._context.pinned_module
        pinned = None if lookup is None or computation is None else lookup(computation)
        if pinned is not None:
            return dict(
                fingerprint=pinned.fingerprint, op_count=pinned.op_count, op_histogram=pinned.ops
            )
        return dict(
            fingerprint=module.fingerprint, op_count=module.op_count, op_histogram=module.ops
        )

    def _failed_before_compile(
        self,
        name: str,
        error: Exception,
        trace_s: float | None,
        lower_s: float | None,
        mixed_precision: bool | None,
    ) -> None:
        """The row of a call whose tracing or lowering raised: no compile ran, so no
        compile time; the seconds it spent and the error are kept (a failed row)."""
        settings = CacheSettings.current()
        entries = self._entries.count(settings.dir)
        record = new_record(
            self._context,
            self._environment,
            Measured(
                transform=name,
                cache_state=CacheState.UNKNOWN.value,
                compile_s=None,
                cache=CacheDetails(
                    dir=settings.dir,
                    enabled=settings.enabled,
                    entries_before=entries,
                    entries_after=entries,
                    reason_detail="no compile ran: nothing to classify",
                ),
                host_state=host_state(None, cpu_count=self._environment.hardware.cpu_count),
                mixed_precision=mixed_precision,
                figures=dict(
                    trace_s=trace_s,
                    lower_s=lower_s,
                    missing_metrics=["compile_s"],
                    variant=variant_of(flags_in_force()),
                    xla_flags=os.environ.get(XLA_FLAGS_ENV),
                    settings=snapshot_settings(),
                    error=f"{type(error).__name__}: {error}".strip()[:2000],
                ),
            ),
        )
        self.records.append(record)
        self._sink(record)


# memory_analysis() attribute -> record field. jaxlib's CompiledMemoryStats has had these
# names since jax 0.4; host_* twins (memory on the host of an accelerator) are not kept.
_MEMORY_FIELDS = {
    "temp_size_in_bytes": "compiled_temp_bytes",
    "argument_size_in_bytes": "compiled_argument_bytes",
    "output_size_in_bytes": "compiled_output_bytes",
    "generated_code_size_in_bytes": "compiled_code_bytes",
}
# cost_analysis() key -> record field.
_COST_FIELDS = {"flops": "flops", "bytes accessed": "bytes_accessed"}


def compiled_figures(compiled: Any) -> dict[str, Any]:
    """What the backend says about a compiled executable without running it.

    ``memory_analysis()`` (bytes per kind of buffer) and ``cost_analysis()`` (flops, bytes
    accessed): a backend that does not implement one raises or returns None, and its
    fields stay None. ``cost_analysis()`` is a list of one dict per computation in jax
    0.4.30 and a dict later; the list's entries are summed. A negative figure (XLA's
    "unknown") is None.
    """
    figures: dict[str, Any] = dict.fromkeys([*_MEMORY_FIELDS.values(), *_COST_FIELDS.values()])
    try:
        memory = compiled.memory_analysis()
    except Exception:
        memory = None
    if memory is not None:
        for attribute, name in _MEMORY_FIELDS.items():
            value = getattr(memory, attribute, None)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                figures[name] = value
    try:
        cost = compiled.cost_analysis()
    except Exception:
        cost = None
    parts = cost if isinstance(cost, (list, tuple)) else [cost]
    tables = [part for part in parts if isinstance(part, dict)]
    for key, name in _COST_FIELDS.items():
        values = [table[key] for table in tables if key in table]
        if values and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
            for v in values
        ):
            figures[name] = float(sum(values))
    return figures


def warm_up_tracing() -> None:
    """Trace and lower a tiny function once per process before the first measurement.

    JAX loads and registers much of its tracing machinery on first use; without this, the
    first test measured in a process (which one depends on test order and xdist scheduling)
    would pay that in its `trace_s` and `lower_s`, and trace time, which is judged, would
    depend on order. Nothing is compiled.
    """
    import jax
    import numpy as np

    jax.jit(lambda x: x * 2 + 1).trace(np.float32(1)).lower()
