"""pytest-jaxcompile: make JAX/XLA compile-time regressions fail your test session.

Small on purpose, and untyped (``__init__.pyi`` types the public names): where no bytecode
may be written, pytest compiles this file from source at every start (`_api` says why, and
holds the rest: where each public name lives).

PYTEST_DONT_REWRITE
"""

import sys
from importlib.machinery import PathFinder


class PlainImports:
    """Finds this package's modules as Python would, ahead of pytest's assertion rewriter."""

    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        if fullname.startswith("pytest_jaxcompile."):
            return PathFinder.find_spec(fullname, path, target)
        return None


if not any(type(finder).__qualname__ == "PlainImports" for finder in sys.meta_path):
    sys.meta_path.insert(0, PlainImports())

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


def __getattr__(name):  # type: ignore[no-untyped-def]
    from pytest_jaxcompile._api import public

    return public(name)
