"""Compile a row's module and its pinned module again, alternately: needs only jax and jaxlib.

This file is copied whole into every reproducer bundle as ``reproduce.py``
(docs/reproducer.md); the plugin's own children compile with the same code (`Compiler`,
`timed`, `warm_up`), so what the bundle measures is what the pairing measured. It imports
nothing but Python's standard library and, once its flags are read, jax.

In a bundle's folder::

    python reproduce.py              # 10 pairs: each module's median compile, their ratio
    python reproduce.py --pairs 20
    python reproduce.py --dump DIR   # also XLA's dumps of each module: DIR/pinned, DIR/row

The bundle holds ``row.mlir`` (the module the failing row compiled), ``pinned.mlir`` (its
pin's, where the module store had it), each with its serialized compile options
(``*.options.pb``), and ``bundle.json`` (how many devices each compiles for, the
platform). JAX's persistent cache is kept out: every compile is a real one, and a cache
hit would write no dumps.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SIDES = ("pinned", "row")  # the pin's module first in even pairs
# JAX_PLATFORMS for a module's platform, as JAX's backends name themselves
JAX_PLATFORMS = {"gpu": "cuda,rocm", "cpu": "cpu", "tpu": "tpu"}
DEFAULT_PAIRS = 10


class Compiler:
    """JAX's own backend compile of a module and options, in whichever jax this is."""

    def __init__(self) -> None:
        import jax
        from jax._src import compiler
        from jax._src.interpreters import mlir

        self._jax = jax
        self._compiler = compiler
        self._mlir = mlir
        self._xc = importlib.import_module("jax._src.lib").xla_client
        self._ir = importlib.import_module("jax._src.lib.mlir").ir
        self.backend = jax.devices()[0].client

    def load(self, module_bytes: bytes, options_bytes: bytes, devices: int) -> tuple[Any, ...]:
        context = self._mlir.make_ir_context()
        with context:
            module = self._ir.Module.parse(module_bytes)
        options = self._xc.CompileOptions.ParseFromString(options_bytes)
        chosen = self._jax.devices()[:devices]
        return context, module, options, chosen

    def compile(self, loaded: tuple[Any, ...]) -> Any:
        context, module, options, devices = loaded
        compiler = self._compiler
        with context:
            if hasattr(compiler, "backend_compile_and_load"):
                device_list = self._xc.DeviceList(tuple(devices))
                return compiler.backend_compile_and_load(
                    self.backend, module, device_list, options, []
                )
            import inspect

            parameters = inspect.signature(compiler.backend_compile).parameters
            if "executable_devices" in parameters:
                device_list = self._xc.DeviceList(tuple(devices))
                return compiler.backend_compile(self.backend, module, device_list, options, [])
            return compiler.backend_compile(self.backend, module, options, [])


def timed(compiler: Compiler, loaded: tuple[Any, ...]) -> tuple[float, float]:
    """(wall, process CPU) seconds of one compile; Python's collector off inside it."""
    gc.collect()
    gc.disable()
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        executable = compiler.compile(loaded)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        gc.enable()
    del executable  # torn down outside the timing
    return wall, cpu


def warm_up() -> None:
    """Before anything is measured: compile a throwaway module, so that XLA's and LLVM's
    one-time set-up is in no count, pair or profile."""
    import jax
    import jax.numpy as jnp

    def throwaway(x: Any) -> Any:
        return jnp.sum(jnp.tanh(x @ x.T) * 2.0)

    for _ in range(2):
        jax.jit(jax.grad(throwaway)).lower(jnp.ones((4, 4), jnp.float32)).compile()


# ----------------------------------------------------------------------- the script


def _sides(folder: Path) -> list[str]:
    return [side for side in SIDES if (folder / f"{side}.mlir").exists()]


def _start_jax(folder: Path, warm: bool = True) -> Compiler:
    """JAX with its persistent cache off, on the bundle's platform (unless the caller chose
    one), and (`warm`) a throwaway module compiled first."""
    bundle = json.loads((folder / "bundle.json").read_text())
    os.environ.setdefault("JAX_PLATFORMS", JAX_PLATFORMS.get(bundle["platform"], "cpu"))
    os.environ["JAX_ENABLE_COMPILATION_CACHE"] = "false"
    import jax

    jax.config.update("jax_enable_compilation_cache", False)  # type: ignore[no-untyped-call]
    compiler = Compiler()
    if warm:
        warm_up()
    return compiler


def _load(compiler: Compiler, folder: Path, side: str) -> tuple[Any, ...]:
    devices = json.loads((folder / "bundle.json").read_text())["devices"][side]
    return compiler.load(
        (folder / f"{side}.mlir").read_bytes(),
        (folder / f"{side}.options.pb").read_bytes(),
        int(devices),
    )


def pair(folder: Path, pairs: int) -> dict[str, list[tuple[float, float]]]:
    """Each side's (wall, CPU) seconds, compiled alternately `pairs` times."""
    compiler = _start_jax(folder)
    sides = _sides(folder)
    samples: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
    for number in range(pairs):
        for side in sides if number % 2 == 0 else list(reversed(sides)):
            samples[side].append(timed(compiler, _load(compiler, folder, side)))
    return samples


def report(samples: dict[str, list[tuple[float, float]]], jax_version: str) -> list[str]:
    """The lines the script prints: each module's medians and, with both, their ratio."""
    pairs = max((len(values) for values in samples.values()), default=0)
    lines = [f"compiled alternately {pairs} times each (jax {jax_version}):"]
    medians = {}
    for side, values in samples.items():
        wall = statistics.median(value[0] for value in values)
        cpu = statistics.median(value[1] for value in values)
        medians[side] = (wall, cpu)
        lines.append(f"  {side} module: median {wall:.3f} s wall, {cpu:.3f} s CPU")
    if len(medians) == 2 and min(*medians["pinned"]) > 0:
        wall = medians["row"][0] / medians["pinned"][0]
        cpu = medians["row"][1] / medians["pinned"][1]
        lines.append(f"  ratio (row / pinned): {wall:.2f}x wall, {cpu:.2f}x CPU")
    return lines


def dump(folder: Path, into: Path) -> list[Path]:
    """XLA's dumps of each module, each from a fresh process (XLA reads its flags once)
    with the persistent cache off: ``into/pinned``, ``into/row``."""
    written = []
    for side in _sides(folder):
        target = (into / side).resolve()
        flags = os.environ.get("XLA_FLAGS", "")
        environment = {**os.environ, "XLA_FLAGS": f"{flags} --xla_dump_to={target}".strip()}
        script = str(Path(__file__).resolve())
        command = [sys.executable, script, "--one-side", side, "--dump", str(target)]
        subprocess.run(command, cwd=folder, env=environment, check=True)
        written.append(target)
    return written


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description="Compile this bundle's modules alternately; print each median and the ratio."
    )
    parser.add_argument("--pairs", type=int, default=DEFAULT_PAIRS, help="compiles of each")
    parser.add_argument("--dump", type=Path, metavar="DIR", help="write XLA's dumps into DIR")
    parser.add_argument("--one-side", choices=SIDES, help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    folder = Path(__file__).resolve().parent
    if arguments.pairs < 1:
        parser.error("--pairs must be 1 or more")
    if arguments.one_side:
        compiler = _start_jax(folder, warm=False)  # the dumps: this module's alone
        loaded = _load(compiler, folder, arguments.one_side)
        if arguments.dump is not None:
            # The module's own compile options carry the debug options of the process that
            # lowered it, which win over XLA_FLAGS: the dump is asked for there too.
            debug = loaded[2].executable_build_options.debug_options
            debug.xla_dump_to = str(arguments.dump)
            debug.xla_dump_hlo_as_text = True
            if hasattr(debug, "xla_enable_dumping"):
                debug.xla_enable_dumping = True
        compiler.compile(loaded)
        return 0
    samples = pair(folder, arguments.pairs)
    import jax

    print("\n".join(report(samples, jax.__version__)), flush=True)
    if arguments.dump is not None:
        for written in dump(folder, arguments.dump):
            print(f"XLA's dumps: {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
