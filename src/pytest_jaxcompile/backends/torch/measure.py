"""torch.compile rows: per compiled frame, from torch's own compilation metrics.

torch is imported only inside the functions that need it: a JAX-only install never
imports it. Verified with torch 2.13.0 (CPU build), whose
``torch._dynamo.utils.get_compilation_metrics()`` holds one ``CompilationMetrics`` per
frame compile with the phase times, the FX-graph and AOTAutograd cache hit/miss counts
and the recompile reason.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_jaxcompile.backends import (
    Classification,
    DuplicateTransformError,
    MeasureContext,
    Measured,
    Recompile,
    host_state,
    new_record,
    recompile_lines_by_function,
    recompiles,
)
from pytest_jaxcompile.backends.hardware import (
    Hardware,
    hardware_name,
    host_cpu_model,
    usable_cpu_count,
)
from pytest_jaxcompile.backends.memory import RssSampler
from pytest_jaxcompile.records import (
    SCOPE_FIRST_CALL,
    CacheDetails,
    CacheState,
    CallLedger,
    CompileRecord,
)

FRAMEWORK = "torch"


@dataclass(frozen=True)
class TorchEnvironment:
    hardware: Hardware
    torch_version: str
    framework: str = FRAMEWORK

    @property
    def versions(self) -> dict[str, str]:
        return {"torch_version": self.torch_version}

    @classmethod
    def detect(cls, hardware_override: str | None) -> TorchEnvironment:
        import torch

        if torch.cuda.is_available():
            platform_name, device_kind = "gpu", torch.cuda.get_device_name(0)
            device_count = torch.cuda.device_count()
        else:
            platform_name, device_kind, device_count = "cpu", "cpu", 1
        cpu_model, cpu_count = host_cpu_model(), usable_cpu_count()
        name = hardware_override or hardware_name(platform_name, device_kind, cpu_model, cpu_count)
        hardware = Hardware(
            name=name,
            platform=platform_name,
            device_kind=device_kind,
            device_count=device_count,
            cpu_model=cpu_model,
            cpu_count=cpu_count,
            overridden=hardware_override is not None,
        )
        return cls(hardware=hardware, torch_version=str(torch.__version__))


# FrameCompile's timed fields and the torch metric each is read from (seconds, except
# triton's microseconds). torch leaves a metric None when it did not measure it (inductor's
# spans on an FX-graph cache hit, all of them under a backend other than inductor): the
# field is then None, never 0.0, and the frame names the metric in `missing`.
TIMED_METRICS = {
    "compile_s": "entire_frame_compile_time_s",
    "backend_compile_s": "backend_compile_time_s",
    "inductor_s": "inductor_compile_time_s",
    "code_gen_s": "code_gen_time_s",
    "triton_s": "triton_compile_time_us",
}
OVERLAY_FIELDS = {
    "inductor_s": "inductor_s",
    "inductor_code_gen_s": "code_gen_s",
    "triton_s": "triton_s",
}


def metric(metrics: Any, name: str) -> Any:
    """One figure of a ``CompilationMetrics`` (or a plain dict of them); None if absent."""
    if isinstance(metrics, Mapping):
        return metrics.get(name)
    return getattr(metrics, name, None)


@dataclass(frozen=True)
class FrameCompile:
    """One dynamo frame compile, as torch measured it.

    torch measures nested spans: the whole frame compile, inside it the backend compile
    (AOTAutograd and inductor), inside that inductor, inside that its code generation.
    Only those are named; the frame's time outside the backend compile (dynamo's tracing,
    guards and the rest) is ``compile_other_s``. A span torch did not report is None, and
    its metric is named in ``missing``.
    """

    name: str
    location: str
    compile_s: float | None
    backend_compile_s: float | None
    inductor_s: float | None
    code_gen_s: float | None  # inside inductor: code load/build, where a JIT compile spends it
    triton_s: float | None
    fx_cache_hits: int
    fx_cache_misses: int
    autograd_cache_hits: int
    autograd_cache_misses: int
    graph_op_count: int | None
    recompile_reason: str | None
    fail_reason: str | None
    start_time_us: int
    missing: tuple[str, ...] = ()  # torch metrics of the timed fields that were None

    @classmethod
    def from_metrics(cls, metrics: Any) -> FrameCompile:
        """From a ``CompilationMetrics``, or a plain dict with the same names."""

        def count(name: str) -> int:
            return int(metric(metrics, name) or 0)

        timed: dict[str, float | None] = {}
        for field_name, name in TIMED_METRICS.items():
            value = metric(metrics, name)
            scale = 1e6 if name.endswith("_us") else 1.0
            timed[field_name] = None if value is None else float(value) / scale
        return cls(
            name=str(metric(metrics, "co_name") or "<frame>"),
            location=f"{metric(metrics, 'co_filename') or '?'}:"
            f"{metric(metrics, 'co_firstlineno') or '?'}",
            **timed,
            fx_cache_hits=count("inductor_fx_local_cache_hit_count")
            + count("inductor_fx_remote_cache_hit_count"),
            fx_cache_misses=count("inductor_fx_local_cache_miss_count")
            + count("inductor_fx_remote_cache_miss_count"),
            autograd_cache_hits=count("aotautograd_local_cache_hit_count")
            + count("aotautograd_remote_cache_hit_count"),
            autograd_cache_misses=count("aotautograd_local_cache_miss_count")
            + count("aotautograd_remote_cache_miss_count"),
            graph_op_count=metric(metrics, "graph_op_count"),
            recompile_reason=metric(metrics, "recompile_reason"),
            fail_reason=metric(metrics, "fail_reason"),
            start_time_us=count("start_time_us"),
            missing=tuple(
                name for field_name, name in TIMED_METRICS.items() if timed[field_name] is None
            ),
        )

    @property
    def compile_other_s(self) -> float | None:
        if self.compile_s is None or self.backend_compile_s is None:
            return None
        return max(self.compile_s - self.backend_compile_s, 0.0)

    @property
    def phases(self) -> dict[str, float]:
        """A partition of compile_s: the measured backend compile and the rest; empty when
        torch did not report both."""
        if self.backend_compile_s is None or self.compile_other_s is None:
            return {}
        return {
            "backend_compile_s": self.backend_compile_s,
            "compile_other_s": self.compile_other_s,
        }

    @property
    def overlays(self) -> dict[str, float]:
        """Measured spans inside the backend compile; never summed into it. A span torch
        did not report is left out (named in ``missing``), never 0."""
        spans = {name: getattr(self, field_name) for name, field_name in OVERLAY_FIELDS.items()}
        return {name: value for name, value in spans.items() if value is not None}

    @property
    def missing_note(self) -> str | None:
        """What the row says of the metrics torch did not report."""
        if not self.missing:
            return None
        return f"torch reported no {', '.join(self.missing)}: null, not 0"


def classify_frame(frame: FrameCompile, caches_enabled: bool) -> Classification:
    """cache_state of a torch frame compile from torch's cache counters."""
    if not caches_enabled:
        return Classification(
            CacheState.NONE,
            persisted=False,
            reason="no_cache_configured",
            detail="the inductor FX-graph and AOTAutograd caches are disabled",
        )
    # Inductor's code generation and build is where a cold compile spends its time, so
    # the FX-graph cache decides when it was consulted; AOTAutograd's cache otherwise.
    counts = (
        f"FX graph {frame.fx_cache_hits} hit(s) / {frame.fx_cache_misses} miss(es), "
        f"AOTAutograd {frame.autograd_cache_hits} / {frame.autograd_cache_misses}"
    )
    if frame.fx_cache_misses or frame.fx_cache_hits:
        if frame.fx_cache_misses:
            return Classification(CacheState.COLD, detail=f"inductor compiled: {counts}")
        return Classification(CacheState.WARM, detail=f"served from the caches: {counts}")
    if frame.autograd_cache_misses:
        return Classification(CacheState.COLD, detail=f"compiled: {counts}")
    if frame.autograd_cache_hits:
        return Classification(CacheState.WARM, detail=f"served from the caches: {counts}")
    return Classification(
        CacheState.UNKNOWN,
        reason="no_cache_lookups",
        detail="torch reported no FX-graph or AOTAutograd cache lookup for this frame "
        "(a backend other than inductor, or a graph with nothing to compile)",
    )


def caches_enabled() -> bool:
    from torch._functorch import config as functorch_config
    from torch._inductor import config as inductor_config

    return bool(inductor_config.fx_graph_cache) or bool(functorch_config.enable_autograd_cache)


def cache_dir() -> str | None:
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir as inductor_cache_dir

        return str(inductor_cache_dir())
    except (ImportError, AttributeError):
        return os.environ.get("TORCHINDUCTOR_CACHE_DIR")


def frames_from_metrics(metrics: Iterable[Any], start_time_us: int) -> list[FrameCompile]:
    """The frame compiles among torch's compilation metrics that started at or after a
    moment (its metrics deque holds earlier ones too)."""
    return [
        frame
        for frame in map(FrameCompile.from_metrics, metrics)
        if frame.start_time_us >= start_time_us
    ]


def frames_since(start_time_us: int) -> list[FrameCompile]:
    """Frame compiles torch recorded since a moment (its metrics deque is bounded)."""
    from torch._dynamo.utils import get_compilation_metrics

    return frames_from_metrics(get_compilation_metrics(), start_time_us)


def now_us() -> int:
    return int(time.time() * 1e6)


def frame_records(
    frames: list[FrameCompile],
    names: list[str],
    context: MeasureContext,
    environment: TorchEnvironment,
    source: str,
    ledger: dict[str, Any] | None = None,
    memory: dict[str, Any] | None = None,
) -> list[CompileRecord]:
    """A record per frame; `memory` (`RssPeak.figures`) is shared by every frame: torch
    measures no memory per frame compile."""
    enabled = caches_enabled()
    directory = cache_dir()
    records = []
    for frame, name in zip(frames, names, strict=True):
        verdict = classify_frame(frame, enabled)
        notes = [f"recompile: {frame.recompile_reason}"] if frame.recompile_reason else []
        if frame.fail_reason:
            notes.append(f"compile failed: {frame.fail_reason}")
        records.append(
            new_record(
                context,
                environment,
                Measured(
                    transform=name,
                    cache_state=verdict.cache_state.value,
                    compile_s=frame.compile_s,
                    cache=CacheDetails(
                        dir=directory,
                        enabled=enabled,
                        reason=verdict.reason,
                        reason_detail=verdict.detail,
                        notes=notes,
                    ),
                    host_state=host_state(),
                    source=source,
                    figures=dict(
                        backend_compile_s=frame.backend_compile_s,
                        phases=frame.phases or None,
                        overlays=frame.overlays,
                        ledger=ledger,
                        module_name=frame.location,
                        op_count=frame.graph_op_count,
                        missing_metrics=list(frame.missing) or None,
                        **(memory or {}),
                    ),
                ),
            )
        )
    return records


class TorchCompile:
    """The `torch_compile` fixture's value: compile, run the first call, record each frame."""

    def __init__(
        self,
        environment: TorchEnvironment,
        context: MeasureContext,
        sink: Callable[[CompileRecord], None],
    ) -> None:
        self._environment = environment
        self._context = context
        self._sink = sink
        self.records: list[CompileRecord] = []
        self.frame_starts: set[int] = set()  # frames measured here, which a census skips

    def __call__(
        self,
        model_or_fn: Any,
        *example_inputs: Any,
        transform: str | None = None,
        fresh: bool = True,
        mixed_precision: bool | None = None,
        **compile_kwargs: Any,
    ) -> Any:
        """``torch.compile(model_or_fn, **compile_kwargs)``, then its first call, measured.

        With ``fresh=True`` (the default) dynamo's in-process caches are reset first, so
        the figure is what a new process pays (the on-disk caches still apply).
        """
        import torch

        if fresh:
            torch._dynamo.reset()
        base = transform or getattr(model_or_fn, "__name__", None) or type(model_or_fn).__name__
        if any(record.transform.split("#")[0] == base for record in self.records):
            raise DuplicateTransformError(
                f"transform {base!r} was already measured in {self._context.cell}; "
                "give each torch_compile call its own transform= name"
            )
        environment = self._environment
        compiled: Any = torch.compile(model_or_fn, **compile_kwargs)
        started_us = now_us()
        sampler = RssSampler()
        with sampler:
            start = time.perf_counter()
            try:
                compiled(*example_inputs)
            finally:  # a call that raises keeps its seconds
                wall_s = time.perf_counter() - start
                memory = sampler.stop().figures(SCOPE_FIRST_CALL)
                frames = frames_since(started_us)
                self.frame_starts.update(frame.start_time_us for frame in frames)
                self._record(frames, base, wall_s, environment, mixed_precision, memory)
        return compiled

    def _record(
        self,
        frames: list[FrameCompile],
        base: str,
        wall_s: float,
        environment: TorchEnvironment,
        mixed_precision: bool | None,
        memory: dict[str, Any],
    ) -> None:
        partition = build_ledger(frames, self._context.cell, wall_s)
        ledger = None if partition is None else partition.to_dict()
        names = [base if index == 0 else f"{base}#{index + 1}" for index in range(len(frames))]
        context = self._context
        if mixed_precision is not None:
            context = dataclasses.replace(context, mixed_precision=mixed_precision)
        for record in frame_records(frames, names, context, environment, "fixture", ledger, memory):
            self.records.append(record)
            self._sink(record)


NO_RECOMPILE_REASON = "torch gave no recompile reason"


def frame_recompiles(frames: list[FrameCompile]) -> list[Recompile]:
    """Each compile of a frame after its first, with dynamo's recompile reason."""
    return recompiles(
        (
            (frame.name, f"recompile: {frame.recompile_reason}" if frame.recompile_reason else None)
            for frame in frames
        ),
        NO_RECOMPILE_REASON,
    )


def recompile_problems(max_compiles: int | None, frames: list[FrameCompile]) -> list[str]:
    """compile_budget(max_compiles=N) for torch: each frame, how often it compiled, and
    why each compile after its first (as the JAX message says it)."""
    if max_compiles is None or len(frames) <= max_compiles:
        return []
    lines = [
        f"{len(frames)} torch.compile frame compiles in this test, over its "
        f"compile_budget(max_compiles={max_compiles}):"
    ]
    why = recompile_lines_by_function(frame_recompiles(frames))
    first_at = {frame.name: frame.location for frame in reversed(frames)}
    for name, count in Counter(frame.name for frame in frames).most_common():
        lines.append(f"  {name} at {first_at[name]}: {count}x")
        lines.extend(why.get(name, []))
    return lines


def build_ledger(frames: list[FrameCompile], cell: str, wall_s: float | None) -> CallLedger | None:
    """The partition of a call in which torch compiled: wall = compile + residual.

    None when a frame's compile time was not reported: a partial sum would pass for the
    whole (the frame's row names the missing metric). Likewise the backend-compile time
    and the rest are None when a frame lacks them (a compile that failed before its
    backend ran), and an overlay that some frame lacks is left out.
    """
    compile_s = [frame.compile_s for frame in frames]
    if None in compile_s:
        return None
    names = [frame.name for frame in frames]
    return CallLedger.partition(
        cell,
        wall_s,
        sum(value for value in compile_s if value is not None),
        trace_s=None,
        lower_s=None,
        backend_compile_s=_total([frame.backend_compile_s for frame in frames]),
        compile_other_s=_total([frame.compile_other_s for frame in frames]),
        compiles=len(frames),
        persistent_cache_hits=sum(
            1
            for frame in frames
            if frame.fx_cache_hits + frame.autograd_cache_hits
            and not frame.fx_cache_misses + frame.autograd_cache_misses
        ),
        modules={name: names.count(name) for name in sorted(set(names))},
        overlays={
            name: sum(frame.overlays[name] for frame in frames)
            for name in OVERLAY_FIELDS
            if all(name in frame.overlays for frame in frames)
        },
        framework=FRAMEWORK,
        recompiles=[recompile.line() for recompile in frame_recompiles(frames)],
    )


def _total(values: list[float | None]) -> float | None:
    """The sum, or None when any value is unknown (never a partial sum)."""
    known = [value for value in values if value is not None]
    return sum(known) if len(known) == len(values) else None
