"""Census: every compile a test triggers, from JAX's events; the test's ledger.

A test's own compiles become census rows; they and the compiles it measures through the
``jax_compile`` fixture (`EventLog.counted_compiles`) count against ``max_compiles`` and make
its pinned compile count. JAX's eager dispatch of operations outside jit (``jnp.ones(5)``,
``x + 1``; see `eager`) is none of these: it is summed in the ledger, by JAX function
name, and counts against ``max_compiles`` only when the test asks (``count_eager``).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from typing import Any

from pytest_jaxcompile.backends import (
    MeasureContext,
    Measured,
    host_state,
    new_record,
    recompile_lines_by_function,
    signed_names,
)
from pytest_jaxcompile.backends.jax.backendstart import XLA_FLAGS_ENV
from pytest_jaxcompile.backends.jax.classify import CompileEvidence, classify
from pytest_jaxcompile.backends.jax.explain import recompile_explanations
from pytest_jaxcompile.backends.jax.guard import snapshot_settings
from pytest_jaxcompile.backends.jax.keyparts import COMPUTATION_PART, flags_in_force, variant_of
from pytest_jaxcompile.backends.jax.measure import CacheSettings, JaxEnvironment
from pytest_jaxcompile.backends.jax.monitor import (
    EVENT_BACKEND_COMPILE,
    EVENT_CACHE_RETRIEVAL,
    EVENT_CACHE_SAVED,
    EVENT_LOWER,
    EVENT_TRACE,
    EventLog,
    ModuleCompile,
)
from pytest_jaxcompile.records import CENSUS_SOURCE, CacheDetails, CallLedger, CompileRecord


def module_fingerprint(module: ModuleCompile) -> str | None:
    """The module's own fingerprint: the hash JAX gives its computation part of the cache key
    (``computation:``), so that a changed XLA flag or compile option is not a changed module.
    Where no part was logged, the whole key (``cachekey:``, covering module, flags and
    options); None where JAX computed no key (the persistent cache off)."""
    computation = module.key.parts.get(COMPUTATION_PART)
    if computation:
        return f"computation:{computation}"
    return f"cachekey:{module.cache_key}" if module.cache_key else None


def census_records(
    log: EventLog,
    context: MeasureContext,
    environment: JaxEnvironment,
    cache: CacheSettings,
    memory: dict[str, Any] | None = None,
) -> list[CompileRecord]:
    """One record per module the test compiled itself (see `EventLog.own_compiles`).

    The settings recorded are those in force when the test's call ended. `memory` is the
    test call's peak RSS (`RssPeak.figures`), shared by every row of the test. JAX's
    listeners never see the Compiled object, so its memory and cost analyses are absent.
    """
    in_force = snapshot_settings()
    xla_flags = os.environ.get(XLA_FLAGS_ENV)
    # Census rows name the XLA flags only: the compile options of a compile are not seen.
    variant = variant_of(flags_in_force())
    # Load when the call ended, so the load gate applies to census rows as well.
    host = host_state(cpu_count=environment.hardware.cpu_count)
    compiles = log.own_compiles()
    names = signed_names([(module.fun_name, module.signature) for module in compiles])
    records = []
    for module, name in zip(compiles, names, strict=True):
        verdict = classify(
            CompileEvidence(
                cache_configured=cache.configured,
                fresh=True,
                backend_compiles=1,
                cache_requests=module.cache_requests,
                cache_hits=module.cache_hits,
                cache_writes=module.cache_writes,
                skip_reasons=tuple(module.skip_reasons),
            )
        )
        records.append(
            new_record(
                context,
                environment,
                Measured(
                    transform=name,
                    cache_state=verdict.cache_state.value,
                    compile_s=module.backend_compile_s,
                    cache=CacheDetails(
                        dir=cache.dir,
                        enabled=cache.enabled,
                        persisted=verdict.persisted,
                        reason=verdict.reason,
                        reason_detail=verdict.detail,
                        notes=list(verdict.notes),
                    ),
                    host_state=host,
                    source=CENSUS_SOURCE,
                    figures=dict(
                        trace_s=module.trace_s or None,
                        lower_s=module.lower_s or None,
                        backend_compile_s=module.backend_compile_s,
                        compile_cpu_s=(
                            None
                            if module.backend_compile_cpu_s is None
                            else round(module.backend_compile_cpu_s, 6)
                        ),
                        cache_retrieval_s=module.cache_retrieval_s,
                        module_name=module.module_name,
                        fingerprint=module_fingerprint(module),
                        **module.key.record_fields(),
                        xla_flags=xla_flags,
                        settings=in_force,
                        variant=variant,
                        **(memory or {}),
                    ),
                ),
            )
        )
    return records


def build_ledger(
    log: EventLog, cell: str, wall_s: float | None, caches_cleared_because: str | None = None
) -> CallLedger:
    """Partition the call's wall time: compile (union of JAX's phase spans) + residual.

    Time counts every compile; the compile count every compile the test triggered, its
    jax_compile measurements included (`EventLog.counted_compiles`: not the fixture's
    repeats, whose number is compile_repeat's, nor JAX's eager dispatch, which is counted
    beside it). Recompiles are explained of the test's own compiles: a measurement is
    fresh by design.
    """
    compiles = log.counted_compiles()
    eager = log.eager_compiles()
    if log.spans:
        trace_s = log.covered_s(EVENT_TRACE)
        lower_s = log.covered_s(EVENT_LOWER)
        backend_s = log.covered_s(EVENT_BACKEND_COMPILE)
        compile_s = log.covered_s(EVENT_TRACE, EVENT_LOWER, EVENT_BACKEND_COMPILE)
    else:  # a jax without time-span events: durations, which may double-count nesting
        trace_s = log.total(EVENT_TRACE) or 0.0
        lower_s = log.total(EVENT_LOWER) or 0.0
        backend_s = log.total(EVENT_BACKEND_COMPILE) or 0.0
        compile_s = trace_s + lower_s + backend_s
    if wall_s is not None and wall_s > 0:
        compile_s = min(compile_s, wall_s)  # spans and wall come from different clocks
    overlays = {}
    retrieval = log.total(EVENT_CACHE_RETRIEVAL)
    if retrieval:
        overlays["cache_retrieval_s"] = retrieval  # lies inside backend_compile_s
    saved = log.total(EVENT_CACHE_SAVED)
    if saved is not None and saved > 0:
        # JAX's figure, a lower bound: its cache entries keep the compile time in whole
        # seconds, so a module compiled in under one "saved" minus its retrieval time.
        overlays["cache_saved_s"] = saved
    overlap = trace_s + lower_s + backend_s - compile_s
    if overlap > 1e-6:
        overlays["phase_overlap_s"] = overlap
    return CallLedger.partition(
        cell,
        wall_s,
        compile_s,
        trace_s=trace_s,
        lower_s=lower_s,
        backend_compile_s=backend_s,
        compiles=len(compiles),
        persistent_cache_hits=sum(1 for module in compiles if module.cache_hits),
        modules=dict(sorted(Counter(module.fun_name for module in compiles).items())),
        overlays=overlays,
        eager_compiles=len(eager),
        eager_compile_s=sum(module.seconds for module in eager),
        eager_modules=dict(sorted(Counter(module.fun_name for module in eager).items())),
        recompiles=(
            [r.line() for r in recompile_explanations(log.own_compiles())]
            if log.explained
            else None
        ),
        caches_cleared_because=caches_cleared_because,
    )


def recompile_problems(
    max_compiles: int | None,
    compiles: Sequence[ModuleCompile],
    eager: Sequence[ModuleCompile] = (),
    count_eager: bool = False,
    *,
    explained: bool = False,
) -> list[str]:
    """The compile_budget(max_compiles=N) failure: every module and how often it compiled,
    and, when JAX `explained` its tracing-cache misses, why each compile after the first.

    `compiles` are every compile the test triggered (`EventLog.counted_compiles`: its own
    and its jax_compile measurements, which are named); `eager` (JAX's eager dispatch)
    count only with `count_eager`, and are named apart either way.
    """
    counted = [*compiles, *eager] if count_eager else list(compiles)
    if max_compiles is None or len(counted) <= max_compiles:
        return []
    counts = Counter(module.fun_name for module in compiles)
    hits = Counter(module.fun_name for module in compiles if module.cache_hits)
    measured = Counter(module.fun_name for module in compiles if module.nested)
    what = "compiles, eager dispatch included," if count_eager else "compiles"
    lines = [
        f"{len(counted)} backend {what} in this test, over its "
        f"compile_budget(max_compiles={max_compiles}) (in-memory cache hits do not count):"
    ]
    own = [module for module in compiles if not module.nested]
    why = recompile_lines_by_function(recompile_explanations(own)) if explained else {}
    for name, count in counts.most_common():
        detail = f"{count - hits[name]} compiled by XLA, {hits[name]} from the persistent cache"
        if measured[name]:
            detail += f"; {measured[name]} measured by the jax_compile fixture"
        lines.append(f"  {name}: {count}x ({detail})")
        lines.extend(why.get(name, []))
    if eager:
        names = Counter(module.fun_name for module in eager)
        listed = ", ".join(
            f"{name}" + (f" {count}x" if count > 1 else "") for name, count in sorted(names.items())
        )
        counted_or_not = (
            "counted"
            if count_eager
            else ("not counted, compile_budget(count_eager=True) counts them")
        )
        lines.append(
            f"  eager dispatch (operations outside jit): {len(eager)}x ({counted_or_not}): {listed}"
        )
    if any(count > 1 for count in Counter(module.fun_name for module in own).values()) and not why:
        lines.append(
            "A function compiled more than once retraced: look for a fresh closure or "
            "jax.jit(...) per call, or changing shapes, dtypes or static arguments."
        )
    return lines
