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
# scripts/venv-constraints.txt: what the suite holds back, and why.
python -m pip install --quiet --disable-pip-version-check -e "$repo[test]" \
  --constraint "$repo/scripts/venv-constraints.txt"
