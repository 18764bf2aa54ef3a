"""Judge a records corpus against the pins outside pytest, with the plugin's own rules.

The rows judged are the latest per cell, transform and comparability key (see
`corpus.LatestRows`); each is judged by `verdicts.judge`, exactly as the plugin judges a
session's rows: strictly within its key, tolerance from the pin, then the record's marker
value, then the given default, and the same floor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_jaxcompile.corpus.store import Corpus, LatestRows, Row
from pytest_jaxcompile.gate.pins import PinStore
from pytest_jaxcompile.gate.verdicts import (
    Status,
    Thresholds,
    Verdict,
    bumped_from,
    judge_all,
    session_failed,
)
from pytest_jaxcompile.output.terminal import relative, row_text
from pytest_jaxcompile.records import ComparabilityKey

STATUS_ORDER = tuple(Status)  # the summary's order: failing verdicts first


def expected_recompile(verdict: Verdict, store: PinStore) -> list[str]:
    """For an unpinned row pinned under other jax versions only: those versions."""
    if verdict.status is not Status.UNPINNED:
        return []
    record = verdict.record
    return bumped_from(record.key, store.keys_pinning(record.cell, record.transform))


def verdict_label(verdict: Verdict, store: PinStore) -> str:
    """The status as shown in tables; a jax version bump is named as an expected recompile."""
    if expected_recompile(verdict, store):
        return "expected recompile (jax bump)"
    return verdict.status.value


@dataclass
class CheckOutcome:
    verdicts: list[Verdict]
    store: PinStore
    thresholds: Thresholds
    fail_on_improvement: bool
    corpus_description: str
    failed: bool = False
    expected: list[Verdict] = field(default_factory=list)

    def count(self, status: Status) -> int:
        return sum(1 for verdict in self.verdicts if verdict.status is status)


def check_corpus(
    corpus: Corpus,
    store: PinStore,
    thresholds: Thresholds,
    fail_on_improvement: bool,
    on_row: Callable[[Row], None] | None = None,
) -> CheckOutcome:
    """Judge the latest rows; `on_row` sees every row read (e.g. to collect trends)."""
    latest = LatestRows()
    for row in corpus.rows():
        latest.add(row)
        if on_row is not None:
            on_row(row)
    verdicts = judge_all(latest.records(), store, thresholds)
    return CheckOutcome(
        verdicts=verdicts,
        store=store,
        thresholds=thresholds,
        fail_on_improvement=fail_on_improvement,
        corpus_description=corpus.describe(),
        failed=session_failed(verdicts, fail_on_improvement, thresholds.time_advisory),
        expected=[verdict for verdict in verdicts if expected_recompile(verdict, store)],
    )


def format_row(verdict: Verdict) -> str:
    """One row as the plugin's summary prints it, and when it was measured."""
    text = row_text(verdict)
    if verdict.record.timestamp:
        text += f"  at {verdict.record.timestamp}"
    return text


def check_lines(outcome: CheckOutcome, verbose: bool, root: Path) -> list[str]:
    """The report of `pytest-jaxcompile check`: rows grouped by key, worst first."""
    lines: list[str] = []
    by_key: dict[ComparabilityKey, list[Verdict]] = {}
    for verdict in outcome.verdicts:
        by_key.setdefault(verdict.record.key, []).append(verdict)
    for key in sorted(by_key):
        verdicts = sorted(
            by_key[key],
            key=lambda v: (STATUS_ORDER.index(v.status), v.record.cell, v.record.transform),
        )
        header = key.describe()
        pin_file = next((v.pin_file for v in verdicts if v.pin_file is not None), None)
        if pin_file is not None and pin_file.exists():
            header += f"  ({relative(pin_file, root)})"
        lines.append(header)
        hidden = 0
        for verdict in verdicts:
            if verdict.status is Status.OK and not verbose:
                hidden += 1
                continue
            lines.append("  " + format_row(verdict))
            if verdict.note:
                lines.append("      " + verdict.note)
        if hidden:
            lines.append(f"  ok         {hidden} row(s) within tolerance (-v lists them)")
    counts = ", ".join(
        f"{outcome.count(status)} {status.value}"
        for status in STATUS_ORDER
        if outcome.count(status)
    )
    lines.append(
        f"checked the latest row per cell, transform and key: {len(outcome.verdicts)} row(s) "
        f"from {outcome.corpus_description}"
    )
    if counts:
        lines.append(f"compile rows: {counts}")
    if outcome.expected:
        versions = sorted(
            {v for verdict in outcome.expected for v in expected_recompile(verdict, outcome.store)}
        )
        lines.append(
            f"expected recompiles: {len(outcome.expected)} unpinned row(s) are pinned only under "
            f"jax {', '.join(versions)}: a jax version bump recompiles once by design; "
            "not drift. Pin the new version (pytest-jaxcompile pin) when it is the baseline."
        )
    thresholds = outcome.thresholds
    missed = outcome.count(Status.MISS)
    if missed:
        lines.append(
            f"MISS: {missed} row(s) compiled cold although their module is unchanged since its "
            "warm pin (--expect-warm)."
        )
    grew = outcome.count(Status.GREW)
    if grew:
        lines.append(
            f"GREW: {grew} row(s) compiled a module that grew beyond its op-count limit."
        )
    drift = outcome.count(Status.DRIFT)
    if drift:
        lines.append(
            f"DRIFT: {drift} row(s) compiled slower than their pin by more than the tolerance "
            f"and by more than {thresholds.floor_s:g} s"
            + ("; reported only (--time-advisory)." if thresholds.time_advisory else ".")
        )
    improved = outcome.count(Status.IMPROVED)
    if improved and outcome.fail_on_improvement and not thresholds.time_advisory:
        lines.append(
            f"improved: {improved} row(s) compiled faster than their pin "
            "(failing: --fail-on-improvement)."
        )
    noisy = outcome.count(Status.NOISY)
    if noisy:
        lines.append(
            f"noisy: {noisy} row(s) were measured above {thresholds.max_load:g} load per core "
            "and are not judged (--strict judges them)."
        )
    return lines
