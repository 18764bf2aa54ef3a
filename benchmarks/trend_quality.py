"""Trend quality: false alarms on flat noisy series, detection of creeping ones.

    python benchmarks/trend_quality.py [--series 2000] [--seed 1] [--quick]

Every series is simulated (seeded, so every run prints the same figures) and judged by
the logic `pytest-jaxcompile check --trend` uses (`corpus.trend.fit_series`): the
Mann-Kendall test over the series, the flat-then-rise fit where the test passes, and the
rule "p below alpha and the level up by more than the threshold". Figures are relative:
the absolute floor that also applies (--floor, 0.25 s by default) is left out here.

Sections:

flat
    Series with no rise: noise around one level. Independent +-15 % (uniform), lognormal
    noise (sigma 0.1, heavier tails), an autocorrelated wander within about +-15 %
    (AR(1), phi 0.7: the machine is slow for a few sessions, then fast), one session twice
    as slow, and the latest two sessions 1.5x slow (a loaded runner, just now). Any series
    flagged is a false alarm; the figure is per 1,000 series.
creep
    Series that rise: 10 %, 5 % and 2 % per session from the second session on, with
    +-5 % and +-15 % noise; and a flat history that creeps 5 % per session from its
    middle. Detection rate, and how far the located start is from the true one.
step
    A flat history, then one step up that persists: after how many sessions is it flagged?
delay
    A flat history, then a creep, checked after every session as CI would: how many
    sessions of creep until the check fails, and how much the series had risen by then.
timing
    Microseconds per series judged (flat ones need the test only; rising ones the fit too).
defaults
    The defaults chosen from these figures.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from pytest_jaxcompile.corpus.trend import (
    DEFAULT_TREND_ALPHA,
    DEFAULT_TREND_THRESHOLD,
    DEFAULT_TREND_WINDOW,
    Fit,
    TrendSettings,
    fit_series,
    is_rising,
)

ALPHAS = (0.01, 0.05)
THRESHOLDS = (0.10, 0.25, 0.35, 0.50)
LENGTHS = (10, 30)
MAX_ALPHA = max(ALPHAS)

Generator = Callable[[random.Random, int], list[float]]


def uniform(spread: float) -> Generator:
    return lambda rng, n: [1.0 + rng.uniform(-spread, spread) for _ in range(n)]


def lognormal(sigma: float) -> Generator:
    return lambda rng, n: [math.exp(rng.gauss(0.0, sigma)) for _ in range(n)]


def wander(phi: float, spread: float) -> Generator:
    """AR(1) around 1: stationary standard deviation spread / 2, clipped to +-spread."""
    scale = spread / 2 * math.sqrt(1 - phi * phi)

    def make(rng: random.Random, n: int) -> list[float]:
        level, values = rng.gauss(0.0, spread / 2), []
        for _ in range(n):
            level = phi * level + rng.gauss(0.0, scale)
            values.append(1.0 + max(-spread, min(spread, level)))
        return values

    return make


def spike(rng: random.Random, n: int) -> list[float]:
    values = uniform(0.15)(rng, n)
    values[rng.randrange(n)] *= 2.0
    return values


def slow_tail(rng: random.Random, n: int) -> list[float]:
    values = uniform(0.15)(rng, n)
    return values[:-2] + [value * 1.5 for value in values[-2:]]


def creep(rate: float, spread: float, start: int = 1) -> Generator:
    """Flat up to `start`, then up by `rate` per session (times +-spread noise)."""
    return lambda rng, n: [
        (1 + rate) ** max(0, i - start + 1) * (1 + rng.uniform(-spread, spread)) for i in range(n)
    ]


def step(size: float, after: int, spread: float = 0.15) -> Generator:
    """Flat, then `after` sessions `size` higher (the last ones)."""
    return lambda rng, n: [
        (1 + size if i >= n - after else 1.0) * (1 + rng.uniform(-spread, spread)) for i in range(n)
    ]


@dataclass
class Outcome:
    series: list[tuple[Fit, list[float]]]
    seconds: float

    def rising(self, alpha: float, threshold: float) -> list[Fit]:
        settings = TrendSettings(threshold=threshold, alpha=alpha)
        return [fit for fit, values in self.series if is_rising(fit, values, settings)]

    def flagged(self, alpha: float, threshold: float) -> int:
        return len(self.rising(alpha, threshold))


def simulate(make: Generator, n: int, count: int, seed: int) -> Outcome:
    """`count` series of `n` points, each fitted as `check --trend` does (at the largest
    alpha of the grid; the rule is then applied per alpha and threshold)."""
    rng = random.Random(seed)
    series = [make(rng, n) for _ in range(count)]
    began = time.perf_counter()
    fits = [fit_series(values, alpha=MAX_ALPHA) for values in series]
    seconds = time.perf_counter() - began
    return Outcome(
        [(fit, values) for fit, values in zip(fits, series, strict=True) if fit is not None],
        seconds,
    )


def header(title: str) -> None:
    print()
    print(f"== {title}")


def grid_header() -> str:
    return "  ".join(f"a={a:g} t={t:.0%}".rjust(12) for a in ALPHAS for t in THRESHOLDS)


def flat_section(count: int, seed: int) -> dict[str, dict[int, Outcome]]:
    header("flat")
    print(f"false alarms per 1,000 series ({count} series each; a = alpha, t = threshold)")
    scenarios: dict[str, Generator] = {
        "+-15 % uniform": uniform(0.15),
        "lognormal sigma 0.1": lognormal(0.10),
        "AR(1) wander +-15 %": wander(0.7, 0.15),
        "one session 2x slow": spike,
        "latest two 1.5x slow": slow_tail,
    }
    results: dict[str, dict[int, Outcome]] = {}
    for n in LENGTHS:
        print(f"-- {n} points per series")
        print(f"{'scenario':<24}{grid_header()}")
        for offset, (name, make) in enumerate(scenarios.items()):
            outcome = simulate(make, n, count, seed + 100 * n + offset)
            results.setdefault(name, {})[n] = outcome
            cells = "  ".join(
                f"{1000 * outcome.flagged(a, t) / count:12.1f}" for a in ALPHAS for t in THRESHOLDS
            )
            print(f"{name:<24}{cells}")
    return results


def creep_section(count: int, seed: int) -> dict[str, dict[int, Outcome]]:
    header("creep")
    print(
        f"detected per 100 series ({count} series each), and the located start minus the "
        "true one (median; 0 is exact)"
    )
    scenarios: dict[str, tuple[Generator, Callable[[int], int]]] = {
        "10 %/session, +-5 %": (creep(0.10, 0.05), lambda n: 1),
        "10 %/session, +-15 %": (creep(0.10, 0.15), lambda n: 1),
        "5 %/session, +-5 %": (creep(0.05, 0.05), lambda n: 1),
        "5 %/session, +-15 %": (creep(0.05, 0.15), lambda n: 1),
        "2 %/session, +-5 %": (creep(0.02, 0.05), lambda n: 1),
        "2 %/session, +-15 %": (creep(0.02, 0.15), lambda n: 1),
    }
    results: dict[str, dict[int, Outcome]] = {}
    for n in LENGTHS:
        scenarios[f"flat, then 5 %/session from {n // 2}"] = (
            creep(0.05, 0.05, start=n // 2),
            lambda n: n // 2,
        )
    for n in LENGTHS:
        print(f"-- {n} points per series")
        print(f"{'scenario':<32}{grid_header()}  start error")
        for offset, (name, (make, true_start)) in enumerate(scenarios.items()):
            if name.startswith("flat, then") and not name.endswith(f"from {n // 2}"):
                continue
            outcome = simulate(make, n, count, seed + 1000 + 100 * n + offset)
            results.setdefault(name, {})[n] = outcome
            cells = "  ".join(
                f"{100 * outcome.flagged(a, t) / count:12.1f}" for a in ALPHAS for t in THRESHOLDS
            )
            starts = [
                fit.start for fit in outcome.rising(DEFAULT_TREND_ALPHA, DEFAULT_TREND_THRESHOLD)
            ]
            error = (
                f"{statistics.median(s - true_start(n) for s in starts):+.0f}" if starts else "—"
            )
            print(f"{name:<32}{cells}  {error:>11}")
    return results


def step_section(count: int, seed: int) -> None:
    header("step")
    print(
        f"a step up after a flat history, +-15 % noise: detected per 100 series ({count} "
        f"each) at alpha {DEFAULT_TREND_ALPHA:g}, threshold "
        f"{DEFAULT_TREND_THRESHOLD:.0%}, by sessions since the step"
    )
    afters = (2, 3, 4, 5, 6, 8, 10)
    print(f"{'step, history':<24}" + "".join(f"{a:>8}" for a in afters))
    for size in (0.3, 0.5):
        for n_before in (7, 20):
            cells = []
            for offset, after in enumerate(afters):
                outcome = simulate(
                    step(size, after),
                    n_before + after,
                    count,
                    seed + 5000 + int(size * 100) + n_before * 10 + offset,
                )
                flagged = outcome.flagged(DEFAULT_TREND_ALPHA, DEFAULT_TREND_THRESHOLD)
                cells.append(f"{100 * flagged / count:8.1f}")
            print(f"{f'+{size:.0%}, {n_before} before':<24}" + "".join(cells))


def delay_section(count: int, seed: int) -> None:
    header("delay")
    print(
        f"sessions from the first risen one until `check --trend` fails (alpha "
        f"{DEFAULT_TREND_ALPHA:g}, window {DEFAULT_TREND_WINDOW}): 10 flat sessions, then a "
        f"creep; median and 90th percentile of {count} series, and the rise by then"
    )
    thresholds = (0.25, 0.35, 0.50)
    print(f"{'creep':<24}" + "".join(f"{f't={t:.0%}':>24}" for t in thresholds))
    flat_before, longest = 10, 40
    for offset, (rate, spread) in enumerate(
        ((0.10, 0.05), (0.10, 0.15), (0.05, 0.05), (0.05, 0.15), (0.02, 0.05))
    ):
        rng = random.Random(seed + 9000 + offset)
        delays: dict[float, list[int]] = {t: [] for t in thresholds}
        for _ in range(count):
            values = creep(rate, spread, start=flat_before)(rng, flat_before + longest)
            for threshold in thresholds:
                settings = TrendSettings(threshold=threshold)
                for risen in range(1, longest + 1):
                    window = values[: flat_before + risen][-DEFAULT_TREND_WINDOW:]
                    fit = fit_series(window, settings.alpha)
                    if fit is not None and is_rising(fit, window, settings):
                        delays[threshold].append(risen)
                        break
                else:
                    delays[threshold].append(longest + 1)
        cells = []
        for threshold in thresholds:
            ordered = sorted(delays[threshold])
            median, high = ordered[len(ordered) // 2], ordered[int(len(ordered) * 0.9)]
            shown = [">40" if d > longest else str(d) for d in (median, high)]
            cells.append(f"{shown[0]:>6} / {shown[1]:>3} (+{(1 + rate) ** median - 1:.0%})")
        print(f"{f'{rate:.0%}/session, +-{spread:.0%}':<24}" + "".join(f"{c:>24}" for c in cells))


def timing_section(
    flat: dict[str, dict[int, Outcome]], rising: dict[str, dict[int, Outcome]], count: int
) -> None:
    header("timing")
    for n in LENGTHS:
        flat_us = 1e6 * flat["+-15 % uniform"][n].seconds / count
        creep_us = 1e6 * rising["10 %/session, +-5 %"][n].seconds / count
        print(
            f"{n} points: {flat_us:8.0f} us per flat series, {creep_us:8.0f} us per "
            "rising series (test and fit)"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=2000, help="series per scenario")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="100 series per scenario")
    args = parser.parse_args(argv)
    count = 100 if args.quick else args.series
    import platform

    import numpy
    import scipy

    fit_series([1.0, 1.1, 1.2, 1.3, 1.4, 1.5])  # scipy imported before anything is timed

    header("machine")
    print(
        f"Python {platform.python_version()}, numpy {numpy.__version__}, scipy "
        f"{scipy.__version__}, {platform.machine()}; seed {args.seed}, {count} series per "
        "scenario"
    )
    flat = flat_section(count, args.seed)
    rising = creep_section(count, args.seed)
    step_section(count, args.seed)
    delay_section(max(20, count // 10), args.seed)
    timing_section(flat, rising, count)
    header("defaults")
    print(
        f"alpha {DEFAULT_TREND_ALPHA:g}, threshold {DEFAULT_TREND_THRESHOLD:.0%}, window "
        f"{DEFAULT_TREND_WINDOW} points"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
