"""Decide a compile's cache_state from what JAX reported while it ran.

Pure logic: no JAX import. The evidence is gathered by `monitor.py` from JAX's
`jax.monitoring` events and its compiler loggers, on the measuring thread only.

Facts this relies on (jax 0.4.30 to 0.12, see jax/_src/compiler.py and compilation_cache.py):

- `/jax/compilation_cache/compile_requests_use_cache` fires whenever a cache key is
  computed, also with no cache dir set, so `none` comes from the configuration.
- `/jax/compilation_cache/cache_hits` fires on a hit; `/jax/compilation_cache/cache_misses`
  fires only when an entry is *written*. A miss that writes nothing fires neither.
- JAX writes nothing (and logs why) below `jax_persistent_cache_min_compile_time_secs`,
  for entries under the min entry size, on processes other than process 0, and, before
  jax 0.11, for modules with host callbacks (jax 0.11 and later write and reuse those).
  "Nothing written into a populated cache" is therefore not a hit.
- A compile served from JAX's in-process caches fires no event at all.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_jaxcompile.backends import Classification
from pytest_jaxcompile.records import REASON_UNEXPLAINED, CacheState

# Why JAX did not write a cache entry; codes are stable, details are for people
# (REASON_UNEXPLAINED, from records, where JAX gave none).
REASON_HOST_CALLBACKS = "host_callbacks"
REASON_MIN_COMPILE_TIME = "below_min_compile_time"
REASON_ENTRY_TOO_SMALL = "entry_too_small"
REASON_NOT_PROCESS_0 = "not_process_0"
REASON_CACHE_DISABLED = "cache_disabled"


@dataclass(frozen=True)
class SkipReason:
    """JAX's own explanation for not persisting a compiled module."""

    code: str
    detail: str


@dataclass(frozen=True)
class CompileEvidence:
    """Everything observed around one measured compile."""

    cache_configured: bool
    fresh: bool
    backend_compiles: int = 0
    cache_requests: int = 0
    cache_hits: int = 0
    cache_writes: int = 0
    skip_reasons: tuple[SkipReason, ...] = ()
    entries_before: int | None = None
    entries_after: int | None = None


def skip_reason_from_log(template: str, args: Sequence[object]) -> SkipReason | None:
    """Map one of JAX's "Not writing persistent cache entry" log records to a reason.

    Matches on the message template (stable across patch releases) and reads the
    figures from the record's arguments instead of parsing formatted text.
    """
    if "Not writing persistent cache entry" not in template:
        return None
    if "host callbacks" in template:
        return SkipReason(
            REASON_HOST_CALLBACKS,
            "the module uses host callbacks (jax.pure_callback, jax.debug.print, ...), "
            "which JAX before 0.11 never persists",
        )
    if "seconds to compile" in template and len(args) >= 3:
        threshold, took = _as_float(args[1]), _as_float(args[2])
        return SkipReason(
            REASON_MIN_COMPILE_TIME,
            f"compiled in {took:.3f} s, under jax_persistent_cache_min_compile_time_secs "
            f"= {threshold:g} s",
        )
    if "less than threshold" in template and len(args) >= 3:
        size, threshold = _as_float(args[1]), _as_float(args[2])
        return SkipReason(
            REASON_ENTRY_TOO_SMALL,
            f"entry of {size:.0f} bytes is under jax_persistent_cache_min_entry_size_bytes "
            f"= {threshold:.0f}",
        )
    if "process_id != 0" in template:
        return SkipReason(REASON_NOT_PROCESS_0, "only process 0 writes persistent cache entries")
    if "disabled/not initialized" in template:
        return SkipReason(
            REASON_CACHE_DISABLED, "the persistent cache is disabled or failed to initialize"
        )
    return SkipReason(REASON_UNEXPLAINED, template % tuple(args) if args else template)


def _as_float(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float("nan")


def classify(evidence: CompileEvidence) -> Classification:
    """Turn the evidence into a cache_state; `unknown` whenever it does not decide."""
    if evidence.backend_compiles == 0 and evidence.cache_requests == 0:
        if not evidence.fresh:
            return Classification(
                CacheState.MEMORY,
                detail="served from JAX's in-process cache: nothing was compiled",
            )
        return Classification(
            CacheState.UNKNOWN,
            reason="no_compile_events",
            detail="JAX reported no compile although its in-process caches were cleared",
        )
    if not evidence.cache_configured:
        return Classification(
            CacheState.NONE,
            persisted=False,
            reason="no_cache_configured",
            detail="no persistent compilation cache is configured (jax_compilation_cache_dir)",
        )
    if evidence.cache_requests == 0:
        return Classification(
            CacheState.UNKNOWN,
            reason="cache_not_consulted",
            detail=(
                "JAX compiled without consulting the persistent cache although it is "
                "configured now. JAX decides at the first compile of a process whether the "
                "cache is in use, so it was probably disabled then: configure the cache "
                "before any JAX computation (e.g. in pytest_configure)"
            ),
        )
    if evidence.cache_hits and evidence.cache_hits < evidence.cache_requests:
        return Classification(
            CacheState.UNKNOWN,
            reason="mixed_evidence",
            detail=(
                f"{evidence.cache_requests} modules compiled in one measurement with "
                f"{evidence.cache_hits} hit(s): hit and miss are mixed"
            ),
        )
    if evidence.cache_hits:
        return Classification(CacheState.WARM, detail="persistent-cache hit")
    notes = _entry_count_notes(evidence)
    if evidence.cache_writes:
        return Classification(
            CacheState.COLD,
            persisted=True,
            detail="compiled and written to the cache",
            notes=notes,
        )
    reason = evidence.skip_reasons[0] if evidence.skip_reasons else None
    if reason is None:
        return Classification(
            CacheState.COLD,
            persisted=False,
            reason=REASON_UNEXPLAINED,
            detail="compiled; JAX wrote no cache entry and logged no reason",
            notes=notes,
        )
    return Classification(
        CacheState.COLD,
        persisted=False,
        reason=reason.code,
        detail=reason.detail,
        notes=notes,
    )


def _entry_count_notes(evidence: CompileEvidence) -> tuple[str, ...]:
    """Cross-check JAX's events against the entry files; events win, oddities are noted."""
    before, after = evidence.entries_before, evidence.entries_after
    if before is None or after is None:
        return ()
    if evidence.cache_writes and after <= before:
        return (
            "JAX reported a cache write but the entry count did not grow "
            f"({before} -> {after}): another process may have written the same key, or JAX "
            "is writing to the cache dir it opened first (it keeps that one for the process)",
        )
    if not evidence.cache_writes and after > before:
        return (
            f"the entry count grew ({before} -> {after}) without a write by this compile; "
            "another process is writing to the same cache dir",
        )
    return ()
