"""`python -m pytest_jaxcompile`: the subcommands.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import sys

from pytest_jaxcompile.cli import main

if __name__ == "__main__":
    sys.exit(main())
