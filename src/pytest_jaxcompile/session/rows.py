"""Collecting rows: what one pytest process measured, test by test.

Rows come from the measuring fixtures and from each test's census (`census`), and on the
controller from the xdist workers' payloads (`xdist`); the session's conclusion
(`conclusion`) hands them to the gate.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from pytest_jaxcompile.output.junit import junit_properties
from pytest_jaxcompile.records import CallLedger, CompileRecord


@dataclass
class SessionRows:
    """The records, the census'd tests' ledgers and the tests whose call phase ran."""

    records: list[CompileRecord] = field(default_factory=list)
    ledgers: dict[str, CallLedger] = field(default_factory=dict)  # by cell
    ran_cells: set[str] = field(default_factory=set)
    _by_cell: dict[str, list[CompileRecord]] = field(default_factory=dict)

    def add(self, record: CompileRecord) -> None:
        self.records.append(record)
        self._by_cell.setdefault(record.cell, []).append(record)

    def of(self, cell: str) -> list[CompileRecord]:
        return self._by_cell.get(cell, [])

    def measured(self, item: pytest.Item, record: CompileRecord) -> None:
        """A row measured in this process, during `item`."""
        self.add(record)
        # Appended as soon as the row exists, so a test that fails later keeps it;
        # junitxml writes them as <property> elements (also from xdist workers).
        item.user_properties.extend(junit_properties(record))

    def add_ledger(self, ledger: CallLedger) -> None:
        self.ledgers[ledger.cell] = ledger

    def phase_ended(self, cell: str, report: pytest.TestReport) -> None:
        """A phase of the test `cell` ended: the tests that ran, and each of its rows' and
        its ledger's outcome."""
        if report.when == "call" and not report.skipped:
            self.ran_cells.add(cell)
        if report.when == "call":
            outcome: str | None = report.outcome
        else:
            outcome = "error" if report.failed else None
        if outcome is None:
            return
        # A failure or error is never overwritten by a later passing phase.
        for record in self.of(cell):
            if record.outcome in (None, "passed"):
                record.outcome = outcome
        ledger = self.ledgers.get(cell)
        if ledger is not None and ledger.outcome in (None, "passed"):
            ledger.outcome = outcome
