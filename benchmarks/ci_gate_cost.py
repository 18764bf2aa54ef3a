"""What a pull request's gate step costs beside a plain ``pytest``, with 0, 1 and 10 changed rows.

    python benchmarks/ci_gate_cost.py [--tests 10] [--depth 320] [--repeats 3] [--changed 0,1,10]

A project of ``--tests`` tests, each compiling its own MLP gradient of ``--depth`` layers
(about a second of compile each on a 2-core machine), is given a baseline as the example gate
workflow's default-branch run makes it (docs/examples/jaxcompile.yml: a pin update with
``--compile-paired`` into ``.jaxcompile-baseline/pins`` on an empty compilation cache, then
again on the cache it filled). Then, for each count of changed rows, that many tests change
their module (a constant of the model, so the compile work is the same and every pairing
ends equal), and, from a copy of the compilation cache as the default branch left it, each
of these runs ``--repeats`` times, interleaved:

plain
    ``pytest -p no:jaxcompile -p plain_compile``: what the pull request's tests cost without
    the gate, the same tests with a ``jax_compile`` fixture that only compiles and returns
    (its changed modules compile cold, the rest hit the cache);
gate
    the workflow's pull-request command: ``pytest --compile-paired -o
    compile_pins_dir=.jaxcompile-baseline/pins --compile-expect-warm``; each changed module
    is paired with the baseline's in the pairing child after the tests.

Printed: a Markdown table of the median wall seconds of each and their ratio, with the
pairs the gate's rows used (from its JSON report). No ``-n``: one process, as on the 2-core
machine this runs on.
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
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODEL = """
import jax
import jax.numpy as jnp
import numpy as np

WIDTH = 64


def params(depth, seed):
    rng = np.random.default_rng(seed)
    return [jnp.asarray(rng.normal(size=(WIDTH, WIDTH)) / WIDTH**0.5, jnp.float32)
            for _ in range(depth)]


def loss(weights, x, scale):
    for w in weights:
        x = jnp.tanh(x @ w) * scale
    return jnp.mean(x**2)
"""
TEST = """
import jax
import jax.numpy as jnp
import model

def test_model_{index}(jax_compile):
    weights = model.params({depth}, {index})
    x = jnp.ones((8, model.WIDTH), jnp.float32)
    scale = {scale}
    grad = jax_compile(jax.grad(lambda w, x: model.loss(w, x, scale)), weights, x, transform="grad")
    grad(weights, x)
"""


PLAIN_FIXTURE = """
import jax
import pytest


@pytest.fixture
def jax_compile():
    def compile(function, *args, transform):
        return jax.jit(function).lower(*args).compile()

    return compile
"""


def write_tests(project: Path, tests: int, depth: int, changed: int) -> None:
    for index in range(tests):
        scale = "1.0002" if index < changed else "1.0001"  # never 1.0: XLA drops a multiply by one
        body = TEST.format(index=index, depth=depth, scale=scale)
        (project / f"test_model_{index}.py").write_text(textwrap.dedent(body))


def pytest(project: Path, *args: str) -> float:
    env = dict(
        os.environ, JAX_COMPILATION_CACHE_DIR=str(project / ".jax_cache"), PYTHONPATH=str(project)
    )
    env.pop("PYTEST_ADDOPTS", None)
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            *args,
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(
            f"pytest {' '.join(args)} exited {done.returncode}:\n{done.stdout[-3000:]}"
        )
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=10)
    parser.add_argument("--depth", type=int, default=320)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--changed", default="0,1,10")
    args = parser.parse_args()
    counts = [int(count) for count in args.changed.split(",")]
    project = Path(tempfile.mkdtemp(prefix="ci-gate-cost-"))
    shutil.copy(REPO / "conftest_example.py", project / "conftest.py")
    (project / "model.py").write_text(MODEL)
    (project / "plain_compile.py").write_text(PLAIN_FIXTURE)
    (project / "pytest.ini").write_text("[pytest]\n")
    baseline = ("--compile-paired", "-o", "compile_pins_dir=.jaxcompile-baseline/pins")
    write_tests(project, args.tests, args.depth, 0)
    cold = pytest(project, *baseline, "--compile-pin-update")
    warm = pytest(project, *baseline, "--compile-pin-update")
    print(f"baseline: cold pin update {cold:.1f} s, warm {warm:.1f} s ({args.tests} tests)")
    main_cache = project.parent / (project.name + "-main-cache")
    shutil.copytree(project / ".jax_cache", main_cache)
    gate = (*baseline, "--compile-expect-warm", "--compile-report=report.json")
    rows = []
    for changed in counts:
        write_tests(project, args.tests, args.depth, changed)
        plain_s, gate_s, pairs = [], [], []
        for _ in range(args.repeats):
            for kind in ("plain", "gate"):
                shutil.rmtree(project / ".jax_cache")
                shutil.copytree(main_cache, project / ".jax_cache")
                if kind == "plain":
                    plain_s.append(pytest(project, "-p", "no:jaxcompile", "-p", "plain_compile"))
                else:
                    gate_s.append(pytest(project, *gate))
                    report = json.loads((project / "report.json").read_text())
                    pairs += [
                        len(record["paired_new_cpu_s"])
                        for record in report["records"]
                        if record.get("paired_new_cpu_s")
                    ]
        plain, gated = statistics.median(plain_s), statistics.median(gate_s)
        rows.append((changed, plain, gated, pairs))
        print(f"  {changed} changed: plain {plain_s}, gate {gate_s}", flush=True)
    print("\n| changed rows | plain pytest | gate step | ratio | pairs per paired row |")
    print("|---:|---:|---:|---:|---|")
    for changed, plain, gated, pairs in rows:
        used = f"{min(pairs)}-{max(pairs)}" if pairs else "none paired"
        print(f"| {changed} | {plain:.1f} s | {gated:.1f} s | x{gated / plain:.2f} | {used} |")
    shutil.rmtree(project)
    shutil.rmtree(main_cache)


if __name__ == "__main__":
    main()
