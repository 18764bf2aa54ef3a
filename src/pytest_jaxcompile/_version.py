"""The package version, read by the build.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

__version__ = "0.1.0"
