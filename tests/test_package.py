"""The package as users get it: an sdist and a wheel that `twine check` accepts, and a wheel
that, installed into a fresh venv, gates a real pytest session through its entry point.

Slow (a build, a venv, an install with jax: about a minute with a warm pip cache), so it runs
once, in scripts/test.sh; the nox sessions install the package from its wheel themselves and
leave it out (noxfile.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parent.parent

INSTALLED_SESSION = '''
import importlib.metadata
import sys

import pytest_jaxcompile

pytest_plugins = ["pytester"]

MODEL = """
import jax.numpy as jnp

def test_double(jax_compile):
    compiled = jax_compile(lambda x: (x * 2).sum(), jnp.ones(4), transform="double")
    assert float(compiled(jnp.ones(4))) == 8.0
"""


def test_the_installed_plugin_pins_and_gates(pytester):
    assert "site-packages" in pytest_jaxcompile.__file__  # the wheel's copy, not a checkout
    assert importlib.metadata.version("pytest-jaxcompile") == pytest_jaxcompile.__version__
    pytester.makepyfile(test_model=MODEL)
    pinned = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--compile-pin-update")
    pinned.assert_outcomes(passed=1)
    (pin,) = (pytester.path / "pins").glob("*.toml")
    assert '[pins."test_model.py::test_double".double]' in pin.read_text()
    judged = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    judged.assert_outcomes(passed=1)
    judged.stdout.fnmatch_lines(["*jax compile times*", "compile rows: 1 *"])
'''


def run(*argv: str | Path, cwd: Path | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(
        [str(arg) for arg in argv], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"{argv}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done.stdout


def test_the_built_wheel_installs_into_a_fresh_venv_and_gates_a_session(tmp_path: Path) -> None:
    from pytest_jaxcompile import __version__

    dist = tmp_path / "dist"
    # The sdist first, then the wheel built from the sdist: a file the sdist misses fails here.
    run(sys.executable, "-m", "build", "--outdir", dist, REPO)
    built = sorted(path.name for path in dist.iterdir())
    assert built == [
        f"pytest_jaxcompile-{__version__}-py3-none-any.whl",
        f"pytest_jaxcompile-{__version__}.tar.gz",
    ]
    run(sys.executable, "-m", "twine", "check", "--strict", *sorted(dist.iterdir()))

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv)
    python = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
    (wheel,) = dist.glob("*.whl")
    run(python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", wheel)
    project = tmp_path / "session"
    project.mkdir()
    (project / "test_installed.py").write_text(textwrap.dedent(INSTALLED_SESSION))
    out = run(
        python,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        "-q",
        "test_installed.py",
        cwd=project,
    )
    # The inner sessions name no plugin: the fixture came through the entry point.
    assert re.search(r"\b1 passed\b", out), out


def test_the_version_is_written_once_and_has_a_changelog_section() -> None:
    from pytest_jaxcompile import __version__

    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"]
    assert pyproject["project"]["dynamic"] == ["version"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "pytest_jaxcompile._version.__version__"
    }
    assert re.search(
        rf"^## {re.escape(__version__)}\b", (REPO / "CHANGELOG.md").read_text(), re.MULTILINE
    )
