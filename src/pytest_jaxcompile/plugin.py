"""pytest hooks, options and fixtures of pytest-jaxcompile; the logic lives elsewhere.

Nothing here imports jax at module level: a session that never uses the fixture or
the marker never pays for a JAX import.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Generator
from typing import Any

import pytest

from pytest_jaxcompile._version import __version__
from pytest_jaxcompile.budget import (
    MARKER_HELP,
    MARKER_NAME,
    CompileBudget,
    merge_budgets,
    over_budget,
    parse_budget,
)
from pytest_jaxcompile.gate import Identity, conclude, ordered
from pytest_jaxcompile.github import MODES as GITHUB_MODES
from pytest_jaxcompile.github import (
    GitHubTargets,
    annotation_commands,
    append_step_summary,
    record_path_resolver,
    step_summary,
)
from pytest_jaxcompile.measure import JaxCompile, JaxEnvironment, TestContext
from pytest_jaxcompile.monitor import CompileMonitor
from pytest_jaxcompile.pins import PinFileError, PinStore
from pytest_jaxcompile.records import CompileRecord
from pytest_jaxcompile.reporting import (
    SessionOutcome,
    build_report,
    junit_properties,
    summary_lines,
    write_report,
)
from pytest_jaxcompile.settings import Settings, non_negative_float

PLUGIN_NAME = "jaxcompile-session"
WORKER_OUTPUT_KEY = "jaxcompile"
plugin_key = pytest.StashKey["JaxCompilePlugin"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("jaxcompile", "compile-time gate for JAX/XLA (pytest-jaxcompile)")
    group.addoption(
        "--compile-pin-update", action="store_true", default=False,
        help="write this session's measured compile rows into the pins (never fails on drift).",
    )
    group.addoption(
        "--compile-pins-dir", default=None, metavar="DIR",
        help="directory of pin files (default: ini compile_pins_dir, else 'pins' in rootdir).",
    )
    group.addoption(
        "--compile-tolerance", type=non_negative_float, default=None, metavar="FRACTION",
        help="relative slowdown over the pin that counts as DRIFT (default: 0.5 = +50%%).",
    )
    group.addoption(
        "--compile-floor", type=non_negative_float, default=None, metavar="SECONDS",
        help="absolute slowdown a row must also exceed to be DRIFT (default: 0.25 s).",
    )
    group.addoption(
        "--compile-hardware", default=None, metavar="NAME",
        help="hardware name for the comparability key, for a pool of identical runners "
        "(also env JAXCOMPILE_HARDWARE, ini compile_hardware).",
    )
    group.addoption(
        "--compile-fail-on-improvement", action="store_true", default=False,
        help="also fail the session when a row compiles faster than its pin beyond tolerance.",
    )
    group.addoption(
        "--compile-report", default=None, metavar="PATH",
        help="write the session's compile records and verdicts as JSON to PATH.",
    )
    group.addoption(
        "--compile-github", default=None, choices=GITHUB_MODES,
        help="GitHub Actions output: 'auto' (default) appends a Markdown summary to "
        "$GITHUB_STEP_SUMMARY and prints annotations when $GITHUB_ACTIONS is 'true'; 'off'.",
    )
    parser.addini("compile_pins_dir", "directory of pin files, relative to rootdir", default="")
    parser.addini("compile_tolerance", "relative drift tolerance (default 0.5)", default="")
    parser.addini("compile_floor", "absolute drift floor in seconds (default 0.25)", default="")
    parser.addini("compile_hardware", "hardware name override for the comparability key",
                  default="")
    parser.addini("compile_fail_on_improvement", "fail on improved rows too", type="bool",
                  default=False)
    parser.addini("compile_report", "path of the JSON report, relative to rootdir", default="")
    parser.addini("compile_mixed_precision", "default mixed_precision of compile rows",
                  type="bool", default=False)
    parser.addini("compile_github", "GitHub Actions output: auto or off (default auto)",
                  default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    plugin = JaxCompilePlugin(config, Settings.from_config(config))
    config.stash[plugin_key] = plugin
    config.pluginmanager.register(plugin, PLUGIN_NAME)
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistHooks(plugin), f"{PLUGIN_NAME}-xdist")


def pytest_unconfigure(config: pytest.Config) -> None:
    plugin = config.stash.get(plugin_key, None)
    if plugin is not None:
        plugin.monitor.uninstall()
        del config.stash[plugin_key]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Bad compile_budget arguments are a collection error of the test that has them."""
    try:
        budget_of(metafunc.definition)
        problem = None
    except ValueError as error:
        problem = f"{metafunc.definition.nodeid}: {error}"
    if problem is not None:  # outside the except: no chained traceback in the report
        pytest.fail(problem, pytrace=False)


def budget_of(node: pytest.Item) -> CompileBudget:
    return merge_budgets(
        parse_budget(marker.args, marker.kwargs) for marker in node.iter_markers(MARKER_NAME)
    )


@pytest.fixture
def jax_compile(request: pytest.FixtureRequest) -> JaxCompile:
    """Measure compiles: ``jax_compile(lowered)`` or ``jax_compile(fn, *args)``.

    Returns the ``jax.stages.Compiled``; each call is one transform row of this test.
    """
    plugin = request.config.stash[plugin_key]
    node = request.node
    assert isinstance(node, pytest.Item)
    return plugin.probe_for(node)


class JaxCompilePlugin:
    """Session state: the records measured, the pins, and the verdicts."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.monitor = CompileMonitor()
        self.records: list[CompileRecord] = []
        self.ran_cells: set[str] = set()
        self.store: PinStore | None = None
        self.outcome: SessionOutcome | None = None
        self.worker_identities: set[Identity] = set()  # environments xdist workers ran in
        self.workers_merged: set[str] = set()
        self.workers_lost: set[str] = set()
        self.lost: list[str] = []
        self.github_problem: str | None = None
        self.report_problem: str | None = None
        self._records_by_cell: dict[str, list[CompileRecord]] = {}
        self._environment: JaxEnvironment | None = None

    @property
    def is_xdist_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    def environment(self) -> JaxEnvironment:
        if self._environment is None:
            self._environment = JaxEnvironment.detect(self.settings.hardware_override)
        return self._environment

    def add_record(self, record: CompileRecord) -> None:
        self.records.append(record)
        self._records_by_cell.setdefault(record.cell, []).append(record)

    def records_of(self, cell: str) -> list[CompileRecord]:
        return self._records_by_cell.get(cell, [])

    def probe_for(self, item: pytest.Item) -> JaxCompile:
        budget = budget_of(item)
        path, line, _ = item.location
        mixed = budget.mixed_precision
        context = TestContext(
            cell=item.nodeid,
            mixed_precision=self.settings.mixed_precision_default if mixed is None else mixed,
            tolerance=budget.tolerance,
            location=(path, (line or 0) + 1),
        )

        def measured(record: CompileRecord) -> None:
            self.add_record(record)
            # Appended as soon as the row exists, so a test that fails later keeps it;
            # junitxml writes them as <property> elements (also from xdist workers).
            item.user_properties.extend(junit_properties(record))

        return JaxCompile(self.monitor, self.environment, context, measured)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.is_xdist_worker:
            return
        try:
            self.store = PinStore.load(self.settings.pins_dir)
        except PinFileError as error:
            raise pytest.UsageError(
                f"pytest-jaxcompile: cannot read pin file {error}\n"
                "Fix the file by hand or restore it from version control "
                "(it was left as it is)."
            ) from None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        result = yield
        problems = over_budget(budget_of(item), self.records_of(item.nodeid))
        if problems:
            pytest.fail("\n".join(problems), pytrace=False)
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if report.when == "call" and not report.skipped:
            self.ran_cells.add(item.nodeid)
        if report.when == "call":
            outcome: str | None = report.outcome
        else:
            outcome = "error" if report.failed else None
        if outcome is not None:
            for record in self.records_of(item.nodeid):
                # A failure or error is never overwritten by a later passing phase.
                if record.outcome in (None, "passed"):
                    record.outcome = outcome
        return report

    def worker_payload(self) -> dict[str, Any]:
        """What an xdist worker sends to the controller (plain JSON-able data)."""
        return {
            "records": [record.to_dict() for record in self.records],
            "ran_cells": sorted(self.ran_cells),
            "identities": [list(identity) for identity in sorted(self.measured_identities())],
        }

    def merge_worker_output(self, worker: str, output: dict[str, Any]) -> None:
        """Take one worker's rows, once (xdist may report a node down twice)."""
        if worker in self.workers_merged:
            return
        payload = output.get(WORKER_OUTPUT_KEY)
        if payload is None:
            return
        self.workers_merged.add(worker)
        for data in payload.get("records", []):
            self.add_record(CompileRecord.from_dict(data))
        self.ran_cells.update(payload.get("ran_cells", []))
        self.worker_identities.update(
            (str(hardware), str(jax)) for hardware, jax in payload.get("identities", [])
        )

    def worker_lost(self, worker: str, error: object) -> None:
        if worker not in self.workers_merged and worker not in self.workers_lost:
            self.workers_lost.add(worker)
            self.lost.append(
                f"pytest-xdist worker {worker} went down ({error}) before it sent its compile "
                "rows; rows of the tests it ran are not judged"
            )

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.is_xdist_worker:
            workeroutput: dict[str, Any] = self.config.workeroutput  # type: ignore[attr-defined]
            workeroutput[WORKER_OUTPUT_KEY] = self.worker_payload()
            return
        if self.store is None:  # the session ended before it started (e.g. usage error)
            return
        self.outcome = conclude(
            self.records,
            self.ran_cells,
            self.measured_identities() | self.worker_identities,
            self.store,
            self.settings.gate,
            rootdir=self.config.rootpath,
        )
        self.outcome.lost = list(self.lost)
        if self.settings.report_path is not None:
            try:
                write_report(
                    self.settings.report_path,
                    build_report(self.outcome, ordered(self.records), __version__),
                )
            except OSError as error:  # CI would upload nothing: that must not pass quietly
                self.report_problem = (
                    f"compile report NOT written to {self.settings.report_path}: {error}"
                )
                if session.exitstatus == pytest.ExitCode.OK:
                    session.exitstatus = pytest.ExitCode.TESTS_FAILED
        github = self.github_targets()
        if github.step_summary is not None and self.outcome.has_news():
            try:
                append_step_summary(github.step_summary, step_summary(self.outcome))
            except OSError as error:
                self.github_problem = f"GitHub step summary not written: {error}"
        if self.outcome.failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def github_targets(self) -> GitHubTargets:
        return GitHubTargets.from_environment(os.environ, self.settings.github)

    def measured_identities(self) -> set[Identity]:
        """(hardware, jax_version) this process ran under, also when it measured nothing."""
        identities = {(record.hardware, record.jax_version) for record in self.records}
        if self._environment is None and not identities and "jax" in sys.modules:
            self.environment()  # jax is loaded anyway: the tests ran without measuring
        if self._environment is not None:
            identities.add((self._environment.hardware.name, self._environment.jax_version))
        return identities

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        outcome = self.outcome
        if outcome is None:
            return
        problems = [(self.report_problem, {"red": True, "bold": True}),
                    (self.github_problem, {"yellow": True})]
        if not outcome.has_news() and not any(text for text, _ in problems):
            return
        terminalreporter.write_sep("=", "jax compile times")
        verbose = self.config.get_verbosity() > 0
        lines = summary_lines(outcome, verbose) if outcome.has_news() else []
        for text, markup in lines + [(text, markup) for text, markup in problems if text]:
            terminalreporter.write_line(text, **markup)
        github = self.github_targets()
        if github.annotations and outcome.has_news():
            path_of = record_path_resolver(self.config.rootpath, github.workspace)
            for command in annotation_commands(outcome, path_of, github.workspace):
                terminalreporter.write_line(command)  # a workflow command: no markup


class XdistHooks:
    """Registered only when pytest-xdist is installed: its hooks exist only then."""

    def __init__(self, plugin: JaxCompilePlugin) -> None:
        self._plugin = plugin

    def pytest_testnodedown(self, node: Any, error: object) -> None:
        worker = str(getattr(getattr(node, "gateway", None), "id", None) or id(node))
        output = getattr(node, "workeroutput", None)
        if output:
            self._plugin.merge_worker_output(worker, output)
        if error is not None:
            self._plugin.worker_lost(worker, error)
