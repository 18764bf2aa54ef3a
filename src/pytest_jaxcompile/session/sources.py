"""Where in the user's code each explained row's operations come from, read after the tests.

Reading a module's locations prints it once more with its debug info: a session pays it only
for the rows the gate will explain, in the process that compiled them (each xdist worker its
own, before its rows travel): every row of a pin update (the pin keeps the histogram), and
the rows whose module changed since their own key's pin (`unchanged`: one lookup) and that
fail or are unpinned after an upgrade (`explained`: one judge). A session whose modules are
its pins' reads none and judges none here (docs/benchmarks.md).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from pytest_jaxcompile.backends import BackendSession
from pytest_jaxcompile.gate.judging import judge
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.nearest import UPGRADE
from pytest_jaxcompile.gate.pins import PinStore
from pytest_jaxcompile.records import CompileRecord


def explained(record: CompileRecord, store: PinStore, thresholds: Thresholds) -> bool:
    """Whether the gate will explain this row: it fails, or it is unpinned after an upgrade
    (an upgrade block may name it)."""
    verdict = judge(record, store, thresholds)
    upgraded = verdict.nearest is not None and verdict.nearest.relation == UPGRADE
    return upgraded or verdict.fails(thresholds)


def unchanged(record: CompileRecord, store: PinStore) -> bool:
    """Whether the row's module is its own key's pin's (one lookup): it did not grow, and
    nothing is read for it."""
    pin = store.get(record.key, *record.row_id)
    return (
        pin is not None and record.fingerprint is not None and pin.fingerprint == record.fingerprint
    )


def read_sources(
    records: Iterable[CompileRecord],
    backends: Mapping[str, BackendSession],
    store: PinStore,
    thresholds: Thresholds,
    pin_update: bool,
    root: Path,
) -> int:
    """Fill ``source_ops`` of every row of a pin update, else of each `explained` row;
    how many rows were asked for."""
    wanted: dict[str, list[CompileRecord]] = {}
    for record in records:
        if pin_update or (not unchanged(record, store) and explained(record, store, thresholds)):
            wanted.setdefault(record.framework, []).append(record)
    for framework, rows in wanted.items():
        backends[framework].read_sources(rows, root)
    return sum(len(rows) for rows in wanted.values())
