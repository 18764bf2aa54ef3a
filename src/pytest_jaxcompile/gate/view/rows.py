"""One verdict as shown (`RowView`), and the folds of rows whose statuses are counted rather
than listed at default verbosity.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pytest_jaxcompile.gate.grouping import shown_key
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.nearest import UPGRADE
from pytest_jaxcompile.gate.profile import profile_note
from pytest_jaxcompile.gate.status import Status, Tone, Verdict
from pytest_jaxcompile.gate.view.causes import brief, note_parts
from pytest_jaxcompile.gate.view.figures import Figures, figures
from pytest_jaxcompile.gate.view.meaning import meaning
from pytest_jaxcompile.records import ComparabilityKey, CompileRecord


@dataclass(frozen=True)
class RowView:
    """One verdict as shown: its label, tone, figures, causes and whether it fails."""

    verdict: Verdict
    fails: bool
    figures: Figures
    causes: tuple[str, ...]  # what explains the verdict (the gate's note), one per line
    meaning: str  # what the status says about this row: "compiled slower than its pin ..."
    # The note's short line (`causes.brief`: at most 160 characters, no histogram or
    # profile) and its parts, one per line: the default summary shows the first, -v these
    cause: str | None = None
    details: tuple[str, ...] = ()
    # Where inside XLA the compile spent its time (the compile profile; also in `causes`,
    # as part of the note): for outputs that show no notes, the dashboard's tables.
    profile: str | None = None
    # compile_reproducer: the row's reproducer bundle, relative to the rootdir, if written
    reproducer: str | None = None

    @property
    def status(self) -> Status:
        return self.verdict.status

    @property
    def tone(self) -> Tone:
        return self.verdict.status.tone

    @property
    def record(self) -> CompileRecord:
        return self.verdict.record

    @property
    def cell(self) -> str:
        return self.verdict.record.cell

    @property
    def transform(self) -> str:
        return self.verdict.record.transform

    @property
    def variant(self) -> str:
        return self.verdict.record.variant

    @property
    def name(self) -> str:
        """``cell [transform]`` (``[transform | variant]`` for a settings variant)."""
        return self.verdict.record.name

    @property
    def key(self) -> ComparabilityKey:
        """The key the row is shown under: its judged compile's (`grouping.shown_key`)."""
        return shown_key(self.verdict)

    @property
    def expected_recompile(self) -> bool:
        """An unpinned row whose nearest pin is the same hardware under an earlier version."""
        nearest = self.verdict.nearest
        return (
            self.status is Status.UNPINNED and nearest is not None and nearest.relation == UPGRADE
        )

    @property
    def label(self) -> str:
        """The status as tables show it; an unpinned row after an upgrade says so."""
        nearest = self.verdict.nearest
        if self.expected_recompile and nearest is not None:
            return (
                f"unpinned (upgrade from {nearest.key.framework} {nearest.key.framework_version})"
            )
        return self.status.value


def row_view(
    verdict: Verdict,
    thresholds: Thresholds,
    pin_update: bool = False,
    reproducer: str | None = None,
) -> RowView:
    return RowView(
        verdict,
        fails=not pin_update and verdict.fails(thresholds),
        figures=figures(verdict, thresholds),
        causes=(verdict.note,) if verdict.note else (),
        cause=brief(verdict.note),
        details=note_parts(verdict.note),
        meaning=meaning(verdict.status, [verdict], thresholds, plural=False),
        profile=profile_note(verdict, thresholds),
        reproducer=reproducer,
    )


# Statuses whose rows are folded at default verbosity (unless they fail): a count per file,
# the median of their ratios and the five furthest, instead of two lines a row.
FOLDED = (Status.UNPINNED, Status.NOISY, Status.BUDGET)
FOLD_FURTHEST = 5  # rows named in a fold: those with the highest ratios


def folded(row: RowView) -> bool:
    """Whether this row is shown in its status's fold rather than on its own lines."""
    return row.status in FOLDED and not row.fails


@dataclass(frozen=True)
class Fold:
    """Rows of one folded status as a count per file, and their ratios: unpinned rows
    against their nearest pin under another key, noisy rows against their own pin."""

    status: Status
    rows: tuple[RowView, ...]
    per_file: tuple[tuple[str, int], ...]
    median: float | None  # of the ratios
    furthest: tuple[tuple[RowView, float], ...]  # the rows with the highest ratios

    def per_file_text(self) -> str:
        return ", ".join(f"{name} {count}" for name, count in self.per_file)

    def ratios_text(self) -> str | None:
        """``3 compared with their nearest pin under another key: median 1.02x; furthest:
        ...`` (unpinned) or ``median 1.04x of their pin (wall seconds); highest: ...``."""
        if self.median is None:
            return None
        named = ", ".join(f"{row.name} {ratio:.2f}x" for row, ratio in self.furthest)
        if self.status is Status.UNPINNED:
            compared = sum(1 for row in self.rows if _fold_ratio(row) is not None)
            return (
                f"{compared} compared with their nearest pin under another key: median "
                f"{self.median:.2f}x; furthest: {named}"
            )
        metrics = sorted(
            {row.figures.metric.name for row in self.rows if row.figures.ratio is not None}
        )
        return (
            f"median {self.median:.2f}x of their pin ({', '.join(metrics)} seconds); "
            f"highest: {named}"
        )


def _fold_ratio(row: RowView) -> float | None:
    if row.status is Status.UNPINNED:
        nearest = row.verdict.nearest
        return None if nearest is None else nearest.ratio
    return row.figures.ratio


def fold(rows: Sequence[RowView]) -> Fold:
    """The fold of rows of one status (the status of the first)."""
    files = Counter(row.cell.split("::", 1)[0] for row in rows)
    ratios = [(row, ratio) for row in rows if (ratio := _fold_ratio(row)) is not None]
    furthest = sorted(ratios, key=lambda item: -item[1])[:FOLD_FURTHEST]
    return Fold(
        rows[0].status if rows else Status.UNPINNED,
        tuple(rows),
        tuple(sorted(files.items())),
        statistics.median(ratio for _, ratio in ratios) if ratios else None,
        tuple(furthest),
    )


def split_folds(rows: Iterable[RowView]) -> tuple[list[RowView], list[Fold]]:
    """The rows shown on their own lines, and the folds of the others (in FOLDED order)."""
    shown: list[RowView] = []
    by_status: dict[Status, list[RowView]] = {}
    for row in rows:
        if folded(row):
            by_status.setdefault(row.status, []).append(row)
        else:
            shown.append(row)
    return shown, [fold(by_status[status]) for status in FOLDED if status in by_status]
