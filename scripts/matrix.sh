#!/usr/bin/env bash
# The version matrix (noxfile.py): the test suite under the oldest combination the plugin
# supports (Python 3.10, every core dependency at its declared floor: jax 0.4.30, ...) and the
# newest (Python 3.13, latest releases). Each session builds its own venv under .nox/ and
# installs the package with its test extra, without torch.
#   bash scripts/matrix.sh                 # both sessions
#   bash scripts/matrix.sh -s newest       # one
#   bash scripts/matrix.sh -- -k cache     # arguments after -- go to pytest
# Interpreters come from PATH or pyenv (see noxfile.py).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$repo/scripts/setup-venv.sh"  # the project venv; its test extra brings nox
cd "$repo"
sessions=(-s oldest newest)
for arg in "$@"; do
  case "$arg" in
    -s|--session|--sessions|-e) sessions=(); break ;;
    --) break ;;
  esac
done
exec python -m nox "${sessions[@]}" "$@"
