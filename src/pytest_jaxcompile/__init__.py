"""pytest-jaxcompile: make JAX/XLA compile-time regressions fail your test session."""

from __future__ import annotations

from pytest_jaxcompile._version import __version__
from pytest_jaxcompile.budget import CompileBudget
from pytest_jaxcompile.classify import Classification, CompileEvidence, classify
from pytest_jaxcompile.measure import DuplicateTransformError, JaxCompile
from pytest_jaxcompile.pins import Pin, PinFileError, PinStore
from pytest_jaxcompile.records import CacheState, ComparabilityKey, CompileRecord
from pytest_jaxcompile.verdicts import Status, Thresholds, Verdict, judge

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
