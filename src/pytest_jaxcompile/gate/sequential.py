"""The paired gate's statistic: a sequential signed-rank test over the pairs as they arrive.

Each pair gives a log ratio (the new module's seconds over the pinned module's). A row is
judged at a schedule of looks, `LOOKS` (after 6, 8, 10, 12, 16, 20, 30, 45 and 60 pairs),
and stops at the first look that decides it. At a look with n pairs the estimate is the
Hodges-Lehmann median of the n(n+1)/2 Walsh averages (pairwise means) of the log ratios,
and the interval runs from the Walsh average of rank `RANKS[look]` from the bottom to the
one of that rank from the top:

- wholly above ``log(1 + tolerance)``: DRIFT;
- wholly below ``-log(1 + tolerance)``: improved;
- wholly below ``log(1 + tolerance)`` (or the medians closer than the floor): ok, not
  slower than the tolerance;
- else not decided: the next look, up to the last the row may have.

The ranks make it a group-sequential signed-rank test: ``benchmarks/paired_boundaries.py``
computes them from the exact joint law of the signed-rank statistics across the looks
(distribution-free: it holds for any noise spread evenly about its centre), spending at
most `ONE_SIDED_ERROR` over all the looks together (Lan and DeMets' alpha spending), for a
false DRIFT of a module exactly at the tolerance and for a false ok of one just as slow
(docs/paired.md). The pairing child judges with this module as its pairs arrive
(backends/jax/paired_child.py); the gate judges the recorded pairs again with it, and
reaches the same look.

Pure logic on lists of seconds: no JAX, no pytest, only the package's constants imported
(the pairing child imports it).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_jaxcompile._constants import METRIC_CPU, METRIC_WALL, PAIRED_LOOKS

# The looks: after this many pairs a row may be decided. Fewer than 6 pairs cannot give a
# signed-rank decision at this error at all (6 pairs all on one side: 1 in 64).
LOOKS = PAIRED_LOOKS
# The error spent over every look together, on each side: a false DRIFT (a module exactly
# `tolerance` slower) and a false ok (likewise). 2.5 % each: the two sides of a 95 % interval.
ONE_SIDED_ERROR = 0.025
# The Walsh-average rank of each look's interval, from `benchmarks/paired_boundaries.py`
# (10^6 simulated sessions, seed 1): the first look decides only with all six pairs on one
# side, later looks spend the error left as the square root of their share of 60 pairs.
RANKS = (1, 1, 3, 7, 17, 32, 100, 277, 543)

DRIFT = "DRIFT"
IMPROVED = "improved"
OK = "ok"


def looks_up_to(max_pairs: int) -> list[tuple[int, int]]:
    """The (pairs, rank) looks a row with at most `max_pairs` pairs has: the schedule cut
    there, which spends only less of the error (the ranks stay valid)."""
    return [(pairs, rank) for pairs, rank in zip(LOOKS, RANKS, strict=True) if pairs <= max_pairs]


def walsh_averages(values: Sequence[float]) -> list[float]:
    """Every ``(values[i] + values[j]) / 2`` for i <= j, sorted: their median is the
    Hodges-Lehmann estimate of the centre, their order statistics its interval."""
    count = len(values)
    return sorted((values[i] + values[j]) / 2 for i in range(count) for j in range(i, count))


@dataclass(frozen=True)
class Look:
    """The pairs judged at one look."""

    pairs: int
    ratio: float  # Hodges-Lehmann estimate of the ratio (new over base)
    low: float  # the look's interval (its rank's Walsh averages)
    high: float
    rank: int
    base_s: float  # median seconds of each side over these pairs
    new_s: float
    status: str | None  # DRIFT, improved, ok, or None: not decided at this look


def judge_look(
    base: Sequence[float], new: Sequence[float], rank: int, tolerance: float, floor_s: float
) -> Look:
    """The first len(base) pairs judged with the interval of Walsh rank `rank`."""
    logs = [math.log(n / b) for b, n in zip(base, new, strict=True)]
    averages = walsh_averages(logs)
    low, high = averages[rank - 1], averages[len(averages) - rank]
    base_s, new_s = statistics.median(base), statistics.median(new)
    bound = math.log1p(tolerance)
    status: str | None = None
    if abs(new_s - base_s) < floor_s:
        status = OK  # within the floor: too small to fail, whatever the ratio (0: no floor)
    elif low > bound:
        status = DRIFT
    elif high < -bound:
        status = IMPROVED
    elif high < bound:
        status = OK  # not slower than the tolerance, with the test's confidence
    return Look(
        pairs=len(logs),
        ratio=math.exp(statistics.median(averages)),
        low=math.exp(low),
        high=math.exp(high),
        rank=rank,
        base_s=base_s,
        new_s=new_s,
        status=status,
    )


Seconds = Sequence[float] | None


def judged_seconds(
    cpu: tuple[Seconds, Seconds], wall: tuple[Seconds, Seconds]
) -> tuple[str, Sequence[float], Sequence[float]] | None:
    """The clock the pairs are judged on, and its (base, new) seconds: CPU seconds where both
    sides have every one measured (above 0), else wall seconds; None where neither has."""
    for clock, (base, new) in ((METRIC_CPU, cpu), (METRIC_WALL, wall)):
        if base and new and len(base) == len(new) and min(base) > 0 and min(new) > 0:
            return clock, base, new
    return None


def judge_pairs(
    base: Sequence[float],
    new: Sequence[float],
    tolerance: float,
    floor_s: float,
    max_pairs: int = LOOKS[-1],
) -> Look | None:
    """The first look that decides the pairs (in their order), else the last look they
    reached, not decided; None with fewer pairs than the first look."""
    reached = None
    for pairs, rank in looks_up_to(min(max_pairs, len(base), len(new))):
        reached = judge_look(base[:pairs], new[:pairs], rank, tolerance, floor_s)
        if reached.status is not None:
            return reached
    return reached


def interval_confidence(pairs: int, rank: int) -> float:
    """The confidence of the Walsh averages' interval ``[rank, M + 1 - rank]`` at one look
    on its own (the sequential rule's error is over all looks together: `ONE_SIDED_ERROR`)."""
    if pairs < 1 or rank < 1:
        return 0.0
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
