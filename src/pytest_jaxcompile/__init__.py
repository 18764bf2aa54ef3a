"""pytest-jaxcompile: make JAX/XLA compile-time regressions fail your test session.

The public names, ``__version__`` too, are imported on first use (PEP 562), so loading the
plugin does not load the measurement, pin and output modules of a session that never uses
them.

The package's modules are found by Python's own path finder, ahead of pytest's assertion
rewriter (`PlainImports`): pytest marks every module of an entry-point plugin for rewriting,
and where no bytecode may be written (``PYTHONDONTWRITEBYTECODE``, a read-only
site-packages) its hook parses and compiles each one from source at every start, ignoring
the ``.pyc`` files pip wrote at install. These modules hold no assert a user reads
(``PYTEST_DONT_REWRITE``), so nothing is lost.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_jaxcompile._version import __version__
    from pytest_jaxcompile.backends import Classification, DuplicateTransformError
    from pytest_jaxcompile.backends.jax.classify import CompileEvidence, classify
    from pytest_jaxcompile.backends.jax.measure import JaxCompile
    from pytest_jaxcompile.gate.budget import CompileBudget
    from pytest_jaxcompile.gate.judging import judge
    from pytest_jaxcompile.gate.limits import Thresholds
    from pytest_jaxcompile.gate.outcome import Outcome
    from pytest_jaxcompile.gate.pins import Pin, PinFileError, PinStore
    from pytest_jaxcompile.gate.status import Status, Verdict
    from pytest_jaxcompile.records import CacheState, ComparabilityKey, CompileRecord


class PlainImports:
    """Finds this package's submodules as Python would without pytest's assertion rewriter
    (a `sys.meta_path` finder; not an `importlib.abc.MetaPathFinder`, whose import costs a
    plain ``import pytest_jaxcompile`` about 30 ms).

    On `sys.meta_path` from the package's import until its pytest session ends
    (`uninstall` in ``pytest_unconfigure``): a Python finder still there when the interpreter
    shuts down costs the shutdown about 8 M instructions, more than the finder saves
    (`benchmarks/startup.py`). Found by name: a re-import of this package (a pytester session
    restores sys.modules) makes a new class.
    """

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if not fullname.startswith(f"{__name__}."):
            return None
        return importlib.machinery.PathFinder.find_spec(fullname, path, target)

    @staticmethod
    def installed() -> bool:
        return any(type(finder).__qualname__ == "PlainImports" for finder in sys.meta_path)

    @classmethod
    def install(cls) -> None:
        if not cls.installed():
            sys.meta_path.insert(0, cls())

    @staticmethod
    def uninstall() -> None:
        sys.meta_path[:] = [
            finder for finder in sys.meta_path if type(finder).__qualname__ != "PlainImports"
        ]


PlainImports.install()

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

__all__ = [
    "CacheState",
    "Classification",
    "ComparabilityKey",
    "CompileBudget",
    "CompileEvidence",
    "CompileRecord",
    "DuplicateTransformError",
    "JaxCompile",
    "Outcome",
    "Pin",
    "PinFileError",
    "PinStore",
    "Status",
    "Thresholds",
    "Verdict",
    "__version__",
    "classify",
    "judge",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'pytest_jaxcompile' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
