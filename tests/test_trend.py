"""Trend detection: the pure logic (corpus/trend.py), and `check --trend` / `report` in-process."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from corpus_helpers import CREEP, FLAT, WANDER, row, trend_session, write_lines
from scipy import stats

from pytest_jaxcompile.cli import main
from pytest_jaxcompile.corpus.store import Corpus, CorpusError
from pytest_jaxcompile.corpus.trend import (
    MIN_POINTS,
    TrendCollector,
    TrendSettings,
    could_rise,
    fit_series,
    is_rising,
    trend_test,
)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


# --------------------------------------------------------------------------- the fit


def test_a_steady_creep_is_found_from_its_first_risen_point() -> None:
    fit = fit_series([1.0 * 1.1**i for i in range(10)], alpha=0.01)
    assert fit is not None
    assert fit.p_value < 1e-6 and fit.tau == pytest.approx(1.0)
    assert (fit.start, fit.shape) == (1, "ramp")
    assert fit.before_s == pytest.approx(1.0)
    assert fit.after_s == pytest.approx(1.1**9)
    assert fit.rise == pytest.approx(1.1**9 - 1)


def test_flat_then_creeping_starts_where_the_creep_does() -> None:
    values = [1.0, 1.02, 0.98, 1.01, 0.99, 1.1, 1.2, 1.31, 1.42, 1.55, 1.7]
    fit = fit_series(values, alpha=0.01)
    assert fit is not None and fit.p_value < 0.01
    assert (fit.start, fit.shape) == (5, "ramp")
    assert fit.before_s == pytest.approx(1.0, abs=0.02)
    assert fit.after_s == pytest.approx(1.7, rel=0.03)


def test_a_step_that_persists_is_located_at_the_step() -> None:
    values = [1.0, 1.02, 0.98, 1.01, 0.99, 1.01, 1.0, 1.3, 1.32, 1.28, 1.31, 1.29, 1.3, 1.31]
    fit = fit_series(values, alpha=0.01)
    assert fit is not None and fit.p_value < 0.01
    assert (fit.start, fit.shape) == (7, "step")
    assert fit.rise == pytest.approx(0.3, abs=0.02)


def test_wandering_noise_and_single_slow_points_are_not_rises() -> None:
    fit = fit_series(WANDER, alpha=0.05)
    assert fit is not None and fit.p_value > 0.5
    assert (fit.before_s, fit.shape) == (fit.after_s, "none")
    for spike_at in (3, 8, 9):  # one slow session, anywhere, even the latest
        values = [1.0] * 10
        values[spike_at] = 3.0
        values = [v * (1 + 0.01 * ((i * 7) % 5 - 2)) for i, v in enumerate(values)]
        spiked = fit_series(values, alpha=0.05)
        assert spiked is not None and spiked.p_value > 0.05, spike_at


def test_too_few_points_and_constant_series() -> None:
    assert fit_series([1.0, 2.0, 3.0, 4.0, 5.0][: MIN_POINTS - 1]) is None
    constant = fit_series([0.5] * 8, alpha=0.05)
    assert constant is not None and (constant.tau, constant.p_value) == (0.0, 1.0)


def test_the_trend_test_is_scipys_kendall_tau_also_when_reused() -> None:
    rng = random.Random(3)
    for n in (6, 7, 12, 30):
        for _ in range(40):
            values = [round(rng.uniform(0.8, 1.2), 2) for _ in range(n)]  # ties included
            expected = stats.kendalltau(np.arange(n), np.log(values), alternative="greater")
            tau, p_value = trend_test(values)
            assert tau == pytest.approx(expected.statistic)
            assert p_value == pytest.approx(expected.pvalue)


def test_series_that_cannot_rise_are_never_tested_and_never_rising() -> None:
    rng = random.Random(5)
    settings = TrendSettings(threshold=0.35, alpha=0.05)
    for _ in range(300):
        values = [rng.uniform(0.8, 1.2) * (1 + rng.choice([0, 0, 0.5])) for _ in range(10)]
        fit = fit_series(values, alpha=0.05)
        assert fit is not None
        if not could_rise(values, settings.threshold):
            assert not is_rising(fit, values, settings)
    assert not could_rise([1.0, 1.3, 1.34, 1.0, 1.3, 1.3, 1.3, 1.3], 0.35)
    assert could_rise([1.0, 1.0, 1.0, 1.0, 1.36, 1.4, 1.5], 0.35)


@pytest.mark.integration
def test_a_flat_corpus_is_checked_without_importing_scipy(tmp_path: Path) -> None:
    flat = [row(day, compile_s=1 + day % 3 / 10) for day in range(1, 20)]
    write_lines(tmp_path / "r.jsonl", flat)
    code = (
        "import sys; from pytest_jaxcompile.cli import main; "
        f"status = main(['check', {str(tmp_path)!r}, '--trend']); "
        "assert status == 0, status; assert 'scipy' not in sys.modules; "
        "assert 'numpy' not in sys.modules"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "trend rows: 0 rising series of 1 with at least 6 points" in result.stdout


# --------------------------------------------------------------------------- collecting


def test_the_window_keeps_the_latest_points_whatever_the_reading_order(tmp_path: Path) -> None:
    rows = [row(day, compile_s=float(day)) for day in range(1, 21)]
    random.Random(1).shuffle(rows)
    write_lines(tmp_path / "a.jsonl", rows[:10])
    write_lines(tmp_path / "b.jsonl", rows[10:])
    collector = TrendCollector(TrendSettings(window=8))
    for corpus_row in Corpus([tmp_path]).rows():
        collector.add(corpus_row)
    (series,) = collector.series
    assert [point.value for point in collector.points(series)] == [float(d) for d in range(13, 21)]
    assert collector.stats.dropped == 12


def test_untimed_and_loaded_rows_are_left_out_unless_strict(tmp_path: Path) -> None:
    rows = [row(day, compile_s=1.0) for day in range(1, 9)]
    rows.append(row(9, compile_s=1.0, timestamp=""))
    rows.append(row(10, compile_s=9.0, host_state={"load_per_core": 3.0}))
    write_lines(tmp_path / "r.jsonl", rows)
    for strict, kept in ((False, 8), (True, 9)):
        collector = TrendCollector(TrendSettings(max_load=1.0, strict=strict))
        for corpus_row in Corpus([tmp_path]).rows():
            collector.add(corpus_row)
        (series,) = collector.series
        assert len(collector.points(series)) == kept
        assert collector.stats.untimed == 1
        assert collector.stats.noisy == (0 if strict else 1)


def test_a_bad_commit_field_names_file_and_line(tmp_path: Path) -> None:
    write_lines(tmp_path / "r.jsonl", [row(1), row(2, commit="abc")])
    collector = TrendCollector(TrendSettings())
    with pytest.raises(CorpusError, match=r"r\.jsonl:2: 'commit' must be an object or null"):
        for corpus_row in Corpus([tmp_path]).rows():
            collector.add(corpus_row)


# --------------------------------------------------------------------------- the commands


def test_check_trend_catches_creep_that_re_pinned_checks_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ten daily sessions: one series rises 10 % per session, one wanders +-15 %.

    The pins are re-derived the day before the last, so the pin check is green; the trend
    check fails, names the rising series and the session where it started, and not the
    wandering one.
    """
    monkeypatch.chdir(tmp_path)
    for day in range(1, 10):
        trend_session(tmp_path, day)
    status, out, err = _run(capsys, "pin", "records")
    assert status == 0, err
    trend_session(tmp_path, 10)

    status, out, err = _run(capsys, "check", "records")
    assert status == 0, out + err  # every comparison with the day-9 pins is within tolerance

    status, out, err = _run(capsys, "check", "records", "--trend", "--json", "check.json")
    assert status == 1, out + err
    assert CREEP in out and FLAT not in out.split("trends:", 1)[1]
    rising = [line for line in out.splitlines() if line.lstrip().startswith("RISING ")]
    assert len(rising) == 1 and CREEP in rising[0] and "| cold" in rising[0]
    detail = out.splitlines()[out.splitlines().index(rising[0]) + 1]
    assert "rising since 2026-11-02T10:00:00+00:00 (commit 020202020202 on refs/heads/main)" in (
        detail
    )
    assert "1.000 s before, 2.358 s now" in detail
    assert "+136%" in detail
    assert "trend rows: 1 rising series of 2 with at least 6 points" in out

    document = json.loads((tmp_path / "check.json").read_text())
    assert document["gate"] == "fail"
    (trend,) = document["trends"]
    assert (trend["cell"], trend["started_at"]) == (CREEP, "2026-11-02T10:00:00+00:00")
    assert trend["commit"]["sha"] == "02" * 20
    assert trend["before_s"] == pytest.approx(1.0)
    assert trend["after_s"] == pytest.approx(1.1**9)

    # The same history with a threshold above the rise: reported as found, not failing.
    status, out, _ = _run(capsys, "check", "records", "--trend", "--trend-threshold", "1.5")
    assert status == 0 and "RISING" not in out


def test_check_trend_without_pins_checks_trends_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for day in range(1, 11):
        trend_session(tmp_path, day)
    status, out, err = _run(capsys, "check", "records")
    assert status == 2 and "no pin files in pins" in err
    status, out, err = _run(capsys, "check", "records", "--trend")
    assert status == 1, err
    assert out.startswith("no pin files in pins: trends only, from 20 compile record(s)")
    assert "unpinned" not in out


def test_the_trend_options_are_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for args, message in (
        (["--trend-window", "3"], "the window needs at least 6 points"),
        (["--trend-alpha", "1"], "must be between 0 and 1"),
        (["--trend-threshold", "-1"], "must be a finite number >= 0"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            main(["check", "records", "--trend", *args])
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err


def test_report_leads_with_the_rising_series(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for day in range(1, 11):
        trend_session(tmp_path, day)
    status, out, err = _run(capsys, "report", "records")
    assert status == 0, err
    assert out.index("**Rising: 1 series**") < out.index("| cell | transform | compile_s |")
    rises = out[: out.index("| cell | transform | compile_s |")]
    (line,) = [line for line in rises.splitlines() if line.startswith("| `tests/")]
    assert line.startswith(f"| `{CREEP}` | `vag` |") and "| +136% |" in line
    assert "2026-11-02T10:00:00+00:00 (commit 020202020202 on refs/heads/main)" in line

    # Since day 6, five points a series: too few to test; the section says there is no rise.
    status, out, _ = _run(capsys, "report", "records", "--since", "2026-11-06")
    assert status == 0
    assert "No sustained rise (Mann-Kendall p < 0.01 over the latest 30 points" in out
