"""What reduces the noise of the paired gate's ratios on this machine: a small study.

    python benchmarks/paired_noise_sources.py [--pairs 16] [--rounds 2] [--depth 20]

Two modules of equal work (a rich MLP gradient, `paired_gate._rich`, and the same lowered
again under another name) are compiled alternately, as the pairing child compiles a row
(`paired_child._timed`: the collector off, JAX's persistent cache off, one throwaway module
first), in a fresh process per condition:

- ``ABBA``: the child's order (base, new; new, base; ...), no pinning: the plugin as it is;
- ``ABAB``: base first in every pair;
- ``pinned``: ABBA, the process pinned to one CPU (``os.sched_setaffinity`` before JAX is
  imported, so that XLA's threads are pinned too);
- ``one codegen thread``: ABBA, ``XLA_FLAGS=--xla_cpu_parallel_codegen_split_count=1``
  (XLA's CPU backend compiles the LLVM module in one piece rather than in parallel parts).

Each condition's pairs are read on three clocks: the process's CPU seconds (what the gate
judges), the compiling thread's own CPU seconds (``time.thread_time``) and wall seconds.
Printed per condition and clock: the noise per compile (the pairs' log ratios' spread from
their median absolute deviation, over the square root of 2: `gate.sequential.pair_noise`)
in each round, and the median ratio. The rounds run the conditions interleaved, so that a
change of the machine's load falls on all of them. The machine's load average is printed
before and after: say it with the figures (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

CONDITIONS = ("ABBA", "ABAB", "pinned", "one codegen thread")
CLOCKS = ("process cpu", "thread cpu", "wall")

CHILD = r"""
import gc, json, os, sys, time
condition, stage, pairs = sys.argv[1], sys.argv[2], int(sys.argv[3])
if condition == "pinned":
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
import jax
jax.config.update("jax_enable_compilation_cache", False)
from pytest_jaxcompile.backends.jax.child import warm_up
from pytest_jaxcompile.backends.jax.instructions_child import Compiler
compiler = Compiler()
warm_up()
spec = json.load(open(os.path.join(stage, "spec.json")))
def loaded(side):
    return compiler.load(open(os.path.join(stage, side + ".mlir"), "rb").read(),
                         open(os.path.join(stage, "options.pb"), "rb").read(), 1)
def timed(side):
    module = loaded(side)
    gc.collect(); gc.disable()
    try:
        wall, cpu, thread = time.perf_counter(), time.process_time(), time.thread_time()
        executable = compiler.compile(module)
        wall = time.perf_counter() - wall
        cpu, thread = time.process_time() - cpu, time.thread_time() - thread
    finally:
        gc.enable()
    del executable
    return {"process cpu": cpu, "thread cpu": thread, "wall": wall}
samples = {"base": [], "new": []}
for pair in range(pairs):
    order = ("base", "new") if condition == "ABAB" or pair % 2 == 0 else ("new", "base")
    for side in order:
        samples[side].append(timed(side))
print(json.dumps(samples))
"""


def stage_modules(directory: Path, depth: int) -> float:
    """The two modules and their compile options, staged as text; one plain compile's
    seconds."""
    from paired_gate import _rich, stage

    base, plain = stage(_rich(depth))
    new, _ = stage(_rich(depth, name="again"))
    (directory / "base.mlir").write_text(base.text)
    (directory / "new.mlir").write_text(new.text)
    (directory / "options.pb").write_bytes(base.options)
    (directory / "spec.json").write_text(json.dumps({"devices": base.devices}))
    return plain


def run_condition(condition: str, directory: Path, pairs: int) -> dict[str, list[dict[str, float]]]:
    env = dict(os.environ)
    if condition == "one codegen thread":
        env["XLA_FLAGS"] = (
            env.get("XLA_FLAGS", "") + " --xla_cpu_parallel_codegen_split_count=1"
        ).strip()
    result = subprocess.run(
        [sys.executable, "-c", CHILD, condition, str(directory), str(pairs)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    samples: dict[str, list[dict[str, float]]] = json.loads(result.stdout.splitlines()[-1])
    return samples


def main(argv: list[str] | None = None) -> int:
    from pytest_jaxcompile.gate.sequential import pair_noise

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--depth", type=int, default=20)
    parser.add_argument("--only", default=",".join(CONDITIONS))
    args = parser.parse_args(argv)
    conditions = args.only.split(",")
    print(f"load average before: {os.getloadavg()}, {os.cpu_count()} CPUs")
    found: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        plain = stage_modules(directory, args.depth)
        print(f"rich{args.depth}_grad: one plain compile {plain:.2f} s; {args.pairs} pairs a run")
        for _ in range(args.rounds):
            for condition in conditions:
                samples = run_condition(condition, directory, args.pairs)
                for clock in CLOCKS:
                    logs = [
                        math.log(new[clock] / base[clock])
                        for base, new in zip(samples["base"], samples["new"], strict=True)
                    ]
                    found.setdefault((condition, clock), []).append(
                        (pair_noise(logs) / math.sqrt(2), math.exp(statistics.median(logs)))
                    )
    print(f"load average after: {os.getloadavg()}")
    print()
    print("| condition | clock | noise per compile, each round | median ratio, each round |")
    print("|---|---|---|---|")
    for (condition, clock), rounds in found.items():
        noises = ", ".join(f"{noise:.1%}" for noise, _ in rounds)
        ratios = ", ".join(f"{ratio:.3f}" for _, ratio in rounds)
        print(f"| {condition} | {clock} | {noises} | {ratios} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
