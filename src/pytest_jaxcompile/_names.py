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

# The marker (its arguments are parsed by gate/budget.py).
MARKER_NAME = "compile_budget"
MARKER_HELP = (
    "compile_budget(seconds=None, *, tolerance=None, mixed_precision=None, max_compiles=None, "
    "max_ops_growth=None, max_memory_growth=None, max_flops_growth=None, cacheable=None, "
    "count_eager=None): a ceiling on any transform's compile_s in this test, a drift "
    "tolerance for its pins, whether it runs in mixed precision (part of the comparability "
    "key), a ceiling on its backend compiles, how much its modules may grow over their "
    "pinned op counts, compiled temp bytes and flops, whether every module must be "
    "persistent-cacheable, and whether JAX's eager dispatch of operations outside jit counts "
    "against max_compiles. The marker also turns on the census of every compile in the test."
)
