"""The sequential paired gate's boundaries: the signed-rank ranks at each look.

    python benchmarks/paired_boundaries.py [--sessions 1000000] [--seed 1]

`--compile-paired` judges a row at a schedule of looks (`gate.sequential.LOOKS`: after 6, 8,
10, 12, 16, 20, 30, 45 and 60 pairs) and stops at the first look that decides it. At look k
its interval runs between the Walsh averages of rank ``RANKS[k]`` from either end. This
script computes those ranks: a group-sequential signed-rank test whose one-sided error
(a false DRIFT for a module exactly at the tolerance; a false ok for one exactly at it, by
symmetry) is spent across the looks by the spending function `spent` (Lan and DeMets'
alpha spending), at most `gate.sequential.ONE_SIDED_ERROR` (2.5 %) in all.

Under the null (log ratios spread evenly about the tested bound, a continuous
distribution) the signs of the centred log ratios are fair coins independent of their
sizes, and the sizes' order is a uniformly random permutation: the joint law of the
signed-rank statistics across all looks is the same for every such distribution. So
simulated standard normal sessions give it exactly, up to Monte Carlo error. At each look
the rank is the largest whose crossing probability, added to the earlier looks' (a session
counted once, at its first crossing), stays within what the spending function allows by
then. Looks share their pairs, so a later look's small ranks cost little extra error: a
session that crosses at 8 pairs mostly crossed at 6 already.

The spending function spends at the first look just what its smallest decision needs
(1/64: all six pairs on one side; 0.63 of the error, so that a large change is decided by
six pairs) and the rest as the square root of the share of the last look's pairs.
Prints the ranks, each look's nominal per-look confidence and the error spent in all;
``gate/sequential.py`` holds the printed table, and tests/test_sequential.py checks it
against a smaller simulation.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from pytest_jaxcompile.gate.sequential import (
    LOOKS,
    ONE_SIDED_ERROR,
)

FIRST_LOOK_SHARE = 0.63  # of the error, spent by the first look: >= 1/64 / 2.5 %


def spent(fraction: float) -> float:
    """The share of the error spent by the look at `fraction` of the last look's pairs."""
    first = LOOKS[0] / LOOKS[-1]
    if fraction < first:
        return 0.0
    rest = math.sqrt((fraction - first) / (1 - first))
    return min(1.0, FIRST_LOOK_SHARE + (1 - FIRST_LOOK_SHARE) * rest)


def negative_rank_sums(samples: np.ndarray) -> np.ndarray:
    """T- (the sum of the ranks of the negative values, by size) of each session's first n
    values at every look: the count of Walsh averages below zero."""
    sums = np.empty((samples.shape[0], len(LOOKS)), dtype=np.int64)
    for column, pairs in enumerate(LOOKS):
        head = samples[:, :pairs]
        ranks = np.abs(head).argsort(axis=1).argsort(axis=1) + 1
        sums[:, column] = np.where(head < 0, ranks, 0).sum(axis=1)
    return sums


def boundaries(sessions: int, seed: int) -> tuple[list[int], list[float]]:
    """The rank at each look, and the error spent by each look in all."""
    generator = np.random.default_rng(seed)
    chunks = []
    for start in range(0, sessions, 100_000):
        size = min(100_000, sessions - start)
        chunks.append(negative_rank_sums(generator.standard_normal((size, LOOKS[-1]))))
    sums = np.concatenate(chunks)
    crossed = np.zeros(sums.shape[0], dtype=bool)
    ranks, spent_so_far = [], []
    for column, pairs in enumerate(LOOKS):
        allowed = ONE_SIDED_ERROR * spent(pairs / LOOKS[-1])
        rank = 0  # decides when fewer than `rank` Walsh averages lie beyond the bound
        while (crossed | (sums[:, column] <= rank)).mean() <= allowed:
            rank += 1
        crossed |= sums[:, column] <= rank - 1
        ranks.append(rank)
        spent_so_far.append(float(crossed.mean()))
    return ranks, spent_so_far


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    from pytest_jaxcompile.gate.sequential import interval_confidence

    ranks, spent_so_far = boundaries(args.sessions, args.seed)
    print(f"{args.sessions} simulated sessions, one-sided error {ONE_SIDED_ERROR:g}")
    print("| pairs | rank | per-look confidence | error spent by then |")
    print("|---|---|---|---|")
    for pairs, rank, error in zip(LOOKS, ranks, spent_so_far, strict=True):
        confidence = interval_confidence(pairs, rank) if rank else 0.0
        print(f"| {pairs} | {rank} | {confidence:.2%} | {error:.4f} |")
    print(f"RANKS = {tuple(ranks)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
