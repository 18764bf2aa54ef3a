"""`report`: the Markdown region, the HTML page, determinism; and the dashboard logic."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from corpus_helpers import cli, row, write_lines
from records_factory import make_record

from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.pins import PinStore
from pytest_jaxcompile.output.charts import MAX_POINTS, Series
from pytest_jaxcompile.output.dashboard import (
    BEGIN_MARKER,
    END_MARKER,
    DashboardError,
    markdown,
    replace_region,
    table_rows,
)

A, B = "tests/test_m.py::test_a", "tests/test_m.py::test_b"
README = f"""# My project

Some text that must stay exactly as it is.\t

{BEGIN_MARKER}
old table
{END_MARKER}

More text.
"""


def _corpus(root: Path) -> None:
    """Two cells; A has vag and jit; cold and warm; a jax bump on day 4; pins of 0.10.2."""
    rows = []
    for day in range(1, 7):
        version = "0.10.2" if day < 4 else "0.11.0"
        for cell, transform in ((A, "vag"), (A, "jit"), (B, "vag")):
            rows.append(
                row(
                    day,
                    cell=cell,
                    transform=transform,
                    jax_version=version,
                    compile_s=1.0 + day / 10,
                )
            )
            rows.append(
                row(
                    day,
                    11,
                    cell=cell,
                    transform=transform,
                    jax_version=version,
                    compile_s=0.05,
                    cache_state="warm",
                )
            )
    rows.append({"record_kind": "energy_probe", "cell": A, "joules": 12})
    write_lines(root / "records" / "a.jsonl", rows[: len(rows) // 2])
    write_lines(root / "records" / "nested" / "b.jsonl", rows[len(rows) // 2 :])
    before = "2026-10-31T00:00:00+00:00"  # pinned before the first row
    PinStore(root / "pins").update(
        [
            make_record(cell=A, transform="vag", compile_s=1.2, timestamp=before),
            make_record(cell=A, transform="jit", compile_s=1.2, timestamp=before),
            make_record(cell=B, transform="vag", compile_s=0.5, timestamp=before),
            make_record(
                cell=A, transform="vag", compile_s=0.05, cache_state="warm", timestamp=before
            ),
        ]
    )


def test_readme_region_is_rewritten_idempotently_and_check_catches_a_stale_one(
    tmp_path: Path,
) -> None:
    _corpus(tmp_path)
    readme = tmp_path / "README.md"
    readme.write_text(README)
    first = cli(tmp_path, "report", "records", "--readme", "README.md")
    assert first.returncode == 0, first.stderr
    assert "README.md: updated" in first.stdout
    text = readme.read_text()
    head, rest = text.split(BEGIN_MARKER)
    region, tail = rest.split(END_MARKER)
    assert head == README.split(BEGIN_MARKER)[0]
    assert tail == README.split(END_MARKER)[1]
    assert "**cpu:cpu @ Test CPU x2 | jax 0.10.2 | full precision | cold**" in region
    # B's latest cold row (day 3) is older than its warm row of the same day: shown with
    # its figures, not judged, as `check` passes it over.
    assert (
        "| `tests/test_m.py::test_b` | `vag` | 1.300 s | 0.500 s | 2.60x | — | — | "
        "passed over: a newer warm row measured its cell |" in region
    )
    assert "unpinned (upgrade from jax 0.10.2)" in region  # 0.11.0 rows, pinned under 0.10.2
    assert "old table" not in region

    written = readme.read_bytes()
    mtime = readme.stat().st_mtime_ns
    second = cli(tmp_path, "report", "records", "--readme", "README.md")
    assert "README.md: unchanged" in second.stdout
    assert readme.read_bytes() == written and readme.stat().st_mtime_ns == mtime

    assert cli(tmp_path, "report", "records", "--readme", "README.md", "--check").returncode == 0
    write_lines(tmp_path / "records" / "c.jsonl", [row(9, cell=B, compile_s=0.5)])
    stale = cli(tmp_path, "report", "records", "--readme", "README.md", "--check")
    assert stale.returncode == 1
    assert "README.md: out of date" in stale.stdout
    assert readme.read_bytes() == written  # --check writes nothing
    cli(tmp_path, "report", "records", "--readme", "README.md")
    assert cli(tmp_path, "report", "records", "--readme", "README.md", "--check").returncode == 0


def test_readme_without_markers_is_an_error_naming_the_file(tmp_path: Path) -> None:
    _corpus(tmp_path)
    (tmp_path / "README.md").write_text("# no markers\n")
    result = cli(tmp_path, "report", "records", "--readme", "README.md")
    assert result.returncode == 2
    assert "README.md: expected exactly one <!-- BEGIN jaxcompile -->" in result.stderr
    assert (tmp_path / "README.md").read_text() == "# no markers\n"


def test_report_without_files_prints_the_markdown(tmp_path: Path) -> None:
    _corpus(tmp_path)
    result = cli(tmp_path, "report", "records")
    assert result.returncode == 0
    assert result.stdout.startswith("Latest compile time per cell and transform")
    assert result.stdout.count("| cell | transform |") == 4  # keys: 2 versions x cold/warm


def test_html_page_is_self_contained_with_one_chart_per_cell_and_transform(
    tmp_path: Path,
) -> None:
    _corpus(tmp_path)
    result = cli(tmp_path, "report", "records", "--html", "out/compile.html")
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "out" / "compile.html").read_text()
    assert "http" not in page.lower()
    for external in ("<link", "src=", "url(", "@import", "<iframe", "<img", "fetch("):
        assert external not in page
    assert page.count("<script") == 1 and "<script>" in page  # the inline filter box
    assert page.count("<svg") == 3  # (A, vag), (A, jit), (B, vag)
    charts = re.findall(r"<figure .*?</figure>", page, re.S)
    assert len(charts) == 3
    for chart in charts:
        assert chart.count('class="series"') == 2  # cold and warm, each its own series
        assert chart.count('<g class="bump">') == 1  # 0.10.2 -> 0.11.0
        assert ">jax 0.11.0</text>" in chart
    a_vag = next(chart for chart in charts if "test_a</code> [vag]" in chart)
    assert a_vag.count('<g class="pin"') == 2  # cold and warm pins, under 0.10.2
    assert "pin cold 1.200 s (jax 0.10.2)" in a_vag
    # The trend heading names the jax versions charted, first measured first.
    (heading,) = re.findall(r'<section class="charts">\n<h3>(.*?)</h3>', page)
    assert heading.endswith(" | jax 0.10.2, 0.11.0 | full precision"), heading

    again = cli(tmp_path, "report", "records", "--html", "out/compile.html", "--check")
    assert again.returncode == 0, again.stdout


def test_markdown_is_sorted_escaped_and_deterministic(tmp_path: Path) -> None:
    store = PinStore(tmp_path)
    store.update([make_record(cell="t.py::test_gone", compile_s=3.0)])
    records = [
        make_record(cell="t.py::test_p[a|b]", compile_s=1.0),
        make_record(cell="t.py::test_a", compile_s=2.0, cache_state="unknown"),
    ]
    first = markdown(table_rows(records, store, Thresholds()), Thresholds())
    second = markdown(table_rows(list(reversed(records)), store, Thresholds()), Thresholds())
    assert first == second
    assert "`t.py::test_p[a\\|b]`" in first
    assert first.index("| cold**") < first.index("| unknown**")
    assert "| not judged |" in first
    assert "| `t.py::test_gone` | `vag` | — | 3.000 s | — | — | — | not measured | — |" in first


def test_region_replacement_keeps_everything_else_byte_for_byte() -> None:
    text = "a\r\n" + BEGIN_MARKER + " keep\r\nold\r\n" + END_MARKER + " tail\r\n"
    new = replace_region(text, "x\ny\n", Path("R.md"))
    assert new == "a\r\n" + BEGIN_MARKER + "\r\nx\r\ny\r\n" + END_MARKER + " tail\r\n"
    assert replace_region(new, "x\ny\n", Path("R.md")) == new
    for broken in ("no markers", BEGIN_MARKER * 2 + END_MARKER, END_MARKER + BEGIN_MARKER):
        with pytest.raises(DashboardError, match=r"^R\.md: "):
            replace_region(broken, "x", Path("R.md"))


def test_trend_series_stay_bounded_and_do_not_depend_on_reading_order() -> None:
    points = [(1_700_000_000 + 37 * i, (i % 11) / 10) for i in range(20_000)]
    series = Series()
    for time, value in points:
        series.add(time, value)
    shuffled = Series()
    random.Random(4).shuffle(points)
    for time, value in points:
        shuffled.add(time, value)
    assert len(series.buckets) <= MAX_POINTS
    assert sum(bucket.count for bucket in series.buckets.values()) == 20_000
    assert series.width == shuffled.width
    assert {i: (b.count, b.low, b.high) for i, b in series.buckets.items()} == {
        i: (b.count, b.low, b.high) for i, b in shuffled.buckets.items()
    }


def test_a_figure_judged_on_cpu_seconds_is_labelled_beside_wall_seconds(tmp_path: Path) -> None:
    """A noisy row (above compile_max_load) is compared on CPU seconds: its compile_s and pin
    cells say so, in the Markdown and the HTML tables, next to plain wall seconds."""
    from pytest_jaxcompile.output.charts import Trends
    from pytest_jaxcompile.output.dashboard import html_page
    from pytest_jaxcompile.records import HostState

    store = PinStore(tmp_path)
    store.update(
        [
            make_record(cell=A, compile_s=1.0, compile_cpu_s=0.8),
            make_record(cell=B, compile_s=1.0, compile_cpu_s=0.8),
        ]
    )
    loaded = HostState(cpu_count=2, load_avg_1m=6.0, load_per_core=3.0, process_cpu_s=1.0)
    records = [
        make_record(cell=A, compile_s=2.5, compile_cpu_s=0.9, host_state=loaded),
        make_record(cell=B, compile_s=1.1, compile_cpu_s=0.85),
    ]
    rows = table_rows(records, store, Thresholds())
    assert [(row.cell, row.status.value if row.status else None, row.metric) for row in rows] == [
        (A, "noisy", "cpu"),
        (B, "ok", "wall"),
    ]
    text = markdown(rows, Thresholds())
    assert "| `tests/test_m.py::test_a` | `vag` | 0.900 s cpu | 0.800 s cpu | 1.12x |" in text
    assert "| `tests/test_m.py::test_b` | `vag` | 1.100 s | 1.000 s | 1.10x |" in text
    page = html_page(rows, Trends(), store, Thresholds(), "a corpus")
    assert '<td class="num">0.900 s cpu</td><td class="num">0.800 s cpu</td>' in page
    assert '<td class="num">1.100 s</td><td class="num">1.000 s</td>' in page


def test_the_page_leads_with_the_drift_session_and_folds_stale_pins(tmp_path: Path) -> None:
    """Six daily sessions, one of them DRIFT: the page's first section is that session (when,
    which row, by how much), its point is marked on the chart, and the pins of a key no row
    measured (an old laptop's) are folded under "Stale pins", after everything else."""
    steady, drifting = "tests/test_m.py::test_steady", "tests/test_m.py::test_drifting"
    for day in range(1, 7):
        write_lines(
            tmp_path / "records" / f"202611{day:02d}T100000Z-1-abcdef.jsonl",
            [
                row(
                    day,
                    cell=drifting,
                    compile_s=2.0 if day == 4 else 0.5,
                    commit={"sha": f"{day:02d}" * 20, "ref": "refs/heads/main"},
                ),
                row(day, cell=steady, compile_s=0.3),
            ],
        )
    before = "2026-10-31T10:00:00+00:00"  # pinned before the history
    PinStore(tmp_path / "pins").update(
        [
            make_record(cell=drifting, compile_s=0.5, timestamp=before),
            make_record(cell=steady, compile_s=0.3, timestamp=before),
            *(
                make_record(cell=f"tests/test_m.py::test_{n}", hardware="old-laptop")
                for n in range(10)
            ),
        ]
    )
    result = cli(tmp_path, "report", "records", "--html", "compile.html")
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "compile.html").read_text()

    headings = re.findall(r"<h2[^>]*>(.*?)</h2>", page)
    assert headings[:3] == ["What changed", "Needs attention", "Trends"], headings
    assert headings[-1] == "Stale pins"
    changes = page[page.index('<section id="changes">') : page.index('<section id="attention">')]
    (session,) = re.findall(r'<h3 class="alert">(.*?)</h3>', changes)
    assert session == "2026-11-04 10:00 UTC (commit 040404040404 on refs/heads/main): 1 DRIFT"
    (listed,) = re.findall(r'<tr data-test="(.*?)">(.*?)</tr>', changes)
    assert listed[0] == drifting
    assert "DRIFT" in listed[1] and "2.000 s, pin 0.500 s (4.00x, tolerance 75%)" in listed[1]
    assert "chart</a>" in listed[1]
    # The chart marks the DRIFT point; the steady test's chart marks nothing.
    charts = re.findall(r'<figure id="[^"]*" data-test="([^"]*)">(.*?)</figure>', page, re.S)
    marked = {cell: chart.count('<g class="change">') for cell, chart in charts}
    assert marked == {drifting: 1, steady: 0}
    # The old laptop's ten pins lead nothing: folded at the end, not in needs attention.
    attention = page[page.index('<section id="attention">') : page.index('<h2 id="trends">')]
    assert "old-laptop" not in attention and "Missing" not in page
    stale = page[page.index('<section id="stale-pins">') :]
    assert "<details><summary>10 pin(s) under 1 key(s) that no row measured" in stale
    assert stale.count('<tr data-test="tests/test_m.py::test_') == 10
