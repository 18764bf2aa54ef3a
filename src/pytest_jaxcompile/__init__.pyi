"""The public names' types; ``__init__.py`` imports each from its home on first use, and
holds ``__all__`` (`tests/test_startup.py` checks that both name the same)."""

from importlib.machinery import ModuleSpec
from typing import Any

from pytest_jaxcompile._version import __version__ as __version__
from pytest_jaxcompile.backends import Classification as Classification
from pytest_jaxcompile.backends import DuplicateTransformError as DuplicateTransformError
from pytest_jaxcompile.backends.jax.classify import CompileEvidence as CompileEvidence
from pytest_jaxcompile.backends.jax.classify import classify as classify
from pytest_jaxcompile.backends.jax.measure import JaxCompile as JaxCompile
from pytest_jaxcompile.gate.budget import CompileBudget as CompileBudget
from pytest_jaxcompile.gate.judging import judge as judge
from pytest_jaxcompile.gate.limits import Thresholds as Thresholds
from pytest_jaxcompile.gate.outcome import Outcome as Outcome
from pytest_jaxcompile.gate.pins import Pin as Pin
from pytest_jaxcompile.gate.pins import PinFileError as PinFileError
from pytest_jaxcompile.gate.pins import PinStore as PinStore
from pytest_jaxcompile.gate.status import Status as Status
from pytest_jaxcompile.gate.status import Verdict as Verdict
from pytest_jaxcompile.records import CacheState as CacheState
from pytest_jaxcompile.records import ComparabilityKey as ComparabilityKey
from pytest_jaxcompile.records import CompileRecord as CompileRecord

class PlainImports:
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> ModuleSpec | None: ...
