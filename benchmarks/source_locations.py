"""What reading a module's source locations costs (where it grew, docs/reproducer.md).

    python benchmarks/source_locations.py [--layers 40,400,1200] [--repeats 5]

A model whose module is several MB (a rich MLP's gradient, unrolled `--layers` deep) is
lowered once per size; then, for each, the median over `--repeats` of: printing the module
with its debug info and counting its operations by source location (`read_sources`, what the
session does after the tests for a pin update's rows and failing rows only), beside printing
its text without locations (`as_text`, what every measured row pays already, for its
fingerprint and op counts); and what a session with nothing failing does instead for each
row: decide that it will not be read (`session.sources.unchanged`: one lookup of its own
pin's fingerprint, and, for a changed module, `explained`: one `judge` against its pin).
Printed as the table docs/benchmarks.md copies.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))


def _model(layers: int):  # type: ignore[no-untyped-def]
    import jax
    import jax.numpy as jnp

    def loss(ws, x):  # type: ignore[no-untyped-def]
        for i, w in enumerate(ws):
            x = jnp.tanh(x @ w) + jnp.sin(x) * (i + 1) - jnp.exp(-x * x)
        return jnp.sum(x)

    ws = [jnp.ones((32, 32)) * 0.01 for _ in range(layers)]
    return jax.jit(jax.grad(loss)).lower(ws, jnp.ones((4, 32)))


def _median(action, repeats: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="40,400,1200")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)

    import jax
    from records_factory import make_record  # type: ignore[import-not-found]

    from pytest_jaxcompile.backends.jax.locations import read_sources
    from pytest_jaxcompile.backends.jax.measure import count_ops
    from pytest_jaxcompile.gate.limits import Thresholds
    from pytest_jaxcompile.gate.pins import PinStore
    from pytest_jaxcompile.session.sources import explained, unchanged

    with tempfile.TemporaryDirectory() as directory:
        store = PinStore.load(Path(directory))
        rows = [make_record(cell=f"tests/t.py::test_{n}", compile_s=1.0) for n in range(1000)]
        store.update(rows)
        store = PinStore.load(Path(directory))
        thresholds = Thresholds()
        start = time.perf_counter()
        assert all(unchanged(row, store) for row in rows)
        unchanged_us = (time.perf_counter() - start) / len(rows) * 1e6
        start = time.perf_counter()
        assert not any(explained(row, store, thresholds) for row in rows)
        judged_us = (time.perf_counter() - start) / len(rows) * 1e6

    print(f"jax {jax.__version__}, {platform.processor() or platform.machine()}")
    print("| Layers | Module text | Ops | Locations read | as_text() | Locations kept |")
    print("|---:|---:|---:|---:|---:|---:|")
    for layers in (int(value) for value in args.layers.split(",")):
        lowered = _model(layers)
        text = lowered.as_text()
        module = lowered.compiler_ir()
        histogram = read_sources(module, REPO)
        read_s = _median(lambda module=module: read_sources(module, REPO), args.repeats)
        text_s = _median(lowered.as_text, args.repeats)
        print(
            f"| {layers} | {len(text) / 1e6:.1f} MB | {count_ops(text):,} | {read_s:.3f} s | "
            f"{text_s:.3f} s | {len(histogram)} |"
        )
    print(
        f"a row whose module is its pin's: {unchanged_us:.1f} us (one lookup); a changed "
        f"row that passes: {judged_us:.0f} us (one judge against its pin)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
