"""What a changed module that hit the cache costs a session: one compile of it, afresh.

    python benchmarks/changed_module.py [--rounds 5] [--length 256] [--unroll 16]

A row whose module changed since its pin and that hit the persistent cache (a re-run of a
failed job, the cache holding the new module) is compiled once more with the cache
bypassed, its twin (gate/twins.py), and judged on that compile; a session whose modules are
unchanged compiles nothing more. The project is the one of issue #54: the gradient of a
``lax.scan`` (LENGTH steps), pinned cold and warm with ``unroll=1``; the change is
``unroll=UNROLL``, left in the persistent cache by one run before the rounds.

Each round runs, in fresh pytest processes on the warm cache: the unchanged module (no
twin), and the changed one (one twin). The figures per way are the medians over the rounds of
the pytest process's wall seconds and, for the changed module, of its twin's seconds, beside
the changed module's cold compile as the run that filled the cache measured it. Rounds
interleave the ways, so drifting load hits both.
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
import time
from pathlib import Path

CONFTEST = """
import os

import jax


def pytest_configure(config):
    here = os.path.dirname(__file__)
    jax.config.update("jax_compilation_cache_dir", os.path.join(here, "jaxcache"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
"""

TEST = """
import os

import jax
import jax.numpy as jnp

UNROLL = int(os.environ.get("UNROLL", "1"))


def f(x):
    def step(c, _):
        return jnp.tanh(c * 1.01 + jnp.sin(c)), None

    return jnp.sum(jax.lax.scan(step, x, None, length={length}, unroll=UNROLL)[0])


def test_f(jax_compile):
    jax_compile(jax.jit(jax.grad(f)), jnp.ones((8, 8)), transform="grad")
"""


def session(project: Path, unroll: int, *args: str) -> tuple[float, dict[str, object]]:
    """One pytest process: its wall seconds and its one row, from its report."""
    report = project / "report.json"
    report.unlink(missing_ok=True)
    env = {**os.environ, "UNROLL": str(unroll), "JAXCOMPILE_HARDWARE": "bench"}
    start = time.perf_counter()
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly"]
    subprocess.run(
        [*command, "-q", "--compile-report", str(report), *args],
        cwd=project,
        env=env,
        stdout=subprocess.DEVNULL,
        check=False,
    )
    wall = time.perf_counter() - start
    (row,) = json.loads(report.read_text())["records"]
    return wall, row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--unroll", type=int, default=16)
    options = parser.parse_args()
    project = Path(tempfile.mkdtemp(prefix="jaxcompile-changed-"))
    try:
        (project / "conftest.py").write_text(CONFTEST)
        (project / "test_m.py").write_text(TEST.format(length=options.length))
        session(project, 1, "--compile-pin-update")  # empty cache: the cold pin
        session(project, 1, "--compile-pin-update")  # the warm pin
        _, filled = session(project, options.unroll)  # the change, cold: now in the cache
        walls: dict[str, list[float]] = {"unchanged": [], "changed": []}
        twins: list[float] = []
        for _ in range(options.rounds):
            wall, row = session(project, 1)
            assert row["cache_state"] == "warm" and row["twin_compile_s"] is None, row
            walls["unchanged"].append(wall)
            wall, row = session(project, options.unroll)
            assert row["cache_state"] == "warm" and row["twin_cache_state"] == "cold", row
            walls["changed"].append(wall)
            twins.append(float(row["twin_compile_s"]))  # type: ignore[arg-type]
    finally:
        shutil.rmtree(project, ignore_errors=True)
    load = os.getloadavg()[0]
    print(f"== machine: {os.cpu_count()} cores, load average {load:.2f} at the end")
    print(
        f"== grad of a {options.length}-step lax.scan, unroll 1 -> {options.unroll}, "
        f"{options.rounds} rounds on a warm cache (medians)"
    )
    print(
        f"the changed module's cold compile (the run that filled the cache): "
        f"{filled['compile_s']:.3f} s"
    )
    print(f"unchanged module: session {statistics.median(walls['unchanged']):.2f} s, no twin")
    print(
        f"changed module:   session {statistics.median(walls['changed']):.2f} s, its twin "
        f"(compiled with the cache bypassed) {statistics.median(twins):.3f} s"
    )


if __name__ == "__main__":
    main()
