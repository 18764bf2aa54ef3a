"""Fixed names and words that are needed before the session's machinery is imported.

A leaf module (nothing of the package, nothing heavy): the option table is built at plugin
load from the choices below, and a pytest-xdist controller that has not started the session
recognises a worker's rows by their key.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import pytest

PLATFORM_ALIASES = {"cuda": "gpu", "rocm": "gpu", "gpu": "gpu", "tpu": "tpu", "cpu": "cpu"}

# compile_clear_caches: when a census'd test starts with the framework's in-process caches
# cleared.
CLEAR_AUTO = "auto"
CLEAR_ALWAYS = "always"
CLEAR_NEVER = "never"
CLEAR_MODES = (CLEAR_AUTO, CLEAR_ALWAYS, CLEAR_NEVER)

# The measuring fixtures: a test that requests one uses the plugin, and asks for seconds.
FIXTURES = frozenset({"jax_compile", "torch_compile"})

# What each pytest-xdist worker sends the controller (its rows), under this key.
WORKER_OUTPUT_KEY = "jaxcompile"
# What the controller tells each xdist worker: the tests with a pinned compile count.
WORKER_INPUT_COUNTED_KEY = "jaxcompile_counted_cells"

# XLA_FLAGS as the plugin found them at load, before any conftest.py (the settings guard's
# baseline), kept where the session's machinery starts later.
XLA_FLAGS_ENV = "XLA_FLAGS"
XLA_FLAGS_AT_LOAD_KEY = pytest.StashKey["str | None"]()
