"""pytest start-up with the plugin installed, for a project that never uses it.

A throwaway project with two plain tests and no JAX is run with the plugin (as installed,
loaded from its entry point) and with ``-p no:jaxcompile``, interleaved, N times each, with
bytecode written (as in a user's venv: the first run of each mode writes it, the warm-up
runs are not counted) and with ``PYTHONDONTWRITEBYTECODE=1`` (as in many containers and CI
images). Prints each mode's median wall seconds and the ratio plugin / no plugin.

    python benchmarks/startup.py [--runs 20]

The project's directory is a fresh temporary one; ``-p no:cacheprovider`` keeps it clean.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TESTS = """
def test_one():
    assert 1 + 1 == 2


def test_two():
    assert "a" in "abc"
"""

MODES = {"plugin": (), "no plugin": ("-p", "no:jaxcompile")}


def one_run(project: Path, extra: tuple[str, ...], env: dict[str, str]) -> float:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra]
    start = time.perf_counter()
    result = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if result.returncode != 0 or "2 passed" not in result.stdout:
        raise SystemExit(f"pytest failed ({' '.join(extra) or 'plugin'}):\n{result.stdout}")
    return wall


def measure(project: Path, runs: int, bytecode: bool) -> dict[str, float]:
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if not bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    for extra in MODES.values():  # warm-up: writes bytecode where allowed, fills OS caches
        one_run(project, extra, env)
    walls: dict[str, list[float]] = {mode: [] for mode in MODES}
    for _ in range(runs):
        for mode, extra in MODES.items():
            walls[mode].append(one_run(project, extra, env))
    return {mode: statistics.median(values) for mode, values in walls.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each mode (default 20)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        project = Path(scratch)
        (project / "test_plain.py").write_text(TESTS)
        print(f"== start-up, two plain tests, median of {args.runs} interleaved runs")
        for label, bytecode in (("bytecode written", True), ("PYTHONDONTWRITEBYTECODE=1", False)):
            medians = measure(project, args.runs, bytecode)
            with_plugin, without = medians["plugin"], medians["no plugin"]
            print(
                f"{label}: plugin {with_plugin:.3f} s, -p no:jaxcompile {without:.3f} s, "
                f"ratio x{with_plugin / without:.3f} ({(with_plugin - without) * 1000:+.1f} ms)"
            )


if __name__ == "__main__":
    main()
