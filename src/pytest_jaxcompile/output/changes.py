"""What changed: the history's rows that were DRIFT, MISS or GREW, newest session first.

The dashboard leads with them: when (the session's time and commit), which row, and by how
much. Each row of the corpus is judged as `check` judges a row (`gate.judging.judge`), against
the pins as they are now, the pins the trend charts draw; a chart marks each of these rows.
A row measured before the pin it is compared with was written is passed over, as `check`
passes it over (`corpus.check.pinned_after`). Only a row that could fail is judged: one
slower than its pin by more than the floor (the floor has no per-pin override) in one of the
figures the gate compares, a cold row when misses are judged (``--expect-warm``), every row
under a growth limit; the rest pass by at the cost of a comparison.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone

from pytest_jaxcompile.corpus.check import COLD_STATES, WARM, pinned_after
from pytest_jaxcompile.corpus.commit import commit_label
from pytest_jaxcompile.corpus.store import NO_TIME, Row
from pytest_jaxcompile.gate.judging import judge
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.pins import PinStore
from pytest_jaxcompile.gate.status import Status
from pytest_jaxcompile.gate.view import figures
from pytest_jaxcompile.output.attention import ChartId, chart_link
from pytest_jaxcompile.records import ComparabilityKey, transform_label

CHANGED = (Status.MISS, Status.GREW, Status.DRIFT)  # what a change in the history is
MAX_SESSIONS = 20  # the newest sessions with a change that the page lists and marks
# The figures a time verdict compares (wall, CPU, trace, lowering): a row no slower than its
# pin by more than the floor in any of them cannot be DRIFT.
_TIMED = ("compile_s", "compile_cpu_s", "trace_s", "lower_s")


@dataclass(frozen=True)
class Change:
    """One row of the history that was DRIFT, MISS or GREW against its pin."""

    time: float
    session: str  # the session's records file, by name
    commit: str  # its commit ("" where it recorded none)
    status: Status
    key: ComparabilityKey
    cell: str
    transform: str
    variant: str
    compile_s: float  # the row's wall seconds: where its chart places it
    figures: str  # what the verdict compared: "2.000 s, pin 0.500 s (4.00x, tolerance 75%)"

    @property
    def chart_id(self) -> ChartId:
        key = self.key
        return (
            key.framework,
            key.hardware,
            key.mixed_precision,
            self.cell,
            self.transform,
            self.variant,
        )


class Changes:
    """Collects the history's changes while the corpus streams by (see the module)."""

    def __init__(self, store: PinStore, thresholds: Thresholds) -> None:
        self._store = store
        self._thresholds = thresholds
        self._sessions: dict[str, list[Change]] = {}
        self._growth_limited = any(
            limit is not None
            for limit in (
                thresholds.max_ops_growth,
                thresholds.max_memory_growth,
                thresholds.max_flops_growth,
            )
        )

    def add(self, row: Row) -> None:
        if row.time == NO_TIME or row.compile_s is None or not self._could_fail(row):
            return
        verdict = judge(row.record(), self._store, self._thresholds)
        if verdict.status not in CHANGED:
            return
        commit = row.data.get("commit")
        change = Change(
            row.time,
            row.path.name,
            commit_label(commit) if isinstance(commit, dict) else "",
            verdict.status,
            row.key,
            row.cell,
            row.transform,
            row.variant,
            row.compile_s,
            figures(verdict, self._thresholds).text(),
        )
        self._sessions.setdefault(change.session, []).append(change)
        if len(self._sessions) > 2 * MAX_SESSIONS:  # memory bounded by the sessions shown
            self._sessions = dict(self._newest(MAX_SESSIONS))

    def _could_fail(self, row: Row) -> bool:
        """Whether the row is worth judging: cheap tests first, the pin's time last."""
        thresholds, state = self._thresholds, row.key.cache_state
        cold = state in COLD_STATES
        if not (
            (thresholds.expect_warm and cold)  # a MISS is judged against the warm pin
            or self._growth_limited  # GREW is judged on other figures
            or self._slower_than_floor(row)
        ):
            return False
        # Measured before its pin was written: the pin says nothing of it (as in `check`).
        store = self._store
        return not (pinned_after(store, row, state) or (cold and pinned_after(store, row, WARM)))

    def _slower_than_floor(self, row: Row) -> bool:
        pin = self._store.get(row.key, row.cell, row.transform, row.variant)
        if pin is None:
            return False
        data = row.data
        for field in _TIMED:
            measured, pinned = data.get(field), getattr(pin, field, None)
            if not isinstance(measured, (int, float)) or pinned is None:
                continue
            if measured - pinned > self._thresholds.floor_s:
                return True
        return False

    def _newest(self, count: int) -> list[tuple[str, list[Change]]]:
        ordered = sorted(
            self._sessions.items(),
            key=lambda item: (-max(change.time for change in item[1]), item[0]),
        )
        return ordered[:count]

    def sessions(self) -> list[tuple[str, list[Change]]]:
        """The newest sessions with a change (at most `MAX_SESSIONS`), newest first, each
        session's changes worst first."""
        return [
            (
                session,
                sorted(
                    changes,
                    key=lambda c: (c.status.severity, c.key, c.cell, c.transform, c.variant),
                ),
            )
            for session, changes in self._newest(MAX_SESSIONS)
        ]

    def by_chart(self) -> dict[ChartId, list[Change]]:
        """The listed changes by the chart that marks them."""
        marks: dict[ChartId, list[Change]] = {}
        for _, changes in self.sessions():
            for change in changes:
                marks.setdefault(change.chart_id, []).append(change)
        return marks


def _utc(time: float) -> str:
    return datetime.fromtimestamp(time, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def changes_html(changes: Changes, chart_ids: Mapping[ChartId, str]) -> list[str]:
    """The page's first section: each session with a change, newest first, its rows."""
    sessions = changes.sessions()
    out = ['<section id="changes">', "<h2>What changed</h2>"]
    if not sessions:
        out.append(
            '<p class="all-clear">No row of the history was DRIFT, MISS or GREW against the '
            "pins.</p>"
        )
        out.append("</section>")
        return out
    out.append(
        "<p>Rows of the history that were DRIFT, MISS or GREW against the pins (as the charts "
        "below draw them, where each is marked), newest session first"
        + (f"; the newest {MAX_SESSIONS} such sessions" if len(sessions) == MAX_SESSIONS else "")
        + ".</p>"
    )
    for session, listed in sessions:
        counts = ", ".join(
            f"{sum(1 for change in listed if change.status is status)} {status.value}"
            for status in CHANGED
            if any(change.status is status for change in listed)
        )
        when = _utc(max(change.time for change in listed))
        commit = listed[0].commit
        out.append(
            f'<h3 class="alert">{html.escape(when)}'
            + (f" (commit {html.escape(commit)})" if commit else "")
            + f": {html.escape(counts)}</h3>"
        )
        out.append(
            f"<p>session <code>{html.escape(session)}</code></p>"
            '<table class="changes"><tr><th>verdict</th><th>cell</th><th>transform</th>'
            "<th>key</th><th>by how much</th></tr>"
        )
        for change in listed:
            link = chart_link(chart_ids, change.key, change.cell, change.transform, change.variant)
            out.append(
                f'<tr data-test="{html.escape(change.cell)}">'
                f'<td class="{change.status.value}">{change.status.value}</td>'
                f"<td><code>{html.escape(change.cell)}</code>{link}</td>"
                f"<td>{html.escape(transform_label(change.transform, change.variant))}</td>"
                f"<td>{html.escape(change.key.describe())}</td>"
                f"<td>{html.escape(change.figures)}</td></tr>"
            )
        out.append("</table>")
    out.append("</section>")
    return out
