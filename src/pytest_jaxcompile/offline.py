"""Judge a records corpus against the pins outside pytest, with the plugin's own rules.

The rows judged are the latest per cell, transform and comparability key (see
`corpus.LatestRows`); each is judged by `verdicts.judge`, exactly as the plugin judges a
session's rows: strictly within its key, tolerance from the pin, then the record's marker
value, then the given default, and the same floor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pytest_jaxcompile.corpus import Corpus, LatestRows, latest_rows
from pytest_jaxcompile.pins import PinStore
from pytest_jaxcompile.records import ComparabilityKey
from pytest_jaxcompile.reporting import relative
from pytest_jaxcompile.verdicts import (
    Status,
    Thresholds,
    Verdict,
    bumped_from,
    judge_all,
    session_failed,
)

STATUS_ORDER = (Status.DRIFT, Status.IMPROVED, Status.UNPINNED, Status.NOT_JUDGED, Status.OK)


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
    corpus: Corpus, store: PinStore, thresholds: Thresholds, fail_on_improvement: bool
) -> CheckOutcome:
    latest: LatestRows = latest_rows(corpus)
    verdicts = judge_all(latest.records(), store, thresholds)
    return CheckOutcome(
        verdicts=verdicts,
        store=store,
        thresholds=thresholds,
        fail_on_improvement=fail_on_improvement,
        corpus_description=corpus.describe(),
        failed=session_failed(verdicts, fail_on_improvement),
        expected=[verdict for verdict in verdicts if expected_recompile(verdict, store)],
    )


def format_row(verdict: Verdict, label: str | None = None) -> str:
    """One row as the plugin's summary prints it."""
    record = verdict.record
    text = f"{label or verdict.status.value:<10} {record.cell} [{record.transform}]"
    text += f" {record.compile_s:.3f} s"
    if verdict.pin is not None:
        text += f", pin {verdict.pin.compile_s:.3f} s"
        if verdict.ratio is not None:
            text += f" ({verdict.ratio:.2f}x"
            if verdict.tolerance is not None:
                text += f", tolerance {verdict.tolerance:.0%}"
            text += ")"
    if verdict.status is Status.NOT_JUDGED:
        text += f" [{record.cache_state}]"
    if record.timestamp:
        text += f"  at {record.timestamp}"
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
    drift = outcome.count(Status.DRIFT)
    if drift:
        lines.append(
            f"DRIFT: {drift} row(s) compiled slower than their pin by more than the tolerance "
            f"and by more than {outcome.thresholds.floor_s:g} s."
        )
    improved = outcome.count(Status.IMPROVED)
    if improved and outcome.fail_on_improvement:
        lines.append(
            f"improved: {improved} row(s) compiled faster than their pin "
            "(failing: --fail-on-improvement)."
        )
    return lines
