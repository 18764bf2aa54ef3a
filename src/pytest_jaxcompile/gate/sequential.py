"""The paired gate's statistic: a sequential signed-rank test over the pairs as they arrive.

Each pair gives a log ratio (the new module's seconds over the pinned module's). A row is
judged at a schedule of looks, `LOOKS` (after 6, 8, 10, 12, 16, 20, 30, 45 and 60 pairs),
and stops at the first look that decides it. At a look with n pairs the estimate is the
Hodges-Lehmann median of the n(n+1)/2 Walsh averages (pairwise means) of the log ratios,
and the interval runs from the Walsh average of rank `RANKS[look]` from the bottom to the
one of that rank from the top:

- wholly above ``log(1 + bound)``: DRIFT;
- wholly below ``-log(1 + bound)``: improved;
- wholly below ``log(1 + bound)``: ok, not slower than the bound;
- else not decided: the next look, up to the last the row may have, unless the looks left
  cannot decide it (`futile`): then it stops, not decided.

The bound is the larger of the tolerance and the floor (``floor_s`` over the pinned
module's median seconds): a row is ok by the floor only when its whole interval, in
seconds, is under the floor, and DRIFT only when it is wholly over it, never on the
medians alone. So ok always means, with the rule's confidence: not slower than the larger
of the tolerance and the floor.

Futility (`futile`): at a look that does not decide, the pairs' noise measured so far
(`pair_noise`: the spread of the log ratios) predicts the last look's interval; where even
that interval, centred where the estimate may drift by then, would most likely still
straddle the bound (a chance under `FUTILITY` that it would not), the row stops not
decided rather than spending every pair. Stopping without a decision never adds an error
(a futility stop is not a verdict), so the ranks' promise stands.

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
from functools import cache
from statistics import NormalDist

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
# A row stops not decided when the chance that its last look decides it, were its ratio
# what the pairs so far estimate, is under this: chosen on benchmarks/paired_noise.py's
# simulation, for the equal rows it stops early against the pairs it saves
# (docs/benchmarks.md#the-paired-gate-on-a-noisy-runner).
FUTILITY = 0.05
# A normal spread from the log ratios' median absolute deviation (robust to the odd
# preempted compile); the pairs' noise, per compile, is that over the square root of 2.
_MAD_TO_SD = 1.4826

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
    bound: float = 0.0  # the ratio over 1 judged against: the tolerance, or the floor's share
    by_floor: bool = False  # the floor, not the tolerance, set the bound
    noise: float = 0.0  # the pairs' noise per compile (a fraction: 0.03 = 3 %)
    futile: bool = False  # not decided, and the looks left cannot decide it: stopped

    @property
    def ends(self) -> bool:
        """Whether the pairing stops at this look: decided, or futile."""
        return self.status is not None or self.futile


def pair_noise(logs: Sequence[float]) -> float:
    """The spread of the pairs' log ratios (a normal standard deviation, from their median
    absolute deviation); 0 with fewer than 2."""
    if len(logs) < 2:
        return 0.0
    centre = statistics.median(logs)
    return _MAD_TO_SD * statistics.median(abs(value - centre) for value in logs)


def look_z(pairs: int, rank: int) -> float:
    """The normal quantile of one look's interval on its own (its one-sided level)."""
    tail = _signed_rank_tails(pairs)[rank - 1]
    return NormalDist().inv_cdf(1 - tail)


def half_width(spread: float, pairs: int, rank: int) -> float:
    """About the half width, in log ratio, of the interval of a look of `pairs` pairs at
    Walsh rank `rank`, for log ratios of this spread (the Hodges-Lehmann estimate's
    standard error is ``spread * sqrt(pi / 3 / pairs)`` for normal noise)."""
    return look_z(pairs, rank) * spread * math.sqrt(math.pi / 3 / pairs)


def resolvable(noise: float, max_pairs: int) -> float:
    """About the smallest tolerance against which an equal module is mostly (5 rows in
    6) decided ok within `max_pairs` pairs at this per-compile `noise`: the last look's
    interval's half width and one standard error of its estimate, as a ratio over 1
    (``this runner resolves about 12 % in 20 pairs``)."""
    looks = looks_up_to(max_pairs)
    if not looks:
        return math.inf
    pairs, rank = looks[-1]
    spread = noise * math.sqrt(2)
    return math.expm1(half_width(spread, pairs, rank) + spread * math.sqrt(math.pi / 3 / pairs))


def futile(logs: Sequence[float], estimate: float, bound: float, last: tuple[int, int]) -> bool:
    """Whether the looks left up to `last` ((pairs, rank)) most likely cannot decide a row
    whose log ratios so far are `logs` and whose estimate is `estimate`, at log `bound`:
    the chance that the last look's interval clears the bound, were the ratio the
    estimate, is under `FUTILITY` (the noise measured so far sets both the interval's
    width and how far the estimate may move in the pairs left)."""
    pairs, rank = last
    made = len(logs)
    spread = pair_noise(logs)
    if pairs <= made or spread <= 0:
        return pairs <= made
    width = half_width(spread, pairs, rank)
    moves = spread * math.sqrt(math.pi / 3 * (pairs - made)) / pairs
    normal = NormalDist()
    chance = normal.cdf((estimate - bound - width) / moves) + normal.cdf(
        (bound - width - estimate) / moves
    )
    return chance < FUTILITY


def judge_look(
    base: Sequence[float],
    new: Sequence[float],
    rank: int,
    tolerance: float,
    floor_s: float,
    last: tuple[int, int] | None = None,
) -> Look:
    """The first len(base) pairs judged with the interval of Walsh rank `rank`; with
    `last` (the last look the row may have: (pairs, rank)), a look that does not decide
    says whether the looks left could (`futile`)."""
    logs = [math.log(n / b) for b, n in zip(base, new, strict=True)]
    averages = walsh_averages(logs)
    low, high = averages[rank - 1], averages[len(averages) - rank]
    base_s, new_s = statistics.median(base), statistics.median(new)
    floor_share = floor_s / base_s if base_s > 0 else math.inf
    by_floor = floor_share > tolerance
    ratio_bound = max(tolerance, floor_share)
    bound = math.log1p(ratio_bound)
    estimate = statistics.median(averages)
    status: str | None = None
    if low > bound:
        status = DRIFT  # slower than the tolerance and the floor, with the test's confidence
    elif high < -bound:
        status = IMPROVED
    elif high < bound:
        status = OK  # not slower than the tolerance and the floor, likewise
    return Look(
        pairs=len(logs),
        ratio=math.exp(estimate),
        low=math.exp(low),
        high=math.exp(high),
        rank=rank,
        base_s=base_s,
        new_s=new_s,
        status=status,
        bound=ratio_bound,
        by_floor=by_floor,
        noise=pair_noise(logs) / math.sqrt(2),
        futile=status is None and last is not None and futile(logs, estimate, bound, last),
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
    """The first look that decides the pairs (in their order) or finds the looks left up
    to `max_pairs` cannot (`Look.ends`), else the last look they reached, not decided;
    None with fewer pairs than the first look. The pairing child stops at the same look."""
    allowed = looks_up_to(max_pairs)
    last = allowed[-1] if allowed else None
    reached = None
    for pairs, rank in looks_up_to(min(max_pairs, len(base), len(new))):
        reached = judge_look(base[:pairs], new[:pairs], rank, tolerance, floor_s, last)
        if reached.ends:
            return reached
    return reached


def interval_confidence(pairs: int, rank: int) -> float:
    """The confidence of the Walsh averages' interval ``[rank, M + 1 - rank]`` at one look
    on its own (the sequential rule's error is over all looks together: `ONE_SIDED_ERROR`)."""
    if pairs < 1 or rank < 1:
        return 0.0
    return 1 - 2 * _signed_rank_tails(pairs)[rank - 1]


@cache
def _signed_rank_tails(pairs: int) -> tuple[float, ...]:
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
    return tuple(tails)
