"""Example ``conftest.py`` for a project gated by pytest-jaxcompile.

Copy it to your project's root as ``conftest.py`` (or merge it into yours). The demo
(``scripts/demo.sh``) runs the embedded example suite with exactly this file.
"""

from __future__ import annotations

import os

import jax
import pytest


@pytest.hookimpl(tryfirst=True)  # before pytest-jaxcompile reads its settings
def pytest_configure(config: pytest.Config) -> None:
    # A persistent compilation cache for the session. Configure it before the first
    # compile of the process: JAX decides then whether the cache is in use. CI jobs
    # restore and save this directory between runs.
    cache_dir = os.environ.get("JAX_COMPILATION_CACHE_DIR") or str(config.rootpath / ".jax_cache")
    jax.config.update("jax_compilation_cache_dir", cache_dir)
    # JAX only persists compiles that took at least 1 s by default; small modules (and
    # every module of a unit-test suite) would always compile cold without this.
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)

    # A pool of identical CI runners can share one hardware name in the pins instead of
    # the detected "platform:device @ cpu model xN" (records keep the detected detail).
    # Precedence: --compile-hardware, then JAXCOMPILE_HARDWARE, then ini compile_hardware.
    if os.environ.get("CI") and os.environ.get("RUNNER_POOL"):
        os.environ.setdefault("JAXCOMPILE_HARDWARE", os.environ["RUNNER_POOL"])
