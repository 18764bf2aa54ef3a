"""The verdict as every output shows it: a ready view of each row and of the session.

`session_view(outcome)` is built once from the gate's `Outcome`; the terminal, the GitHub
step summary, annotations and pull-request comment, the JSON report, JUnit, ``check``,
``merge`` and the dashboard only format it. Here live what a status means, what to do about
it, which figures a verdict compared (the metric, its unit, the ratio from those same
figures, the limit), whether a row fails, the re-pin command, and the session's blocks in
one order. Wording that belongs to one output (a terminal's ``-v``, "the session fails"
against a comment's "this run fails") lives with that output.

Its parts live in this package's modules, one per concept: `figures` (the metrics and the
figures a verdict compared), `meaning` (what a status means, what to do), `repin` (the
re-pin command), `rows` (a row as shown, and the folds), `blocks` (the session's blocks),
`spend` (the tests' compile seconds and the gate's own, the trace profile). This module
builds the session's view and names what the outputs use.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_jaxcompile._io import relative
from pytest_jaxcompile.gate.grouping import by_key
from pytest_jaxcompile.gate.outcome import Outcome
from pytest_jaxcompile.gate.pins import never_pinned, pin_file_name
from pytest_jaxcompile.gate.status import Status, Verdict
from pytest_jaxcompile.gate.view.blocks import (
    Block,
    BlockKind,
    busy_pin_text,
    coverage_text,
    instructions_blocks,
    session_blocks,
)
from pytest_jaxcompile.gate.view.figures import METRICS, Figures, Metric, compared_metric, figures
from pytest_jaxcompile.gate.view.meaning import BUDGET_NOT_PINNED, advice
from pytest_jaxcompile.gate.view.repin import Repin, ci_way, repin_command
from pytest_jaxcompile.gate.view.rows import (
    FOLDED,
    Fold,
    RowView,
    fold,
    folded,
    row_view,
    split_folds,
)
from pytest_jaxcompile.gate.view.spend import (
    TRACE_GROUPS,
    Spend,
    TraceRollup,
    TraceShare,
    compile_seconds_per_test,
    session_spend,
    spend_lines,
    trace_rollup,
)
from pytest_jaxcompile.records import ComparabilityKey

__all__ = [
    "BUDGET_NOT_PINNED",
    "FOLDED",
    "METRICS",
    "TRACE_GROUPS",
    "Block",
    "BlockKind",
    "Figures",
    "Fold",
    "GroupView",
    "Metric",
    "Repin",
    "RowView",
    "SessionView",
    "Spend",
    "TraceRollup",
    "TraceShare",
    "advice",
    "busy_pin_text",
    "ci_way",
    "compared_metric",
    "compile_seconds_per_test",
    "coverage_text",
    "figures",
    "fold",
    "folded",
    "group_pin_file",
    "instructions_blocks",
    "repin_command",
    "row_view",
    "session_spend",
    "session_view",
    "spend_lines",
    "split_folds",
    "trace_rollup",
]


@dataclass(frozen=True)
class GroupView:
    """The rows shown under one comparability key (`grouping.shown_key`), most severe
    first, and where its pins live; in a pin update, what its file pins."""

    key: ComparabilityKey
    pin_file: Path | None
    rows: tuple[RowView, ...]
    # A pin update: the rows this key's file pins from the session (a changed row's twin
    # under its twin's key too: such a key may show no row of its own), and the rows shown
    # here that no file pins, counted by why (`pins.never_pinned`: "failed", ...)
    pinned_rows: int = 0
    not_pinned: tuple[tuple[str, int], ...] = ()

    @property
    def budget_rows(self) -> int:
        """Rows judged by their compile_budget only: a pin update does not pin them."""
        return sum(1 for row in self.rows if row.status is Status.BUDGET)

    @property
    def not_pinned_rows(self) -> int:
        return sum(count for _, count in self.not_pinned)

    def not_pinned_text(self) -> str:
        """Why the rows not pinned were not: ``failed`` (one reason), else by reason:
        ``1 failed, 2 unknown cache state``."""
        if len(self.not_pinned) == 1:
            return self.not_pinned[0][0]
        return ", ".join(f"{count} {why}" for why, count in self.not_pinned)


@dataclass(frozen=True)
class SessionView:
    """The session as every output shows it."""

    outcome: Outcome
    groups: tuple[GroupView, ...]  # keys holding the most severe rows first
    blocks: tuple[Block, ...]  # in BlockKind order; STATUS blocks in the Status order
    failed: bool
    trace: TraceRollup | None = None  # where tracing time went (compile_trace_profile)
    spend: Spend | None = None  # what the session and the gate spent (None: a pin update)

    @property
    def rows(self) -> list[RowView]:
        """Every row, in the view's order: by group, most severe first within it."""
        return [row for group in self.groups for row in group.rows]

    def failing(self) -> list[RowView]:
        return [row for row in self.rows if row.fails]

    def counts(self) -> list[tuple[Status, int]]:
        """(status, rows) for every status present, in the Status order."""
        found = Counter(row.status for row in self.rows)
        return [(status, found[status]) for status in Status if found[status]]

    def counts_text(self) -> str:
        """``1 DRIFT, 2 ok``: the rows per status, in the Status order."""
        return ", ".join(f"{n} {status.value}" for status, n in self.counts())

    @property
    def headline(self) -> str:
        """``FAIL (1 DRIFT)``, ``pass``, ``pins updated`` or ``pins NOT updated``."""
        outcome = self.outcome
        if outcome.pin_error is not None:
            return "pins NOT updated"
        if outcome.pin_update:
            return "pins NOT updated" if outcome.pinned_nothing else "pins updated"
        if self.failed:
            failing = Counter(row.status for row in self.failing())
            parts = [f"{failing[status]} {status.value}" for status in Status if failing[status]]
            return "FAIL (" + ", ".join(parts) + ")" if parts else "FAIL"
        return "pass"

    @property
    def reproducers(self) -> str | None:
        """``reproducer bundles of 2 row(s) in jaxcompile-reproducers (python reproduce.py
        in each)``: the one line every output says where bundles were written; None:
        none was."""
        outcome = self.outcome
        if not outcome.reproducers or outcome.reproducers_dir is None:
            return None
        where = relative(outcome.reproducers_dir, outcome.rootdir)
        return (
            f"reproducer bundles of {len(outcome.reproducers)} row(s) in {where} "
            "(python reproduce.py in each; docs/reproducer.md)"
        )

    def blocks_of(self, *kinds: BlockKind) -> list[Block]:
        return [block for block in self.blocks if block.kind in kinds]

    def failure_blocks(self) -> list[Block]:
        """The blocks that make the session fail (a failing status, upgrade, clobber, ...)."""
        return [block for block in self.blocks if block.fails]


def group_pin_file(
    outcome: Outcome, key: ComparabilityKey, verdicts: Sequence[Verdict]
) -> Path | None:
    """The pin file of the group's own key: in a pin update, where it pinned rows (none
    where it pinned nothing: no line names a file not written); else where any of its rows
    was judged against pins.

    Never a verdict's own pin file: an instruction count is compared with a pin of any key,
    yet the group is the key the row is shown under.
    """
    if outcome.pin_update and outcome.pin_error is None:
        if key not in outcome.pinned:
            return None
    elif all(verdict.pin_file is None for verdict in verdicts):
        return None
    found = outcome.pin_files.get(key)
    return found if found is not None else outcome.pins_dir / pin_file_name(key)


def _not_pinned(
    outcome: Outcome, key: ComparabilityKey, verdicts: Sequence[Verdict]
) -> Counter[str]:
    """A pin update's rows shown under `key` that no pin file holds, counted by why."""
    if not outcome.pin_update or outcome.pin_error is not None:
        return Counter()
    pinned = outcome.pinned.get(key, frozenset())
    return Counter(
        never_pinned(verdict.record) or "not pinned"
        for verdict in verdicts
        if verdict.status is not Status.BUDGET and verdict.record.row_id not in pinned
    )


def session_view(outcome: Outcome) -> SessionView:
    """The view of a concluded session (or of merged reports, or of a records corpus)."""
    groups = []
    grouped = by_key(outcome.verdicts)
    if outcome.pin_update:  # a key pinned only through twins is said too
        shown = {key for key, _ in grouped}
        grouped += [(key, []) for key in sorted(outcome.pinned) if key not in shown]
    for key, verdicts in grouped:
        pin_file = group_pin_file(outcome, key, verdicts)
        rows = tuple(
            row_view(v, outcome.thresholds, outcome.pin_update, _reproducer(outcome, v))
            for v in verdicts
        )
        not_pinned = _not_pinned(outcome, key, verdicts)
        groups.append(
            GroupView(
                key,
                pin_file,
                rows,
                pinned_rows=len(outcome.pinned.get(key, ())),
                not_pinned=tuple(sorted(not_pinned.items())),
            )
        )
    groups.sort(key=lambda group: (_severity(group), group.key))
    return SessionView(
        outcome,
        tuple(groups),
        tuple(session_blocks(outcome, [row for group in groups for row in group.rows])),
        outcome.failed,
        trace_rollup(verdict.record for verdict in outcome.verdicts),
        session_spend(outcome),
    )


def _reproducer(outcome: Outcome, verdict: Verdict) -> str | None:
    found = outcome.reproducers.get((verdict.record.key, verdict.record.row_id))
    return None if found is None else relative(found, outcome.rootdir)


def _severity(group: GroupView) -> int:
    """A group's most severe row's (a group of a pin update's twins only: the last)."""
    return group.rows[0].status.severity if group.rows else len(Status)
