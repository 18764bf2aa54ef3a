# Sourced by the other scripts: create (once) and activate .venv with the plugin installed.
# Needs only a Python >= 3.10 with venv; everything else comes from PyPI.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
if [ ! -x "$repo/.venv/bin/python" ]; then
  "$python" -m venv "$repo/.venv"
fi
# shellcheck disable=SC1091
. "$repo/.venv/bin/activate"
python -m pip install --quiet --disable-pip-version-check --upgrade pip
# What the project's venvs hold back, and why; every install into them uses it (a script
# that sources this one reads it from venv_constraints). Not exported: nox's sessions and
# the built-wheel test install what a user would get.
venv_constraints="$repo/scripts/venv-constraints.txt"
python -m pip install --quiet --disable-pip-version-check -e "$repo[test]" \
  --constraint "$venv_constraints"
