from __future__ import annotations

import compileall
import dataclasses
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_jaxcompile.gate.pins import PinStore

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist starts its workers
def pytest_configure(config: pytest.Config) -> None:
    """The plugin's bytecode, compiled once before any worker or session starts. The
    sessions the tests start import the plugin from src/ (an editable install); where no
    bytecode is written (PYTHONDONTWRITEBYTECODE, as on CI machines) each compiled its
    modules from source again, about 0.2 s of CPU a session. An installed plugin has its
    bytecode from pip, as here."""
    if not hasattr(config, "workerinput"):
        compileall.compile_dir(REPO / "src", quiet=1)


def pytest_sessionstart(session: pytest.Session) -> None:
    """JAX, imported in every process that runs tests, before any test. pytester takes
    modules a test imported out of `sys.modules` when the test ends, and jaxlib's extension
    cannot load twice in one process: a later test that imported JAX again (directly or
    through the plugin) aborted its whole worker, only in some orders of the tests. A
    pytest-xdist controller runs no test, so it does not pay the import."""
    if not session.config.pluginmanager.hasplugin("dsession"):
        import jax  # noqa: F401


def regenerating_docs() -> bool:
    """Whether the docs checks rewrite a stale example in place (`JAXCOMPILE_REGENERATE_DOCS=1`)
    rather than only fail on it."""
    return os.environ.get("JAXCOMPILE_REGENERATE_DOCS") == "1"


# A `JaxProject`'s sessions do not profile their failing rows (a child compiling each again,
# seconds a session); a test of the profile asks for it with PROFILE_FAILING, which comes
# later on the command line and wins. (Not in INNER_SESSION_OPTIONS: a compile_* option
# there would switch the plugin on in the sessions that test a project not using it.)
PROFILE_NEVER = ("-o", "compile_profile_failing=never")
PROFILE_FAILING = ("-o", "compile_profile_failing=always")


# A model the tests deepen through MODEL_DEPTH (4 layers by default): a real change of
# module and compile time, one jax_compile row `test_model [grad]`.
DEEPENING_MODEL = """
    import os
    import jax
    import jax.numpy as jnp

    DEPTH = int(os.environ.get("MODEL_DEPTH", "4"))

    def loss(ws, x):
        for i, w in enumerate(ws):
            x = jnp.tanh(x @ w) + jnp.sin(x) * (i + 1)
        return jnp.sum(x)

    def test_model(jax_compile):
        ws = [jnp.ones((128, 128)) * 0.01 for _ in range(DEPTH)]
        jax_compile(jax.jit(jax.grad(loss)), ws, jnp.ones((16, 128)), transform="grad")
"""


class JaxProject:
    """A throwaway pytest project that uses the plugin with a real persistent cache."""

    def __init__(self, pytester: pytest.Pytester, made: PinsMade | None = None) -> None:
        self.pytester = pytester
        self._made = made
        self.path = pytester.path
        self.cache_dir = pytester.path / "jaxcache"
        self.pins_dir = pytester.path / "pins"
        (self.path / "jaxmodels.py").write_text((EXAMPLES / "jaxmodels.py").read_text())

    def conftest(self, *, cache: bool = True, min_compile_time: float | None = 0.0) -> None:
        """Configure the persistent cache in pytest_configure, as conftest_example.py does."""
        lines = ["import jax", "", "def pytest_configure(config):"]
        if cache:
            cache_dir = str(self.cache_dir)
            lines.append(f"    jax.config.update('jax_compilation_cache_dir', {cache_dir!r})")
            if min_compile_time is not None:
                lines.append(
                    "    jax.config.update('jax_persistent_cache_min_compile_time_secs', "
                    f"{min_compile_time!r})"
                )
        else:
            lines.append("    pass")
        self.pytester.makeconftest("\n".join(lines) + "\n")

    def rendezvous(self) -> None:
        """A `rendezvous.meet(directory, name, parties)` helper for tests of the project."""
        (self.path / "rendezvous.py").write_text(RENDEZVOUS)

    def tests(self, source: str, name: str = "test_models") -> None:
        self.pytester.makepyfile(**{name: textwrap.dedent(source)})

    def run(self, *args: str) -> pytest.RunResult:
        report = self.path / "report.json"
        report.unlink(missing_ok=True)
        return self.pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "--compile-report", str(report), *PROFILE_NEVER, *args
        )

    def pin_update(self, *args: str) -> PinSetup:
        """`--compile-pin-update` (with `args`) as a test's setup, its output unread. Where a
        project identical in its files, environment and `args` was pinned earlier in this
        process (another test's setup), its pins, persistent cache and report are copied
        here instead: that session would import JAX and compile the same modules again."""
        if self._made is None or any((self.path / name).exists() for name in PinsMade.KEPT):
            return self.pin_session(args)
        return self._made.pin_update(self, args)

    def pin_session(self, args: tuple[str, ...]) -> PinSetup:
        """The pin update `pin_update` stands for, run here."""
        return PinSetup.of(self.run("--compile-pin-update", *args))

    def report(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.path / "report.json").read_text())
        return data

    def rows(self) -> dict[tuple[str, str], dict[str, Any]]:
        """The last report's records by (test name, transform)."""
        return {
            (record["cell"].split("::")[-1], record["transform"]): record
            for record in self.report()["records"]
        }

    def verdicts(self) -> dict[tuple[str, str], str]:
        return {
            (verdict["cell"].split("::")[-1], verdict["transform"]): verdict["status"]
            for verdict in self.report()["verdicts"]
        }

    def set_pin_field(self, field: str, value: float | None) -> None:
        """Hand-edit the one pin file: set a field in every pin, or drop it (None)."""
        (path,) = self.pins_dir.glob("*.toml")
        lines = []
        for line in path.read_text().splitlines():
            if line.startswith(f"{field} = "):
                if value is None:
                    continue
                line = f"{field} = {value}"
            lines.append(line)
        path.write_text("\n".join(lines) + "\n")

    def pin_files(self) -> dict[str, bytes]:
        if not self.pins_dir.is_dir():
            return {}
        return {path.name: path.read_bytes() for path in sorted(self.pins_dir.glob("*.toml"))}


@dataclasses.dataclass(frozen=True)
class PinSetup:
    """What a test's setup pinning ended with (`JaxProject.pin_update`)."""

    ret: int
    outcomes: dict[str, int]

    def assert_outcomes(self, **expected: int) -> None:
        """As `RunResult.assert_outcomes`: the kinds not named are expected to be none."""
        kinds = ("passed", "skipped", "failed", "errors", "xpassed", "xfailed")
        seen = {kind: self.outcomes.get(kind, 0) for kind in kinds}
        assert seen == {kind: expected.get(kind, 0) for kind in kinds}, self.outcomes

    @classmethod
    def of(cls, result: pytest.RunResult) -> PinSetup:
        try:
            outcomes = dict(result.parseoutcomes())
        except ValueError:  # no summary line (a usage error): no outcome to count
            outcomes = {}
        return cls(int(result.ret), outcomes)


class PinsMade:
    """The results of the setup pin updates run in this process, by what they ran on: the
    project's files (its own directory named alike in every project), the environment and
    the arguments. Only what the session wrote is kept: pins, persistent cache, report."""

    KEPT = ("pins", "jaxcache", "report.json")
    # what pytester writes beside a session it runs (its output, its temporary directories)
    NOT_INPUT = (*KEPT, "stdout", "stderr")

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def pin_update(self, project: JaxProject, args: tuple[str, ...]) -> PinSetup:
        stored = self.directory / self._fingerprint(project.path, args)
        if stored.is_dir():
            for name in self.KEPT:
                _copy(stored / name, project.path / name)
        else:
            setup = project.pin_session(args)
            scratch = stored.with_name(stored.name + ".partial")
            shutil.rmtree(scratch, ignore_errors=True)  # left by a test stopped mid-copy
            scratch.mkdir()
            for name in self.KEPT:
                _copy(project.path / name, scratch / name)
            (scratch / "setup.json").write_text(json.dumps(dataclasses.asdict(setup)))
            scratch.rename(stored)
        return PinSetup(**json.loads((stored / "setup.json").read_text()))

    @staticmethod
    def _fingerprint(path: Path, args: tuple[str, ...]) -> str:
        digest = hashlib.sha256(repr(args).encode())
        here = str(path).encode()
        for file in sorted(path.rglob("*")):
            parts = file.relative_to(path).parts
            if parts[0] in PinsMade.NOT_INPUT or parts[0].startswith("runpytest-"):
                continue
            if any(part.startswith(".") or part == "__pycache__" for part in parts):
                continue
            if file.is_file():
                digest.update(
                    b"\0".join(
                        [
                            str(file.relative_to(path)).encode(),
                            file.read_bytes().replace(here, b"<project>"),
                            b"",
                        ]
                    )
                )
        for name, value in sorted(os.environ.items()):
            if name not in ("PYTEST_CURRENT_TEST", "PYTEST_DEBUG_TEMPROOT"):  # set per test
                digest.update(f"{name}={value}\0".replace(str(path), "<project>").encode())
        return digest.hexdigest()[:32]


def _copy(source: Path, target: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, target)
    elif source.is_file():
        shutil.copy2(source, target)


RENDEZVOUS = """
import os
import time
from pathlib import Path


def meet(directory, name, parties=2, timeout=120.0):
    \"\"\"Wait until `parties` processes have arrived here (files in `directory`).\"\"\"
    here = Path(directory)
    here.mkdir(parents=True, exist_ok=True)
    (here / f"{name}.{os.getpid()}").touch()
    deadline = time.monotonic() + timeout
    while len(list(here.iterdir())) < parties:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name}: only {len(list(here.iterdir()))} of {parties} arrived")
        time.sleep(0.01)
"""

_FIGURE = re.compile(r"\d+\.\d+")
# The compile share of a serial session, or the workers' sum beside the wall under -n N
# (the compile time's, the gate's own and the pairing's).
_SHARE = re.compile(
    r" \(\d+%\)| of the session's N s| summed over \d+ workers(, session N s wall| \(session N s "
    r"wall\))?"
)
_DURATION = re.compile(r"\s+N s  ")  # a --compile-durations line: ranked by measured time
# A profile's phase reads "0.3 ms" under a tenth of a second and "1.234 s" above: which unit
# a phase gets depends on how long it took this time, so both mask alike.
_UNIT = re.compile(r"\bN ms\b")


# The sentence before the re-pin command a failing session prints
INTENDED = "If the change is intended, re-pin and commit the pin files: "


def printed_repin(output: str, sentence: str) -> list[str]:
    """The re-pin command printed after `sentence`, as a shell would split it, less
    ``pytest`` and the variables it sets before it (``JAXCOMPILE_HARDWARE=...``), which must
    be this process's own: the session it starts runs with them as printed."""
    (line,) = [line for line in output.splitlines() if line.startswith(sentence)]
    words = shlex.split(line.removeprefix(sentence))
    while words and "=" in words[0] and not words[0].startswith("-"):
        name, value = words.pop(0).split("=", 1)
        assert os.environ.get(name) == value, line
    assert words[:2] == ["pytest", "--compile-pin-update"], line
    return words[1:]


def compile_summary(result: pytest.RunResult) -> list[str]:
    """The lines of the `jax compile times` section, up to pytest's closing line."""
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if "jax compile times" in line)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("=")), len(lines))
    return lines[start + 1 : end]


_PASSES = re.compile(r"((?:longest|grew most|shrank most) of XLA's HLO passes: )[^;]*")
# Whether a profile's phases are the compile's own (no phase larger than its seconds) or the
# fresh profiling compile's is a measurement too (gate/profile.py)
_PHASES_OF = re.compile(
    r"phases of (?:the compile's N s(?: -> N s)?|the fresh compile made to profile it)"
)


def mask_figures(lines: list[str]) -> list[str]:
    """Measured figures differ between runs; everything else must not. So do the compile
    share of the session, the order of the --compile-durations lists, which of XLA's
    passes a compile profile names (those that took longest, or moved most, this time) and
    which compile its phases are of."""
    masked = [
        _PHASES_OF.sub(
            "phases of C",
            _PASSES.sub(r"\1P", _SHARE.sub("", _UNIT.sub("N s", _FIGURE.sub("N", line)))),
        )
        for line in lines
    ]
    return [line for line in masked if not _DURATION.match(line)]


# The suite's tiers (docs/testing.md), slowest first: each test belongs to exactly one.
# `instruments` (valgrind's counts, the browser) and `integration` (a real JAX process: a
# pytester session, a fresh Python, JAX compiling in this process) are marked; a test that
# uses `pytester` is integration without a mark; every other test is `logic`: in-process,
# on records, pins and reports, and it may start no process (`_logic_starts_no_process`).
TIERS = ("instruments", "integration", "logic")


def tier_of(item: pytest.Item) -> str:
    for tier in TIERS:
        if item.get_closest_marker(tier) is not None:
            return tier
    return "integration" if "pytester" in getattr(item, "fixturenames", ()) else "logic"


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by tier
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its tier and run the slowest tier first, so that pytest-xdist
    hands out the long tests while the short ones are left to even the end (a stable sort:
    a shuffled order, `-p randomly`, is kept within each tier)."""
    for item in items:
        tier = tier_of(item)
        if item.get_closest_marker(tier) is None:
            item.add_marker(tier)
    items.sort(key=lambda item: TIERS.index(tier_of(item)))


def needs_valgrind(test: Callable[..., None]) -> Callable[..., None]:
    """A test that counts under real valgrind: the instruments tier, skipped (naming the
    install) where valgrind is missing; CI installs it (.ci/tools) so it never skips there."""
    missing = shutil.which("valgrind") is None or shutil.which("callgrind_control") is None
    skip = pytest.mark.skipif(
        missing,
        reason="valgrind (with callgrind_control) is not installed: apt-get install valgrind",
    )
    return pytest.mark.instruments(skip(test))


class _NoProcess:
    def __init__(self, *args: object, **kwargs: object) -> None:
        raise AssertionError(
            "a logic-tier test started a process: mark it integration (tests/conftest.py)"
        )


@pytest.fixture(autouse=True)
def _logic_starts_no_process(request: pytest.FixtureRequest) -> Iterator[None]:
    """The logic tier's promise, kept: its tests start no process (the quick command runs
    them in seconds)."""
    if tier_of(request.node) != "logic":
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess, "Popen", _NoProcess)
        yield


@pytest.fixture
def project(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, pins_made: PinsMade
) -> JaxProject:
    # The load gate reads the host's load; pin it low so verdicts under test do not depend
    # on what else this machine runs. Tests of the gate itself set their own value.
    monkeypatch.setenv("JAXCOMPILE_LOAD_PER_CORE", "0")
    return JaxProject(pytester, pins_made)


@pytest.fixture(scope="session")
def pins_made(tmp_path_factory: pytest.TempPathFactory) -> PinsMade:
    return PinsMade(tmp_path_factory.mktemp("pins-made"))


# The options of every session a test starts: file order (below), and without this suite's
# own Hypothesis plugin, which imports all of Hypothesis when pytest starts (a second of
# every inner session's start-up, on hundreds of them); no project a test makes uses it.
# Nor pytest-benchmark's (a test extra; no project a test makes benchmarks), nor pytest-cov's,
# where scripts/coverage.sh installed it: coverage itself measures those sessions
# (`patch = subprocess`). Each plugin's import is paid again by every session.
INNER_SESSION_OPTIONS = "-p no:randomly -p no:hypothesispytest -p no:benchmark -p no:pytest_cov"


@pytest.fixture(autouse=True)
def _inner_sessions_in_file_order(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sessions started by tests run their tests in file order.

    This suite itself runs in random order under pytest-randomly (a test extra); the
    projects its tests create are fixed inputs whose tests may depend on each other (one
    clobbers XLA_FLAGS for the next, one fills a persistent cache for the next). A test
    that wants them shuffled passes ``-p randomly``.
    """
    if "pytester" in request.fixturenames:
        request.getfixturevalue("pytester")  # it empties PYTEST_ADDOPTS when it starts
    monkeypatch.setenv("PYTEST_ADDOPTS", INNER_SESSION_OPTIONS)


@pytest.fixture(autouse=True)
def _outside_github_actions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sessions started by tests must not write into this job's own GitHub step summary."""
    for name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "GITHUB_WORKSPACE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _outside_this_suites_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sessions started by tests are not pytest-xdist workers, even when this suite runs
    under xdist (scripts/test.sh): xdist tells a worker who it is in the environment."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


def set_pins(pins_dir: Path, seconds: dict[str, float], tolerance: float) -> None:
    """Give the named tests' pins fixed figures, and every other pin a huge tolerance,
    so that verdicts are certain whatever the timing (trace and lowering not judged)."""
    for group in PinStore.load(pins_dir).groups():
        for (cell, transform), pin in list(group.pins.items()):
            name = cell.rsplit("::", 1)[-1]
            pin = dataclasses.replace(pin, trace_s=None, lower_s=None)
            if name in seconds:
                group.pins[(cell, transform)] = dataclasses.replace(pin, compile_s=seconds[name])
            else:
                group.pins[(cell, transform)] = dataclasses.replace(pin, tolerance=tolerance)
        group.path.write_text(group.render())


def edit_pins(pins_dir: Path, cache_state: str, fields: dict[str, dict[str, Any]]) -> None:
    """Set fields of the named tests' pins under one cache state (e.g. a fingerprint)."""
    for group in PinStore.load(pins_dir).groups():
        if group.key.cache_state != cache_state:
            continue
        for (cell, transform), pin in list(group.pins.items()):
            name = cell.rsplit("::", 1)[-1]
            if name in fields:
                group.pins[(cell, transform)] = dataclasses.replace(pin, **fields[name])
        group.path.write_text(group.render())


# Six tests, every verdict: the pins are edited after pinning so that each status is
# certain whatever the timing (cache off: every row is `none`, whoever compiles first).
PINNED_SUITE = """
    import jax
    from jaxmodels import mlp_example_args, mlp_loss

    def test_drift(jax_compile):
        jax_compile(jax.jit(mlp_loss), *mlp_example_args(), transform="jit")

    def test_improved(jax_compile):
        jax_compile(jax.jit(mlp_loss), *mlp_example_args(), transform="jit")

    def test_ok(jax_compile):
        jax_compile(jax.jit(mlp_loss), *mlp_example_args(), transform="jit")
        jax_compile(jax.value_and_grad(mlp_loss), *mlp_example_args(), transform="vag")

    def test_memory(jax_compile):
        lowered = jax.jit(mlp_loss).lower(*mlp_example_args())
        jax_compile(lowered, transform="first")
        lowered.compile()  # kept on the Lowered by every jax (0.4.30 keeps no fresh one)
        jax_compile(lowered, transform="again", fresh=False)

    def test_stale(jax_compile):
        jax_compile(jax.jit(mlp_loss), *mlp_example_args(), transform="jit")
        {gone}
"""
GONE = 'jax_compile(jax.grad(mlp_loss), *mlp_example_args(), transform="gone")'
UNPINNED = """
    def test_unpinned(jax_compile):
        jax_compile(jax.jit(mlp_loss), *mlp_example_args(), transform="jit")
"""
EXPECTED = {
    ("test_drift", "jit"): "DRIFT",
    ("test_improved", "jit"): "improved",
    ("test_ok", "jit"): "ok",
    ("test_ok", "vag"): "ok",
    ("test_memory", "first"): "ok",
    ("test_memory", "again"): "not judged",
    ("test_stale", "jit"): "ok",
    ("test_unpinned", "jit"): "unpinned",
}


def make_pinned_suite(project: JaxProject) -> None:
    project.conftest(cache=False)
    project.tests(PINNED_SUITE.replace("{gone}", GONE))
    project.pin_update().assert_outcomes(passed=5)
    set_pins(project.pins_dir, {"test_drift": 0.000001, "test_improved": 1000.0}, 1000.0)
    project.tests(PINNED_SUITE.replace("{gone}", "") + UNPINNED)


def report_shape(report: dict[str, object]) -> dict[str, object]:
    """Everything in a report that does not depend on timing or the process layout."""
    records = report["records"]
    assert isinstance(records, list)
    return {
        "gate": report["gate"],
        "stale": report["stale"],
        "ran_cells": report["ran_cells"],
        "environments": report["environments"],
        "lost": report["lost"],
        "records": [
            (
                r["cell"],
                r["transform"],
                r["cache_state"],
                r["fingerprint"],
                r["outcome"],
                r["location"],
            )
            for r in records
        ],
        "verdicts": [
            (v["cell"], v["transform"], v["status"], v["pin_file"]) for v in report["verdicts"]
        ],  # type: ignore[attr-defined]
    }
