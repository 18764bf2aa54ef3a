"""The figures a verdict compared: each metric (its record and pin field, unit, limit) and
the measured and pinned values in it, with their ratio.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_jaxcompile._constants import (
    INSTRUCTIONS_PHASE,
    METRIC_CPU,
    METRIC_INSTRUCTIONS,
    METRIC_WALL,
    PAIRED_PHASE,
)
from pytest_jaxcompile._numbers import percent
from pytest_jaxcompile.gate.judging import RSS_PHASE
from pytest_jaxcompile.gate.limits import Thresholds, limits_for
from pytest_jaxcompile.gate.paired import PairedComparison
from pytest_jaxcompile.gate.status import Status, Verdict


@dataclass(frozen=True)
class Metric:
    """A figure a verdict can compare: the record's and the pin's field of that name."""

    name: str  # as reports name it: wall, cpu, trace, lower, ops, memory, flops, rss
    unit: str  # s, ops, B, flops, MiB
    field: str  # the CompileRecord and Pin field
    # The Thresholds (and CompileRecord, from the marker) field of its growth limit; None:
    # judged with the tolerance.
    growth_limit: str | None = None

    def format(self, value: float | None) -> str:
        """``0.598 s``, ``1,024 B``, ``12.5 MiB``; ``-`` for a figure not measured."""
        if value is None:
            return "-"
        if self.unit == "s":
            return f"{value:.3f} s"
        if self.unit == "MiB":
            return f"{value:.1f} MiB"
        return f"{value:,.0f} {self.unit}"

    @property
    def paired(self) -> bool:
        """A figure of --compile-paired: the medians of the pairs compiled at the end."""
        return self.name.startswith(PAIRED_PREFIX)

    @property
    def limit_name(self) -> str:
        """The limit with its gate: ``tolerance`` (the seconds gate's), ``paired
        tolerance``, or a growth ``limit``."""
        if self.growth_limit is not None:
            return "limit"
        return "paired tolerance" if self.paired else "tolerance"


PAIRED_PREFIX = "paired "  # a paired metric's name: "paired cpu", as reports name it
# What a paired verdict's ratio is: the pairs' (their Hodges-Lehmann estimate), not the
# ratio of the two medians shown beside it.
PAIRED_RATIO = "pairs' ratio"

# Every metric a verdict compares. A new one (a record and pin field the gate judges) is one
# more entry here: every output shows its figures, unit and ratio from this table.
METRICS: tuple[Metric, ...] = (
    Metric(METRIC_WALL, "s", "compile_s"),
    Metric(METRIC_CPU, "s", "compile_cpu_s"),
    Metric("trace", "s", "trace_s"),
    Metric("lower", "s", "lower_s"),
    Metric("ops", "ops", "op_count", "max_ops_growth"),
    Metric("memory", "B", "compiled_temp_bytes", "max_memory_growth"),
    Metric("flops", "flops", "flops", "max_flops_growth"),
    Metric("rss", "MiB", RSS_PHASE),
    Metric(METRIC_INSTRUCTIONS, "instructions", INSTRUCTIONS_PHASE),
    # --compile-paired: the row's module and its pin's, compiled side by side at the
    # session's end (medians of the pairs; gate/paired.py)
    Metric(f"{PAIRED_PREFIX}{METRIC_CPU}", "s", "paired_new_cpu_s"),
    Metric(f"{PAIRED_PREFIX}{METRIC_WALL}", "s", "paired_new_wall_s"),
)
_BY_NAME = {metric.name: metric for metric in METRICS}
_BY_FIELD = {metric.field: metric for metric in METRICS}


def compared_metric(verdict: Verdict) -> Metric:
    """The metric this verdict's status is about.

    A GREW on the compile is the op count; another phase (trace, lowering, a memory figure)
    is its own metric; else the metric the verdict was judged on, CPU seconds only where the
    row and its pin both have them.
    """
    if verdict.phase != "compile_s":
        return _BY_FIELD.get(verdict.phase, _BY_NAME[METRIC_WALL])
    if verdict.status is Status.GREW:
        return _BY_NAME["ops"]
    metric = _BY_NAME.get(verdict.metric, _BY_NAME[METRIC_WALL])
    if (
        verdict.pin is not None
        and metric.name != METRIC_WALL
        and (_value(verdict.judged, metric) is None or _value(verdict.pin, metric) is None)
    ):
        return _BY_NAME[METRIC_WALL]
    return metric


def _value(source: object, metric: Metric) -> float | None:
    value = getattr(source, metric.field, None)
    return None if value is None else float(value)


@dataclass(frozen=True)
class Figures:
    """What a verdict compared: the row's figure and the pin's, in one metric."""

    metric: Metric
    measured: float | None
    pinned: float | None  # None: no pin (or the pin lacks the figure)
    limit: float | None  # the tolerance or growth limit, a fraction (0.75: +75%)
    # A paired verdict's ratio: the pairs' ratio, which the verdict judged (their
    # Hodges-Lehmann estimate, not the ratio of the two medians)
    judged_ratio: float | None = None
    # The limit as the gate named it, where the metric's own name would not say it: a
    # paired verdict's floor (``paired floor 0.05 s: 17%``), larger than its tolerance
    limit_said: str | None = None

    @property
    def ratio(self) -> float | None:
        if self.judged_ratio is not None:
            return self.judged_ratio
        if self.measured is None or not self.pinned:
            return None
        return self.measured / self.pinned

    @property
    def unit(self) -> str:
        return self.metric.unit

    def value(self, figure: float | None) -> str:
        """A figure with its unit, and the metric named where the unit does not say it
        (a paired figure as its seconds: ``cpu``; `text` says they are the pairs')."""
        text = self.metric.format(figure)
        name = self.metric.name.removeprefix(PAIRED_PREFIX)
        named = name not in (METRIC_WALL, self.metric.unit)
        return f"{text} {name}" if named and figure is not None else text

    def ratio_text(self) -> str:
        """``2.74x``: the ratio of the figures beside it; a paired verdict's says what it
        is (the pairs' ratio, not the ratio of the two medians)."""
        if self.ratio is None:
            return ""
        if self.judged_ratio is not None:
            return f"{PAIRED_RATIO} {self.ratio:.2f}x"
        return f"{self.ratio:.2f}x"

    def limit_text(self) -> str:
        if self.limit_said is not None:
            return self.limit_said
        if self.limit is None:
            return ""
        sign = "" if self.metric.growth_limit is None else "+"
        return f"{self.metric.limit_name} {sign}{percent(self.limit)}"

    def text(self) -> str:
        """``0.598 s cpu, pin 0.218 s cpu (2.74x, tolerance 75%)``; paired: ``paired: 0.692 s
        cpu, pinned module 0.231 s cpu (pairs' ratio 3.01x, paired tolerance
        3%)``."""
        if self.pinned is None:
            return self.value(self.measured)
        text = f"{self.value(self.measured)}, pin {self.value(self.pinned)}"
        if self.metric.paired:  # both compiled now, in pairs: the pin's module, not its figure
            text = f"paired: {self.value(self.measured)}, pinned module {self.value(self.pinned)}"
        inside = ", ".join(part for part in (self.ratio_text(), self.limit_text()) if part)
        return f"{text} ({inside})" if inside else text


def figures(verdict: Verdict, thresholds: Thresholds) -> Figures:
    if verdict.phase == PAIRED_PHASE:
        comparison = PairedComparison.of(verdict.record, thresholds)
        if comparison is not None:  # both sides compiled now: the pin's module is "pin"
            return Figures(
                _BY_NAME[f"paired {comparison.metric}"],
                comparison.new_s,
                comparison.base_s,
                comparison.bound if comparison.by_floor else verdict.tolerance,
                judged_ratio=comparison.ratio,
                limit_said=comparison.floor_bound_text,
            )
    metric = compared_metric(verdict)
    limit = verdict.tolerance
    if metric.growth_limit is not None:  # resolved as the judge resolved it
        limits = limits_for(verdict.record, verdict.pin, thresholds)
        limit = getattr(limits, metric.growth_limit)
    return Figures(
        metric,
        _value(verdict.judged, metric),  # the row's own figure, or its twin's
        None if verdict.pin is None else _value(verdict.pin, metric),
        limit,
    )
