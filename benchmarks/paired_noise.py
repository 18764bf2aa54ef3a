"""The paired gate's promise on a noisy runner, simulated through the rule itself.

    python benchmarks/paired_noise.py [--sessions 2000] [--seed 56] [--tolerance 0.05]
        [--floor 0.05] [--max-pairs 60]

Each simulated session is one changed row's pairs: both modules compiled alternately,
each compile's seconds its module's seconds times ``exp(noise)``, the noise per compile
either normal (lognormal seconds) or heavy-tailed (Student's t with 3 degrees of freedom,
scaled to the same standard deviation: now and then a compile far off), at 1 %, 3 % and
6 % per compile, for a 0.3 s and a 6 s module. Every session is judged by
`gate.sequential.judge_pairs`, the rule the pairing child and the gate share (the child
stops at the look it returns), with the session's default floor and tolerance.

Per case it prints how often the rule says ok, DRIFT and not decided, and the median and
largest pairs a row used:

- ``at the bound``: the new module slower by exactly the larger of the tolerance and the
  floor (its share of the module): ok here is a false ok (the promise: at most 2.5 %);
- ``equal``: DRIFT here is a false DRIFT (at most 2.5 %); ok is what an equal row should
  get, and its pairs are what an equal row costs;
- ``+10 %``: DRIFT is the change caught (where 10 % is over the floor's share).

Pure logic, no JAX: ``tests/test_sequential.py`` holds the error rates on a smaller run
(`simulate`), docs/benchmarks.md the table.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from pytest_jaxcompile._constants import (
    DEFAULT_MAX_PAIRS,
    DEFAULT_PAIRED_FLOOR_S,
    DEFAULT_PAIRED_TOLERANCE,
)
from pytest_jaxcompile.gate.sequential import DRIFT, OK, judge_pairs

NOISES = (0.01, 0.03, 0.06)  # per compile: the standard deviation of its log seconds
SHAPES = ("lognormal", "heavy-tailed")
SIZES = (0.3, 6.0)  # a module's seconds
CHANGES = ("at the bound", "equal", "+10 %")


@dataclass(frozen=True)
class Case:
    noise: float
    shape: str
    size: float
    change: str


@dataclass(frozen=True)
class Tally:
    sessions: int
    ok: int
    drift: int
    undecided: int
    pairs: tuple[int, ...]  # the pairs each session's row used

    def share(self, count: int) -> float:
        return count / self.sessions

    @property
    def median_pairs(self) -> float:
        return statistics.median(self.pairs)


def ratio_of(case: Case, tolerance: float, floor_s: float) -> float:
    """The new module's seconds over the base's in `case`."""
    if case.change == "equal":
        return 1.0
    if case.change == "+10 %":
        return 1.10
    return 1 + max(tolerance, floor_s / case.size)


def draws(
    generator: np.random.Generator, shape: str, noise: float, size: tuple[int, int]
) -> np.ndarray:
    """Log noise per compile of standard deviation `noise`."""
    if shape == "lognormal":
        return noise * generator.standard_normal(size)
    return noise * generator.standard_t(3, size) / math.sqrt(3)


def simulate(
    case: Case,
    sessions: int,
    seed: int,
    tolerance: float = DEFAULT_PAIRED_TOLERANCE,
    floor_s: float = DEFAULT_PAIRED_FLOOR_S,
    max_pairs: int = DEFAULT_MAX_PAIRS,
) -> Tally:
    """`sessions` simulated rows of `case` judged by the rule."""
    generator = np.random.default_rng(seed)
    ratio = ratio_of(case, tolerance, floor_s)
    base = case.size * np.exp(draws(generator, case.shape, case.noise, (sessions, max_pairs)))
    new = (
        case.size * ratio * np.exp(draws(generator, case.shape, case.noise, (sessions, max_pairs)))
    )
    ok = drift = undecided = 0
    pairs = []
    for row in range(sessions):
        look = judge_pairs(base[row].tolist(), new[row].tolist(), tolerance, floor_s, max_pairs)
        assert look is not None
        pairs.append(look.pairs)
        if look.status == OK:
            ok += 1
        elif look.status == DRIFT:
            drift += 1
        elif look.status is None:
            undecided += 1
    return Tally(sessions, ok, drift, undecided, tuple(pairs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=56)
    parser.add_argument("--tolerance", type=float, default=DEFAULT_PAIRED_TOLERANCE)
    parser.add_argument("--floor", type=float, default=DEFAULT_PAIRED_FLOOR_S)
    parser.add_argument("--max-pairs", type=int, default=DEFAULT_MAX_PAIRS)
    parser.add_argument("--noises", default=",".join(map(str, NOISES)))
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    args = parser.parse_args(argv)
    noises = [float(value) for value in args.noises.split(",")]
    sizes = [float(value) for value in args.sizes.split(",")]
    spread = math.sqrt(0.025 * 0.975 / args.sessions)
    print(
        f"{args.sessions} simulated rows a case (Monte Carlo error at 2.5 %: +-{spread:.1%}), "
        f"tolerance {args.tolerance:g}, floor {args.floor:g} s, at most {args.max_pairs} pairs"
    )
    print()
    print(
        "| noise per compile | shape | module | change | ok | DRIFT | not decided "
        "| pairs (median, most) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for index, (noise, shape, size, change) in enumerate(
        (noise, shape, size, change)
        for noise in noises
        for shape in SHAPES
        for size in sizes
        for change in CHANGES
    ):
        case = Case(noise, shape, size, change)
        tally = simulate(
            case, args.sessions, args.seed + index, args.tolerance, args.floor, args.max_pairs
        )
        label = change
        if change == "at the bound":
            label = f"+{ratio_of(case, args.tolerance, args.floor) - 1:.1%} (the bound)"
        print(
            f"| {noise:.0%} | {shape} | {size:g} s | {label} | {tally.share(tally.ok):.1%} "
            f"| {tally.share(tally.drift):.1%} | {tally.share(tally.undecided):.1%} "
            f"| {tally.median_pairs:g}, {max(tally.pairs)} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
