"""Run the embedded example suite from the repository root: ``pytest examples``.

It uses the documented example configuration verbatim; its pins live in ``pins/``.
"""

from __future__ import annotations

from conftest_example import pytest_configure

__all__ = ["pytest_configure"]
