"""The gate-quality benchmark runs end to end with tiny settings and prints every section.

Speed is not asserted here (the benchmark is run on demand and its figures are written
down in docs/benchmarks.md); only what does not depend on the machine's load is. It takes
half a minute, so it runs only when asked: ``JAXCOMPILE_BENCHMARK_SMOKE=1 pytest``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.skipif(
    os.environ.get("JAXCOMPILE_BENCHMARK_SMOKE") != "1",
    reason="benchmark smoke tests run only when asked (JAXCOMPILE_BENCHMARK_SMOKE=1)",
)

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "gate_quality.py"
SECTIONS = [
    "== machine",
    "== false alarms",
    "== detection",
    "== fidelity",
    "== overhead",
    "== naive alternative",
    "== defaults",
]


def test_gate_quality_quick_run_prints_every_section(tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--max-minutes", "10"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    lines = result.stdout.splitlines()
    positions = [lines.index(heading) for heading in SECTIONS]
    assert positions == sorted(positions)

    # The disabled cache is caught by --compile-expect-warm: MISS does not depend on time.
    (disabled,) = [line for line in lines if "cache disabled, --compile-expect-warm" in line]
    assert re.search(r"\s1/1\s+5 MISS\s+5 none\s", disabled), disabled
    # No session of the unchanged suite errored, whatever its verdicts.
    for name in ("no change, cold cache", "no change, warm cache"):
        (row,) = [line for line in lines if line.strip().startswith(name + "  ")]
        assert re.search(r"\s[01]/1\s+(\d+ \w+(, )?)+\s+5 (cold|warm)\s", row), row
    assert any("jax stays unimported with the plugin: yes" in line for line in lines)
    assert any("the plugin's row is 'none'" in line for line in lines)
    assert any(re.match(r"\s*\+ 10,000 entry files\s+10\d\d\d\s", line) for line in lines)

    # The busy process was stopped and the scratch directory removed (the plugin's own pin
    # lock files live in the temp dir by design).
    (busy,) = re.findall(r"busy process (\d+) stopped", result.stdout)
    assert not psutil.pid_exists(int(busy))
    assert [path.name for path in scratch.iterdir() if not path.name.endswith(".lock")] == []


def test_trend_quality_quick_run_prints_every_section() -> None:
    script = REPO / "benchmarks" / "trend_quality.py"
    result = subprocess.run(
        [sys.executable, str(script), "--quick"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    lines = result.stdout.splitlines()
    headings = [
        "== machine",
        "== flat",
        "== creep",
        "== step",
        "== delay",
        "== timing",
        "== defaults",
    ]
    positions = [lines.index(heading) for heading in headings]
    assert positions == sorted(positions)
    # Seeded: the figures do not depend on the machine. A 10 % creep is always caught, and
    # a single slow session never is, at every alpha and threshold of the grid.
    creeps = [line for line in lines if line.startswith("10 %/session, +-5 %")]
    assert len(creeps) == 2 and all(line.split()[4:12] == ["100.0"] * 8 for line in creeps)
    spikes = [line for line in lines if line.startswith("one session 2x slow")]
    assert len(spikes) == 2 and all(
        float(value) < 50 for line in spikes for value in line.split()[4:]
    )
