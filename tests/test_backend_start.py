"""XLA_FLAGS as XLA read them: captured when JAX's backend starts, however JAX was loaded.

The capture is process-wide (as XLA's own parse is), so each case runs in its own process.
The pytest sessions that depend on it are in test_settings_guard.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from jax_behaviour import jax_has_backend_initialization_hooks

pytestmark = pytest.mark.integration

SRC = Path(__file__).resolve().parent.parent / "src"


def _run(script: str, xla_flags: str) -> list[str]:
    env = {**os.environ, "XLA_FLAGS": xla_flags, "JAX_PLATFORMS": "cpu"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_jax_imported_before_watching_is_captured_at_its_backend_start() -> None:
    from jax._src import xla_bridge

    if not isinstance(getattr(xla_bridge, "_backend_initialization_hooks", None), list):
        pytest.skip("this jax keeps no list of backend-initialization hooks to find a capture in")
    lines = _run(
        """
        import os, sys
        import jax.numpy as jnp
        from pytest_jaxcompile.backends.jax import backendstart

        backendstart.watch()  # JAX is imported, its backend not started: a hook
        print(backendstart.at_backend_start())
        jnp.zeros(1)
        os.environ["XLA_FLAGS"] = "--xla_dump_hlo_as_text"  # too late for XLA
        print(backendstart.at_backend_start())

        del sys.modules["pytest_jaxcompile.backends.jax.backendstart"]  # imported afresh
        from pytest_jaxcompile.backends.jax import backendstart as again

        again.watch()  # finds the capture in JAX's hook list; registers nothing new
        print(again.at_backend_start())
        from jax._src import xla_bridge
        print(sum(hasattr(hook, "_pytest_jaxcompile_backend_start")
                  for hook in xla_bridge._backend_initialization_hooks))
        """,
        "--xla_force_host_platform_device_count=1",
    )
    started = (
        "BackendStart(xla_flags='--xla_force_host_platform_device_count=1', "
        "captured_at='backend_start', baseline=None)"
    )
    assert lines == ["None", started, started, "1"]


def test_watching_before_jax_is_imported_leaves_no_trace_on_jax() -> None:
    """On any jax: the import watch puts JAX's own loader back and removes itself. The
    backend start is captured where this jax has backend-initialization hooks; elsewhere
    the value stays unknown (None), and nothing fails."""
    lines = _run(
        """
        import sys
        from pytest_jaxcompile.backends.jax import backendstart

        backendstart.watch()
        assert "jax" not in sys.modules  # watching imports no JAX
        import jax.numpy as jnp
        from jax._src import xla_bridge

        print(type(xla_bridge.__loader__).__name__, type(xla_bridge.__spec__.loader).__name__)
        print(any(hasattr(f, "_pytest_jaxcompile_backend_start") for f in sys.meta_path))
        print(backendstart.at_backend_start())
        jnp.zeros(1)
        print(backendstart.at_backend_start())
        """,
        "",
    )
    assert lines == [
        "SourceFileLoader SourceFileLoader",
        "False",
        "None",
        "BackendStart(xla_flags='', captured_at='backend_start', baseline=None)"
        if jax_has_backend_initialization_hooks()
        else "None",
    ]
