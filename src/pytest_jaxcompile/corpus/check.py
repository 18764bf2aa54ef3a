"""Judge a records corpus against the pins outside pytest, with the plugin's own rules.

The rows judged are those the plugin would judge in the last session of the history
(`judged_rows`): the latest per cell, transform and comparability key
(`store.LatestRows`), less the rows history has passed: a row measured before the pin it
is compared with, and a cold row of a cell that a newer warm row measured since. The gate
concludes on them exactly as on a session's rows (`gate.conclude`), so `check`, the
terminal and the dashboard give the same verdicts.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_jaxcompile.corpus.store import Corpus, LatestRows, Row, parse_timestamp
from pytest_jaxcompile.gate.conclude import GateSettings, conclude
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.outcome import Outcome
from pytest_jaxcompile.gate.pins import PinStore
from pytest_jaxcompile.records import CompileRecord

OLDER_THAN_PIN = "measured before its pin"
SUPERSEDED = "a newer warm row measured its cell"
COLD_STATES = ("cold", "none")  # compiled without the persistent cache's help
WARM = "warm"


@dataclass
class JudgedRows:
    """The rows the gate judges, and those history has passed (with why, counted)."""

    rows: list[Row] = field(default_factory=list)
    older_than_pin: list[Row] = field(default_factory=list)
    superseded: list[Row] = field(default_factory=list)  # by a newer warm row of the cell

    def records(self) -> list[CompileRecord]:
        return [row.record() for row in self.rows]

    def passed_over(self) -> list[tuple[CompileRecord, str]]:
        """The rows not judged, each with why (the dashboard shows them, not judged)."""
        return [(row.record(), OLDER_THAN_PIN) for row in self.older_than_pin] + [
            (row.record(), SUPERSEDED) for row in self.superseded
        ]

    def describe(self) -> str:
        """``; passed over: 3 measured before their pin, 113 cold rows with a newer warm
        row`` (empty when none was)."""
        parts = []
        if self.older_than_pin:
            parts.append(f"{len(self.older_than_pin)} measured before the pin they compare with")
        if self.superseded:
            parts.append(f"{len(self.superseded)} cold row(s) of cells a newer warm row measured")
        return f"; passed over: {', '.join(parts)}" if parts else ""


def pinned_after(store: PinStore, row: Row, cache_state: str) -> bool:
    """Whether the pin this row is compared with (under its key with `cache_state`) was
    written after the row was measured."""
    key = dataclasses.replace(row.key, cache_state=cache_state)
    pin = store.get(key, row.cell, row.transform, row.variant)
    if pin is None or not pin.pinned_at:
        return False
    try:
        return parse_timestamp(pin.pinned_at) > row.time
    except ValueError:
        return False  # a hand-written time: the row is judged, as before


def _warmth_id(row: Row) -> tuple[object, ...]:
    """A row's identity but for its cache state: a cold row and the warm row after it."""
    return (dataclasses.replace(row.key, cache_state=""), row.cell, row.transform, row.variant)


def judged_rows(latest: LatestRows, store: PinStore) -> JudgedRows:
    """The latest rows as the plugin would judge them in the history's last session.

    A row is passed over when it is older than the pin it is compared with (its own key's
    pin; for a cold row, also the warm pin it is checked against for a lost cache), or when
    it is a cold row and a newer warm row of the same cell, transform, settings variant and
    key exists: the cache was warm after it, so it says nothing about the cache now.
    """
    warm_times = {
        _warmth_id(row): row.time for row in latest.rows.values() if row.key.cache_state == WARM
    }
    judged = JudgedRows()
    for row in latest.sorted_rows():
        state = row.key.cache_state
        cold = state in COLD_STATES
        warm_time = warm_times.get(_warmth_id(row))
        if cold and warm_time is not None and warm_time > row.time:
            judged.superseded.append(row)
        elif pinned_after(store, row, state) or (cold and pinned_after(store, row, WARM)):
            judged.older_than_pin.append(row)
        else:
            judged.rows.append(row)
            continue
        row.record()  # passed over, but a bad record is still refused, naming file and line
    return judged


def check_corpus(
    corpus: Corpus,
    store: PinStore,
    thresholds: Thresholds,
    rootdir: Path,
    on_row: Callable[[Row], None] | None = None,
) -> Outcome:
    """`judge_corpus`'s outcome."""
    return judge_corpus(corpus, store, thresholds, rootdir, on_row)[0]


def judge_corpus(
    corpus: Corpus,
    store: PinStore,
    thresholds: Thresholds,
    rootdir: Path,
    on_row: Callable[[Row], None] | None = None,
) -> tuple[Outcome, JudgedRows]:
    """The rows of the corpus the plugin would judge (`judged_rows`), concluded on as a
    session's rows would be; `on_row` sees every row read (e.g. to collect trends)."""
    latest = LatestRows()
    for row in corpus.rows():
        latest.add(row)
        if on_row is not None:
            on_row(row)
    judged = judged_rows(latest, store)
    outcome = conclude(
        judged.records(),
        (),
        (),
        store,
        GateSettings(thresholds, pin_update=False),
        rootdir=rootdir,
    )
    return outcome, judged
