"""Where tracing time goes: JAX internals, stdlib and numpy, the project, the rest.

Tracing is pure Python and never cached, so it is the floor of a warm compile. The
profile runs on an extra trace (after the measured one), so it never inflates trace_s.
"""

from __future__ import annotations

import cProfile
import pstats
import sysconfig
from collections.abc import Callable
from pathlib import Path
from typing import Any

GROUP_JAX = "jax"
GROUP_STDLIB_NUMPY = "stdlib_numpy"
GROUP_PROJECT = "project"
GROUP_OTHER = "other"

_JAX_PACKAGES = ("jax", "jaxlib", "ml_dtypes", "opt_einsum")
_NUMPY_PACKAGES = ("numpy", "scipy")


def _package_of(path: str) -> str | None:
    """Top-level package of a file under site-packages (or dist-packages)."""
    parts = Path(path).parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            index = parts.index(marker)
            if index + 1 < len(parts):
                return parts[index + 1].removesuffix(".py")
    return None


def group_of(filename: str, project_root: Path, stdlib: str) -> str:
    if filename.startswith(("<", "~")):  # builtins and frozen modules: the interpreter
        return GROUP_STDLIB_NUMPY
    package = _package_of(filename)
    if package is not None:
        if package in _JAX_PACKAGES:
            return GROUP_JAX
        if package in _NUMPY_PACKAGES:
            return GROUP_STDLIB_NUMPY
        return GROUP_OTHER
    if filename.startswith(stdlib):
        return GROUP_STDLIB_NUMPY
    try:
        Path(filename).resolve().relative_to(project_root)
    except ValueError:
        return GROUP_OTHER
    return GROUP_PROJECT


def profile_trace(trace: Callable[[], Any], project_root: Path) -> dict[str, float]:
    """Run `trace` under cProfile; the share of its self time per group (sums to 1)."""
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        trace()
    finally:
        profiler.disable()
    stats = pstats.Stats(profiler)
    stdlib = sysconfig.get_paths()["stdlib"]
    totals = dict.fromkeys((GROUP_JAX, GROUP_STDLIB_NUMPY, GROUP_PROJECT, GROUP_OTHER), 0.0)
    raw: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    for (filename, _, _), (_, _, self_time, _, _) in raw.items():
        totals[group_of(filename, project_root, stdlib)] += self_time
    whole = sum(totals.values())
    if whole <= 0:
        return {}
    return {group: round(seconds / whole, 4) for group, seconds in totals.items()}
