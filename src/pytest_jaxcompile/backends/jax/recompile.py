"""A measured module compiled again: the fixture's repeats and a row's twin.

`repeat_compiles` (``compile_repeat``) compiles the module again in the first compile's
cache state; `twin_compile` compiles it once more in another one (gate/twins.py): a cache
hit whose module changed since its pin, with the persistent cache bypassed; a pin update's
cold row, from the cache. Bypassing the cache salts its key with an XLA option at its
default value (`CACHE_BYPASS_OPTIONS`: the same compile work, a key nothing was written
under; JAX hashes the serialized compile options into every key, jax/_src/cache_key.py) and
keeps JAX from writing meanwhile (its minimum compile time raised to infinity), so nothing
is read from or left in the cache. Turning ``jax_enable_compilation_cache`` off would not
do: JAX decides once per process whether the cache is used (compilation_cache.is_cache_used).
These compiles are bracketed as repeats in the compile monitor: no test's compiles.

Measuring never breaks what it measures: a compile added here that raises (out of memory, a
compiler error) fails no test and loses no row. The row keeps what the fixture's own compile
measured, and the error is noted on it (`CompileRecord.added_compile_error`, `raised_text`).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from pytest_jaxcompile.backends.jax.monitor import EVENT_CACHE_HIT, CompileMonitor
from pytest_jaxcompile.backends.jax.residue import clear_in_process_caches
from pytest_jaxcompile.records import CompileRecord

# An XLA debug option at its default value: the same compile, a different cache key.
CACHE_BYPASS_OPTIONS = {"xla_embed_ir_in_executable": False}
ERROR_CHARS = 2000  # of an error kept on a row
# Each twin compile as its row's note names it, by the cache state wanted.
TWIN_COMPILES = {
    "cold": "its compile with the persistent cache bypassed (its twin)",
    "warm": "its compile again from the persistent cache (its warm twin)",
}


def raised_text(compile_named: str, seconds: float, error: Exception) -> str:
    """``its compile with the persistent cache bypassed (its twin) raised after 0.012 s:
    JaxRuntimeError: ...``: a compile added to measure a row that raised, as its row keeps
    it (`CompileRecord.added_compile_error`)."""
    text = f"{compile_named} raised after {seconds:.3f} s: {type(error).__name__}: {error}"
    return text.strip()[:ERROR_CHARS]


def repeat_compiles(
    monitor: CompileMonitor, lowered: Any, times: int, bypass_cache: bool
) -> tuple[list[tuple[float, float]], str | None]:
    """More fresh compiles of the same module, in the first one's cache state: (wall, CPU
    seconds) each, and the error of the one that raised (`raised_text`; None: none did),
    after which none more is tried. After a cold compile filled the persistent cache, a
    plain repeat would be a hit: a cold compile is repeated with the cache bypassed."""
    samples: list[tuple[float, float]] = []
    options = dict(CACHE_BYPASS_OPTIONS) if bypass_cache else {}
    with monitor.capture(repeat=True), _writes_suppressed(bypass_cache):
        for index in range(times):
            clear_in_process_caches()
            cpu_before = cpu_seconds()
            start = time.perf_counter()
            try:
                lowered.compile(compiler_options=options)
            except Exception as error:  # the row keeps the compiles that ran
                named = f"compile_repeat's compile {index + 2} of {times + 1}"
                return samples, raised_text(named, time.perf_counter() - start, error)
            samples.append((time.perf_counter() - start, cpu_seconds() - cpu_before))
    return samples, None


def twin_compile(
    monitor: CompileMonitor,
    record: CompileRecord,
    lowered: Any,
    wanted: str,
    cache_configured: bool,
) -> None:
    """Compile the row's module once more in the cache state `wanted` and keep it as the
    row's twin (its ``twin_*`` fields): "cold", with the persistent cache bypassed ("none"
    where no cache is configured); "warm", from the entry its cold compile just wrote. A
    "warm" twin that found no entry is noted on the row and left out; a twin compile that
    raised is left out, its error kept on the row (``added_compile_error``)."""
    uncached = wanted == "cold"
    options = dict(CACHE_BYPASS_OPTIONS) if uncached else {}
    with monitor.capture(repeat=True) as events, _writes_suppressed(uncached):
        clear_in_process_caches()
        cpu_before = cpu_seconds()
        start = time.perf_counter()
        try:
            lowered.compile(compiler_options=options)
        except Exception as error:  # the row stays as its own compile measured it
            raised = raised_text(TWIN_COMPILES[wanted], time.perf_counter() - start, error)
            earlier = record.added_compile_error
            record.added_compile_error = raised if earlier is None else f"{earlier}; {raised}"
            return
        wall_s = time.perf_counter() - start
        cpu_s = cpu_seconds() - cpu_before
    if not uncached and not events.count(EVENT_CACHE_HIT):
        record.cache.notes.append(
            "compiled again to pin it warm, but the persistent cache held no entry of it"
        )
        return
    record.twin_cache_state = "warm" if not uncached else "cold" if cache_configured else "none"
    record.twin_compile_s = round(wall_s, 6)
    record.twin_compile_cpu_s = round(cpu_s, 6)


@contextlib.contextmanager
def _writes_suppressed(active: bool) -> Iterator[None]:
    """Keep JAX from writing cache entries for the duration (its threshold, raised)."""
    if not active:
        yield
        return
    import jax

    name = "jax_persistent_cache_min_compile_time_secs"
    saved = getattr(jax.config, name)
    jax.config.update(name, float("inf"))  # type: ignore[no-untyped-call]
    try:
        yield
    finally:
        jax.config.update(name, saved)  # type: ignore[no-untyped-call]


def cpu_seconds() -> float:
    """CPU seconds of the whole process, every thread (XLA compiles on its own threads).

    ``time.process_time()`` reads the process CPU clock at its own resolution
    (``CLOCK_PROCESS_CPUTIME_ID``: nanoseconds on Linux), where psutil's ``cpu_times()``
    counts 10 ms ticks, too coarse for a warm compile of a few milliseconds.
    """
    return time.process_time()
