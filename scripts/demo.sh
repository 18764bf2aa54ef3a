#!/usr/bin/env bash
# The whole lifecycle on the embedded example suite, in a scratch copy (demo-run/):
#   1. pin on an empty persistent cache (cold rows), 2. pin again on the filled cache
#   (warm rows), 3. a run that passes, 4. an injected compile-time regression (a much
#   deeper MLP) that fails the session with a readable summary.
# Exits 0 when every step behaved as described, non-zero otherwise.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$repo/scripts/setup-venv.sh"

run="$repo/demo-run"
rm -rf "$run"
mkdir -p "$run"
cp "$repo/examples/jaxmodels.py" "$repo/examples/test_models.py" "$run/"
cp "$repo/conftest_example.py" "$run/conftest.py"
printf '[pytest]\n' >"$run/pytest.ini"  # its own rootdir: pins land in demo-run/pins
cd "$run"
export JAX_COMPILATION_CACHE_DIR="$run/.jax_cache"
unset JAXMODELS_DEPTH

step() {  # step "title" expected-exit-status command...
  local title="$1" expected="$2"
  shift 2
  printf '\n\033[1m### %s\033[0m\n$ %s\n' "$title" "$*"
  set +e
  "$@"
  local status=$?
  set -e
  if [ "$status" -ne "$expected" ]; then
    echo "demo: expected exit status $expected, got $status" >&2
    exit 1
  fi
  echo "(exit status $status, as expected)"
}

step "1. First run: pin the cold compiles (empty cache)" 0 \
  pytest -p no:cacheprovider --compile-pin-update
step "2. Pin the warm compiles too (the cache is filled now; CI restores it)" 0 \
  pytest -p no:cacheprovider --compile-pin-update
step "3. A normal run: every row within tolerance of its pin" 0 \
  pytest -p no:cacheprovider -v
# --compile-strict: judge wall seconds even if this machine happens to be busy right now
# (rows measured above compile_max_load are otherwise judged on their CPU seconds).
step "4. Inject a regression: a 512-layer MLP compiles ~10x slower (and cold)" 1 \
  env JAXMODELS_DEPTH=512 pytest -p no:cacheprovider --compile-strict --compile-report report.json

printf '\n\033[1mDemo complete.\033[0m Pins are in %s/pins; the JSON report of step 4 is %s/report.json.\n' "$run" "$run"
