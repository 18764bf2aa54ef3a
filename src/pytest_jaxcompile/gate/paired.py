"""The paired verdict: a changed row's module and its pin's, compiled side by side.

``--compile-paired`` (docs/paired.md) re-compiles, at the end of the session and on the
same machine, the module of the pin a row is compared with beside the row's own module,
alternately (`backends/jax/paired.py`). The machine and the moment are then the same on
both sides of every pair: what differs is the modules. This module says which rows are
paired and against which pin (`pairing_target`), reads the pairs as one comparison with
its uncertainty (`PairedComparison`), and judges it (`judge_paired`).

The statistic: each pair's ratio (new over base, in the process's CPU seconds, which
waiting for a core does not inflate), taken as a log, and Wilcoxon's signed-rank reading of
those: the Hodges-Lehmann estimate of their centre (the median of the pairwise averages)
and its exact interval from the averages' order statistics (with 20 pairs, the 53rd
smallest to the 53rd largest of the 210 averages, 95.2 % confidence). Alternating the
order makes an equal module's log ratios spread evenly about zero, as the statistic
assumes; under bell-shaped noise it needs about two thirds of the pairs the sign test
would for an interval as narrow.
The row is DRIFT when the whole interval is above ``1 + compile_paired_tolerance`` (and the
medians differ by more than the floor), improved when it is wholly below
``1 / (1 + tolerance)``, ok when it lies within both; otherwise it is not decided, says how
many pairs would decide it, and keeps the seconds gate's verdict.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from pytest_jaxcompile._constants import METRIC_CPU, METRIC_WALL, PAIRED_PHASE
from pytest_jaxcompile._io import relative
from pytest_jaxcompile._numbers import percent
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.nearest import OTHER_HARDWARE, nearest_pin
from pytest_jaxcompile.gate.notes import what_changed
from pytest_jaxcompile.gate.pins import Pin, PinStore
from pytest_jaxcompile.gate.status import Status, Verdict
from pytest_jaxcompile.records import (
    CENSUS_SOURCE,
    ComparabilityKey,
    CompileRecord,
)

CONFIDENCE = 0.95  # the interval's least confidence, where the pairs allow it
PAIRED_STATES = ("cold", "none")  # rows whose compile was a real one, like the pairs'
# Verdicts the pairs decide: the compile's seconds (not trace or lowering, which the pairs
# do not measure; not a deterministic verdict: MISS, GREW, an instruction count).
_DECIDED_BY_PAIRS = (Status.DRIFT, Status.IMPROVED, Status.OK, Status.NOISY, Status.UNPINNED)


@dataclass(frozen=True)
class PairingTarget:
    """The pin a changed row is paired against, and where it lives."""

    key: ComparabilityKey
    path: Path
    pin: Pin
    own_key: bool  # the row's own key's pin (else the nearest key's: other hardware)

    def describe(self, root: Path | None = None) -> str:
        where = self.path.name if root is None else relative(self.path, root)
        return f"{where} ({self.key.describe()})"


def pairing_target(record: CompileRecord, store: PinStore) -> PairingTarget | str | None:
    """The pin a row is paired against: its own key's pin, else the nearest key's that
    differs only in the hardware name (the same platform and device kind; `nearest_pin`).

    None: nothing to pair (no such pin, an unchanged module, a census row, a cache hit, a
    settings variant or version judged against another key); a string: why a row that
    changed cannot be paired.
    """
    if record.source == CENSUS_SOURCE or record.cache_state not in PAIRED_STATES:
        return None
    if record.unmeasured is not None or record.fingerprint is None:
        return None
    pin = store.get(record.key, record.cell, record.transform, record.variant)
    target = None
    if pin is not None:
        target = PairingTarget(record.key, store.path_for(record.key), pin, own_key=True)
    else:
        nearest = nearest_pin(record, store)
        if nearest is None or nearest.relation != OTHER_HARDWARE:
            return None  # an upgrade or a settings change is not the module's change
        target = PairingTarget(nearest.key, store.path_for(nearest.key), nearest.pin, False)
    if target.pin.fingerprint is None:
        return "its pin has no fingerprint to find its module by"
    if target.pin.fingerprint == record.fingerprint:
        return None  # the same module: nothing changed that pairing could measure
    return target


# Exact signed-rank tails up to this many pairs (about 0.1 s); beyond, the normal
# approximation, which is within a rank of the exact one there.
EXACT_SIGNED_RANK_PAIRS = 120


def signed_rank_rank(pairs: int, confidence: float = CONFIDENCE) -> int:
    """The rank k (1-based) whose Walsh averages ``[k, M + 1 - k]`` (of the M = n(n+1)/2)
    hold the pairs' centre with at least `confidence`, where `pairs` allow it (else 1: the
    smallest to the largest)."""
    if pairs < 1:
        return 1
    walsh = pairs * (pairs + 1) // 2
    if pairs > EXACT_SIGNED_RANK_PAIRS:
        spread = math.sqrt(pairs * (pairs + 1) * (2 * pairs + 1) / 24)
        below = walsh / 2 - statistics.NormalDist().inv_cdf(1 - (1 - confidence) / 2) * spread
        return max(1, math.floor(below + 0.5))
    tails = _signed_rank_tails(pairs)
    rank = 1
    while rank < walsh // 2 and tails[rank] <= (1 - confidence) / 2:
        rank += 1
    return rank


def interval_confidence(pairs: int, rank: int) -> float:
    """The confidence of the Walsh averages' interval ``[rank, M + 1 - rank]``."""
    if pairs < 1:
        return 0.0
    if pairs > EXACT_SIGNED_RANK_PAIRS:
        walsh = pairs * (pairs + 1) // 2
        spread = math.sqrt(pairs * (pairs + 1) * (2 * pairs + 1) / 24)
        return 1 - 2 * statistics.NormalDist(walsh / 2, spread).cdf(rank - 0.5)
    return 1 - 2 * _signed_rank_tails(pairs)[rank - 1]


def _signed_rank_tails(pairs: int) -> list[float]:
    """``tails[t] = P(T <= t)`` for Wilcoxon's signed-rank statistic T over `pairs`
    (the sum of the ranks of the positive differences when each sign is a coin toss)."""
    walsh = pairs * (pairs + 1) // 2
    ways = [1] + [0] * walsh  # ways[t]: the subsets of ranks 1..n summing to t
    for rank in range(1, pairs + 1):
        for total in range(walsh, rank - 1, -1):
            ways[total] += ways[total - rank]
    tails, running, outcomes = [], 0, 2**pairs
    for count in ways:
        running += count
        tails.append(running / outcomes)
    return tails


def walsh_averages(values: list[float]) -> list[float]:
    """Every ``(values[i] + values[j]) / 2`` for i <= j, sorted: their median is the
    Hodges-Lehmann estimate of the centre, their order statistics its interval."""
    count = len(values)
    return sorted((values[i] + values[j]) / 2 for i in range(count) for j in range(i, count))


@dataclass(frozen=True)
class PairedComparison:
    """A row's pairs, read as one comparison with its uncertainty."""

    metric: str  # cpu (both sides' CPU seconds measured), else wall
    base_s: float  # the pin's module: median seconds
    new_s: float  # the row's module: median seconds
    ratio: float  # the pairs' ratio (new over base): Hodges-Lehmann, on log ratios
    low: float  # the interval holding that median with `confidence`
    high: float
    confidence: float
    pairs: int
    cost_s: float | None  # the child's seconds for this row's pairs
    against: str  # the pin paired against

    @classmethod
    def of(cls, record: CompileRecord) -> PairedComparison | None:
        """The comparison of a row's pairs; None when it was not paired."""
        sides = (
            (METRIC_CPU, record.paired_base_cpu_s, record.paired_new_cpu_s),
            (METRIC_WALL, record.paired_base_wall_s, record.paired_new_wall_s),
        )
        for metric, base, new in sides:
            if base and new and len(base) == len(new) and min(base) > 0 and min(new) > 0:
                logs = [math.log(n / b) for b, n in zip(base, new, strict=True)]
                averages = walsh_averages(logs)
                pairs = len(logs)
                rank = signed_rank_rank(pairs)
                return cls(
                    metric=metric,
                    base_s=statistics.median(base),
                    new_s=statistics.median(new),
                    ratio=math.exp(statistics.median(averages)),
                    low=math.exp(averages[rank - 1]),
                    high=math.exp(averages[len(averages) - rank]),
                    confidence=interval_confidence(pairs, rank),
                    pairs=pairs,
                    cost_s=record.paired_cost_s,
                    against=record.paired_against or "its pin",
                )
        return None

    def status(self, tolerance: float, floor_s: float) -> Status | None:
        """DRIFT, improved or ok where the interval decides it; None where it does not."""
        if abs(self.new_s - self.base_s) <= floor_s:
            return Status.OK  # within the floor: too small to fail, whatever the ratio
        if self.low > 1 + tolerance:
            return Status.DRIFT
        if self.high < 1 / (1 + tolerance):
            return Status.IMPROVED
        if self.low >= 1 / (1 + tolerance) and self.high <= 1 + tolerance:
            return Status.OK
        return None

    def pairs_to_decide(self, tolerance: float) -> int | None:
        """About how many pairs in all would decide it (the interval narrows as one over
        the square root of the pairs); None when the median sits on the tolerance."""
        bound = 1 + tolerance if self.ratio >= 1 else 1 / (1 + tolerance)
        distance = abs(self.ratio - bound)
        half_width = max(self.ratio - self.low, self.high - self.ratio)
        if distance <= 0 or half_width <= 0:
            return None
        return max(math.ceil(self.pairs * (half_width / distance) ** 2), self.pairs + 1)

    def describe(self, tolerance: float) -> str:
        """``paired with pins/x.toml (...): 10 pairs, cpu 1.204 s -> 1.431 s, 1.19x (97.9 %
        interval 1.15x-1.24x, tolerance 5%), cost 26.3 s``"""
        cost = "" if self.cost_s is None else f", cost {self.cost_s:.1f} s"
        return (
            f"paired with {self.against}: {self.pairs} pairs, {self.metric} "
            f"{self.base_s:.3f} s -> {self.new_s:.3f} s, {self.ratio:.2f}x "
            f"({self.confidence:.1%} interval {self.low:.2f}x-{self.high:.2f}x, tolerance "
            f"{percent(tolerance)}){cost}"
        )


def judge_paired(verdict: Verdict, thresholds: Thresholds) -> Verdict:
    """A paired row's verdict: the pairs decide its compile-time status (DRIFT, improved
    or ok, replacing the seconds gate's, which compared with another moment); not decided,
    the seconds gate's verdict stands with a note saying what would decide it. MISS, GREW,
    an instruction-count verdict and a trace or lowering drift are kept, noted."""
    record = verdict.record
    if record.paired_note is not None:
        return verdict.with_note(f"{record.paired_note}; judged on seconds alone")
    comparison = PairedComparison.of(record)
    if comparison is None:
        return verdict
    tolerance = thresholds.paired_tolerance
    text = comparison.describe(tolerance)
    if verdict.status not in _DECIDED_BY_PAIRS or verdict.phase != "compile_s":
        return verdict.with_note(text)
    status = comparison.status(tolerance, thresholds.floor_s)
    if status is None:
        needed = comparison.pairs_to_decide(tolerance)
        more = (
            f"; about {needed} pairs would decide it (--compile-paired-pairs {needed})"
            if needed is not None
            else ""
        )
        return verdict.with_note(f"{text}: not decided, the interval straddles the tolerance{more}")
    pin = verdict.pin or (verdict.nearest.pin if verdict.nearest is not None else None)
    change = what_changed(record, pin) if pin is not None and status is Status.DRIFT else None
    prefix = "DRIFT " if status is Status.DRIFT else ""
    seconds = verdict.note if verdict.status is not Status.UNPINNED else None
    note = "; ".join(part for part in (prefix + text, change, seconds) if part)
    return dataclasses.replace(
        verdict,
        status=status,
        pin=pin,
        tolerance=tolerance,
        note=note,
        metric=comparison.metric,
        phase=PAIRED_PHASE,
    )
