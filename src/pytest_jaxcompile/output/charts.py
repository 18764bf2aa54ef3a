"""The dashboard's trend charts: compile seconds over time per cell and transform, as
inline SVG.

Trend series are kept in time buckets whose width doubles whenever a series would exceed
`MAX_POINTS` buckets, so memory is bounded per chart, not per record; everything is sorted
and formatted with fixed precision, so an unchanged corpus gives the same bytes.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

from pytest_jaxcompile.corpus.store import NO_TIME, Row
from pytest_jaxcompile.corpus.trend import Trend, TrendReport, rise_text
from pytest_jaxcompile.gate.pins import Pin, PinStore
from pytest_jaxcompile.output.attention import ChartId
from pytest_jaxcompile.output.changes import Change
from pytest_jaxcompile.records import ComparabilityKey, transform_label

TREND_STATES = ("cold", "warm", "none")  # judged states; unknown and memory are not charted
MAX_POINTS = 120
COLORS = {"cold": "#1f6fb4", "warm": "#e8710a", "none": "#2a9d3a"}


@dataclass(slots=True)
class Bucket:
    count: int
    time_sum: float
    value_sum: float
    low: float
    high: float

    def merge(self, other: Bucket) -> None:
        self.count += other.count
        self.time_sum += other.time_sum
        self.value_sum += other.value_sum
        self.low = min(self.low, other.low)
        self.high = max(self.high, other.high)


@dataclass
class Series:
    """One cache state's points of one chart, in at most MAX_POINTS time buckets."""

    width: float = 1.0  # seconds per bucket; doubles when there are too many buckets
    buckets: dict[int, Bucket] = field(default_factory=dict)

    def add(self, time: float, value: float) -> None:
        index = math.floor(time / self.width)
        bucket = self.buckets.get(index)
        if bucket is None:
            self.buckets[index] = Bucket(1, time, value, value, value)
        else:
            bucket.merge(Bucket(1, time, value, value, value))
        while len(self.buckets) > MAX_POINTS:
            self.width *= 2
            merged: dict[int, Bucket] = {}
            for old_index in sorted(self.buckets):
                bucket = self.buckets[old_index]
                target = merged.get(old_index // 2)
                if target is None:
                    merged[old_index // 2] = bucket
                else:
                    target.merge(bucket)
            self.buckets = merged

    def points(self) -> list[Bucket]:
        return [self.buckets[index] for index in sorted(self.buckets)]


@dataclass
class Chart:
    series: dict[str, Series] = field(default_factory=dict)
    versions: dict[str, list[float]] = field(default_factory=dict)  # version -> first, last


class Trends:
    """Collects the trend charts while the corpus streams by."""

    def __init__(self) -> None:
        self.charts: dict[ChartId, Chart] = {}
        self.untimed = 0  # rows without a timestamp cannot be placed on a time axis

    def add(self, row: Row) -> None:
        state = row.key.cache_state
        if state not in TREND_STATES:
            return
        if row.time == NO_TIME:
            self.untimed += 1
            return
        if row.compile_s is None:
            return  # no compile time to chart (the framework reported none)
        key = row.key
        version = key.framework_version
        chart_id = (
            key.framework,
            key.hardware,
            key.mixed_precision,
            row.cell,
            row.transform,
            row.variant,
        )
        chart = self.charts.get(chart_id)
        if chart is None:
            chart = self.charts[chart_id] = Chart()
        series = chart.series.get(state)
        if series is None:
            series = chart.series[state] = Series()
        series.add(row.time, row.compile_s)
        span = chart.versions.get(version)
        if span is None:
            chart.versions[version] = [row.time, row.time]
        else:
            span[0] = min(span[0], row.time)
            span[1] = max(span[1], row.time)


# --------------------------------------------------------------------------- SVG

WIDTH, HEIGHT = 780, 260
LEFT, RIGHT, TOP, BOTTOM = 64, 200, 24, 36
LABEL_GAP = 12  # px between pin labels


def _utc(time: float) -> str:
    return datetime.fromtimestamp(time, timezone.utc).strftime("%Y-%m-%d %H:%M")


def _f(value: float) -> str:
    return f"{value:.1f}"


def chart_svg(
    chart_id: ChartId, chart: Chart, store: PinStore, changes: Sequence[Change] = ()
) -> str:
    """compile_s over time: a series per cache state, pins as lines, jax bumps marked, and
    each row of `changes` (DRIFT, MISS, GREW: the page's "What changed") ringed and named."""
    framework, hardware, mixed, cell, transform, variant = chart_id
    versions = sorted(chart.versions.items(), key=lambda item: (item[1][0], item[0]))
    t_min = min(span[0] for _, span in versions)
    t_max = max(span[1] for _, span in versions)
    if t_max - t_min < 1:
        t_min, t_max = t_min - 1800, t_max + 1800

    pins: list[tuple[str, str, float, float, Pin]] = []  # state, version, t0, t1, pin
    for position, (version, span) in enumerate(versions):
        until = versions[position + 1][1][0] if position + 1 < len(versions) else t_max
        for state in TREND_STATES:
            if state not in chart.series:
                continue
            key = ComparabilityKey(hardware, version, mixed, state, framework)
            pin = store.get(key, cell, transform, variant)
            if pin is not None:
                pins.append((state, version, span[0], until, pin))

    y_top = max(
        [bucket.high for series in chart.series.values() for bucket in series.points()]
        + [pin.compile_s for *_, pin in pins]
    )
    y_max = y_top * 1.1 if y_top > 0 else 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(time: float) -> float:
        return LEFT + (time - t_min) / (t_max - t_min) * plot_w

    def y(value: float) -> float:
        return TOP + (1 - value / y_max) * plot_h

    title = f"{cell} [{transform}]"
    parts = [
        f'<svg class="chart" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{html.escape(title)}">',
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" class="plot"/>',
    ]
    for fraction in (0.0, 0.5, 1.0):
        value = y_max * fraction
        parts.append(
            f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{_f(y(value))}" y2="{_f(y(value))}" '
            'class="grid"/>'
            f'<text x="{LEFT - 6}" y="{_f(y(value) + 4)}" class="axis" text-anchor="end">'
            f"{value:.3g} s</text>"
        )
    for time, anchor in ((t_min, "start"), (t_max, "end")):
        parts.append(
            f'<text x="{_f(x(time))}" y="{HEIGHT - 12}" class="axis" text-anchor="{anchor}">'
            f"{_utc(time)} UTC</text>"
        )
    for version, span in versions[1:]:
        at = _f(x(span[0]))
        parts.append(
            f'<g class="bump"><title>jax {html.escape(version)} first measured '
            f"{_utc(span[0])} UTC: a version bump recompiles once by design</title>"
            f'<line x1="{at}" x2="{at}" y1="{TOP}" y2="{TOP + plot_h}"/>'
            f'<text x="{at}" y="{TOP - 6}" text-anchor="middle">'
            f"jax {html.escape(version)}</text></g>"
        )
    label_at = float("-inf")
    for state, version, start, until, pin in sorted(pins, key=lambda p: -p[4].compile_s):
        level = y(pin.compile_s)
        label_at = max(level + 4, label_at + LABEL_GAP)  # top to bottom, never overlapping
        parts.append(
            f'<g class="pin" stroke="{COLORS[state]}"><title>pin {state} '
            f"{pin.compile_s:.3f} s (jax {html.escape(version)})</title>"
            f'<line x1="{_f(x(start))}" x2="{_f(x(until))}" y1="{_f(level)}" '
            f'y2="{_f(level)}"/></g>'
            f'<text x="{LEFT + plot_w + 6}" y="{_f(label_at)}" class="pinlabel" '
            f'fill="{COLORS[state]}">pin {state} {pin.compile_s:.3f} s '
            f"(jax {html.escape(version)})</text>"
        )
    for state in TREND_STATES:
        series = chart.series.get(state)
        if series is None:
            continue
        color = COLORS[state]
        points = series.points()
        coords = [
            (x(bucket.time_sum / bucket.count), y(bucket.value_sum / bucket.count))
            for bucket in points
        ]
        if len(coords) > 1:
            parts.append(
                f'<polyline class="series" stroke="{color}" points="'
                + " ".join(f"{_f(px)},{_f(py)}" for px, py in coords)
                + '"/>'
            )
        for bucket, (px, py) in zip(points, coords, strict=True):
            mean = bucket.value_sum / bucket.count
            when = _utc(bucket.time_sum / bucket.count)
            tip = f"{state} {mean:.3f} s, {when} UTC"
            if bucket.count > 1:
                tip += f" (mean of {bucket.count}: {bucket.low:.3f} to {bucket.high:.3f} s)"
                parts.append(
                    f'<line class="range" stroke="{color}" x1="{_f(px)}" x2="{_f(px)}" '
                    f'y1="{_f(y(bucket.low))}" y2="{_f(y(bucket.high))}"/>'
                )
            parts.append(
                f'<circle cx="{_f(px)}" cy="{_f(py)}" r="3" fill="{color}">'
                f"<title>{html.escape(tip)}</title></circle>"
            )
    for change in changes:  # on top of the series: a DRIFT is not one dot among many
        px, py = x(change.time), y(change.compile_s)
        tip = f"{change.status.value} {_utc(change.time)} UTC: {change.figures}"
        parts.append(
            f'<g class="change"><title>{html.escape(tip)}</title>'
            f'<circle cx="{_f(px)}" cy="{_f(py)}" r="7"/>'
            f'<text x="{_f(px)}" y="{_f(py - 10)}" text-anchor="middle">'
            f"{change.status.value}</text></g>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _legend(chart: Chart, changed: bool = False) -> str:
    spans = [
        f'<span style="color: {COLORS[state]}">&#9679; {state}</span>'
        for state in TREND_STATES
        if state in chart.series
    ]
    spans.append("<span>dashed: pins of that cache state</span>")
    if len(chart.versions) > 1:
        spans.append("<span>dotted: jax version bump</span>")
    if changed:
        spans.append('<span class="alert">ringed: a row in "What changed"</span>')
    return '<p class="legend">' + "".join(spans) + "</p>"


def chart_ids(trends: Trends) -> dict[ChartId, str]:
    """An anchor per chart, in chart order: ``chart-1``, ``chart-2``, ..."""
    return {chart_id: f"chart-{number}" for number, chart_id in enumerate(sorted(trends.charts), 1)}


def section_versions(trends: Trends) -> dict[tuple[str, str, bool], list[str]]:
    """The framework versions charted in each trend section (framework, hardware,
    precision), in the order they were first measured: its heading names them."""
    first: dict[tuple[str, str, bool], dict[str, float]] = {}
    for (framework, hardware, mixed, *_), chart in trends.charts.items():
        seen = first.setdefault((framework, hardware, mixed), {})
        for version, (start, _) in chart.versions.items():
            seen[version] = min(start, seen.get(version, start))
    return {
        section: sorted(seen, key=lambda version: (seen[version], version))
        for section, seen in first.items()
    }


def trends_html(
    trends: Trends,
    store: PinStore,
    anchors: dict[ChartId, str],
    trend_report: TrendReport | None,
    changes: Mapping[ChartId, list[Change]] | None = None,
) -> list[str]:
    """The trends section: a chart per cell, transform and variant, per section of
    hardware, framework versions and precision."""
    out: list[str] = []
    out.append('<h2 id="trends">Trends</h2>')
    out.append(
        "<p>compile_s over time per cell and transform: one series per cache state (cold, "
        "warm, none; unknown and memory rows are not charted), the pins as dashed lines, "
        "a jax version bump as a dotted line where the new version was first measured. "
        f"Dense series are shown as means of time buckets (at most {MAX_POINTS} per series) "
        "with their range.</p>"
    )
    if trends.untimed:
        out.append(f"<p>{trends.untimed} row(s) without a timestamp are not charted.</p>")
    if not trends.charts:
        out.append("<p>No timestamped cold, warm or none rows to chart.</p>")
    rising: dict[ChartId, list[Trend]] = {}
    for trend in [] if trend_report is None else trend_report.rising:
        key = trend.key
        chart_of = (
            key.framework,
            key.hardware,
            key.mixed_precision,
            trend.cell,
            trend.transform,
            trend.variant,
        )
        rising.setdefault(chart_of, []).append(trend)
    section: tuple[str, str, bool] | None = None
    versions = section_versions(trends)
    for chart_id in sorted(trends.charts):
        framework, hardware, mixed, cell, transform, variant = chart_id
        if section != (framework, hardware, mixed):
            if section is not None:
                out.append("</section>")
            section = (framework, hardware, mixed)
            precision = "mixed precision" if mixed else "full precision"
            out.append('<section class="charts">')
            named = f"{framework} {', '.join(versions[section])}"
            out.append(f"<h3>{html.escape(hardware)} | {html.escape(named)} | {precision}</h3>")
        chart = trends.charts[chart_id]
        out.append(
            f'<figure id="{anchors[chart_id]}" data-test="{html.escape(cell)}">'
            f"<figcaption><code>{html.escape(cell)}</code> "
            f"[{html.escape(transform_label(transform, variant))}]</figcaption>"
        )
        for trend in rising.get(chart_id, []):
            out.append(
                f'<p class="alert">{html.escape(trend.key.cache_state)} rows under '
                f"{html.escape(trend.key.version_label)} rising: "
                f"{html.escape(rise_text(trend))}</p>"
            )
        marked = (changes or {}).get(chart_id, [])
        out.append(chart_svg(chart_id, chart, store, marked))
        out.append(_legend(chart, bool(marked)) + "</figure>")
    if section is not None:
        out.append("</section>")
    return out
