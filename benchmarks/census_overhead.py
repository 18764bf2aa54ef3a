"""Census overhead: a generated suite of small jitted tests with and without the census.

    python benchmarks/census_overhead.py [--tests 120] [--rounds 3]
    python benchmarks/census_overhead.py --model-depth 512 [--rounds 5]
    python benchmarks/census_overhead.py --measured [--rounds 7] [--model constants]
                                         [--unpinned] [--before OTHER_CHECKOUT/src]


Each round runs the same generated suite three ways, in fresh pytest processes: with
the plugin disabled (``-p no:jaxcompile``), with the plugin but no census, and with
``--compile-census``. The figure per way is the fastest round's wall time of the whole
pytest process, and its CPU seconds (user + system, every thread: what a loaded machine
moves least); the ratios are what docs/benchmarks.md reports.

``--model-depth N``: instead, a model-heavy suite of two tests, ``jit`` and
``value_and_grad`` of the embedded example's MLP at N layers (512: about 2,600 and 10,800
StableHLO ops), on a persistent cache the first (unmeasured) run fills: warm, as a CI job
with a restored cache runs it.

``--measured``: the models measured through the ``jax_compile`` fixture, warm, where the
plugin does the most per module: ``constants``, a likelihood closing over 24 NumPy arrays of
64x1024 float32 (embedded in its modules as constants: about 12.6 MB of module text, 532 and
1,494 StableHLO ops), and ``mlp``, the 512-layer MLP (about 2,600 and 10,800 ops, no
constants); each ``jit`` and ``value_and_grad``, pinned first (``--compile-pin-update`` on
the filled cache: the gate as CI runs it), or with ``--unpinned`` not (a suite's first
session: every module is printed and read). With the plugin disabled, the suite's
conftest gives the tests a ``jax_compile`` of its own that traces, lowers and compiles the
same way and measures nothing. Each round runs the three ways in turn (each round starting
one way later); the ratios are each way's over the plugin-disabled session of the same
round, and the figure is their median over the rounds (with their range), of wall time and
of CPU seconds. ``--before SRC`` adds the plugin's two ways run from another source tree
(``git worktree add /tmp/before main``, then ``--before /tmp/before/src``) to the same
rounds: before and after under the same load.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
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


# The measured suites' conftest: the persistent cache, and a stand-in `jax_compile` where the
# plugin is disabled (the same trace, lowering and compile, nothing measured).
MEASURED_CONFTEST = """
import jax
import pytest


class _StandIn:
    @pytest.fixture
    def jax_compile(self):
        return lambda fn, *args: jax.jit(fn).trace(*args).lower().compile()


def pytest_configure(config):
    jax.config.update("jax_compilation_cache_dir", {cache!r})
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    if not config.pluginmanager.has_plugin("jaxcompile"):
        config.pluginmanager.register(_StandIn(), "jax-compile-stand-in")
"""

MEASURED_TESTS = """
import jax
import numpy as np
{model}

def test_jit(jax_compile):
    jax.block_until_ready(jax_compile(loss, *ARGS)(*ARGS))


def test_value_and_grad(jax_compile):
    jax.block_until_ready(jax_compile(jax.value_and_grad(loss), *ARGS)(*ARGS))
"""

MEASURED_MODELS = {
    # 24 data sets of 64x1024 float32 closed over: constants in the modules (6 MiB of data)
    "constants": (
        "a likelihood closing over 24 arrays of 64x1024 float32",
        {},
        """
import jax.numpy as jnp

RNG = np.random.default_rng(0)
DATA = [RNG.standard_normal((64, 1024)).astype(np.float32) for _ in range(24)]
GRID = np.linspace(0.0, 1.0, 1024, dtype=np.float32)
ARGS = (np.ones(8, np.float32),)


def loss(theta):
    total = 0.0
    for index, data in enumerate(DATA):
        model = theta[0] + theta[1] * jnp.sin(theta[2 + index % 6] * GRID)
        total = total + jnp.sum((data - model) ** 2)
    return -0.5 * total
""",
    ),
    "mlp": (
        "the 512-layer MLP (no constants)",
        {"JAXMODELS_DEPTH": "512"},
        """
from jaxmodels import mlp_example_args, mlp_loss as loss

ARGS = tuple(mlp_example_args())
""",
    ),
}


def write_measured_suite(directory: Path, model: str) -> dict[str, str]:
    """A model's two tests measured with `jax_compile`; the environment they need."""
    _, env, source = MEASURED_MODELS[model]
    directory.mkdir()
    shutil.copy(EXAMPLES / "jaxmodels.py", directory / "jaxmodels.py")
    (directory / "conftest.py").write_text(MEASURED_CONFTEST.format(cache=str(directory / "cache")))
    (directory / "test_model.py").write_text(MEASURED_TESTS.format(model=source))
    (directory / "pytest.ini").write_text("[pytest]\n")
    return env


def run_measured(
    root: Path, model: str, rounds: int, before: Path | None = None, pinned: bool = True
) -> None:
    """Interleaved rounds of the three ways on one model (and, with `before`, the plugin's
    two ways again on that source tree); median ratios to the disabled session. `pinned`:
    the suite's rows are pinned first, warm."""
    what, _, _ = MEASURED_MODELS[model]
    directory = root / model
    env = write_measured_suite(directory, model)
    ways = {way: (extra, env) for way, extra in WAYS.items()}
    if before is not None:
        old = {
            **env,
            "PYTHONPATH": os.pathsep.join([str(before), os.environ.get("PYTHONPATH", "")]),
        }
        ways["plugin, no census, before"] = (WAYS["plugin, no census"], old)
        ways["--compile-census, before"] = (WAYS["--compile-census"], old)
        run_once(directory, [], old)  # the before tree's bytecode written
    run_once(directory, [], env)  # fills the persistent cache (and writes bytecode)
    if pinned:
        run_once(directory, ["--compile-pin-update"], env)  # warm pins, as CI's gate has
    names = list(ways)
    walls: dict[str, list[float]] = {way: [] for way in names}
    cpus: dict[str, list[float]] = {way: [] for way in names}
    for index in range(rounds):
        for way in names[index % len(names) :] + names[: index % len(names)]:
            wall, cpu = run_once(directory, *ways[way])
            walls[way].append(wall)
            cpus[way].append(cpu)
    base = "plugin disabled"
    load = os.getloadavg()[0]
    print(
        f"{model}: {what}, jit and value_and_grad through jax_compile, warm, "
        f"{'pinned' if pinned else 'unpinned'}; "
        f"{rounds} interleaved rounds, {os.cpu_count()} CPUs, load average {load:.1f} at the end"
    )
    print("| way | wall, median | vs disabled: median (range) | CPU vs disabled, median |")
    print("|---|---|---|---|")
    for way in names:
        ratios = [wall / plain for wall, plain in zip(walls[way], walls[base], strict=True)]
        cpu = statistics.median(c / p for c, p in zip(cpus[way], cpus[base], strict=True))
        print(
            f"| {way} | {statistics.median(walls[way]):.2f} s | "
            f"x{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}) | "
            f"x{cpu:.3f} |"
        )


# Every way runs pytest, JAX and (but for the disabled way) this plugin alone: the
# development install's other plugins (hypothesis's summary alone takes ~0.4 s, pytest-randomly
# shuffles the order) would add the same seconds to every way and shrink the ratios.
UNRELATED_PLUGINS_OFF = [
    "-p",
    "no:cacheprovider",
    "-p",
    "no:randomly",
    "-p",
    "no:hypothesispytest",
    "-p",
    "no:benchmark",
]


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
        [sys.executable, "-m", "pytest", "-q", *UNRELATED_PLUGINS_OFF, *extra],
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
    parser.add_argument(
        "--measured", action="store_true", help="the models measured by jax_compile"
    )
    parser.add_argument("--model", action="append", choices=sorted(MEASURED_MODELS))
    parser.add_argument(
        "--unpinned", action="store_true", help="with --measured: no pins (a first session)"
    )
    parser.add_argument(
        "--before",
        type=Path,
        metavar="SRC",
        help="with --measured: also the plugin's ways on this source tree (another commit's src/)",
    )
    args = parser.parse_args()
    if args.measured:
        with tempfile.TemporaryDirectory() as scratch:
            for model in args.model or list(MEASURED_MODELS):
                run_measured(Path(scratch), model, args.rounds, args.before, not args.unpinned)
        return 0
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
