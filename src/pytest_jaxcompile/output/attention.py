"""The parts of the HTML dashboard around its tables: what needs attention, cold-to-warm
speed-ups, the stale pins, and the filter box.

Pure functions of the table rows (see `dashboard.table_rows`) and the trends, rendered with
every list sorted and fixed number formats, so the page stays byte-for-byte deterministic.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from pytest_jaxcompile._constants import METRIC_WALL
from pytest_jaxcompile.corpus.trend import (
    Trend,
    TrendReport,
    settings_sentence,
    when_text,
)
from pytest_jaxcompile.gate.status import Status
from pytest_jaxcompile.records import ComparabilityKey, transform_label

NOT_MEASURED = "not measured"

# framework, hardware, mixed_precision, cell, transform, settings variant ("" the default)
ChartId = tuple[str, str, bool, str, str, str]


class RowLike(Protocol):
    """The fields of `dashboard.TableRow` used here."""

    @property
    def key(self) -> ComparabilityKey: ...
    @property
    def cell(self) -> str: ...
    @property
    def transform(self) -> str: ...
    @property
    def variant(self) -> str: ...
    @property
    def compile_s(self) -> float | None: ...
    @property
    def pin_s(self) -> float | None: ...
    @property
    def ratio(self) -> float | None: ...
    @property
    def label(self) -> str: ...
    @property
    def timestamp(self) -> str: ...
    @property
    def status(self) -> Status | None: ...
    @property
    def fails(self) -> bool: ...
    @property
    def metric(self) -> str: ...


def seconds_cell(value: float | None) -> str:
    """A table cell of seconds, or a dash where there are none."""
    return "—" if value is None else f"{value:.3f} s"


def compared_seconds(value: float | None, metric: str) -> str:
    """A row's compile_s or pin cell: the seconds its verdict compared, named where they are
    not wall seconds of the compile (``0.598 s cpu`` for a loaded row judged on CPU seconds,
    ``0.412 s trace`` for a tracing drift), so one column never mixes kinds unlabelled."""
    if value is None or metric == METRIC_WALL:
        return seconds_cell(value)
    return f"{seconds_cell(value)} {metric}"


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def chart_link(
    chart_ids: Mapping[ChartId, str],
    key: ComparabilityKey,
    cell: str,
    transform: str,
    variant: str = "",
) -> str:
    """`` (chart)`` linking to the row's chart, or nothing when it has none."""
    anchor = chart_ids.get(
        (key.framework, key.hardware, key.mixed_precision, cell, transform, variant)
    )
    return f' <a href="#{anchor}">chart</a>' if anchor else ""


# --------------------------------------------------------------------------- coverage


@dataclass(frozen=True)
class Coverage:
    key: ComparabilityKey
    rows: int  # rows measured (latest per cell and transform)
    pins: int
    pins_measured: int
    unpinned: int
    failing: int

    @property
    def pins_missing(self) -> int:
        return self.pins - self.pins_measured


Row = TypeVar("Row", bound=RowLike)


def grouped(rows: Sequence[Row]) -> list[tuple[ComparabilityKey, list[Row]]]:
    """The dashboard's rows (the view's rows and the pins no row measured) by key, keys
    sorted, rows in the order given: the dashboard's one grouping."""
    groups: dict[ComparabilityKey, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.key, []).append(row)
    return sorted(groups.items())


def coverage(rows: Sequence[RowLike]) -> list[Coverage]:
    return [
        Coverage(
            key=key,
            rows=sum(1 for row in group if row.compile_s is not None),
            pins=sum(1 for row in group if row.pin_s is not None),
            pins_measured=sum(
                1 for row in group if row.pin_s is not None and row.compile_s is not None
            ),
            unpinned=sum(1 for row in group if row.status is Status.UNPINNED),
            failing=sum(1 for row in group if row.fails),
        )
        for key, group in grouped(rows)
    ]


# --------------------------------------------------------------------------- speed-up


@dataclass(frozen=True)
class Speedup:
    """Cold over warm seconds of one cell and transform under one key (bar cache state)."""

    cell: str
    transform: str
    cold_s: float | None
    warm_s: float | None
    source: str  # "pins", "latest rows" or "" (not both states known)

    @property
    def ratio(self) -> float | None:
        if self.cold_s is None or not self.warm_s:
            return None
        return self.cold_s / self.warm_s


def speedups(rows: Sequence[RowLike]) -> list[tuple[ComparabilityKey, list[Speedup]]]:
    """Per key without its cache state: cold pin / warm pin where both are pinned, else the
    latest cold row / the latest warm row."""
    groups: dict[ComparabilityKey, dict[tuple[str, str], dict[str, RowLike]]] = {}
    for row in rows:
        if row.key.cache_state not in ("cold", "warm"):
            continue
        base = dataclasses.replace(row.key, cache_state="")
        label = transform_label(row.transform, row.variant)
        groups.setdefault(base, {}).setdefault((row.cell, label), {})[row.key.cache_state] = row
    tables = []
    for base in sorted(groups):
        table = []
        for (cell, transform), states in sorted(groups[base].items()):
            cold, warm = states.get("cold"), states.get("warm")
            if cold is not None and warm is not None and cold.pin_s and warm.pin_s:
                table.append(Speedup(cell, transform, cold.pin_s, warm.pin_s, "pins"))
            elif (
                cold is not None
                and warm is not None
                and cold.compile_s is not None
                and warm.compile_s
            ):
                table.append(
                    Speedup(cell, transform, cold.compile_s, warm.compile_s, "latest rows")
                )
            else:
                table.append(
                    Speedup(
                        cell,
                        transform,
                        None if cold is None else (cold.pin_s or cold.compile_s),
                        None if warm is None else (warm.pin_s or warm.compile_s),
                        "",
                    )
                )
        tables.append((base, table))
    return tables


def describe_without_state(key: ComparabilityKey) -> str:
    precision = "mixed precision" if key.mixed_precision else "full precision"
    return f"{key.hardware} | {key.version_label} | {precision}"


def speedup_html(rows: Sequence[RowLike]) -> list[str]:
    out = [
        '<h2 id="speedup">Cold to warm</h2>',
        "<p>What the persistent cache saves per cell: cold seconds over warm seconds, from "
        "the cold and warm pins where both are pinned, else from the latest cold and warm "
        "rows.</p>",
    ]
    tables = speedups(rows)
    if not tables:
        out.append("<p>No cold or warm rows or pins.</p>")
    for base, table in tables:
        out.append(f"<h3>{_esc(describe_without_state(base))}</h3>")
        out.append(
            '<table class="speedup"><tr><th>cell</th><th>transform</th><th>cold</th>'
            "<th>warm</th><th>speed-up</th><th>from</th></tr>"
        )
        for item in table:
            ratio = item.ratio
            out.append(
                f'<tr data-test="{_esc(item.cell)}"><td><code>{_esc(item.cell)}</code></td>'
                f"<td>{_esc(item.transform)}</td>"
                f'<td class="num">{seconds_cell(item.cold_s)}</td>'
                f'<td class="num">{seconds_cell(item.warm_s)}</td>'
                f'<td class="num">{"—" if ratio is None else f"{ratio:.1f}x"}</td>'
                f"<td>{_esc(item.source or 'not both measured')}</td></tr>"
            )
        out.append("</table>")
    return out


# --------------------------------------------------------------------------- attention


def attention_html(
    rows: Sequence[RowLike], trends: TrendReport | None, chart_ids: Mapping[ChartId, str]
) -> list[str]:
    """What needs attention now: failing rows, rising series, coverage of the keys in use (a
    key no row measured is in the stale pins, `stale_pins_html`)."""
    failing = sorted(
        (row for row in rows if row.fails and row.status is not None),
        key=lambda row: (
            row.status.severity if row.status else 0,
            row.key,
            row.cell,
            row.transform,
            row.variant,
        ),
    )
    rising: list[Trend] = [] if trends is None else trends.rising
    out = ['<section id="attention">', "<h2>Needs attention</h2>"]
    if not failing and not rising:
        out.append(
            '<p class="all-clear">Nothing: no failing row'
            + (", no sustained rise." if trends is not None else ".")
            + "</p>"
        )

    if rising:
        assert trends is not None
        out.append(f'<h3 class="alert">Rising: {len(rising)} series</h3>')
        out.append(
            f"<p>Sustained rises over each series' history ({_esc(_trend_sentence(trends))}). "
            "Pins re-derived along the way hide these from the pin check.</p>"
        )
        out.append(
            '<table class="rising"><tr><th>cell</th><th>transform</th><th>key</th>'
            "<th>rise</th><th>before</th><th>now</th><th>rising since</th></tr>"
        )
        for trend in rising:
            fit = trend.fit
            out.append(
                f'<tr data-test="{_esc(trend.cell)}"><td><code>{_esc(trend.cell)}</code>'
                f"{chart_link(chart_ids, trend.key, trend.cell, trend.transform, trend.variant)}"
                f"</td><td>{_esc(transform_label(trend.transform, trend.variant))}</td>"
                f"<td>{_esc(trend.describe_key())}</td>"
                f'<td class="num alert">{fit.rise:+.0%}</td>'
                f'<td class="num">{seconds_cell(fit.before_s)}</td>'
                f'<td class="num">{seconds_cell(fit.after_s)}</td>'
                f"<td>{_esc(when_text(trend.started))}; {fit.points - fit.start} of "
                f"{fit.points} points after</td></tr>"
            )
        out.append("</table>")

    if failing:
        out.append(f'<h3 class="alert">Failing: {len(failing)} row(s)</h3>')
        out.append(
            '<table class="failing"><tr><th>verdict</th><th>cell</th><th>transform</th>'
            "<th>key</th><th>compile_s</th><th>pin</th><th>ratio</th><th>measured at</th></tr>"
        )
        for row in failing:
            out.append(
                f'<tr data-test="{_esc(row.cell)}"><td class="{_esc(row.label)}">'
                f"{_esc(row.label)}</td><td><code>{_esc(row.cell)}</code>"
                f"{chart_link(chart_ids, row.key, row.cell, row.transform, row.variant)}</td>"
                f"<td>{_esc(transform_label(row.transform, row.variant))}</td>"
                f"<td>{_esc(row.key.describe())}</td>"
                f'<td class="num">{compared_seconds(row.compile_s, row.metric)}</td>'
                f'<td class="num">{compared_seconds(row.pin_s, row.metric)}</td>'
                f'<td class="num">{"—" if row.ratio is None else f"{row.ratio:.2f}x"}</td>'
                f"<td>{_esc(row.timestamp or '—')}</td></tr>"
            )
        out.append("</table>")

    out.append("<h3>Coverage</h3>")
    table = [item for item in coverage(rows) if item.rows]  # keys in use
    if not table:
        out.append("<p>No compile records and no pins.</p>")
    else:
        out.append(
            '<table class="coverage"><tr><th>key</th><th>rows</th><th>pins measured</th>'
            "<th>unpinned rows</th><th>failing</th></tr>"
        )
        for item in table:
            short = ' class="alert"' if item.pins_missing else ""
            out.append(
                f'<tr><td>{_esc(item.key.describe())}</td><td class="num">{item.rows}</td>'
                f'<td class="num"><span{short}>{item.pins_measured} of {item.pins}</span></td>'
                f'<td class="num">{item.unpinned}</td><td class="num">{item.failing}</td></tr>'
            )
        out.append("</table>")
    out.append("</section>")
    return out


def stale_pins_html(rows: Sequence[RowLike]) -> list[str]:
    """The pins no row measured, folded: a test removed, renamed or skipped, or a key no
    longer run (an old hardware name). Listed by key, never leading the page."""
    stale = [row for row in rows if row.label == NOT_MEASURED]
    if not stale:
        return []
    groups = grouped(stale)
    unused = sum(1 for item in coverage(rows) if not item.rows)
    out = [
        '<section id="stale-pins">',
        "<h2>Stale pins</h2>",
        f"<details><summary>{len(stale)} pin(s) under {len(groups)} key(s) that no row "
        f"measured (under --since: none since then); {unused} of those keys had no row at "
        "all</summary>",
        "<p>A test removed, renamed, skipped or no longer run under this key. Pins of a key "
        "no longer used can be deleted with its pin file.</p>",
    ]
    for key, group in groups:
        out.append(f"<h3>{_esc(key.describe())}</h3>")
        out.append('<table class="stale"><tr><th>cell</th><th>transform</th><th>pin</th></tr>')
        for row in group:
            out.append(
                f'<tr data-test="{_esc(row.cell)}"><td><code>{_esc(row.cell)}</code></td>'
                f"<td>{_esc(transform_label(row.transform, row.variant))}</td>"
                f'<td class="num">{seconds_cell(row.pin_s)}</td></tr>'
            )
        out.append("</table>")
    out.extend(["</details>", "</section>"])
    return out


def _trend_sentence(trends: TrendReport) -> str:
    return settings_sentence(trends.settings)


# --------------------------------------------------------------------------- filter

FILTER_HTML = (
    '<p class="filter"><label>Filter by test name: <input id="filter" type="search" '
    'placeholder="part of a test name" autocomplete="off"></label> '
    '<span id="filter-count"></span></p>'
)

# Hides table rows and charts whose test name does not contain the text typed, and the
# chart sections left empty. No network, no storage, no eval: plain DOM calls.
FILTER_SCRIPT = """
(function () {
  "use strict";
  var box = document.getElementById("filter");
  var count = document.getElementById("filter-count");
  var items = Array.prototype.slice.call(document.querySelectorAll("[data-test]"));
  var sections = Array.prototype.slice.call(document.querySelectorAll("section.charts"));
  function apply() {
    var query = box.value.trim().toLowerCase();
    var charts = 0;
    var shown = 0;
    items.forEach(function (item) {
      var match = item.getAttribute("data-test").toLowerCase().indexOf(query) !== -1;
      item.hidden = !match;
      if (item.tagName === "FIGURE") {
        charts += 1;
        if (match) { shown += 1; }
      }
    });
    sections.forEach(function (section) {
      section.hidden = section.querySelector("figure:not([hidden])") === null;
    });
    count.textContent = query ? shown + " of " + charts + " charts shown" : "";
  }
  box.addEventListener("input", apply);
  apply();
})();
"""
