#!/usr/bin/env bash
# Branch coverage of src/ over the logic and integration tiers, the sessions the tests
# start included (coverage's `patch = subprocess`, [tool.coverage] in pyproject.toml).
# The instruments tier is left out: valgrind's counting child would run under coverage's
# tracer, and the browser test needs Chrome. Prints the report; arguments go to pytest.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$repo/scripts/setup-venv.sh"
python -m pip install --quiet --disable-pip-version-check -e "$repo[test,coverage]" \
  --constraint "$venv_constraints"
# The upgrade tests' older jax, where scripts/test.sh built it (they skip without it).
old_python="$repo/.venv-jax-0.9.2/bin/python"
if [ -x "$old_python" ]; then
  export JAXCOMPILE_OLD_JAX_PYTHON="$old_python"
fi
cd "$repo"
rm -f .coverage .coverage.*
# pytest-cov combines every process's data into .coverage and reports it (a later
# `coverage combine` would find nothing left to combine and empty .coverage).
python -m pytest -p no:cacheprovider -p no:randomly -q -n "${JAXCOMPILE_TEST_WORKERS:-2}" \
  -m "not instruments" --cov --cov-report=term:skip-covered --cov-report=json "$@" tests
