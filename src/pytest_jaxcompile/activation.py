"""When a session uses the plugin, and starting the session's machinery then.

The entry point (`plugin`) keeps one `Activation` per pytest config (in its stash) and hands
it its hooks. A project that never uses the plugin pays for the option table and this module
only: the session collector, the backends and the outputs are imported and registered the
first time the session uses them (`Activation.start`):

- at configuration: the pins directory exists, or an option was given (`options.given`);
- at collection: a test has the ``compile_budget`` marker or requests a measuring fixture;
- on a pytest-xdist controller (which collects nothing): when a worker sends rows;
- a measuring fixture requested another way (``request.getfixturevalue``).

Nothing here imports jax or torch.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_jaxcompile._constants import (
    FIXTURES,
    MARKER_NAME,
    WORKER_INPUT_COUNTED_KEY,
    WORKER_OUTPUT_KEY,
    XLA_FLAGS_AT_REGISTRATION_KEY,
    XLA_FLAGS_ENV,
    XLA_FLAGS_SINCE_PLUGIN_LOAD,
    XLA_FLAGS_SINCE_PROCESS_START,
)
from pytest_jaxcompile.options import OPTIONS, given

if TYPE_CHECKING:
    from pytest_jaxcompile.session import SessionCollector

ACTIVATION_KEY = pytest.StashKey["Activation"]()
PLUGIN_NAME = "jaxcompile-session"
PINS_DIR_OPTION = "compile_pins_dir"


def in_use(config: pytest.Config, namespace: argparse.Namespace | None = None) -> bool:
    """Whether the session uses the plugin before any test is collected: an option was
    given (``namespace``: pytest's early parse), or the default pins directory exists."""
    if given(config, namespace):
        return True
    (pins_dir,) = (option for option in OPTIONS if option.name == PINS_DIR_OPTION)
    return Path(config.rootpath, str(pins_dir.default)).is_dir()


def uses(item: pytest.Item) -> bool:
    """Whether a collected test uses the plugin: the marker, or a measuring fixture."""
    fixtures = getattr(item, "fixturenames", ())
    return item.get_closest_marker(MARKER_NAME) is not None or not FIXTURES.isdisjoint(fixtures)


def keep_xla_flags_at_registration(pluginmanager: pytest.PytestPluginManager) -> None:
    """Keep ``XLA_FLAGS`` as they are when the plugin registers (its module just imported,
    the earliest moment pytest runs any of its code), to tell a change by a plugin loaded
    after it from one by a plugin loaded before."""
    config = pluginmanager.get_plugin("pytestconfig")
    if isinstance(config, pytest.Config):
        config.stash[XLA_FLAGS_AT_REGISTRATION_KEY] = os.environ.get(XLA_FLAGS_ENV)


def xla_flags_at_process_start(config: pytest.Config) -> tuple[bool, str | None]:
    """``XLA_FLAGS`` in the environment this process started with, which no plugin can
    change (``/proc/self/environ``, Linux): (known, value). Unknown on another system, and
    for a session that is not the process's own command line (pytester's in-process run,
    an xdist worker: its process started with another's environment)."""
    if tuple(config.invocation_params.args) != tuple(sys.argv[1:]):
        return False, None
    try:
        with open("/proc/self/environ", "rb") as environ:
            entries = environ.read().split(b"\0")
    except OSError:
        return False, None
    prefix = f"{XLA_FLAGS_ENV}=".encode()
    found = [entry[len(prefix) :] for entry in entries if entry.startswith(prefix)]
    return True, found[0].decode(errors="replace") if found else None


def xla_flags_baseline(
    config: pytest.Config,
) -> tuple[str | None, str, tuple[tuple[str, str | None], ...]]:
    """The settings guard's ``XLA_FLAGS`` baseline, taken before any ``conftest.py`` and,
    where it can be known, before any plugin: (the value, since when, the changes seen since
    then, each (where, value)). A wrapper loaded as a plugin (``-p wrapper``, an entry
    point) that overwrote the variable at import is such a change, named."""
    now = os.environ.get(XLA_FLAGS_ENV)
    registered = XLA_FLAGS_AT_REGISTRATION_KEY in config.stash
    at_registration = config.stash.get(XLA_FLAGS_AT_REGISTRATION_KEY, now)
    known, at_start = xla_flags_at_process_start(config)
    if not known:
        at_start, since = at_registration, XLA_FLAGS_SINCE_PLUGIN_LOAD
    else:
        since = XLA_FLAGS_SINCE_PROCESS_START
    changes: list[tuple[str, str | None]] = []
    if registered and at_registration != at_start:
        named = _plugin_args(config)
        before = f"a plugin loaded before pytest-jaxcompile ({named or 'an entry point'})"
        changes.append(
            (before + ("" if named else " or the program that started pytest"), at_registration)
        )
    if now != at_registration:
        changes.append(
            ("a plugin loaded after pytest-jaxcompile (an entry point or PYTEST_PLUGINS)", now)
        )
    return at_start, since, tuple(changes)


def _plugin_args(config: pytest.Config) -> str:
    """The ``-p NAME`` plugins of the command line (``no:`` ones left out), as given."""
    args, names = list(config.invocation_params.args), []
    for index, arg in enumerate(args):
        name = args[index + 1] if arg == "-p" and index + 1 < len(args) else None
        if arg.startswith("-p") and arg != "-p":
            name = arg[2:].lstrip("=")
        if name and not name.startswith("no:"):
            names.append(f"-p {name}")
    return ", ".join(names)


class Activation:
    """Starts the session's machinery once, at the first sign that the session uses it."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.collector: SessionCollector | None = None
        self._session: pytest.Session | None = None

    def start(self) -> SessionCollector:
        """The session collector, registered with its outputs on the first call."""
        if self.collector is None:
            self.collector = _register(self.config)
            if self._session is not None:  # registered after pytest_sessionstart ran
                self.collector.pytest_sessionstart(self._session)
        return self.collector

    def session_started(self, session: pytest.Session) -> None:
        """pytest_sessionstart (first): a collector started later starts its session."""
        self._session = session

    def collected(self, items: list[pytest.Item]) -> None:
        """pytest_collection_modifyitems (last, after deselection): the tests that will run."""
        if self.collector is None and any(uses(item) for item in items):
            self.start()

    # pytest-xdist's controller (`XdistHooks`, registered only where xdist is installed)
    def configure_worker(self, node: Any) -> None:
        """Each worker learns which tests have a pinned compile count (only the controller
        reads the pins; without pins the session has not started, and there are none)."""
        if self.collector is not None:
            node.workerinput[WORKER_INPUT_COUNTED_KEY] = sorted(self.collector.counted_cells)

    def worker_down(self, node: Any, error: object) -> None:
        worker = str(getattr(getattr(node, "gateway", None), "id", None) or id(node))
        output = getattr(node, "workeroutput", None) or {}
        if WORKER_OUTPUT_KEY in output:  # the worker's tests used the plugin
            self.start().merge_worker_output(worker, output)
        if error is not None and self.collector is not None:
            self.collector.worker_lost(worker, error)


class XdistHooks:
    """pytest-xdist's hooks, registered only where xdist is installed: its hooks exist only
    then, and a project without it registers nothing."""

    def __init__(self, activation: Activation) -> None:
        self._activation = activation

    def pytest_configure_node(self, node: Any) -> None:
        self._activation.configure_worker(node)

    def pytest_testnodedown(self, node: Any, error: object) -> None:
        self._activation.worker_down(node, error)


def _register(config: pytest.Config) -> SessionCollector:
    """The session collector and each enabled output, registered with pytest."""
    from pytest_jaxcompile.backends.jax.backendstart import watch
    from pytest_jaxcompile.session import COLLECTOR_KEY, SessionCollector

    watch(config)  # already watching since start-up where the session was known to use it
    from pytest_jaxcompile.resolved import Settings

    settings = Settings.from_config(config)
    collector = SessionCollector(config, settings)
    config.stash[COLLECTOR_KEY] = collector
    manager = config.pluginmanager
    manager.register(collector, PLUGIN_NAME)
    if collector.is_xdist_worker:
        return collector  # workers send their rows; only the controller concludes and writes
    for message in settings.implausible:
        config.issue_config_time_warning(pytest.PytestConfigWarning(message), stacklevel=2)
    from pytest_jaxcompile.output.terminal import TerminalSummary

    manager.register(TerminalSummary(config, settings.durations), f"{PLUGIN_NAME}-terminal")
    if settings.suggest_budgets:
        from pytest_jaxcompile.output.terminal import BudgetSuggestions

        manager.register(BudgetSuggestions(config, settings.count_eager), f"{PLUGIN_NAME}-budgets")
    if settings.report_path is not None:
        from pytest_jaxcompile.gate.conclude import ordered
        from pytest_jaxcompile.output.json_report import ReportWriter

        manager.register(
            ReportWriter(
                config,
                settings.report_path,
                lambda: (ordered(collector.rows.records), list(collector.rows.ledgers.values())),
            ),
            f"{PLUGIN_NAME}-report",
        )
    if settings.record_dir is not None:
        from pytest_jaxcompile.corpus.store import RecordDirWriter
        from pytest_jaxcompile.gate.conclude import ordered

        manager.register(
            RecordDirWriter(
                config,
                settings.record_dir,
                lambda: ordered(collector.rows.records),
                lambda: list(collector.rows.ledgers.values()),
            ),
            f"{PLUGIN_NAME}-record-dir",
        )
    if settings.artifacts_dir is not None:
        from pytest_jaxcompile.output.artifacts import ArtifactWriter

        manager.register(ArtifactWriter(config, settings.artifacts_dir), f"{PLUGIN_NAME}-artifacts")
    from pytest_jaxcompile.output.github import GitHubOutput, GitHubTargets

    targets = GitHubTargets.from_environment(os.environ, settings.github)
    if targets.active:
        manager.register(GitHubOutput(config, targets), f"{PLUGIN_NAME}-github")
    return collector
