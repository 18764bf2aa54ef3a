"""How much pytest-xdist workers slow each other's compiles down.

Run with ``python benchmarks/xdist_contention.py [--reps 3] [--workers 0 2]``. It copies the
embedded example suite into a temporary directory and runs it with pytest (and the plugin)
once per repetition and worker count, with the persistent cache off (every row is ``none``,
i.e. a full XLA compile). It prints the median ``compile_s`` of every row per worker count,
and the ratio to the first worker count. XLA compiles on the host cores: workers that
compile at the same time share them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

CONFTEST = "def pytest_configure(config):\n    pass\n"  # no persistent cache: all `none`


def run_suite(directory: Path, workers: str) -> dict[str, float]:
    report = directory / "report.json"
    report.unlink(missing_ok=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-n",
            workers,
            f"--compile-report={report}",
            "-o",
            "compile_pins_dir=pins",
        ],
        cwd=directory,
        check=True,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(directory)},
    )
    data = json.loads(report.read_text())
    return {
        f"{r['cell'].split('::')[-1]} [{r['transform']}]": r["compile_s"] for r in data["records"]
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--workers", nargs="+", default=["0", "2"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        suite = Path(temp)
        for name in ("jaxmodels.py", "test_models.py"):
            shutil.copy(REPO / "examples" / name, suite / name)
        (suite / "conftest.py").write_text(CONFTEST)
        results: dict[str, dict[str, list[float]]] = {}
        for _ in range(args.reps):
            for workers in args.workers:
                for row, seconds in run_suite(suite, workers).items():
                    results.setdefault(workers, {}).setdefault(row, []).append(seconds)
    print(
        f"host: {os.cpu_count()} logical cores; {args.reps} repetition(s); "
        "median compile_s per row (cache off)"
    )
    base = args.workers[0]
    header = f"{'row':<28}" + "".join(f"{'-n ' + w:>10}" for w in args.workers)
    print(header + "".join(f"{'ratio ' + w:>10}" for w in args.workers[1:]))
    for row in sorted(results[base]):
        medians = [statistics.median(results[w][row]) for w in args.workers]
        line = f"{row:<28}" + "".join(f"{m:10.3f}" for m in medians)
        print(line + "".join(f"{m / medians[0]:10.2f}" for m in medians[1:]))


if __name__ == "__main__":
    main()
