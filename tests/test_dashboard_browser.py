"""The HTML dashboard in a real browser: headless Chromium driven by selenium.

Skips when Chromium, chromedriver or selenium are missing, except under CI=true, where
they are required (.ci/run installs them).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from corpus_helpers import row, write_lines
from records_factory import make_record

from pytest_jaxcompile.cli import main
from pytest_jaxcompile.gate.pins import PinStore

pytestmark = pytest.mark.instruments

CREEP, FLAT = "tests/test_m.py::test_creep", "tests/test_m.py::test_flat"
DRIFT, GONE = "tests/test_m.py::test_drift", "tests/test_m.py::test_gone"
WANDER = [1.00, 1.12, 0.90, 1.15, 0.86, 1.05, 0.95, 1.13, 0.88, 1.08]


def _missing(what: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{what} is required under CI=true (.ci/run installs it)")
    pytest.skip(f"{what} is not installed")


def _find(*names: str) -> str | None:
    return next((path for name in names if (path := shutil.which(name))), None)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _missing("selenium")
    chromium = _find("chromium", "chromium-browser", "google-chrome")
    driver_path = _find("chromedriver")
    if chromium is None:
        _missing("chromium")
    if driver_path is None:
        _missing("chromedriver (Debian: chromium-driver)")
    options = Options()
    options.binary_location = chromium
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _errors(driver: Any) -> list[dict[str, Any]]:
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def _page(root: Path) -> Path:
    """Ten daily sessions: CREEP rises 10 % a session, FLAT wanders, DRIFT is over its pin,
    GONE is pinned and never measured; cold and warm rows, pins of day 9."""
    for day in range(1, 11):
        write_lines(
            root / "records" / f"202611{day:02d}T100000Z-1-abcdef.jsonl",
            [
                row(
                    day,
                    cell=CREEP,
                    compile_s=1.1 ** (day - 1),
                    commit={"sha": f"{day:02d}" * 20, "ref": "refs/heads/main"},
                ),
                row(day, cell=FLAT, compile_s=WANDER[day - 1]),
                row(day, cell=DRIFT, compile_s=2.0),
                row(day, 11, cell=CREEP, compile_s=0.05, cache_state="warm"),
                row(day, 11, cell=FLAT, compile_s=0.04, cache_state="warm"),
            ],
        )
        if day == 9:
            assert main(["pin", "records"]) == 0
    store = PinStore(root / "pins")
    # Pinned before the history's rows: `report` judges rows measured after their pin.
    before = "2026-10-31T10:00:00+00:00"
    store.update(
        [
            make_record(cell=DRIFT, compile_s=0.5, timestamp=before),
            make_record(cell=GONE, timestamp=before),
        ]
    )
    assert main(["report", "records", "--html", "compile.html"]) == 0
    return root / "compile.html"


def test_the_dashboard_leads_with_what_changed_and_filters_charts(
    browser: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from selenium.webdriver.common.by import By

    # The log is read: a page that logs an error shows up in it.
    probe = tmp_path / "probe.html"
    probe.write_text("<!DOCTYPE html><title>p</title><script>console.error('probe')</script>")
    browser.get(probe.as_uri())
    assert any("probe" in entry["message"] for entry in _errors(browser))

    monkeypatch.chdir(tmp_path)
    page = _page(tmp_path)
    capsys.readouterr()
    browser.get(page.as_uri())
    assert _errors(browser) == []

    # First on the page: what changed (DRIFT over its pin in every session), newest first.
    headings = [h.text for h in browser.find_elements(By.TAG_NAME, "h2")]
    assert headings == [
        "What changed",
        "Needs attention",
        "Trends",
        "Cold to warm",
        "Latest figures against the pins",
        "Stale pins",
    ]
    changes = browser.find_element(By.ID, "changes")
    sessions = [h.text for h in changes.find_elements(By.TAG_NAME, "h3")]
    assert sessions[0] == "2026-11-10 10:00 UTC: 1 DRIFT" and len(sessions) == 10
    changed = changes.find_elements(By.CSS_SELECTOR, "table.changes tr[data-test]")
    assert changed[0].get_attribute("data-test") == DRIFT
    assert "2.000 s, pin 0.500 s (4.00x, tolerance 75%)" in changed[0].text
    attention = browser.find_element(By.ID, "attention")
    rising = attention.find_elements(By.CSS_SELECTOR, "table.rising tr[data-test]")
    assert [r.get_attribute("data-test") for r in rising] == [CREEP]
    assert "+136%" in rising[0].text
    assert "2026-11-02T10:00:00+00:00 (commit 020202020202 on refs/heads/main)" in rising[0].text
    failing = attention.find_elements(By.CSS_SELECTOR, "table.failing tr[data-test]")
    assert [(r.get_attribute("data-test"), r.text.split()[0]) for r in failing] == [
        (DRIFT, "DRIFT")
    ]
    # The pin no row measured is folded at the end of the page.
    stale = browser.find_element(By.ID, "stale-pins")
    folded = stale.find_elements(By.CSS_SELECTOR, "table.stale tr[data-test]")
    assert [r.get_attribute("data-test") for r in folded] == [GONE]
    assert not folded[0].is_displayed()
    assert "3 of 4" in attention.find_element(By.CSS_SELECTOR, "table.coverage").text

    # The rising series links to its chart.
    link = rising[0].find_element(By.LINK_TEXT, "chart")
    target = link.get_attribute("href").split("#", 1)[1]
    assert browser.find_element(By.ID, target).get_attribute("data-test") == CREEP

    # Cold to warm: from the pins of day 9 (creep 1.1**8 s cold, 0.05 s warm).
    speedup = browser.find_element(By.CSS_SELECTOR, "table.speedup")
    (creep_row,) = [
        r
        for r in speedup.find_elements(By.CSS_SELECTOR, "tr[data-test]")
        if r.get_attribute("data-test") == CREEP
    ]
    assert "42.9x" in creep_row.text and "pins" in creep_row.text

    # The filter hides the charts (and table rows) of other tests.
    figures = browser.find_elements(By.TAG_NAME, "figure")
    assert sorted(f.get_attribute("data-test") for f in figures) == [CREEP, DRIFT, FLAT]
    assert all(figure.is_displayed() for figure in figures)
    box = browser.find_element(By.ID, "filter")
    box.send_keys("FLAT")
    shown = {f.get_attribute("data-test"): f.is_displayed() for f in figures}
    assert shown == {CREEP: False, DRIFT: False, FLAT: True}
    assert browser.find_element(By.ID, "filter-count").text == "1 of 3 charts shown"
    assert not rising[0].is_displayed()
    box.send_keys("-nothing-matches")
    assert not any(f.is_displayed() for f in figures)
    assert not browser.find_element(By.CSS_SELECTOR, "section.charts").is_displayed()
    box.clear()
    box.send_keys(" ")  # clear() sends no input event; typing does
    assert all(figure.is_displayed() for figure in figures)
    assert _errors(browser) == []
