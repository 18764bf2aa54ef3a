#!/usr/bin/env bash
# The plugin's own checks: lint, types, and the test suite (real JAX on the CPU).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$repo/scripts/setup-venv.sh"
cd "$repo"
ruff check src tests examples benchmarks conftest_example.py
mypy
set +e
python -m pytest -p no:cacheprovider "$@" tests
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "scripts/test.sh: pytest collected no tests; that is a failure here" >&2
  exit 1
fi
exit "$status"
