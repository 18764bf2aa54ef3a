"""pytest-jaxcompile: make JAX/XLA compile-time regressions fail your test session."""

from __future__ import annotations

from pytest_jaxcompile._version import __version__
from pytest_jaxcompile.backends.jax.classify import Classification, CompileEvidence, classify
from pytest_jaxcompile.backends.jax.measure import DuplicateTransformError, JaxCompile
from pytest_jaxcompile.gate.budget import CompileBudget
from pytest_jaxcompile.gate.pins import Pin, PinFileError, PinStore
from pytest_jaxcompile.gate.verdicts import Status, Thresholds, Verdict, judge
from pytest_jaxcompile.records import CacheState, ComparabilityKey, CompileRecord

__all__ = [
    "CacheState",
    "Classification",
    "ComparabilityKey",
    "CompileBudget",
    "CompileEvidence",
    "CompileRecord",
    "DuplicateTransformError",
    "JaxCompile",
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
