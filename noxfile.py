"""The version matrix: the oldest and the newest combination the plugin claims to support.

    nox -s oldest newest        # both ends (what `.ci/run` runs, via scripts/matrix.sh)
    nox -s newest -- -k cache   # arguments after `--` go to pytest

`oldest` is the lowest Python in `requires-python` with every core dependency held at the
floor pyproject.toml declares for it (jax, jaxlib, pytest, ...): raising a floor there
moves this session with it. `newest` is the highest Python the project tests, with
whatever pip resolves today. Both install the package (not editable) with its test extra
and no torch, so the torch backend's tests skip, and run the test suite without lint or
type checks (those run once, in scripts/test.sh).

Interpreters are found on PATH, or else in pyenv's versions directory ($PYENV_ROOT, by
default ~/.pyenv), also when pyenv does not have them active.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import nox

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - nox itself usually runs on the project's venv Python
    import tomli as tomllib

OLDEST_PYTHON = "3.10"
NEWEST_PYTHON = "3.13"

REPO = Path(__file__).resolve().parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())

nox.options.sessions = ["oldest", "newest"]
nox.options.error_on_missing_interpreters = True  # a skipped end of the matrix is a failure
nox.options.default_venv_backend = "venv"


def _floor_constraints() -> list[str]:
    """`name==floor` for each core dependency declared as `name>=floor`."""
    pins = []
    for requirement in PYPROJECT["project"]["dependencies"]:
        spec, _, marker = requirement.partition(";")
        match = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*>=\s*([0-9][0-9A-Za-z.]*)\s*", spec)
        if match is None:
            raise SystemExit(f"noxfile.py: cannot read a floor from {requirement!r}")
        pin = f"{match[1]}=={match[2]}"
        pins.append(f"{pin} ;{marker}" if marker else pin)
    return pins


def _expose_pyenv_pythons(*versions: str) -> None:
    """Put pyenv's builds of `versions` on PATH when PATH has no real `pythonX.Y`.

    pyenv's shims only answer for the versions pyenv has active, so a shim found on PATH
    does not count.
    """
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    for version in versions:
        found = shutil.which(f"python{version}")
        if found and Path(found).parent.name != "shims":
            continue
        builds = [
            path
            for path in (root / "versions").glob(f"{version}.*")
            if re.fullmatch(rf"{re.escape(version)}\.\d+", path.name)
            and (path / "bin" / f"python{version}").is_file()
        ]
        if builds:
            newest = max(builds, key=lambda path: int(path.name.rsplit(".", 1)[1]))
            os.environ["PATH"] = f"{newest / 'bin'}{os.pathsep}{os.environ['PATH']}"


_expose_pyenv_pythons(OLDEST_PYTHON, NEWEST_PYTHON)


# Test files the version matrix leaves to scripts/test.sh (see `_run_tests`).
VERSION_FREE_TESTS = (
    "test_instructions.py",
    "test_instructions_progress.py",
    "test_dashboard_browser.py",
    "test_sequential.py",
    "test_paired_report.py",
)


def _run_tests(session: nox.Session) -> None:
    session.run(
        "python",
        "-c",
        "import sys, jax, jaxlib, numpy, pytest; "
        "print('matrix:', sys.version.split()[0], 'jax', jax.__version__, "
        "'jaxlib', jaxlib.__version__, 'numpy', numpy.__version__, "
        "'pytest', pytest.__version__)",
    )
    # On pytest-xdist workers, as scripts/test.sh runs it (JAXCOMPILE_TEST_WORKERS, default 2).
    workers = os.environ.get("JAXCOMPILE_TEST_WORKERS", "2")
    # No path given: pyproject.toml's testpaths (tests/); `-- tests/test_x.py` runs one file.
    # The built-wheel test runs once, in scripts/test.sh: these sessions install the
    # package from its wheel themselves.
    session.run(
        "python",
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-n",
        workers,
        "--ignore=tests/test_package.py",
        # Run once, in scripts/test.sh: the instruments tier (valgrind's counts, the browser)
        # and the pure statistics and report tests depend on no jax or Python version.
        "-m",
        "not instruments",
        *(f"--ignore=tests/{name}" for name in VERSION_FREE_TESTS),
        *session.posargs,
    )


@nox.session(python=OLDEST_PYTHON)
def oldest(session: nox.Session) -> None:
    """The lowest Python and every core dependency at its declared floor."""
    # Not session.create_tmp(): it points TMPDIR inside the repository, where the projects
    # the tests create would pick up this repository's pyproject.toml as their config.
    constraints = Path(session.virtualenv.location) / "floors.txt"
    constraints.write_text("\n".join(_floor_constraints()) + "\n")
    session.install("--constraint", str(constraints), ".[test]")
    _run_tests(session)


@nox.session(python=NEWEST_PYTHON)
def newest(session: nox.Session) -> None:
    """The highest Python tested, with the newest releases pip resolves."""
    session.install("--upgrade", ".[test]")
    _run_tests(session)
