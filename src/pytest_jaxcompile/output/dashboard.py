"""The dashboard: Markdown tables for a README region, and a self-contained HTML page.

Everything rendered here is a function of the corpus and the pins only (no "generated at"
time, everything sorted, fixed number formats), so rendering an unchanged corpus twice
gives the same bytes.

The HTML page has no external resources at all: the charts are inline SVG (`charts`), the
styles are inline.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_jaxcompile._constants import METRIC_CPU, METRIC_WALL
from pytest_jaxcompile._io import InputError, read_text
from pytest_jaxcompile._numbers import percent
from pytest_jaxcompile.corpus.trend import (
    TrendReport,
    settings_sentence,
    when_text,
)
from pytest_jaxcompile.gate.conclude import GateSettings, conclude
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.pins import PinStore
from pytest_jaxcompile.gate.status import Status
from pytest_jaxcompile.gate.view import TraceRollup, session_view
from pytest_jaxcompile.output.attention import (
    FILTER_HTML,
    FILTER_SCRIPT,
    attention_html,
    chart_link,
    compared_seconds,
    grouped,
    seconds_cell,
    speedup_html,
    stale_pins_html,
)
from pytest_jaxcompile.output.changes import Changes, changes_html
from pytest_jaxcompile.output.charts import Trends, chart_ids, trends_html
from pytest_jaxcompile.records import (
    SCOPE_TEST,
    ComparabilityKey,
    CompileRecord,
    transform_label,
)

BEGIN_MARKER = "<!-- BEGIN jaxcompile -->"
END_MARKER = "<!-- END jaxcompile -->"
NOT_MEASURED = "not measured"  # a pin with no row in the corpus


class DashboardError(InputError):
    """A file the dashboard cannot update; names the file."""


# --------------------------------------------------------------------------- table rows


@dataclass(frozen=True)
class TableRow:
    """One line of a dashboard table: the latest figure of a cell against its pin."""

    key: ComparabilityKey
    cell: str
    transform: str
    compile_s: float | None  # the figure compared (CPU seconds under --metric cpu)
    pin_s: float | None  # the pinned figure it was compared with
    ratio: float | None
    label: str
    timestamp: str
    temp_bytes: int | None = None  # compiled temp bytes (memory_analysis())
    rss_growth_mib: float | None = None  # RSS growth during the compile (or the test)
    rss_scope: str | None = None
    status: Status | None = None  # None: a pin no row measured
    fails: bool = False  # the row fails the gate (the view's verdict)
    variant: str = ""  # the settings variant ("" the default settings)
    execute_s: float | None = None  # the test's call less its compiles (its ledger's)
    # What compile_s and pin_s are: wall seconds of the compile, or the figure the verdict
    # compared instead (cpu, trace, lower), which every table names beside the figure.
    metric: str = METRIC_WALL
    profile: str | None = None  # where inside XLA the compile spent its time (the view's)


def table_rows(
    records: Iterable[CompileRecord],
    store: PinStore,
    thresholds: Thresholds,
    rootdir: Path | None = None,
    passed_over: Iterable[tuple[CompileRecord, str]] = (),
    execute_s: Mapping[str, float] | None = None,
) -> list[TableRow]:
    """The latest records concluded on against the pins (`gate.conclude`, as a session's
    rows), in the view's order, the rows history passed over (`passed_over`: each record
    and why, shown with its figures and not judged, as `check` does), plus pins that no
    record measured. `execute_s` is each test's execute time by cell (`Corpus.execute_s`,
    from the ledgers of census'd tests)."""
    execute_s = execute_s or {}
    outcome = conclude(
        records,
        (),
        (),
        store,
        GateSettings(thresholds, pin_update=False),
        rootdir=rootdir or Path.cwd(),
    )
    rows = []
    seen: set[tuple[ComparabilityKey, str, str, str]] = set()
    for record, why in passed_over:
        seen.add((record.key, *record.row_id))
        pin = store.get(record.key, record.cell, record.transform, record.variant)
        pin_s = None if pin is None else pin.compile_s
        rows.append(
            TableRow(
                record.key,
                record.cell,
                record.transform,
                record.compile_s,
                pin_s,
                record.compile_s / pin_s if record.compile_s is not None and pin_s else None,
                f"passed over: {why}",
                record.timestamp,
                status=Status.NOT_JUDGED,
                variant=record.variant,
                execute_s=execute_s.get(record.cell),
            )
        )
    for row in session_view(outcome).rows:
        record, figures = row.record, row.figures
        seen.add((record.key, *record.row_id))
        timed = figures.unit == "s"  # the seconds columns show seconds only
        rows.append(
            TableRow(
                key=record.key,
                cell=record.cell,
                transform=record.transform,
                compile_s=figures.measured if timed else record.compile_s,
                pin_s=figures.pinned
                if timed
                else (None if row.verdict.pin is None else row.verdict.pin.compile_s),
                ratio=figures.ratio,
                label=row.label,
                timestamp=record.timestamp,
                temp_bytes=record.compiled_temp_bytes,
                rss_growth_mib=record.compile_rss_growth_mib,
                rss_scope=record.compile_rss_scope,
                status=row.status,
                fails=row.fails,
                variant=record.variant,
                execute_s=execute_s.get(record.cell),
                metric=figures.metric.name if timed else METRIC_WALL,
                profile=row.profile,
            )
        )
    for group in store.groups():
        for (cell, transform, variant), pin in group.all_pins():
            if (group.key, cell, transform, variant) not in seen:
                rows.append(
                    TableRow(
                        group.key,
                        cell,
                        transform,
                        None,
                        pin.compile_s,
                        None,
                        NOT_MEASURED,
                        "",
                        variant=variant,
                    )
                )
    rows.sort(key=lambda row: (row.key, row.cell, row.transform, row.variant))
    return rows


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}x"


MEMORY_COLUMNS = (
    "temp: the compiled program's scratch memory (memory_analysis()); RSS growth: how much "
    "the process's resident memory grew during the compile ((test): during the whole test)."
)


def _bytes(value: int | None) -> str:
    if value is None:
        return "—"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value} B"


def _rss(row: TableRow) -> str:
    """``+3.2 MiB``; a census row's figure covers its whole test: ``+3.2 MiB (test)``."""
    if row.rss_growth_mib is None:
        return "—"
    scope = " (test)" if row.rss_scope == SCOPE_TEST else ""
    return f"+{row.rss_growth_mib:.1f} MiB{scope}"


def thresholds_sentence(thresholds: Thresholds) -> str:
    text = (
        f"DRIFT: slower than the pin by more than {percent(thresholds.tolerance)} "
        f"(or the pin's own tolerance) and by more than {thresholds.floor_s:g} s"
    )
    if thresholds.metric == METRIC_CPU:
        text += "; figures are process CPU seconds where the row and its pin have them"
    return text


# --------------------------------------------------------------------------- Markdown


def _md_cell(text: str) -> str:
    """Text for a GitHub table cell: pipes escaped, in a code span when it is safe."""
    escaped = text.replace("|", "\\|")
    return escaped if "`" in text else f"`{escaped}`"


def markdown(
    rows: list[TableRow], thresholds: Thresholds, trend_report: TrendReport | None = None
) -> str:
    """Per comparability key, a table of the latest figures against the pins; with
    `trend_report`, the sustained rises first."""
    lines = [
        "Latest compile time per cell and transform under each comparability key "
        f"(hardware | jax version | precision | cache state), against its pin. "
        f"{thresholds_sentence(thresholds)}. {MEMORY_COLUMNS}",
        "",
    ]
    if trend_report is not None:
        lines.extend(markdown_trends(trend_report))
    if not rows:
        lines.append("No compile records and no pins.")
        return "\n".join(lines) + "\n"
    for key, group in grouped(rows):
        lines.append(f"**{key.describe()}**")
        lines.append("")
        lines.append(
            "| cell | transform | compile_s | pin | ratio | temp | RSS growth | verdict | "
            "measured at |"
        )
        lines.append("|---|---|---:|---:|---:|---:|---:|---|---|")
        for row in group:
            pin, transform = row.pin_s, transform_label(row.transform, row.variant)
            lines.append(
                f"| {_md_cell(row.cell)} | {_md_cell(transform)} | "
                f"{compared_seconds(row.compile_s, row.metric)} | "
                f"{compared_seconds(pin, row.metric)} | {_ratio(row.ratio)} | "
                f"{_bytes(row.temp_bytes)} | {_rss(row)} | {row.label} | {row.timestamp or '—'} |"
            )
        lines.append("")
        lines.extend(
            f"- {_md_cell(row.cell)} [{_md_cell(transform_label(row.transform, row.variant))}]: "
            f"{row.profile}"
            for row in group
            if row.profile
        )
        if any(row.profile for row in group):
            lines.append("")
    return "\n".join(lines)


def markdown_trends(trend_report: TrendReport) -> list[str]:
    """The sustained rises as a Markdown table (a sentence when there are none)."""
    rising = trend_report.rising
    sentence = settings_sentence(trend_report.settings)
    if not rising:
        return [f"No sustained rise ({sentence}).", ""]
    lines = [
        f"**Rising: {len(rising)} series** ({sentence}):",
        "",
        "| cell | transform | key | rise | before | now | rising since |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for trend in rising:
        fit = trend.fit
        lines.append(
            f"| {_md_cell(trend.cell)} | {_md_cell(trend.transform)} | "
            f"{trend.describe_key().replace('|', '/')} | {fit.rise:+.0%} | "
            f"{seconds_cell(fit.before_s)} | {seconds_cell(fit.after_s)} | "
            f"{when_text(trend.started).replace('|', '/')} |"
        )
    lines.append("")
    return lines


def replace_region(text: str, content: str, path: Path) -> str:
    """`text` with the region between the markers replaced by `content`; the rest kept."""
    begins, ends = text.count(BEGIN_MARKER), text.count(END_MARKER)
    if begins != 1 or ends != 1:
        missing = [
            f"{count} {marker!r} line(s)"
            for marker, count in ((BEGIN_MARKER, begins), (END_MARKER, ends))
            if count != 1
        ]
        raise DashboardError(
            path,
            f"expected exactly one {BEGIN_MARKER} and one {END_MARKER}, found "
            f"{' and '.join(missing)}; add the two marker lines where the compile-time "
            "table should go",
        )
    start = text.index(BEGIN_MARKER) + len(BEGIN_MARKER)
    end = text.index(END_MARKER)
    if end < start:
        raise DashboardError(path, f"{END_MARKER} comes before {BEGIN_MARKER}")
    newline = "\r\n" if "\r\n" in text else "\n"
    body = content if content.endswith("\n") else content + "\n"
    return text[:start] + newline + body.replace("\n", newline) + text[end:]


def read_text_exact(path: Path) -> str:
    """The file's text with its line endings as they are (no newline translation)."""
    return read_text(path, DashboardError)


# --------------------------------------------------------------------------- trends

# --------------------------------------------------------------------------- HTML page

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
code { font-size: 0.95em; }
.DRIFT, .MISS, .GREW { color: #b00020; font-weight: bold; }
.improved { color: #2a7d2a; }
figure { margin: 1em 0 2em; }
figcaption { font-weight: bold; margin-bottom: 0.3em; }
svg.chart { font-size: 11px; }
svg .plot { fill: #fafafa; stroke: #bbb; }
svg .grid { stroke: #e4e4e4; }
svg .axis { fill: #555; }
svg .series { fill: none; stroke-width: 1.5; }
svg .range { stroke-width: 1; opacity: 0.6; }
svg .pin line { stroke-dasharray: 6 4; stroke-width: 1.5; }
svg .pinlabel { font-size: 10px; }
svg .bump line { stroke: #888; stroke-dasharray: 2 3; }
svg .bump text { fill: #555; }
svg .change circle { fill: none; stroke: #b00020; stroke-width: 2; }
svg .change text { fill: #b00020; font-weight: bold; }
.legend span { margin-right: 1.2em; }
.alert { color: #b00020; font-weight: bold; }
.all-clear { color: #2a7d2a; }
.filter { position: sticky; top: 0; background: #fff; padding: 0.4em 0; margin: 0; }
.filter input { width: 24em; }
#filter-count { color: #555; margin-left: 1em; }
"""


@dataclass(frozen=True)
class VariantTable:
    """The settings variants of one key, side by side: per cell and transform, each
    variant's latest row (None where it has none)."""

    key: ComparabilityKey
    variants: tuple[str, ...]  # "" (the default settings) first, then sorted
    cells: tuple[tuple[str, str, tuple[TableRow | None, ...]], ...]  # cell, transform, rows


def variant_tables(rows: Iterable[TableRow]) -> list[VariantTable]:
    """The cells and transforms measured under more than one settings variant, per key."""
    by_key: dict[ComparabilityKey, dict[tuple[str, str], dict[str, TableRow]]] = {}
    for row in rows:
        if row.status is not None:  # measured rows only: a pin alone is not a variant's row
            by_key.setdefault(row.key, {}).setdefault((row.cell, row.transform), {})[
                row.variant
            ] = row
    tables = []
    for key in sorted(by_key):
        several = {pair: found for pair, found in by_key[key].items() if len(found) > 1}
        if not several:
            continue
        variants = sorted({variant for found in several.values() for variant in found})
        tables.append(
            VariantTable(
                key,
                tuple(variants),
                tuple(
                    (cell, transform, tuple(several[(cell, transform)].get(v) for v in variants))
                    for cell, transform in sorted(several)
                ),
            )
        )
    return tables


def variants_html(rows: Iterable[TableRow]) -> list[str]:
    """The settings variants side by side: compile time, the pin's, the verdict and the
    test's execute time of each variant of a cell and transform."""
    tables = variant_tables(rows)
    if not tables:
        return []
    out = [
        '<h2 id="variants">Settings variants</h2>',
        "<p>Rows of one cell and transform that differ only in a setting that changes the "
        "compiled program (an XLA flag or compile option in the cache key), side by side: "
        "each is judged against its own pin. execute: the test's call less its compiles "
        "(census'd tests).</p>",
    ]
    for table in tables:
        out.append(f"<h3>{html.escape(table.key.describe())}</h3>")
        head = "".join(
            f'<th colspan="3"><code>{html.escape(variant or "default settings")}</code></th>'
            for variant in table.variants
        )
        sub = "<th>compile_s</th><th>execute</th><th>verdict</th>" * len(table.variants)
        out.append(
            f'<table class="variants"><tr><th rowspan="2">cell</th>'
            f'<th rowspan="2">transform</th>{head}</tr><tr>{sub}</tr>'
        )
        for cell, transform, found in table.cells:
            cells = "".join(
                "<td>—</td><td>—</td><td>—</td>"
                if row is None
                else f'<td class="num">{compared_seconds(row.compile_s, row.metric)}</td>'
                f'<td class="num">{seconds_cell(row.execute_s)}</td>'
                f'<td class="{html.escape(row.label.split()[0])}">{html.escape(row.label)}</td>'
                for row in found
            )
            out.append(
                f'<tr data-test="{html.escape(cell)}"><td><code>{html.escape(cell)}</code>'
                f"</td><td>{html.escape(transform)}</td>{cells}</tr>"
            )
        out.append("</table>")
    return out


def trace_html(rollup: TraceRollup | None) -> list[str]:
    """Where the latest rows' tracing time goes, by package group and by file."""
    if rollup is None:
        return []
    out = [
        '<h2 id="trace">Where tracing time goes</h2>',
        f"<p>{rollup.rows} profiled row(s) (compile_trace_profile), "
        f"{rollup.trace_s:.3f} s of tracing: each row's shares weighted by its trace "
        "seconds.</p>",
        '<table class="trace"><tr><th>package</th><th>share</th><th>seconds</th></tr>',
    ]
    for share in rollup.groups:
        out.append(
            f'<tr><td>{html.escape(share.name)}</td><td class="num">{share.share:.0%}</td>'
            f'<td class="num">{share.seconds:.3f} s</td></tr>'
        )
    out.append("</table>")
    if rollup.files:
        out.append('<table class="trace"><tr><th>top file</th><th>share</th><th>seconds</th></tr>')
        for share in rollup.files:
            out.append(
                f"<tr><td><code>{html.escape(share.name)}</code></td>"
                f'<td class="num">{share.share:.0%}</td>'
                f'<td class="num">{share.seconds:.3f} s</td></tr>'
            )
        out.append("</table>")
    return out


def html_page(
    rows: list[TableRow],
    trends: Trends,
    store: PinStore,
    thresholds: Thresholds,
    corpus_description: str,
    trend_report: TrendReport | None = None,
    trace: TraceRollup | None = None,
    changes: Changes | None = None,
) -> str:
    """The dashboard, what changed first: the history's DRIFT, MISS and GREW rows
    (`changes`), what needs attention now, the charts (those rows marked), cold-to-warm
    speed-ups, the tables, the settings variants, where tracing time goes (`trace`, the
    latest rows' trace profile), and the stale pins, folded."""
    anchors = chart_ids(trends)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        '<head><meta charset="utf-8"><title>Compile times</title>',
        f"<style>{STYLE}</style></head>",
        "<body>",
        "<h1>Compile times</h1>",
        f"<p>From {html.escape(corpus_description)}. "
        f"{html.escape(thresholds_sentence(thresholds))}. {html.escape(MEMORY_COLUMNS)}</p>",
        FILTER_HTML,
    ]
    if changes is not None:
        out.extend(changes_html(changes, anchors))
    out.extend(attention_html(rows, trend_report, anchors))
    marks = None if changes is None else changes.by_chart()
    out.extend(trends_html(trends, store, anchors, trend_report, marks))
    out.extend(speedup_html(rows))
    out.append('<h2 id="latest">Latest figures against the pins</h2>')
    measured = [row for row in rows if row.label != NOT_MEASURED]  # the rest: stale pins
    if not measured:
        out.append("<p>No compile records.</p>")
    for key, group in grouped(measured):
        out.append(f"<h3>{html.escape(key.describe())}</h3>")
        out.append(
            "<table><tr><th>cell</th><th>transform</th><th>compile_s</th><th>pin</th>"
            "<th>ratio</th><th>temp</th><th>RSS growth</th><th>verdict</th>"
            "<th>measured at</th></tr>"
        )
        for row in group:
            pin = row.pin_s
            out.append(
                f'<tr data-test="{html.escape(row.cell)}">'
                f"<td><code>{html.escape(row.cell)}</code>"
                f"{chart_link(anchors, row.key, row.cell, row.transform)}</td>"
                f"<td>{html.escape(transform_label(row.transform, row.variant))}</td>"
                f'<td class="num">{compared_seconds(row.compile_s, row.metric)}</td>'
                f'<td class="num">{compared_seconds(pin, row.metric)}</td>'
                f'<td class="num">{_ratio(row.ratio)}</td>'
                f'<td class="num">{_bytes(row.temp_bytes)}</td>'
                f'<td class="num">{html.escape(_rss(row))}</td>'
                f'<td class="{html.escape(row.label.split()[0])}">{html.escape(row.label)}</td>'
                f"<td>{html.escape(row.timestamp or '—')}</td></tr>"
            )
        out.append("</table>")
        profiled = [row for row in group if row.profile]
        if profiled:  # where inside XLA the compile spent its time (the compile profile)
            out.append("<ul>")
            out.extend(
                f"<li><code>{html.escape(row.cell)}</code> "
                f"[{html.escape(transform_label(row.transform, row.variant))}]: "
                f"{html.escape(row.profile or '')}</li>"
                for row in profiled
            )
            out.append("</ul>")
    out.extend(variants_html(rows))
    out.extend(trace_html(trace))
    out.extend(stale_pins_html(rows))
    out.append(f"<script>{FILTER_SCRIPT}</script>")
    out.append("</body>")
    out.append("</html>")
    return "\n".join(out) + "\n"
