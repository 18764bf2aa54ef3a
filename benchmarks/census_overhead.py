"""Census overhead: a generated suite of small jitted tests with and without the census.

    python benchmarks/census_overhead.py [--tests 120] [--rounds 3]
    python benchmarks/census_overhead.py --model-depth 512 [--rounds 5]

Each round runs the same generated suite three ways, in fresh pytest processes: with
the plugin disabled (``-p no:jaxcompile``), with the plugin but no census, and with
``--compile-census``. The figure per way is the fastest round's wall time of the whole
pytest process, and its CPU seconds (user + system, every thread: what a loaded machine
moves least); the ratios are what docs/benchmarks.md reports.

``--model-depth N``: instead, a model-heavy suite of two tests, ``jit`` and
``value_and_grad`` of the embedded example's MLP at N layers (512: about 2,600 and 10,800
StableHLO ops), on a persistent cache the first (unmeasured) run fills: warm, as a CI job
with a restored cache runs it.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
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


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def write_model_suite(directory: Path, depth: int) -> dict[str, str]:
    """Two tests of one large model on a persistent cache; the environment they need."""
    shutil.copy(EXAMPLES / "jaxmodels.py", directory / "jaxmodels.py")
    cache = directory / "cache"
    (directory / "conftest.py").write_text(
        "import jax\n\n\ndef pytest_configure(config):\n"
        f"    jax.config.update('jax_compilation_cache_dir', {str(cache)!r})\n"
        "    jax.config.update('jax_persistent_cache_min_compile_time_secs', 0)\n"
    )
    (directory / "test_model.py").write_text(
        textwrap.dedent(
            """
            import jax
            from jaxmodels import mlp_example_args, mlp_loss

            def test_jit():
                jax.block_until_ready(jax.jit(mlp_loss)(*mlp_example_args()))

            def test_value_and_grad():
                vag = jax.jit(jax.value_and_grad(mlp_loss))
                jax.block_until_ready(vag(*mlp_example_args()))
            """
        )
    )
    (directory / "pytest.ini").write_text("[pytest]\n")
    return {"JAXMODELS_DEPTH": str(depth)}


def run_once(
    directory: Path, extra: list[str], env: dict[str, str] | None = None
) -> tuple[float, float]:
    """The pytest process's wall seconds and CPU seconds (user + system)."""
    # Bytecode is written, as in a user's venv (pip compiles what it installs): with the
    # caller's PYTHONDONTWRITEBYTECODE every run with the plugin would compile its modules
    # again (about 0.1 s a session the disabled way never pays); the first round writes it.
    environment = {**os.environ, "JAX_PLATFORMS": "cpu", **(env or {})}
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra],
        cwd=directory,
        check=True,
        stdout=subprocess.DEVNULL,
        env=environment,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=120)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model-depth", type=int, default=None, metavar="N")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        env: dict[str, str] = {}
        if args.model_depth is None:
            write_suite(directory, args.tests)
            what, tests = f"{args.tests} tests of small jitted functions", args.tests
        else:
            env = write_model_suite(directory, args.model_depth)
            run_once(directory, ["-p", "no:jaxcompile"], env)  # fills the persistent cache
            what, tests = f"jit and value_and_grad of a {args.model_depth}-layer MLP, warm", 2
        best = dict.fromkeys(WAYS, (float("inf"), float("inf")))
        for _ in range(args.rounds):
            for way, extra in WAYS.items():  # interleaved, so drifting load hits all ways
                wall, cpu = run_once(directory, extra, env)
                best[way] = (min(best[way][0], wall), min(best[way][1], cpu))
    base_wall, base_cpu = best["plugin disabled"]
    print(f"census overhead: {what}, best of {args.rounds} rounds, {os.cpu_count()} CPUs")
    for way, (wall, cpu) in best.items():
        print(
            f"  {way:<20} {wall:7.2f} s wall  x{wall / base_wall:.3f}   "
            f"{cpu:7.2f} s cpu  x{cpu / base_cpu:.3f}"
        )
    (census, _), (plain, _) = best["--compile-census"], best["plugin, no census"]
    print(
        f"  census vs no census: x{census / plain:.3f} wall "
        f"({(census - plain) / tests * 1000:+.1f} ms per test)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
