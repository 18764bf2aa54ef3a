"""Pins a session did not measure (stale pins), and tests whose compile count changed
from its pin.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pytest_jaxcompile.gate.pins import PinStore
from pytest_jaxcompile.records import (
    CENSUS_SOURCE,
    CallLedger,
    ComparabilityKey,
    CompileRecord,
    row_name,
)


@dataclass(frozen=True)
class StalePin:
    """A pin of a test that ran in this session but measured nothing for it."""

    key: ComparabilityKey
    cell: str
    transform: str
    pin_file: Path
    variant: str = ""  # the settings variant pinned ("" the default settings)

    @property
    def name(self) -> str:
        return row_name(self.cell, self.transform, self.variant)


def find_stale(
    store: PinStore,
    ran_cells: set[str],
    measured: set[tuple[str, str, str]],
    hardware: str,
    framework_version: str,
    censused: set[str] | None = None,
) -> list[StalePin]:
    """Pins, for this hardware and version, of tests that ran but measured nothing.

    `measured` holds the session's rows' (cell, transform, variant). A census pin is stale
    only to a session that took a census of its test (`censused`): a session without a
    census could not have measured it. A settings variant's pin is stale only to a session
    that measured that variant somewhere (a session run with other XLA flags measured
    another variant, and leaves the default settings' pins alone).
    """
    variants = {variant for _, _, variant in measured} or {""}
    stale = []
    for group in store.groups():
        if (group.key.hardware, group.key.framework_version) != (hardware, framework_version):
            continue
        for (cell, transform, variant), pin in group.all_pins():
            if pin.source == CENSUS_SOURCE and cell not in (censused or set()):
                continue
            if variant not in variants:
                continue
            if cell in ran_cells and (cell, transform, variant) not in measured:
                stale.append(StalePin(group.key, cell, transform, group.path, variant))
    return stale


@dataclass(frozen=True)
class CompileCountChange:
    """A test compiled a different number of modules than pinned (a retrace, or fewer)."""

    cell: str
    compiles: int
    pinned: int
    # Why each compile of a function after its first happened (the ledger's `recompiles`).
    recompiles: tuple[str, ...] = ()

    def headline(self) -> str:
        return (
            f"compile count changed: {self.cell}: {self.compiles} backend compile(s), "
            f"pinned {self.pinned}"
        )


def compile_count_changes(
    ledgers: Iterable[CallLedger], records: Iterable[CompileRecord], store: PinStore
) -> list[CompileCountChange]:
    keys_of: dict[str, set[ComparabilityKey]] = {}
    for record in records:
        keys_of.setdefault(record.cell, set()).add(record.key)
    changes = []
    for ledger in ledgers:
        pinned = {
            count
            for key in keys_of.get(ledger.cell, ())
            if (count := store.compiles_pinned(key, ledger.cell)) is not None
        }
        if pinned and ledger.compiles not in pinned:
            changes.append(
                CompileCountChange(
                    ledger.cell, ledger.compiles, max(pinned), tuple(ledger.recompiles or ())
                )
            )
    return sorted(changes, key=lambda change: change.cell)
