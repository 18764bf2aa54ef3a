"""Measure XLA compile times of the example models, and pick a regression depth.

Run with ``python benchmarks/model_depth.py``. For each case it clears JAX's
in-memory caches, lowers a fresh ``jax.jit`` and times ``lowered.compile()``
(wall clock), with the persistent compilation cache disabled. It also records
the ``/jax/core/compile/backend_compile_duration`` monitoring event (XLA time
only). Plain JAX; the plugin is not used.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import jaxmodels

BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"

_backend_durations: list[float] = []


def _on_duration(event: str, duration_secs: float, **kwargs: str | int) -> None:
    """Record backend compile durations reported by JAX's monitoring hooks."""
    if event == BACKEND_COMPILE_EVENT:
        _backend_durations.append(duration_secs)


def time_compiles(
    make_fn: Callable[[], Any], args: Sequence[Any], reps: int
) -> tuple[list[float], list[float]]:
    """Return ``(compile wall times, backend compile times)`` over ``reps`` runs."""
    walls: list[float] = []
    backends: list[float] = []
    for _ in range(reps):
        jax.clear_caches()  # type: ignore[no-untyped-call]
        lowered = jax.jit(make_fn()).lower(*args)
        _backend_durations.clear()
        start = time.perf_counter()
        lowered.compile()
        walls.append(time.perf_counter() - start)
        backends.append(sum(_backend_durations))
    return walls, backends


def _row(label: str, walls: list[float], backends: list[float]) -> str:
    """Format one result row."""
    return (
        f"{label:<34} {min(walls):8.3f} {statistics.median(walls):8.3f} "
        f"{max(walls):8.3f} {statistics.median(backends):9.3f}"
    )


def _header() -> str:
    """Format the table header."""
    return f"{'case':<34} {'min s':>8} {'median s':>8} {'max s':>8} {'xla med s':>9}"


def _other_cases(
    depth: int, reps: int, *, mlp_only: bool = False
) -> list[tuple[str, list[float], list[float]]]:
    """Time the non-gradient MLP cases and the attention cases."""
    mlp_params, x, y = jaxmodels.mlp_example_args(depth)
    att_params, att_x = jaxmodels.attention_example_args()
    batched_x = x.reshape(2, -1, x.shape[-1])
    batched_y = y.reshape(2, -1, y.shape[-1])
    cases: list[tuple[str, Callable[[], Any], tuple[Any, ...]]] = [
        ("jit(mlp_apply)", lambda: jaxmodels.mlp_apply, (mlp_params, x)),
        (
            "jit(vmap(mlp_loss))",
            lambda: jax.vmap(jaxmodels.mlp_loss, in_axes=(None, 0, 0)),
            (mlp_params, batched_x, batched_y),
        ),
    ]
    if not mlp_only:
        cases += [
            ("jit(attention_apply)", lambda: jaxmodels.attention_apply, (att_params, att_x)),
            (
                "jit(value_and_grad(attention_loss))",
                lambda: jax.value_and_grad(jaxmodels.attention_loss),
                (att_params, att_x),
            ),
        ]
    return [(label, *time_compiles(make_fn, args, reps)) for label, make_fn, args in cases]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the measurements and print the tables and a recommendation."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--depths",
        type=int,
        nargs="+",
        default=[8, 16, 24, 32, 48, 64, 128, 256, 320, 384, 512],
        help="MLP depths to compare against the baseline depth",
    )
    parser.add_argument("--baseline", type=int, default=jaxmodels.DEFAULT_DEPTH)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--min-ratio", type=float, default=3.0)
    parser.add_argument("--min-extra", type=float, default=0.6, help="seconds")
    parser.add_argument("--max-time", type=float, default=5.0, help="seconds")
    parser.add_argument(
        "--margin",
        type=float,
        default=1.25,
        help="safety factor applied to --min-ratio and --min-extra for the recommendation",
    )
    opts = parser.parse_args(argv)

    jax.config.update("jax_enable_compilation_cache", False)  # type: ignore[no-untyped-call]
    jax.monitoring.register_event_duration_secs_listener(_on_duration)
    print(f"jax {jax.__version__}, devices {jax.devices()}, reps {opts.reps}")

    # Warm-up: the first compile in a process pays one-off backend set-up.
    time_compiles(lambda: jax.numpy.sin, (jax.numpy.ones(3),), 1)

    print("\nvalue_and_grad(mlp_loss) by depth")
    print(_header())
    results: dict[int, list[float]] = {}
    for depth in [opts.baseline, *opts.depths]:
        args = jaxmodels.mlp_example_args(depth)
        walls, backends = time_compiles(
            lambda: jax.value_and_grad(jaxmodels.mlp_loss), args, opts.reps
        )
        results[depth] = walls
        print(_row(f"depth {depth}", walls, backends), flush=True)

    base = results[opts.baseline]
    print(f"\nvs depth {opts.baseline}: ratio/extra use medians; 'safe' compares")
    print(f"min at depth against max at depth {opts.baseline}")
    print(f"{'depth':>6} {'ratio':>7} {'extra s':>8} {'safe ratio':>10} {'safe extra':>10}")
    recommended = None
    for depth in opts.depths:
        walls = results[depth]
        ratio = statistics.median(walls) / statistics.median(base)
        extra = statistics.median(walls) - statistics.median(base)
        safe_ratio = min(walls) / max(base)
        safe_extra = min(walls) - max(base)
        print(f"{depth:>6} {ratio:7.1f} {extra:8.3f} {safe_ratio:10.1f} {safe_extra:10.3f}")
        ok = (
            safe_ratio >= opts.min_ratio * opts.margin
            and safe_extra >= opts.min_extra * opts.margin
            and max(walls) <= opts.max_time
        )
        if ok and recommended is None:
            recommended = depth

    print("\nother cases at default depth")
    print(_header())
    for label, walls, backends in _other_cases(jaxmodels.model_depth(), opts.reps):
        print(_row(label, walls, backends), flush=True)

    if recommended is None:
        print("\nno measured depth meets the criteria")
        return 1
    print(f"\nMLP cases at depth {recommended}")
    print(_header())
    for label, walls, backends in _other_cases(recommended, opts.reps, mlp_only=True):
        print(_row(label, walls, backends), flush=True)
    print(
        f"\nrecommended regression depth: {recommended} (smallest measured depth whose min "
        f"is >= {opts.min_ratio * opts.margin:.2f}x and >= {opts.min_extra * opts.margin:.2f}s "
        f"over depth {opts.baseline}'s max, with max <= {opts.max_time}s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
