"""pytest-jaxcompile: make JAX/XLA compile-time regressions fail your test session.

The public names are imported on first use (PEP 562), so loading the plugin does not load
the measurement, pin and output modules of a session that never uses them.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from pytest_jaxcompile._version import __version__

if TYPE_CHECKING:
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

_HOMES = {
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
