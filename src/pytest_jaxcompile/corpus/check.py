"""Judge a records corpus against the pins outside pytest, with the plugin's own rules.

The rows judged are the latest per cell, transform and comparability key (see
`store.LatestRows`); the gate concludes on them exactly as on a session's rows
(`gate.conclude`), so `check` and the terminal give the same verdict lines.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pytest_jaxcompile.corpus.store import Corpus, LatestRows, Row
from pytest_jaxcompile.gate.conclude import GateSettings, conclude
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.outcome import Outcome
from pytest_jaxcompile.gate.pins import PinStore


def check_corpus(
    corpus: Corpus, store: PinStore, thresholds: Thresholds, rootdir: Path,
    on_row: Callable[[Row], None] | None = None,
) -> Outcome:
    """The latest rows of the corpus, concluded on as a session's rows would be;
    `on_row` sees every row read (e.g. to collect trends)."""
    latest = LatestRows()
    for row in corpus.rows():
        latest.add(row)
        if on_row is not None:
            on_row(row)
    return conclude(
        latest.records(), (), (), store,
        GateSettings(thresholds, pin_update=False), rootdir=rootdir,
    )
