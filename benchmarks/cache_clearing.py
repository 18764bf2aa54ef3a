"""What clearing JAX's in-process caches before each census'd test costs.

    python benchmarks/cache_clearing.py [--tests 60] [--rounds 3]

A census'd test that calls a function an earlier test compiled, and which is still in
memory, starts with JAX's in-process caches cleared (``jax.clear_caches()``), so that what
it compiles does not depend on the tests before it; ``-o compile_clear_caches=never`` turns
that off. The cost is that functions shared between tests are traced, lowered and compiled
(or read from the persistent cache) again in every test that uses them, and the eager
operations a test runs are compiled again.

The generated suite is the case where this costs most: every test calls one of two
module-level jitted training steps (``value_and_grad`` of the example MLP and attention
block, shared by all tests), builds an input eagerly and checks the result with
``jnp.allclose``. It runs in fresh pytest processes, ``--compile-census`` on every test,
with caches kept (``never``) and cleared (the default ``auto``, which clears before every
test here: the shared steps stay in memory), without a persistent cache and with a warm one
(minimum compile time 0, filled by a run before the first round), and with the plugin
disabled as the baseline. The figure per way is the fastest round's wall time of the whole pytest
process; rounds interleave the ways, so drifting load hits all of them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SUITE_HEAD = """
import jax
import jax.numpy as jnp
from jaxmodels import attention_example_args, attention_loss, mlp_example_args, mlp_loss

mlp_step = jax.jit(jax.value_and_grad(mlp_loss))
attention_step = jax.jit(jax.value_and_grad(attention_loss))
MLP = mlp_example_args()
ATTENTION = attention_example_args()
"""

SUITE_TEST = """
def test_mlp_{index}():
    loss, grads = mlp_step(*MLP)
    assert bool(jnp.isfinite(loss))
    assert bool(jnp.allclose(jnp.ones(4) * {index}, jnp.full(4, {index}.0)))

def test_attention_{index}():
    loss, grads = attention_step(*ATTENTION)
    assert bool(jnp.isfinite(loss))
"""

CACHE_CONFTEST = """
import jax

def pytest_configure(config):
    jax.config.update("jax_compilation_cache_dir", {cache!r})
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
"""

WAYS = {
    "plugin disabled": (False, ["-p", "no:jaxcompile"]),
    "census, caches kept": (False, ["--compile-census", "-o", "compile_clear_caches=never"]),
    "census, caches cleared": (False, ["--compile-census"]),
    "warm cache, census, caches kept": (
        True,
        ["--compile-census", "-o", "compile_clear_caches=never"],
    ),
    "warm cache, census, caches cleared": (True, ["--compile-census"]),
}


def write_suite(directory: Path, tests: int) -> None:
    body = SUITE_HEAD + "".join(SUITE_TEST.format(index=index) for index in range(tests // 2))
    (directory / "test_shared.py").write_text(textwrap.dedent(body))
    shutil.copy(REPO / "examples" / "jaxmodels.py", directory / "jaxmodels.py")
    (directory / "pytest.ini").write_text("[pytest]\n")


def run_once(directory: Path, cached: bool, extra: list[str]) -> float:
    conftest = CACHE_CONFTEST.format(cache=str(directory / "jaxcache")) if cached else ""
    (directory / "conftest.py").write_text(conftest)
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            *extra,
        ],
        cwd=directory,
        check=True,
        stdout=subprocess.DEVNULL,
        env={
            **os.environ,
            "JAX_PLATFORMS": "cpu",
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(directory), os.environ.get("PYTHONPATH")])
            ),
        },
    )
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        write_suite(directory, args.tests)
        run_once(directory, True, ["--compile-census"])  # fills the persistent cache
        best = dict.fromkeys(WAYS, float("inf"))
        for _ in range(args.rounds):
            for way, (cached, extra) in WAYS.items():
                best[way] = min(best[way], run_once(directory, cached, extra))
    tests = args.tests // 2 * 2
    baseline = best["plugin disabled"]
    print(
        f"cache clearing: {tests} census'd tests sharing two jitted training steps, "
        f"best of {args.rounds} rounds, {os.cpu_count()} CPUs"
    )
    for way, seconds in best.items():
        print(f"  {way:<36} {seconds:7.2f} s   x{seconds / baseline:.3f}")
    for prefix in ("census", "warm cache, census"):
        kept, cleared = best[f"{prefix}, caches kept"], best[f"{prefix}, caches cleared"]
        print(
            f"  {prefix}: clearing costs {cleared - kept:+.2f} s "
            f"({(cleared - kept) / tests * 1000:+.1f} ms per test, x{cleared / kept:.2f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
