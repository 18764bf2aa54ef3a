"""The instruction gate: how exact the count is, what it catches, and what it costs.

    python benchmarks/instruction_gate.py [--idle 5] [--busy 5] [--unchanged 20]
        [--modules all|NAME,NAME] [--tolerance 0.01] [--json PATH]

Real modules are lowered here (the example MLP and attention of examples/jaxmodels.py,
forward and gradient, plus MLPs of 4, 8, 20, 21 and 22 layers and attention blocks of three
widths) and staged exactly as `--compile-instructions` stages a row's module. Each session
is one counting child (the plugin's own `run_child`), which counts every module in turn:

spread
    ``--idle`` sessions on the machine as it is and ``--busy`` sessions with every core kept
    busy by busy-loop processes this script starts (and stops). Per module: the largest
    minus the smallest count over all those sessions, in percent of the smallest.
false DRIFT
    The first idle session is the pin. Every other session (idle, busy, and more idle ones
    up to ``--unchanged`` unchanged sessions in all) is judged at ``--tolerance``: a module
    whose count is over the pin by more than it is a false DRIFT.
detection
    In every session, the 21- and 22-layer MLPs' counts are judged against the 20-layer
    pin: 22 layers is 10 % more layers, 21 layers 5 %. Caught when over the tolerance.
cost
    Per session: the child's wall seconds (valgrind start, JAX import, warm-up, the counts)
    and the seconds of the counts alone, per module; beside them the plain in-process
    compile seconds of the same modules.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "src"))


def _modules() -> dict[str, Callable[[], Any]]:
    """Name -> a function returning a jax.stages.Lowered."""
    import jax
    import jax.numpy as jnp
    import jaxmodels as m

    def mlp(depth: int, width: int = 64) -> Callable[[], Any]:
        def lower() -> Any:
            params = m.mlp_init(0, [width] * (depth + 1))
            x = jnp.ones((8, width), jnp.float32)

            def loss(params: Any, x: Any) -> Any:
                for w, b in params:
                    x = jnp.tanh(x @ w + b)
                return jnp.sum(x * x)

            return jax.jit(jax.grad(loss)).lower(params, x)

        return lower

    def attention(dim: int) -> Callable[[], Any]:
        def lower() -> Any:
            params = m.attention_init(0, dim)
            x = jnp.ones((4, 16, dim), jnp.float32)
            return jax.jit(jax.grad(m.attention_loss)).lower(params, x)

        return lower

    def example(fn: Callable[..., Any], args: Callable[[], tuple[Any, ...]]) -> Callable[[], Any]:
        return lambda: jax.jit(fn).lower(*args())

    return {
        "example_mlp_loss": example(m.mlp_loss, m.mlp_example_args),
        "example_mlp_grad": example(jax.grad(m.mlp_loss), m.mlp_example_args),
        "example_attention_loss": example(m.attention_loss, m.attention_example_args),
        "example_attention_grad": example(jax.grad(m.attention_loss), m.attention_example_args),
        "mlp4_grad": mlp(4),
        "mlp8_grad": mlp(8),
        "mlp20_grad": mlp(20),
        "mlp21_grad": mlp(21),
        "mlp22_grad": mlp(22),
        "attention32_grad": attention(32),
        "attention64_grad": attention(64),
        "attention128_grad": attention(128),
    }


def _stage(names: list[str]) -> tuple[list[Any], dict[str, float]]:
    """The staged compiles of the modules, and their plain compile seconds (best of 3)."""
    from pytest_jaxcompile.backends.jax.instructions import InstructionStager, capture
    from pytest_jaxcompile.backends.jax.residue import clear_in_process_caches
    from pytest_jaxcompile.records import CompileRecord

    builders = _modules()
    stager = InstructionStager(timeout_s=0)
    plain: dict[str, float] = {}
    for name in names:
        lowered = builders[name]()
        with capture() as captured:
            lowered.compile()
        record = CompileRecord(name, name, "bench", "", "", False, "none", 0.0)
        stager.add(record, captured)
        times = []
        for _ in range(3):
            clear_in_process_caches()  # a real compile each time, as the fixture's fresh=True
            start = time.perf_counter()
            lowered.compile(compiler_options={})  # not the Lowered's cached executable
            times.append(time.perf_counter() - start)
        plain[name] = min(times)
    return stager.staged, plain


def _busy() -> None:
    while True:
        pass


def _session(staged: list[Any], names: list[str], busy: bool, timeout_s: float) -> dict[str, Any]:
    from pytest_jaxcompile.backends.jax.instructions import run_child

    workers = []
    if busy:
        workers = [
            multiprocessing.get_context("spawn").Process(target=_busy, daemon=True)
            for _ in range(os.cpu_count() or 2)
        ]
        for worker in workers:
            worker.start()
    try:
        start = time.perf_counter()
        with tempfile.TemporaryDirectory() as directory:
            results = run_child(Path(directory), staged, timeout_s)
        wall = time.perf_counter() - start
    finally:
        for worker in workers:
            worker.terminate()
            worker.join()
    if -1 in results:
        raise SystemExit(f"counting child failed: {results[-1]}")
    return {
        "busy": busy,
        "wall_s": wall,
        "counts": {names[i]: results[i]["instructions"] for i in range(len(names))},
        "seconds": {names[i]: results[i].get("seconds") for i in range(len(names))},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--idle", type=int, default=5)
    parser.add_argument("--busy", type=int, default=5)
    parser.add_argument(
        "--unchanged",
        type=int,
        default=20,
        help="unchanged sessions judged for false DRIFT, pin excluded",
    )
    parser.add_argument("--modules", default="all")
    parser.add_argument("--tolerance", type=float, default=None)
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    from pytest_jaxcompile.gate.limits import DEFAULT_INSTRUCTIONS_TOLERANCE

    tolerance = DEFAULT_INSTRUCTIONS_TOLERANCE if args.tolerance is None else args.tolerance
    names = list(_modules()) if args.modules == "all" else args.modules.split(",")
    staged, plain = _stage(names)
    extra_idle = max(0, args.unchanged + 1 - args.idle - args.busy)
    plan = [False] * args.idle + [True] * args.busy + [False] * extra_idle
    sessions = []
    for number, busy in enumerate(plan, 1):
        session = _session(staged, names, busy, args.timeout)
        sessions.append(session)
        print(
            f"session {number}/{len(plan)} ({'busy' if busy else 'idle'}): "
            f"{session['wall_s']:.0f} s",
            file=sys.stderr,
            flush=True,
        )
    _report(names, sessions, plain, tolerance, args.idle + args.busy)
    if args.json is not None:
        args.json.write_text(json.dumps({"sessions": sessions, "plain_s": plain}, indent=1))
    return 0


def _report(
    names: list[str],
    sessions: list[dict[str, Any]],
    plain: dict[str, float],
    tolerance: float,
    spread_sessions: int,
) -> None:
    pin = sessions[0]["counts"]
    print(
        f"{len(names)} modules, {len(sessions)} sessions "
        f"({sum(s['busy'] for s in sessions)} with every core busy), tolerance {tolerance:.2%}"
    )
    print("\nmodule                   count (pin)    spread   plain s   counted s")
    worst = 0.0
    for name in names:
        counts = [s["counts"][name] for s in sessions[:spread_sessions]]
        spread = (max(counts) - min(counts)) / min(counts)
        worst = max(worst, spread)
        seconds = [s["seconds"][name] for s in sessions if s["seconds"][name] is not None]
        counted = f"{min(seconds):9.1f}" if seconds else "        -"
        print(f"{name:<24} {pin[name]:>13,}  {spread:7.3%}  {plain[name]:8.3f}  {counted}")
    print(f"\nlargest spread of any module over the first {spread_sessions} sessions: {worst:.3%}")
    false_drift = sum(
        1 for s in sessions[1:] for name in names if s["counts"][name] > pin[name] * (1 + tolerance)
    )
    sessions_with = sum(
        1
        for s in sessions[1:]
        if any(s["counts"][name] > pin[name] * (1 + tolerance) for name in names)
    )
    print(
        f"false DRIFT: {false_drift} module(s) in {sessions_with} of {len(sessions) - 1} "
        "unchanged sessions"
    )
    if {"mlp20_grad", "mlp21_grad", "mlp22_grad"} <= set(names):
        base = pin["mlp20_grad"]
        changed = (("mlp22_grad", "22 layers (+10 %)"), ("mlp21_grad", "21 layers (+5 %)"))
        for name, label in changed:
            caught = sum(1 for s in sessions if s["counts"][name] > base * (1 + tolerance))
            growth = [s["counts"][name] / base - 1 for s in sessions]
            print(
                f"20-layer pin, {label}: caught in {caught} of {len(sessions)} sessions "
                f"(count {min(growth):+.2%} to {max(growth):+.2%} over the pin)"
            )
    walls = [s["wall_s"] for s in sessions]
    counted = [sum(v for v in s["seconds"].values() if v is not None) for s in sessions]
    print(
        f"\ncost per session: {min(walls):.0f}-{max(walls):.0f} s wall, of which counting "
        f"{min(counted):.0f}-{max(counted):.0f} s ({min(counted) / len(names):.1f} s per module "
        f"at best); plain compiles of the same modules: {sum(plain.values()):.2f} s in all"
    )


if __name__ == "__main__":
    sys.exit(main())
