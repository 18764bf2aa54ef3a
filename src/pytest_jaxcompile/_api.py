"""The package's public names, each imported from its home on first use, and why the
package's `__init__.py` is as small as it is.

The public names, ``__version__`` too, are imported on first use (PEP 562, the package's
``__getattr__``), so loading the plugin does not load the measurement, pin and output modules
of a session that never uses them.

The package's modules are found by Python's own path finder, ahead of pytest's assertion
rewriter (`pytest_jaxcompile.PlainImports`): pytest marks every module of an entry-point
plugin for rewriting, and where no bytecode may be written (``PYTHONDONTWRITEBYTECODE``, a
read-only site-packages) its hook parses and compiles each one from source at every start,
ignoring the ``.pyc`` files pip wrote at install. These modules hold no assert a user reads
(``PYTEST_DONT_REWRITE``), so nothing is lost. The package's ``__init__`` itself is always
loaded by that hook (it installs the finder), so it is kept small: its compile at each start
cost about 4 M instructions when it was 125 lines (`benchmarks/startup.py`).

The finder is on `sys.meta_path` from the package's import until its pytest session ends
(the entry point's ``pytest_unconfigure``): a Python finder still there when the
interpreter shuts down costs the shutdown about 8 M instructions, more than the finder saves.
It is found by its name: a re-import of the package (a pytester session restores
sys.modules) makes a new class.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "__version__": "pytest_jaxcompile._version",
    "DuplicateTransformError": "pytest_jaxcompile.backends",
    "Classification": "pytest_jaxcompile.backends",
    "CompileEvidence": "pytest_jaxcompile.backends.jax.classify",
    "classify": "pytest_jaxcompile.backends.jax.classify",
    "JaxCompile": "pytest_jaxcompile.backends.jax.measure",
    "CompileBudget": "pytest_jaxcompile.gate.budget",
    "Outcome": "pytest_jaxcompile.gate.outcome",
    "Pin": "pytest_jaxcompile.gate.pins",
    "PinFileError": "pytest_jaxcompile.gate.pins",
    "PinStore": "pytest_jaxcompile.gate.pins",
    "Status": "pytest_jaxcompile.gate.status",
    "Thresholds": "pytest_jaxcompile.gate.limits",
    "Verdict": "pytest_jaxcompile.gate.status",
    "judge": "pytest_jaxcompile.gate.judging",
    "CacheState": "pytest_jaxcompile.records",
    "ComparabilityKey": "pytest_jaxcompile.records",
    "CompileRecord": "pytest_jaxcompile.records",
}


def public(name: str) -> Any:
    """The package's public `name`, imported from its home."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'pytest_jaxcompile' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
