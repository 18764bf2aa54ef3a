"""Where tracing time goes: JAX internals, stdlib and numpy, the project, the rest.

Tracing is pure Python and never cached, so it is the floor of a warm compile. The
profile runs on an extra trace (after the measured one), so it never inflates trace_s.
A row keeps the share of its trace time per group (`trace_profile`) and the files that
took the most (`trace_files`); the session's rollup of both is `gate/view/spend.py`'s
`trace_rollup`.

PYTEST_DONT_REWRITE
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

TOP_FILES = 10  # the files a row keeps: those with the largest share of its trace time
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


def file_label(filename: str, project_root: Path, stdlib: str) -> str:
    """A profiled file as reports name it: relative to site-packages, the project or the
    standard library (``jax/_src/core.py``, ``models/mlp.py``, ``<stdlib>/functools.py``);
    builtins are ``<builtins>``."""
    if filename.startswith(("<", "~")):
        return "<builtins>"
    parts = Path(filename).parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            return "/".join(parts[parts.index(marker) + 1 :])
    if filename.startswith(stdlib):
        return "<stdlib>/" + Path(filename).relative_to(stdlib).as_posix()
    try:
        return Path(filename).resolve().relative_to(project_root).as_posix()
    except ValueError:
        return filename


def profile_trace(
    trace: Callable[[], Any], project_root: Path
) -> tuple[dict[str, float], dict[str, float]]:
    """Run `trace` under cProfile: the share of its self time per group (sums to 1), and
    per file for the `TOP_FILES` files with the largest shares (both empty: no time)."""
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        trace()
    finally:
        profiler.disable()
    stats = pstats.Stats(profiler)
    stdlib = sysconfig.get_paths()["stdlib"]
    totals = dict.fromkeys((GROUP_JAX, GROUP_STDLIB_NUMPY, GROUP_PROJECT, GROUP_OTHER), 0.0)
    files: dict[str, float] = {}
    raw: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    for (filename, _, _), (_, _, self_time, _, _) in raw.items():
        totals[group_of(filename, project_root, stdlib)] += self_time
        label = file_label(filename, project_root, stdlib)
        files[label] = files.get(label, 0.0) + self_time
    whole = sum(totals.values())
    if whole <= 0:
        return {}, {}
    top = sorted(files.items(), key=lambda item: (-item[1], item[0]))[:TOP_FILES]
    return (
        {group: round(seconds / whole, 4) for group, seconds in totals.items()},
        {label: round(seconds / whole, 4) for label, seconds in top},
    )
