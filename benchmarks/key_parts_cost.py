"""What reading the cache-key parts costs: JAX hashes each part twice at DEBUG.

    python benchmarks/key_parts_cost.py [--pairs 9] [--depths 2,64,512]

JAX's ``jax._src.cache_key`` logs the hash of each part of a persistent-cache key only when
its logger is at DEBUG, and to do so hashes every part a second time, the computation
included (canonicalised module bytes). The plugin lowers that logger while it captures (see
``backends/jax/keyparts.py``). Per module (the example MLP's ``value_and_grad`` at several
depths), with the persistent cache on and the entry already written, the same function is
lowered and compiled again and again (in-process caches cleared, so every compile computes
the key and is a persistent-cache hit: the case where the key is the largest share of the
time),
alternately without and with the capture. Printed per module, its size and, for the time
spent inside ``cache_key.get`` and for the whole compile, the median without and with the
capture and the median difference of adjacent pairs. docs/benchmarks.md copies the
table.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "examples"))

from pytest_jaxcompile.backends.jax.monitor import CompileMonitor  # noqa: E402

MONITOR = CompileMonitor()  # the capture the fixture and the census open

KEY_SECONDS: list[float] = []  # time inside JAX's cache_key.get, per compile


def _time_the_key() -> None:
    """Wrap ``jax._src.cache_key.get`` (compilation_cache calls it through the module)."""
    from jax._src import cache_key

    original = cache_key.get

    def timed(*args, **kwargs):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            KEY_SECONDS.append(time.perf_counter() - start)

    cache_key.get = timed


def _timed_compile(lower, capture: bool) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """Seconds of the compile, and of the key computation inside it."""
    import jax

    jax.clear_caches()  # type: ignore[no-untyped-call]
    lowered = lower()  # a Lowered keeps its executable: lower afresh, time the compile only
    start = time.perf_counter()
    if capture:
        with MONITOR.capture(key_parts=True) as events:
            lowered.compile()
        assert events.key_parts().parts, "no key part was logged: is the persistent cache on?"
    else:
        lowered.compile()
    return time.perf_counter() - start, KEY_SECONDS.pop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=9)
    parser.add_argument("--depths", default="2,64,512")
    args = parser.parse_args()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import jaxmodels

    cache_dir = tempfile.mkdtemp(prefix="key-parts-cost-")
    jax.config.update("jax_compilation_cache_dir", cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    _time_the_key()
    print(
        f"jax {jax.__version__}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, {args.pairs} pairs per module, persistent-cache hits"
    )
    print(
        f"{'module':<16} {'MLIR':>9} | {'key without':>11} {'key with':>9} "
        f"{'median diff':>11} | {'hit without':>11} {'hit with':>9} {'median diff':>11}"
    )
    for depth in (int(d) for d in args.depths.split(",")):
        params = jaxmodels.mlp_init(0, jaxmodels.mlp_widths(depth))
        x = jaxmodels.example_inputs((jaxmodels.BATCH, jaxmodels.IN_WIDTH), seed=1)
        y = jaxmodels.example_inputs((jaxmodels.BATCH, jaxmodels.OUT_WIDTH), seed=2)

        def lower(params=params, x=x, y=y):  # type: ignore[no-untyped-def]
            return jax.jit(jax.value_and_grad(jaxmodels.mlp_loss)).trace(params, x, y).lower()

        size_kib = len(lower().as_text()) / 1024
        lower().compile()  # writes the entry
        timings: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
        for pair in range(args.pairs):
            order = (False, True) if pair % 2 == 0 else (True, False)  # alternate the first
            for capture in order:
                timings[capture].append(_timed_compile(lower, capture))
        cells = []
        for column in (1, 0):  # the key computation, then the whole compile (a hit)
            without = [t[column] for t in timings[False]]
            with_capture = [t[column] for t in timings[True]]
            diffs = [w - wo for w, wo in zip(with_capture, without, strict=True)]
            cells.append(
                f"{statistics.median(without) * 1e3:>8.1f} ms "
                f"{statistics.median(with_capture) * 1e3:>6.1f} ms "
                f"{statistics.median(diffs) * 1e3:>+8.1f} ms"
            )
        print(f"{'mlp depth ' + str(depth):<16} {size_kib:>5.0f} KiB | {cells[0]} | {cells[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
