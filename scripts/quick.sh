#!/usr/bin/env bash
# The inner loop, between two changes (about a minute on two cores): the logic tier (every
# test that runs in-process on records, pins and reports), then the integration and
# instrument tests of what this change touches: the test files it changes, and tests/test_X.py
# for each module X.py it changes under src/ (against main: committed on this branch, staged,
# unstaged or untracked). Arguments go to both pytest runs (e.g. -x, -k, or more test files).
# README's test command, scripts/test.sh, runs every tier with ruff and mypy.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
if [ -x .venv/bin/python ]; then
  . .venv/bin/activate  # set up by scripts/setup-venv.sh: its pip run is not repeated here
else
  . scripts/setup-venv.sh
fi
workers="${JAXCOMPILE_TEST_WORKERS:-2}"
pytest_run() {
  local status=0
  python -m pytest -p no:cacheprovider -p no:randomly -q -n "$workers" "$@" || status=$?
  # 5: nothing selected (no changed file had such a test): not a failure here
  [ "$status" -eq 0 ] || [ "$status" -eq 5 ] || exit "$status"
}
echo "scripts/quick.sh: the logic tier"
pytest_run -m logic "$@" tests

base=$(git merge-base HEAD main 2>/dev/null || git rev-parse HEAD)
changed=$(
  {
    git diff --name-only "$base"
    git ls-files --others --exclude-standard
  } | sort -u
)
files=()
for path in $changed; do
  case "$path" in
    tests/test_*.py) [ -f "$path" ] && files+=("$path") ;;
    src/pytest_jaxcompile/*.py)
      named="tests/test_$(basename "$path")"
      [ -f "$named" ] && files+=("$named")
      ;;
  esac
done
if [ ${#files[@]} -eq 0 ]; then
  echo "scripts/quick.sh: no test file of a changed module; the integration tier not run"
  exit 0
fi
mapfile -t files < <(printf '%s\n' "${files[@]}" | sort -u)
echo "scripts/quick.sh: the integration and instrument tests of ${files[*]}"
pytest_run -m "not logic" "$@" "${files[@]}"
