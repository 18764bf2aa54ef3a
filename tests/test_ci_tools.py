""".ci/tools where it runs: on Debian and on GitHub's Ubuntu 24.04 runner, simulated.

The script runs for real (bash, its own logic) against a scratch PATH holding only the tools
each machine has and a fake os-release (`CI_TOOLS_OS_RELEASE`), in its dry-run mode
(`CI_TOOLS_DRY_RUN=1`): it says what it would install, and no apt-get runs.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from test_dashboard_browser import BROWSER_ARGUMENTS, BROWSERS

# Each test runs .ci/tools in a shell: a process
pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parent.parent
TOOLS = REPO / ".ci" / "tools"
BASH = shutil.which("bash") or "/bin/bash"

DEBIAN = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n'
UBUNTU = 'PRETTY_NAME="Ubuntu 24.04.3 LTS"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\n'
# Ubuntu's transitional chromium-browser: a script that hands over to the snap.
SNAP_STUB = """#!/bin/sh
if ! [ -x /snap/bin/chromium ]; then
    echo "Command '$0' requires the chromium snap to be installed." >&2
    exit 1
fi
exec /snap/bin/chromium "$@"
"""


def _tool(folder: Path, name: str, text: str = "#!/bin/sh\nexit 0\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    path.chmod(0o755)
    return path


def _run(
    tmp_path: Path, os_release: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    release = tmp_path / "os-release"
    release.write_text(os_release)
    return subprocess.run(
        [BASH, str(TOOLS)],
        env={
            "PATH": str(tmp_path / "bin"),
            "CI_TOOLS_OS_RELEASE": str(release),
            "CI_TOOLS_DRY_RUN": "1",
            **(env or {}),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )


def _would_install(done: subprocess.CompletedProcess[str]) -> list[str]:
    (line,) = [line for line in done.stdout.splitlines() if "would install:" in line]
    packages = line.split("would install:", 1)[1].split()
    return [] if packages == ["nothing"] else packages


def test_on_debian_the_missing_tools_are_installed_as_debian_packages(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    done = _run(tmp_path, DEBIAN)
    assert done.returncode == 0, done.stderr
    assert _would_install(done) == ["chromium", "chromium-driver", "valgrind"]


def test_on_debian_with_every_tool_nothing_is_installed(tmp_path: Path) -> None:
    for name in ("chromium", "chromedriver", "valgrind", "callgrind_control"):
        _tool(tmp_path / "bin", name)
    done = _run(tmp_path, DEBIAN)
    assert done.returncode == 0, done.stderr
    assert _would_install(done) == []
    assert (
        f".ci/tools: browser {tmp_path}/bin/chromium, chromedriver {tmp_path}/bin/" in done.stdout
    )


def test_on_githubs_ubuntu_runner_its_chrome_and_driver_are_used_and_no_chromium_installed(
    tmp_path: Path,
) -> None:
    """The runner image: Google Chrome on PATH, ChromeDriver in $CHROMEWEBDRIVER, the snap's
    stub as chromium-browser, no valgrind: only valgrind, a real Ubuntu package, is installed."""
    _tool(tmp_path / "bin", "chromium-browser", SNAP_STUB)
    chrome = _tool(tmp_path / "bin", "google-chrome")
    driver = _tool(tmp_path / "chromedriver-linux64", "chromedriver")
    done = _run(tmp_path, UBUNTU, {"CHROMEWEBDRIVER": str(driver.parent)})
    assert done.returncode == 0, done.stderr
    assert _would_install(done) == ["valgrind"]
    assert f".ci/tools: browser {chrome}, chromedriver {driver}" in done.stdout


def test_on_ubuntu_the_snap_stub_is_no_browser_and_chromium_is_never_installed(
    tmp_path: Path,
) -> None:
    _tool(tmp_path / "bin", "chromium-browser", SNAP_STUB)
    _tool(tmp_path / "bin", "chromedriver")
    for name in ("valgrind", "callgrind_control"):
        _tool(tmp_path / "bin", name)
    done = _run(tmp_path, UBUNTU)
    assert done.returncode == 1
    assert "would install" not in done.stdout
    assert "no usable Chrome or Chromium" in done.stderr and "snap" in done.stderr


@pytest.mark.parametrize("os_release", [DEBIAN, UBUNTU])
def test_without_the_dry_run_apt_get_is_what_runs(tmp_path: Path, os_release: str) -> None:
    """The dry run is the only difference: without it the script calls apt-get (here a
    stand-in on the scratch PATH that records its arguments), as root or through sudo."""
    _tool(tmp_path / "bin", "google-chrome")
    _tool(tmp_path / "bin", "chromedriver")
    calls = tmp_path / "calls"
    for name in ("apt-get", "sudo", "env"):
        _tool(tmp_path / "bin", name, f'#!{BASH}\necho "{name} $*" >>{calls}\n')
    _tool(tmp_path / "bin", "id", f"#!{BASH}\necho 0\n")  # as root: no sudo
    done = _run(tmp_path, os_release, {"CI_TOOLS_DRY_RUN": ""})
    assert done.returncode == 0, done.stderr
    recorded = calls.read_text()
    assert re.search(
        r"(?m)^env DEBIAN_FRONTEND=noninteractive apt-get install .* valgrind$", recorded
    )
    assert "chromium" not in recorded


def test_the_browser_test_finds_what_the_script_finds_and_starts_it_as_ci_needs() -> None:
    """The browser test looks for the same browsers in the same order, and starts it with the
    flags a CI container needs: headless, no sandbox (AppArmor blocks Chromium's on the
    runner images), no /dev/shm (small in containers)."""
    script = TOOLS.read_text()
    (names,) = re.findall(r"for name in (google-chrome [^;]*);", script)
    assert tuple(names.split()) == BROWSERS
    assert "CHROMEWEBDRIVER" in script
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        assert flag in BROWSER_ARGUMENTS


# Ubuntu's names for Chromium that are stubs handing over to the snap (fails in CI).
SNAP_STUB_PACKAGES = {"chromium", "chromium-browser", "chromium-driver", "chromium-chromedriver"}
WORKFLOWS = [
    REPO / "docs" / "examples" / "jaxcompile.yml",
    REPO / "docs" / "examples" / "jaxcompile-repin.yml",
    REPO / ".github" / "workflows" / "ci.yml",
]


def test_the_workflows_apt_steps_install_only_real_ubuntu_packages(tmp_path: Path) -> None:
    """Each workflow step that runs apt-get, run on a scratch PATH whose sudo and apt-get
    record their arguments: what it installs on ubuntu-latest is a real package."""
    yaml = pytest.importorskip("yaml")
    calls = tmp_path / "calls"
    _tool(tmp_path / "bin", "sudo", f'#!{BASH}\n"$@"\n')
    _tool(tmp_path / "bin", "apt-get", f'#!{BASH}\necho "$*" >>{calls}\n')
    installed: dict[str, list[str]] = {}
    for path in WORKFLOWS:
        for job in yaml.safe_load(path.read_text())["jobs"].values():
            for step in job["steps"]:
                script = str(step.get("run", ""))
                if "apt-get" not in script:
                    continue
                calls.unlink(missing_ok=True)
                done = subprocess.run(
                    [BASH, "-euo", "pipefail", "-c", script],
                    env={"PATH": str(tmp_path / "bin")},
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
                assert done.returncode == 0, (path.name, step.get("name"), done.stderr)
                for call in calls.read_text().splitlines():
                    if call.split()[0] == "install":
                        packages = [word for word in call.split()[1:] if not word.startswith("-")]
                        installed.setdefault(path.name, []).extend(packages)
    assert installed == {"jaxcompile.yml": ["valgrind"]}
    assert not set(installed["jaxcompile.yml"]) & SNAP_STUB_PACKAGES


def test_the_example_workflows_and_quickstart_say_the_runners_jax_is_in_the_key() -> None:
    """A runner's Python resolves its jax, and the jax version is part of every pin's key:
    the workflows users copy say so where they set the Python, and the Quickstart's CI part."""
    for path in WORKFLOWS[:2]:
        text = path.read_text()
        for match in re.finditer(
            r"\n((?:      #[^\n]*\n)*)      - uses: actions/setup-python@", text
        ):
            comment = " ".join(match.group(1).split())
            assert "jax version is part of every pin's key" in comment, (path.name, comment)
    readme = (REPO / "README.md").read_text()
    ci_part = readme.split("### In CI: a baseline that follows main", 1)[1].split("###", 1)[0]
    assert "jax version is part of the key" in ci_part and "pin jax" in ci_part
    # each baseline is keyed on the runner's jax, as its pins are
    gate = (REPO / "docs" / "examples" / "jaxcompile.yml").read_text()
    assert gate.count('echo "baseline-jax=${class}jax-${jax}-"') == 2
