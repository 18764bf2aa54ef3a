"""Census overhead: a generated suite of small jitted tests with and without the census.

    python benchmarks/census_overhead.py [--tests 120] [--rounds 3]

Each round runs the same generated suite three ways, in fresh pytest processes: with
the plugin disabled (``-p no:jaxcompile``), with the plugin but no census, and with
``--compile-census``. The figure per way is the fastest round's wall time of the whole
pytest process; the ratios are what docs/benchmarks.md reports.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

WAYS = {
    "plugin disabled": ["-p", "no:jaxcompile"],
    "plugin, no census": [],
    "--compile-census": ["--compile-census"],
}


def write_suite(directory: Path, tests: int) -> None:
    lines = ["import jax", "import jax.numpy as jnp", "", "X = jnp.arange(8.0)", ""]
    for index in range(tests):
        lines += textwrap.dedent(
            f"""
            def test_small_{index}():
                step = jax.jit(lambda x: jnp.tanh(x * {index + 1}.0) + {index})
                assert step(X).shape == (8,)
            """
        ).splitlines()
    (directory / "test_generated.py").write_text("\n".join(lines) + "\n")
    (directory / "pytest.ini").write_text("[pytest]\n")


def run_once(directory: Path, extra: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra],
        cwd=directory,
        check=True,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=120)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        write_suite(directory, args.tests)
        best = dict.fromkeys(WAYS, float("inf"))
        for _ in range(args.rounds):
            for way, extra in WAYS.items():  # interleaved, so drifting load hits all ways
                best[way] = min(best[way], run_once(directory, extra))
    baseline = best["plugin disabled"]
    print(
        f"census overhead: {args.tests} tests of small jitted functions, "
        f"best of {args.rounds} rounds, {os.cpu_count()} CPUs"
    )
    for way, seconds in best.items():
        print(f"  {way:<20} {seconds:7.2f} s   x{seconds / baseline:.3f}")
    census, plain = best["--compile-census"], best["plugin, no census"]
    print(
        f"  census vs no census: x{census / plain:.3f} "
        f"({(census - plain) / args.tests * 1000:+.1f} ms per test)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
