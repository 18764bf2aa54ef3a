"""JAX's files of a reproducer bundle: the script and the install's environment.

``reproduce.py`` is `backends/jax/reproduce.py` copied whole (it imports only jax and
Python's standard library); ``environment.txt`` is ``jax.print_environment_info()`` with
``XLA_FLAGS``, the CPU and its usable cores, as this process sees them. Read only when a
bundle is written (gate/reproducer.py, docs/reproducer.md).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

from pytest_jaxcompile._constants import XLA_FLAGS_ENV
from pytest_jaxcompile.backends.hardware import host_cpu_model, usable_cpu_count

SCRIPT = Path(__file__).with_name("reproduce.py")


def environment_text() -> str:
    """``jax.print_environment_info()``'s text, then the flags and the host."""
    import jax

    try:
        info = jax.print_environment_info(return_string=True)
    except Exception as error:  # e.g. nvidia-smi hanging or absent: said, never fatal
        info = f"jax.print_environment_info() failed: {type(error).__name__}: {error}\n"
    flags = os.environ.get(XLA_FLAGS_ENV)
    lines = [
        str(info).rstrip(),
        "",
        f"XLA_FLAGS: {flags if flags else '(not set)'}",
        f"CPU: {host_cpu_model()} ({usable_cpu_count()} usable cores)",
        f"OS: {platform.platform()}",
    ]
    return "\n".join(lines) + "\n"


def reproducer_files() -> dict[str, bytes]:
    return {
        "reproduce.py": SCRIPT.read_bytes(),
        "environment.txt": environment_text().encode("utf-8"),
    }
