"""Compile memory: what sampling the RSS costs per compile, and how close its peak is.

    python benchmarks/compile_memory.py [--pairs 15] [--runs 3] [--quick]

Three sections, each printed as a table that docs/benchmarks.md copies:

* ``== cost``: the same lowered module (the example MLP's ``value_and_grad`` at several
  depths) compiled fresh (in-process caches cleared, no persistent cache) again and again,
  alternately without and with `RssSampler` at the fixture's 1 ms interval. Per module: the
  median wall seconds of each, the median and worst difference of adjacent pairs, the
  sampling thread's own CPU seconds per compile (median, worst: what it takes from the
  machine, and what the plugin subtracts from ``compile_cpu_s``), and the samples taken.
  Entering and leaving an empty sampled block is timed too (thread start and join).
* ``== accuracy``: in a fresh process per run, one compile of a module large enough to be the
  process's peak (the 24-layer MLP, and modules holding a 32 or 128 MiB constant, which XLA
  copies while compiling), sampled at 1, 5 and 20 ms; the highest sample against the kernel's
  ``VmHWM`` (/proc/self/status) read after the compile, which is the true peak when it rose
  during the compile. The recorded peak uses ``VmHWM`` in that case, so the shortfall is what
  sampling alone would have missed.
* ``== growth``: in fresh processes, how much RSS the same compile adds as the process's
  first compile and as a later one, and what a process's very first XLA compile adds: the
  noise the RSS floor has to clear.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "examples"))

MIB = 1024 * 1024


def _vm_hwm() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def _lowered(depth: int, batch: int = 8):  # type: ignore[no-untyped-def]
    import jax
    import jaxmodels

    params = jaxmodels.mlp_init(0, jaxmodels.mlp_widths(depth))
    x = jaxmodels.example_inputs((batch, jaxmodels.IN_WIDTH), seed=1)
    y = jaxmodels.example_inputs((batch, jaxmodels.OUT_WIDTH), seed=2)
    # A throwaway compile first: the process's very first XLA compile carries one-time
    # costs, measured on their own (FIRST_CHILD).
    jax.jit(lambda a: a + 1)(x).block_until_ready()
    return jax.jit(jax.value_and_grad(jaxmodels.mlp_loss)).trace(params, x, y).lower()


def _lowered_constant(mib: int):  # type: ignore[no-untyped-def]
    """A module holding a float32 constant of `mib` MiB: XLA copies it while compiling."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    rows = mib * MIB // (4 * 1024)
    constant = np.random.default_rng(0).random((rows, 1024), dtype=np.float32)
    x = np.ones((rows, 1024), np.float32)
    return jax.jit(lambda a: jnp.tanh(a + constant) * constant).trace(x).lower()


def _lowered_named(name: str):  # type: ignore[no-untyped-def]
    """``mlp24`` (the example MLP's value_and_grad, 24 layers) or ``const32`` (32 MiB)."""
    if name.startswith("mlp"):
        return _lowered(int(name[3:]))
    return _lowered_constant(int(name[5:]))


def cost(depths: list[int], pairs: int, intervals: list[float]) -> None:
    import jax

    from pytest_jaxcompile.backends.memory import RssSampler

    print("== cost")
    print(
        f"{'module':<16} {'interval':>8} {'compiles':>8} {'without (median)':>17} "
        f"{'with (median)':>14} {'diff median':>12} {'diff worst':>11} "
        f"{'sampler cpu median':>19} {'sampler cpu worst':>18} {'samples (median)':>17}"
    )
    for depth in depths:
        lowered = _lowered(depth)
        lowered.compile(compiler_options={})  # warm up the process
        without: list[float] = []
        with_: dict[float, list[float]] = {interval: [] for interval in intervals}
        cpu: dict[float, list[float]] = {interval: [] for interval in intervals}
        samples: dict[float, list[int]] = {interval: [] for interval in intervals}
        for _ in range(pairs):  # interleaved: without, then each interval, round after round
            for interval in (None, *intervals):
                jax.clear_caches()  # type: ignore[no-untyped-call]
                sampler = RssSampler(interval) if interval is not None else None
                if sampler is not None:
                    sampler.__enter__()
                start = time.perf_counter()
                lowered.compile(compiler_options={})
                wall = time.perf_counter() - start
                if sampler is None or interval is None:
                    without.append(wall)
                    continue
                result = sampler.stop()
                with_[interval].append(wall)
                cpu[interval].append(result.sampler_cpu_s)
                samples[interval].append(result.samples)
        for interval in intervals:
            diffs = [b - a for a, b in zip(without, with_[interval], strict=True)]
            print(
                f"{'mlp depth ' + str(depth):<16} {interval * 1e3:>5.0f} ms {pairs:>8} "
                f"{statistics.median(without) * 1e3:>14.1f} ms "
                f"{statistics.median(with_[interval]) * 1e3:>11.1f} ms "
                f"{statistics.median(diffs) * 1e3:>+9.1f} ms {max(diffs) * 1e3:>+8.1f} ms "
                f"{statistics.median(cpu[interval]) * 1e3:>16.2f} ms "
                f"{max(cpu[interval]) * 1e3:>15.2f} ms "
                f"{statistics.median(samples[interval]):>17.0f}"
            )
    blocks = []
    for _ in range(200):
        start = time.perf_counter()
        with RssSampler():
            pass
        blocks.append(time.perf_counter() - start)
    print(
        f"empty sampled block (thread start and join): median "
        f"{statistics.median(blocks) * 1e6:.0f} us, worst {max(blocks) * 1e6:.0f} us "
        "(200 blocks)"
    )


ACCURACY_CHILD = """
import json, sys, time
sys.path[:0] = {paths!r}
from compile_memory import _lowered_named, _vm_hwm
from pytest_jaxcompile.backends.memory import RssSampler
lowered = _lowered_named({name!r})
hwm_before = _vm_hwm()
with RssSampler({interval}) as sampler:
    lowered.compile()
result = sampler.result
print(json.dumps(dict(hwm_before=hwm_before, hwm_after=_vm_hwm(), sampled=result.sampled_bytes,
                      recorded=result.peak_bytes, before=result.before_bytes,
                      samples=result.samples, exact=result.exact)))
"""


def _child(code: str) -> dict[str, object]:
    output = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    ).stdout
    data: dict[str, object] = json.loads(output.strip().splitlines()[-1])
    return data


def accuracy(names: list[str], intervals: list[float], runs: int) -> None:
    print("== accuracy")
    print(
        f"{'module':<16} {'interval':>8} {'runs':>4} {'growth (VmHWM)':>15} "
        f"{'sampled short by (median)':>26} {'(worst)':>9} {'VmHWM rose':>10}"
    )
    paths = [str(REPO / "benchmarks"), str(REPO / "src"), str(REPO / "examples")]
    for name in names:
        for interval in intervals:
            shortfalls, growths, rose = [], [], 0
            for _ in range(runs):
                data = _child(ACCURACY_CHILD.format(paths=paths, name=name, interval=interval))
                hwm_before, hwm_after = int(data["hwm_before"]), int(data["hwm_after"])  # type: ignore[call-overload]
                sampled, before = int(data["sampled"]), int(data["before"])  # type: ignore[call-overload]
                if hwm_after > hwm_before:  # the true peak of the compile is VmHWM
                    rose += 1
                    shortfalls.append((hwm_after - sampled) / MIB)
                    growths.append((hwm_after - before) / MIB)
            if not shortfalls:
                print(
                    f"{name:<16} {interval * 1e3:>5.0f} ms {runs:>4} "
                    "  VmHWM never rose during the compile: no reference"
                )
                continue
            print(
                f"{name:<16} {interval * 1e3:>5.0f} ms {runs:>4} "
                f"{statistics.median(growths):>11.1f} MiB "
                f"{statistics.median(shortfalls):>22.1f} MiB {max(shortfalls):>5.1f} MiB "
                f"{rose:>6}/{runs}"
            )


FIRST_CHILD = """
import json, sys
sys.path[:0] = {paths!r}
import numpy as np
import jaxmodels as m
import jax
from pytest_jaxcompile.backends.memory import RssSampler
params = [(np.ones((16, 4), np.float32), np.zeros(4, np.float32))]
x, y = np.ones((8, 16), np.float32), np.ones((8, 4), np.float32)
lowered = jax.jit(m.mlp_loss).trace(params, x, y).lower()  # nothing compiled yet
with RssSampler() as sampler:
    lowered.compile()
print(json.dumps(sampler.result.growth_mib))
"""


GROWTH_CHILD = """
import json, sys
sys.path[:0] = {paths!r}
from compile_memory import _lowered
import jax
from pytest_jaxcompile.backends.memory import RssSampler
lowered = _lowered({depth})
growths = []
for _ in range(3):
    jax.clear_caches()
    with RssSampler() as sampler:
        lowered.compile(compiler_options={{}})
    growths.append(sampler.result.growth_mib)
print(json.dumps(growths))
"""


def growth(depths: list[int], runs: int) -> None:
    print("== growth")
    print(f"{'module':<16} {'runs':>4} {'1st compile (median, worst)':>28} {'2nd':>18} {'3rd':>18}")
    paths = [str(REPO / "benchmarks"), str(REPO / "src"), str(REPO / "examples")]
    for depth in depths:
        columns: list[list[float]] = [[], [], []]
        for _ in range(runs):
            output = subprocess.run(
                [sys.executable, "-c", GROWTH_CHILD.format(paths=paths, depth=depth)],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "JAX_PLATFORMS": "cpu"},
            ).stdout
            for column, value in zip(
                columns, json.loads(output.strip().splitlines()[-1]), strict=True
            ):
                column.append(value)
        cells = [f"{statistics.median(c):>7.1f}, {max(c):>6.1f} MiB" for c in columns]
        print(
            f"{'mlp depth ' + str(depth):<16} {runs:>4} {cells[0]:>28} {cells[1]:>18} "
            f"{cells[2]:>18}"
        )
    print(
        "(a throwaway compile runs first: the 1st compile measured is "
        "not the process's very first XLA compile)"
    )
    paths = [str(REPO / "src"), str(REPO / "examples")]
    firsts = [
        float(
            json.loads(
                subprocess.run(
                    [sys.executable, "-c", FIRST_CHILD.format(paths=paths)],
                    capture_output=True,
                    text=True,
                    check=True,
                    env={**os.environ, "JAX_PLATFORMS": "cpu"},
                )
                .stdout.strip()
                .splitlines()[-1]
            )
        )
        for _ in range(runs)
    ]
    print(
        f"a process's very first XLA compile (a 1-layer MLP, numpy inputs): median "
        f"{statistics.median(firsts):.1f} MiB, worst {max(firsts):.1f} MiB ({runs} runs)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=15)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="tiny settings, for a smoke run")
    args = parser.parse_args()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    depths = [2, 6, 24] if not args.quick else [2]
    pairs = args.pairs if not args.quick else 2
    runs = args.runs if not args.quick else 1
    import jax

    print("== machine")
    print(
        f"{platform.machine()}, {os.cpu_count()} logical CPUs, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}, jax {jax.__version__}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    cost(depths, pairs, [0.001, 0.005])
    accuracy(
        ["mlp24", "const32", "const128"] if not args.quick else ["const32"],
        [0.001, 0.005, 0.02],
        runs,
    )
    growth([6, 24] if not args.quick else [2], runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
