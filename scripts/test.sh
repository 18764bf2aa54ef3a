#!/usr/bin/env bash
# The plugin's own checks: lint, types, and the test suite (real JAX and torch on the CPU).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$repo/scripts/setup-venv.sh"
# The torch backend's tests need torch; pin the CPU build explicitly (a looser range can
# pull a multi-GB CUDA build). JAXCOMPILE_SKIP_TORCH=1 tests the JAX-only install instead,
# where those tests skip.
if [ "${JAXCOMPILE_SKIP_TORCH:-0}" != "1" ]; then
  python -m pip install --quiet --disable-pip-version-check "torch==2.13.0"
fi
# A second jax for the upgrade tests: pins made under an older jax, judged under this one.
old_jax="0.9.2"
old_venv="$repo/.venv-jax-$old_jax"
if [ ! -x "$old_venv/bin/python" ]; then
  python -m venv "$old_venv"
fi
"$old_venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "jax==$old_jax" "jaxlib==$old_jax" -e "$repo" --constraint "$venv_constraints"
export JAXCOMPILE_OLD_JAX_PYTHON="$old_venv/bin/python"
cd "$repo"
ruff check src tests examples benchmarks conftest_example.py noxfile.py
ruff format --check src tests examples benchmarks conftest_example.py noxfile.py
mypy
set +e
# Tests are handed out in file order by default. pytest-randomly (a test extra)
# is there to shuffle it: JAXCOMPILE_TEST_ORDER="-p randomly --randomly-seed=N" (N printed
# by a shuffled run repeats it). The projects the tests start run in file order
# (tests/conftest.py).
read -r -a order <<<"${JAXCOMPILE_TEST_ORDER:--p no:randomly}"
# Most tests start a pytest session of their own (a fresh process that imports JAX), so
# the suite runs on pytest-xdist workers, two by default (the CI machine's cores):
# JAXCOMPILE_TEST_WORKERS=0 runs it in this one process.
workers="${JAXCOMPILE_TEST_WORKERS:-2}"
# -rs lists every skipped test with its reason (the browser test without chromium, the
# torch tests without torch): a skip is never silent; --durations=25 names where the
# suite's minutes went (docs/testing.md keeps its budget).
python -m pytest -p no:cacheprovider -rs --durations=25 -n "$workers" "${order[@]}" "$@" tests
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "scripts/test.sh: pytest collected no tests; that is a failure here" >&2
  exit 1
fi
exit "$status"
