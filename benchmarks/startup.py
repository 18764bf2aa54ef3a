"""pytest start-up with the plugin installed, for a project that never uses it.

A throwaway project with two plain tests and no JAX is run with the plugin (as installed,
loaded from its entry point) and with ``-p no:jaxcompile``, interleaved, N times each, with
bytecode written (as in a user's venv: the first run of each mode writes it, the warm-up
runs are not counted) and with ``PYTHONDONTWRITEBYTECODE=1`` (as in many containers and CI
images). Prints each mode's median wall seconds and the ratio plugin / no plugin, and where
valgrind is installed each mode's instructions for one start (the ratio the host's load does
not move).

    python benchmarks/startup.py [--runs 20] [--python PATH]

By default the runs use a fresh venv made for them, with pytest and the plugin installed as
a user gets it from PyPI (a regular install, not an editable one: pytest marks only a
regular install's package for assertion rewriting, which is what a user pays for). The
project's directory is a fresh temporary one; ``-p no:cacheprovider`` keeps it clean.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
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


REPO = Path(__file__).resolve().parents[1]


def fresh_venv(where: Path) -> str:
    """A venv with pytest and the plugin (regular install, its own dependencies but jax)."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    python = str(where / "bin" / "python")
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "pytest", "pluggy", "psutil", "filelock"], check=True)
    subprocess.run([*pip, "--no-deps", str(REPO)], check=True)
    return python


def one_run(python: str, project: Path, extra: tuple[str, ...], env: dict[str, str]) -> float:
    command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra]
    start = time.perf_counter()
    result = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if result.returncode != 0 or "2 passed" not in result.stdout:
        raise SystemExit(f"pytest failed ({' '.join(extra) or 'plugin'}):\n{result.stdout}")
    return wall


def run_env(bytecode: bool) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONHASHSEED"] = "0"
    if not bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def instructions(python: str, project: Path, extra: tuple[str, ...], bytecode: bool) -> int:
    """One start's instructions under valgrind (cachegrind, no cache simulation): the
    figure that does not move with the host's load."""
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    command += [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra]
    result = subprocess.run(
        command, cwd=project, env=run_env(bytecode), capture_output=True, text=True
    )
    match = re.search(r"I\s+refs:\s+([\d,]+)", result.stderr)
    if result.returncode != 0 or match is None:
        raise SystemExit(f"valgrind failed ({' '.join(extra) or 'plugin'}):\n{result.stderr}")
    return int(match.group(1).replace(",", ""))


def measure(python: str, project: Path, runs: int, bytecode: bool) -> dict[str, float]:
    env = run_env(bytecode)
    for extra in MODES.values():  # warm-up: writes bytecode where allowed, fills OS caches
        one_run(python, project, extra, env)
    walls: dict[str, list[float]] = {mode: [] for mode in MODES}
    for _ in range(runs):
        for mode, extra in MODES.items():
            walls[mode].append(one_run(python, project, extra, env))
    return {mode: statistics.median(values) for mode, values in walls.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each mode (default 20)")
    parser.add_argument(
        "--python", help="a Python with pytest and the plugin installed (default: a fresh venv)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        python = args.python or fresh_venv(Path(scratch) / "venv")
        project = Path(scratch) / "project"
        project.mkdir()
        (project / "test_plain.py").write_text(TESTS)
        print(f"== start-up, two plain tests, median of {args.runs} interleaved runs ({python})")
        # No bytecode first: pytest's hook reads the .pyc it wrote in a run that could write
        # one, which a container that never writes bytecode does not have.
        for label, bytecode in (("PYTHONDONTWRITEBYTECODE=1", False), ("bytecode written", True)):
            medians = measure(python, project, args.runs, bytecode)
            with_plugin, without = medians["plugin"], medians["no plugin"]
            print(
                f"{label}: plugin {with_plugin:.3f} s, -p no:jaxcompile {without:.3f} s, "
                f"ratio x{with_plugin / without:.3f} ({(with_plugin - without) * 1000:+.1f} ms)"
            )
            if shutil.which("valgrind") is not None:
                counts = {
                    mode: instructions(python, project, extra, bytecode)
                    for mode, extra in MODES.items()
                }
                plugin_count, plain_count = counts["plugin"], counts["no plugin"]
                print(
                    f"{label}: instructions plugin {plugin_count:,}, -p no:jaxcompile "
                    f"{plain_count:,}, ratio x{plugin_count / plain_count:.4f}"
                )


if __name__ == "__main__":
    main()
