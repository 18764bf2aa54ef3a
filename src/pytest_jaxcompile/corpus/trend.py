"""Sustained rises in a records corpus: the creep that no comparison with one pin catches.

A *series* is every row of one cell and transform under one comparability key (hardware,
framework version, precision, cache state), in time order. Each change may add a little,
every row may stay within tolerance of a pin that is re-derived now and then, and the
series still doubles. Here a series is judged on its own history:

1. **Is there a sustained rise?** The Mann-Kendall trend test (Kendall's tau between the
   points' order and their figures, one-sided, `scipy.stats.kendalltau`) over the series'
   most recent points. It ranks the points, so a single slow outlier moves it little, and
   it asks for a rise that most later points keep.
2. **Where did it start, and by how much?** The series is fitted, in log seconds, as flat
   up to a point and then either a step or a straight rise (least squares, every split);
   the best fit names the first risen point. The level before is the median of the flat
   part, the level after is the Theil-Sen line (`scipy.stats.theilslopes`) through the
   risen points, read at the last point: where the series is now.
3. **Does it matter?** A rise counts when the test is significant (p below ``alpha``), the
   level rose by more than ``threshold`` (a fraction, like the plugin's tolerance) and by
   more than ``floor_s`` seconds (like its floor), and at least `MIN_AFTER` of the points
   since the start are themselves above the level before by more than ``threshold``: one
   or two slow sessions at the end, however slow, are not a rise.

Collecting keeps at most ``window`` points per series (the latest by time), so memory grows
with the number of series, not of records. scipy (and numpy) are imported only when a
series could pass the rule at all (`could_rise`): a corpus of flat series never loads them.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pytest_jaxcompile._numbers import NumberError, finite_number, percent
from pytest_jaxcompile.corpus.commit import commit_label
from pytest_jaxcompile.corpus.store import NO_TIME, CorpusError, Row, RowId
from pytest_jaxcompile.records import ComparabilityKey, row_name

# Defaults, chosen from benchmarks/trend_quality.py (docs/benchmarks.md, "Trend detection").
DEFAULT_TREND_THRESHOLD = 0.35
DEFAULT_TREND_ALPHA = 0.01
DEFAULT_TREND_WINDOW = 30
MIN_POINTS = 6  # fewer points in a series: not tested
MIN_AFTER = 3  # a rise must have lasted this many points: never a single slow point
METRIC_WALL, METRIC_CPU = "wall", "cpu"
TINY_S = 1e-6  # figures are compared as logs; 0 s is taken as this


@dataclass(frozen=True)
class TrendSettings:
    threshold: float = DEFAULT_TREND_THRESHOLD
    alpha: float = DEFAULT_TREND_ALPHA
    window: int = DEFAULT_TREND_WINDOW
    floor_s: float = 0.0
    metric: str = METRIC_WALL
    max_load: float | None = None  # rows above this load per core are left out
    strict: bool = False  # keep them

    def __post_init__(self) -> None:
        if self.window < MIN_POINTS:
            raise ValueError(f"the trend window must be at least {MIN_POINTS} points")


class Point(NamedTuple):  # a tuple: one is made per row read
    time: float
    value: float  # seconds
    timestamp: str
    commit: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Fit:
    """What was found in one series of figures (in time order)."""

    points: int
    tau: float  # Kendall's tau of figure against order
    p_value: float  # one-sided: the chance of a tau this high without a rise
    start: int  # index of the first risen point
    shape: str  # "step" or "ramp"
    before_s: float  # median of the points before `start`
    after_s: float  # the Theil-Sen line through the risen points, at the last point

    @property
    def rise(self) -> float:
        """The level after relative to before, minus one: 0.3 is 30 % higher."""
        return self.after_s / self.before_s - 1 if self.before_s > 0 else math.inf


def _logs(values: Sequence[float]) -> Any:
    import numpy as np

    return np.log(np.maximum(np.asarray(values, dtype=float), TINY_S))


_TESTED: dict[tuple[int, int], tuple[float, float]] = {}  # (n, S) -> (tau, p), no ties


def trend_test(values: Sequence[float]) -> tuple[float, float]:
    """Mann-Kendall: (Kendall's tau of figure against order, one-sided p of a rise).

    The figures are tested with `scipy.stats.kendalltau`. Without ties, tau and p depend only
    on the number of points and on Kendall's S (concordant minus discordant pairs), so
    scipy's answer is kept per (n, S) and reused: a corpus of thousands of series calls it
    a few hundred times.
    """
    import numpy as np
    from scipy import stats

    y = _logs(values)
    n = len(y)
    if n < 2 or float(np.ptp(y)) == 0.0:  # constant: no trend (tau is undefined)
        return 0.0, 1.0
    ties = len(np.unique(y)) < n
    memo: tuple[int, int] | None = None
    if not ties:
        s_statistic = int(np.sign(y[None, :] - y[:, None])[np.triu_indices(n, 1)].sum())
        memo = (n, s_statistic)
        if memo in _TESTED:
            return _TESTED[memo]
    result = stats.kendalltau(np.arange(n), y, alternative="greater")
    answer = float(result.statistic), float(result.pvalue)
    if memo is not None:
        _TESTED[memo] = answer
    return answer


def locate_rise(values: Sequence[float]) -> tuple[int, str, float, float]:
    """Where a series turned up: (first risen index, shape, level before, level now).

    Fits log seconds as flat up to a split and then a step or a straight rise, by least
    squares, for every split that leaves at least MIN_AFTER risen points; the smallest error
    wins, on a tie the earlier split.
    """
    import numpy as np
    from scipy import stats

    y = _logs(values)
    n = len(y)
    if n < MIN_AFTER + 1:
        raise ValueError(f"locating a rise needs at least {MIN_AFTER + 1} points")
    order = np.arange(n, dtype=float)
    best: tuple[float, int, str] | None = None  # (squared error, last flat index, shape)
    for last in range(0, n - MIN_AFTER):
        flat, risen = y[: last + 1], y[last + 1 :]
        step_error = float(np.sum((flat - flat.mean()) ** 2) + np.sum((risen - risen.mean()) ** 2))
        design = np.column_stack([np.ones(n), np.maximum(order - last, 0.0)])
        coefficients = np.linalg.lstsq(design, y, rcond=None)[0]
        ramp_error = float(np.sum((design @ coefficients - y) ** 2))
        for error, shape in ((step_error, "step"), (ramp_error, "ramp")):
            if best is None or error < best[0] - 1e-12:
                best = (error, last, shape)
    assert best is not None
    _, last, shape = best
    before = float(np.exp(np.median(y[: last + 1])))
    slope, intercept, _, _ = stats.theilslopes(y[last + 1 :], order[last + 1 :])
    after = float(np.exp(intercept + slope * (n - 1)))
    return last + 1, shape, before, after


def fit_series(values: Sequence[float], alpha: float = 1.0) -> Fit | None:
    """The trend test and, when it is significant at `alpha`, where the rise started.

    None with fewer than MIN_POINTS figures. Without a significant trend the fit says so
    (start at the last point, before and after both the median): locating is skipped.
    """
    n = len(values)
    if n < MIN_POINTS:
        return None
    tau, p_value = trend_test(values)
    if not p_value < alpha:
        import numpy as np

        level = float(np.exp(np.median(_logs(values))))
        return Fit(n, tau, p_value, n - 1, "none", level, level)
    start, shape, before, after = locate_rise(values)
    return Fit(n, tau, p_value, start, shape, before, after)


@dataclass(frozen=True)
class Trend:
    """One series' verdict: its points, its fit, and whether it counts as a rise."""

    series: RowId
    points: tuple[Point, ...]
    fit: Fit
    rising: bool
    framework: str = "jax"

    def describe_key(self) -> str:
        return self.key.describe()

    @property
    def key(self) -> ComparabilityKey:
        return self.series[0]

    @property
    def cell(self) -> str:
        return self.series[1]

    @property
    def transform(self) -> str:
        return self.series[2]

    @property
    def variant(self) -> str:
        return self.series[3]

    @property
    def started(self) -> Point:
        return self.points[self.fit.start]


def judge_trend(
    series: RowId, points: Sequence[Point], settings: TrendSettings, framework: str = "jax"
) -> Trend | None:
    """The trend of one series (points in time order).

    None with too few points, and for a series that cannot pass the rule whatever the
    statistics say (see `could_rise`): those are not tested, so a corpus of flat series
    never imports scipy.
    """
    values = [point.value for point in points]
    if len(values) < MIN_POINTS or not could_rise(values, settings.threshold):
        return None
    fit = fit_series(values, settings.alpha)
    if fit is None:
        return None
    return Trend(series, tuple(points), fit, is_rising(fit, values, settings), framework)


def could_rise(values: Sequence[float], threshold: float) -> bool:
    """A necessary condition of `is_rising`, without statistics: at least MIN_AFTER points
    above the lowest one by more than the threshold. (The level before a rise is a median
    of points, never below the lowest, so a series failing this cannot be rising.)"""
    line = max(min(values), TINY_S) * (1 + threshold)
    return sum(1 for value in values if value > line) >= MIN_AFTER


def is_rising(fit: Fit, values: Sequence[float], settings: TrendSettings) -> bool:
    """The rule: a significant trend, the level now above the level before by more than the
    threshold and the floor, and at least MIN_AFTER of the points since the start above
    that line themselves (a sustained rise, not one or two slow sessions at the end)."""
    if not (
        fit.p_value < settings.alpha
        and fit.rise > settings.threshold
        and fit.after_s - fit.before_s > settings.floor_s
    ):
        return False
    line = fit.before_s * (1 + settings.threshold)
    return sum(1 for value in values[fit.start :] if value > line) >= MIN_AFTER


_Entry = tuple[float, int, Point]  # (time, order read, point): a min-heap keeps the latest


@dataclass
class TrendStats:
    rows: int = 0
    untimed: int = 0  # no timestamp: not placed in time
    unmeasured: int = 0  # no compile time (a metric the framework did not report)
    noisy: int = 0  # measured above the load limit (wall metric, not strict)
    without_cpu: int = 0  # cpu metric: rows without CPU seconds
    dropped: int = 0  # older than the window of their series
    series: int = 0  # series with at least MIN_POINTS points (set by `trends`)


class TrendCollector:
    """Keeps the latest `window` points per series while a corpus streams by."""

    def __init__(self, settings: TrendSettings) -> None:
        self.settings = settings
        self.series: dict[RowId, list[_Entry]] = {}
        self.frameworks: dict[RowId, str] = {}  # series of another framework than jax
        self.stats = TrendStats()
        self._order = 0
        self._commits: dict[tuple[tuple[str, Any], ...], Mapping[str, Any]] = {}

    def add(self, row: Row) -> None:
        stats = self.stats
        stats.rows += 1
        if row.time == NO_TIME:
            stats.untimed += 1
            return
        data = row.data
        value = row.compile_s
        if value is None:
            stats.unmeasured += 1
            return
        if self.settings.metric == METRIC_CPU:
            cpu = data.get("compile_cpu_s")
            if cpu is None:
                stats.without_cpu += 1
                return
            value = _number(cpu, "compile_cpu_s", row)
        elif not self.settings.strict and self.settings.max_load is not None:
            host = data.get("host_state")
            load = host.get("load_per_core") if isinstance(host, dict) else None
            if load is not None and _number(load, "host_state.load_per_core", row) > (
                self.settings.max_load
            ):
                stats.noisy += 1
                return
        point = Point(row.time, value, str(data.get("timestamp")), self._commit(row, data))
        self._order += 1
        series = (row.key, row.cell, row.transform, row.variant)
        entries = self.series.get(series)
        if entries is None:
            entries = self.series[series] = []
            framework = data.get("framework")
            if isinstance(framework, str) and framework != "jax":
                self.frameworks[series] = framework
        entry = (row.time, self._order, point)
        if len(entries) < self.settings.window:
            heapq.heappush(entries, entry)
        else:
            heapq.heappushpop(entries, entry)
            stats.dropped += 1

    def _commit(self, row: Row, data: dict[str, Any]) -> Mapping[str, Any] | None:
        commit = data.get("commit")
        if commit is None:
            return None
        if not isinstance(commit, dict):
            raise CorpusError(
                row.path, f"'commit' must be an object or null, got {commit!r}", row.where
            )
        identity = tuple(sorted((str(k), v) for k, v in commit.items() if _hashable(v)))
        return self._commits.setdefault(identity, commit)  # one object per commit

    def points(self, series: RowId) -> list[Point]:
        return [point for _, _, point in sorted(self.series[series])]

    def trends(self) -> list[Trend]:
        """The series that were tested (see `judge_trend`), judged; in series order."""
        judged = []
        self.stats.series = sum(1 for entries in self.series.values() if len(entries) >= MIN_POINTS)
        for series in sorted(self.series):
            trend = judge_trend(
                series, self.points(series), self.settings, self.frameworks.get(series, "jax")
            )
            if trend is not None:
                judged.append(trend)
        return judged


def _hashable(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _number(value: Any, name: str, row: Row) -> float:
    try:
        return finite_number(value)
    except NumberError as error:
        raise CorpusError(
            row.path, f"{name!r} must be {error.expected} or null, got {value!r}", row.where
        ) from None


# --------------------------------------------------------------------------- text


def describe_key(key: ComparabilityKey) -> str:
    """``cpu:cpu @ AMD EPYC x2 | jax 0.10.2 | full precision | cold``."""
    return key.describe()


def when_text(point: Point) -> str:
    """``2026-11-02T10:00:00+00:00 (commit 1a2b3c4d5e6f on refs/heads/main)``."""
    text = point.timestamp
    if point.commit is not None:
        label = commit_label(point.commit)
        if label:
            text += f" (commit {label})"
    return text


def rise_text(trend: Trend) -> str:
    """The one-line account of a series' rise (or of what was found in it)."""
    fit = trend.fit
    return (
        f"{fit.rise:+.0%}: {fit.before_s:.3f} s before, {fit.after_s:.3f} s now; "
        f"rising since {when_text(trend.started)}, {fit.points - fit.start} of "
        f"{fit.points} points after ({'a step' if fit.shape == 'step' else 'a steady rise'}; "
        f"Mann-Kendall tau {fit.tau:.2f}, p {fit.p_value:.2g})"
    )


def settings_sentence(settings: TrendSettings) -> str:
    text = (
        f"Mann-Kendall p < {settings.alpha:g} over the latest {settings.window} points of "
        f"each series (at least {MIN_POINTS}), the level up by more than "
        f"{percent(settings.threshold)}"
    )
    if settings.floor_s:
        text += f" and by more than {settings.floor_s:g} s"
    return text


def trend_lines(trends: Iterable[Trend], settings: TrendSettings, stats: TrendStats) -> list[str]:
    """The trend section of `check --trend`: rising series first, then a summary."""
    trends = list(trends)
    rising = [trend for trend in trends if trend.rising]
    lines = [f"trends: a sustained rise is {settings_sentence(settings)}"]
    for trend in rising:
        lines.append(
            f"  RISING     {trend.describe_key()}  "
            f"{row_name(trend.cell, trend.transform, trend.variant)}"
        )
        lines.append(f"      {rise_text(trend)}")
    skipped = [
        f"{count} {what}"
        for count, what in (
            (stats.untimed, "without a timestamp"),
            (stats.unmeasured, "without a compile time"),
            (stats.noisy, "measured above the load limit (--strict keeps them)"),
            (stats.without_cpu, "without CPU seconds (--metric cpu)"),
        )
        if count
    ]
    summary = (
        f"trend rows: {len(rising)} rising series of {stats.series} with at least "
        f"{MIN_POINTS} points"
    )
    if skipped:
        summary += "; rows left out: " + ", ".join(skipped)
    lines.append(summary)
    if rising:
        lines.append(
            f"RISING: {len(rising)} series rose by more than {percent(settings.threshold)} "
            "over their history; pins re-derived along the way hide this from the pin check. "
            "To accept a level, pass --since a time after the rise."
        )
    return lines


def trend_to_dict(trend: Trend) -> dict[str, Any]:
    """A series' trend as JSON (``check --json``'s ``trends``)."""
    fit = trend.fit
    return {
        "cell": trend.cell,
        "transform": trend.transform,
        "key": trend.key.to_dict(),
        "rising": trend.rising,
        "rise": fit.rise,
        "before_s": fit.before_s,
        "after_s": fit.after_s,
        "shape": fit.shape,
        "started_at": trend.started.timestamp,
        "commit": None if trend.started.commit is None else dict(trend.started.commit),
        "points": fit.points,
        "points_after": fit.points - fit.start,
        "tau": fit.tau,
        "p_value": fit.p_value,
    }


@dataclass
class TrendReport:
    """Trends for the dashboard: the rising series and what was analysed."""

    settings: TrendSettings
    trends: list[Trend] = field(default_factory=list)
    stats: TrendStats = field(default_factory=TrendStats)

    @property
    def rising(self) -> list[Trend]:
        return [trend for trend in self.trends if trend.rising]

    @classmethod
    def of(cls, collector: TrendCollector) -> TrendReport:
        return cls(collector.settings, collector.trends(), collector.stats)
