"""What the installed JAX does, found out by asking it: tests assert that, not one version's habits.

Each probe runs in a fresh Python process with its own cache dir, so it neither configures
the persistent cache of the test process nor depends on the plugin's own classification.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

_HOST_CALLBACK_PROBE = textwrap.dedent(
    """
    import sys
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)

    def probe_plain(x):
        return x * 2

    def probe_callback(x):
        shape = jax.ShapeDtypeStruct(x.shape, x.dtype)
        return jax.pure_callback(lambda a: a, shape, x) * 2

    for function in (probe_plain, probe_callback):
        jax.jit(function).lower(jnp.ones(4)).compile()
    """
)


_LATE_CACHE_PROBE = textwrap.dedent(
    """
    import sys
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_compilation_cache", False)
    jnp.ones(3).block_until_ready()  # the first compile of the process, cache disabled
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)

    def probe_late(x):
        return x * 3

    jax.jit(probe_late).lower(jnp.ones(4)).compile()
    """
)


def _run_probe(source: str, cache_dir: Path) -> None:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    subprocess.run(
        [sys.executable, "-c", source, str(cache_dir)],
        check=True,
        env=env,
        capture_output=True,
        text=True,
    )


def _entries_of(cache_dir: Path, module_name: str) -> list[str]:
    # "<module>-<hash>" (jax 0.4.30) or "<module>-<hash>-cache" beside "...-atime" (later).
    return [
        path.name
        for path in cache_dir.iterdir()
        if path.name.startswith(f"{module_name}-") and not path.name.endswith("-atime")
    ]


@functools.cache
def jax_persists_host_callbacks() -> bool:
    """Whether this JAX writes a persistent-cache entry for a module with a host callback.

    jax 0.10 and earlier never do (they log "Not writing persistent cache entry ... because
    it uses host callbacks"); jax 0.11 and later write and reuse such entries.
    """
    with tempfile.TemporaryDirectory(prefix="jax-probe-") as directory:
        cache_dir = Path(directory)
        _run_probe(_HOST_CALLBACK_PROBE, cache_dir)
        if not _entries_of(cache_dir, "jit_probe_plain"):
            listing = sorted(path.name for path in cache_dir.iterdir())
            raise RuntimeError(
                f"the probe's control module was not persisted either ({listing}): "
                "the persistent cache does not work here, so the probe decides nothing"
            )
        return bool(_entries_of(cache_dir, "jit_probe_callback"))


@functools.cache
def jax_uses_a_cache_enabled_after_the_first_compile() -> bool:
    """Whether this JAX uses a persistent cache enabled after the process's first compile.

    jax 0.4.31 and later decide at the first compile and keep to it; jax 0.4.30 reads the
    setting at every compile.
    """
    with tempfile.TemporaryDirectory(prefix="jax-probe-") as directory:
        cache_dir = Path(directory)
        _run_probe(_LATE_CACHE_PROBE, cache_dir)
        return bool(_entries_of(cache_dir, "jit_probe_late"))


_CACHE_KEY_LOG_PROBE = textwrap.dedent(
    """
    import logging, sys
    import jax
    import jax.numpy as jnp

    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("jax._src.compiler").setLevel(logging.DEBUG)
    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.jit(lambda x: x * 5).lower(jnp.ones(4)).compile()
    """
)


@functools.cache
def jax_logs_persistent_cache_keys() -> bool:
    """Whether this JAX logs each compile's persistent-cache key (the census's fingerprint).

    jax 0.4.30 does not (it logs hits by module name only); later versions log the key of
    every miss and hit.
    """
    with tempfile.TemporaryDirectory(prefix="jax-probe-") as directory:
        env = {**os.environ, "JAX_PLATFORMS": "cpu"}
        done = subprocess.run(
            [sys.executable, "-c", _CACHE_KEY_LOG_PROBE, directory],
            check=True,
            env=env,
            capture_output=True,
            text=True,
        )
        return "PERSISTENT COMPILATION CACHE MISS for" in done.stderr


@functools.cache
def jax_has_backend_initialization_hooks() -> bool:
    """Whether this jax lets a plugin hook its backend's start (XLA_FLAGS as XLA read them).

    Where it does not, the plugin reads the value as unknown and judges as before.
    """
    from jax._src import xla_bridge

    return hasattr(xla_bridge, "register_backend_initialization_hook")


def needs_backend_hooks() -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        not jax_has_backend_initialization_hooks(),
        reason="this jax has no backend-initialization hooks: XLA_FLAGS at backend start is "
        "read as unknown",
    )
