"""The trend options shared by `check --trend` and `report`.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse

from pytest_jaxcompile.corpus.trend import (
    DEFAULT_TREND_ALPHA,
    DEFAULT_TREND_THRESHOLD,
    DEFAULT_TREND_WINDOW,
    MIN_POINTS,
    TrendSettings,
)
from pytest_jaxcompile.options import Option, argparse_type
from pytest_jaxcompile.options.subcommands import thresholds_from

# The one validator of numbers (finite, >= 0), for these subcommand-only options too.
non_negative_float = argparse_type(Option("trend", "number", ""))


def window(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < MIN_POINTS:
        raise argparse.ArgumentTypeError(f"{text!r}: the window needs at least {MIN_POINTS} points")
    return value


def probability(text: str) -> float:
    value = float(non_negative_float(text))
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be between 0 and 1")
    return value


def add_trend_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trend-threshold",
        type=non_negative_float,
        default=DEFAULT_TREND_THRESHOLD,
        metavar="FRACTION",
        help="a sustained rise counts when the level rose by more than this fraction "
        f"(and by more than --floor seconds; default {DEFAULT_TREND_THRESHOLD})",
    )
    parser.add_argument(
        "--trend-window",
        type=window,
        default=DEFAULT_TREND_WINDOW,
        metavar="POINTS",
        help="analyse the latest POINTS rows of each series "
        f"(default {DEFAULT_TREND_WINDOW}, at least {MIN_POINTS})",
    )
    parser.add_argument(
        "--trend-alpha",
        type=probability,
        default=DEFAULT_TREND_ALPHA,
        metavar="P",
        help="significance of the Mann-Kendall trend test: the chance a flat series passes it "
        f"(default {DEFAULT_TREND_ALPHA})",
    )


def trend_settings_from(args: argparse.Namespace) -> TrendSettings:
    """The trend options, and the verdict options a trend shares (floor, metric, load)."""
    thresholds = thresholds_from(args)
    return TrendSettings(
        threshold=args.trend_threshold,
        alpha=args.trend_alpha,
        window=args.trend_window,
        floor_s=thresholds.floor_s,
        metric=thresholds.metric,
        max_load=thresholds.max_load,
        strict=thresholds.strict,
    )
