"""pytest hooks, options and fixtures of pytest-jaxcompile; the logic lives elsewhere.

Nothing here imports jax at module level: a session that never uses the fixture or
the marker never pays for a JAX import.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Generator
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

from pytest_jaxcompile._version import __version__
from pytest_jaxcompile.backends.jax.census import (
    CENSUS_SOURCE,
    build_ledger,
    census_records,
    recompile_problems,
    unique_names,
)
from pytest_jaxcompile.backends.jax.guard import (
    XLA_FLAGS_ENV,
    Clobber,
    clobber_affects_requirements,
    find_clobbers,
    parse_xla_flags,
    platform_problem,
    settings_problems,
    snapshot_settings,
    uncacheable_reason,
)
from pytest_jaxcompile.backends.jax.measure import (
    CacheSettings,
    JaxCompile,
    JaxEnvironment,
    MeasureContext,
)
from pytest_jaxcompile.backends.jax.monitor import CompileMonitor, EventLog
from pytest_jaxcompile.backends.torch.measure import (
    FrameCompile,
    TorchCompile,
    TorchEnvironment,
)
from pytest_jaxcompile.backends.torch.measure import build_ledger as build_torch_ledger
from pytest_jaxcompile.backends.torch.measure import frame_records as torch_frame_records
from pytest_jaxcompile.backends.torch.measure import frames_since as torch_frames_since
from pytest_jaxcompile.backends.torch.measure import now_us as torch_now_us
from pytest_jaxcompile.backends.torch.measure import recompile_problems as torch_recompile_problems
from pytest_jaxcompile.corpus.commit import session_commit
from pytest_jaxcompile.corpus.commit import stamp as stamp_commit
from pytest_jaxcompile.corpus.store import write_session_records
from pytest_jaxcompile.gate.budget import (
    MARKER_HELP,
    MARKER_NAME,
    CompileBudget,
    merge_budgets,
    over_budget,
    parse_budget,
)
from pytest_jaxcompile.gate.conclude import Identity, conclude, ordered
from pytest_jaxcompile.gate.pins import PinFileError, PinStore
from pytest_jaxcompile.options import Settings, non_negative_float
from pytest_jaxcompile.output.github import MODES as GITHUB_MODES
from pytest_jaxcompile.output.github import (
    GitHubTargets,
    annotation_commands,
    append_step_summary,
    record_path_resolver,
    step_summary,
)
from pytest_jaxcompile.output.terminal import (
    SessionOutcome,
    build_report,
    junit_properties,
    relative,
    summary_lines,
    write_report,
)
from pytest_jaxcompile.records import CallLedger, CompileRecord

PLUGIN_NAME = "jaxcompile-session"
WORKER_OUTPUT_KEY = "jaxcompile"
plugin_key = pytest.StashKey["JaxCompilePlugin"]()
torch_probe_key = pytest.StashKey["TorchCompile"]()


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
        help="relative slowdown over the pin that counts as DRIFT (default: 0.75 = +75%%).",
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
        "--compile-census", action="store_true", default=False,
        help="record every compile of every test (tests marked compile_budget always are).",
    )
    group.addoption(
        "--compile-max-ops-growth", type=non_negative_float, default=None, metavar="FRACTION",
        help="fail rows whose module grew beyond this fraction over the pinned op count "
        "(deterministic; e.g. 0.1).",
    )
    group.addoption(
        "--compile-time-advisory", action="store_true", default=False,
        help="report time DRIFT without failing the session (gate on deterministic checks).",
    )
    group.addoption(
        "--compile-trace-profile", action="store_true", default=False,
        help="attribute each measured function's trace time to JAX, stdlib/numpy, the "
        "project and other packages (cProfile on one extra trace).",
    )
    group.addoption(
        "--compile-expect-warm", action="store_true", default=False,
        help="for jobs that restore a compilation cache: a cold row of a module unchanged "
        "since its warm pin is a cache regression (MISS) and fails.",
    )
    group.addoption(
        "--compile-repeat", type=int, default=None, metavar="N",
        help="compile each measured transform N times, caches cleared in between; the "
        "fastest is the figure, the spread is recorded (default 1).",
    )
    group.addoption(
        "--compile-metric", choices=("wall", "cpu"), default=None,
        help="what verdicts compare: wall seconds (default) or process CPU seconds.",
    )
    group.addoption(
        "--compile-max-load", type=non_negative_float, default=None, metavar="LOAD",
        help="rows measured above this 1-minute load per core are judged on CPU seconds, "
        "their wall seconds not judged (default 1.0).",
    )
    group.addoption(
        "--compile-strict", action="store_true", default=False,
        help="judge the wall seconds of rows measured above --compile-max-load too.",
    )
    group.addoption(
        "--compile-record-dir", default=None, metavar="DIR",
        help="append this session's compile records to DIR, as a new JSON lines file "
        "(the results corpus read by the pytest-jaxcompile command).",
    )
    group.addoption(
        "--compile-github", default=None, choices=GITHUB_MODES,
        help="GitHub Actions output: 'auto' (default) appends a Markdown summary to "
        "$GITHUB_STEP_SUMMARY and prints annotations when $GITHUB_ACTIONS is 'true'; 'off'.",
    )
    parser.addini("compile_pins_dir", "directory of pin files, relative to rootdir", default="")
    parser.addini("compile_tolerance", "relative drift tolerance (default 0.75)", default="")
    parser.addini("compile_floor", "absolute drift floor in seconds (default 0.25)", default="")
    parser.addini("compile_hardware", "hardware name override for the comparability key",
                  default="")
    parser.addini("compile_fail_on_improvement", "fail on improved rows too", type="bool",
                  default=False)
    parser.addini("compile_report", "path of the JSON report, relative to rootdir", default="")
    parser.addini("compile_record_dir",
                  "results directory for the session's records, relative to rootdir",
                  default="")
    parser.addini("compile_mixed_precision", "default mixed_precision of compile rows",
                  type="bool", default=False)
    parser.addini("compile_census", "record every compile of every test", type="bool",
                  default=False)
    parser.addini("compile_max_ops_growth", "default op-count growth gate (fraction)",
                  default="")
    parser.addini("compile_time_advisory", "time DRIFT does not fail the session",
                  type="bool", default=False)
    parser.addini("compile_expect_warm", "cold rows of unchanged modules fail (MISS)",
                  type="bool", default=False)
    parser.addini("compile_required_xla_flags",
                  "XLA flags every compile must run with, e.g. --xla_gpu_autotune_level=0",
                  type="linelist", default=[])
    parser.addini("compile_require_cache", "every compile must use a persistent cache",
                  type="bool", default=False)
    parser.addini("compile_require_cacheable",
                  "every compiled module must be persistent-cacheable", type="bool",
                  default=False)
    parser.addini("compile_expected_platform", "gpu, tpu or cpu: fail on a silent fallback",
                  default="")
    parser.addini("compile_repeat", "fresh compiles per transform (default 1)", default="")
    parser.addini("compile_metric", "wall (default) or cpu", default="")
    parser.addini("compile_max_load", "load per core above which rows are judged on CPU (1.0)",
                  default="")
    parser.addini("compile_strict", "judge noisy rows too", type="bool", default=False)
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


@pytest.fixture
def torch_compile(request: pytest.FixtureRequest) -> TorchCompile:
    """Measure ``torch.compile``: ``torch_compile(model_or_fn, *example_inputs, **kwargs)``.

    Compiles, runs the first call and returns the compiled callable; each compiled frame
    is a row of this test. Needs torch (``pip install pytest-jaxcompile[torch]``).
    """
    plugin = request.config.stash[plugin_key]
    node = request.node
    assert isinstance(node, pytest.Item)
    return plugin.torch_probe_for(node)


class JaxCompilePlugin:
    """Session state: the records measured, the pins, and the verdicts."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.monitor = CompileMonitor()
        self.records: list[CompileRecord] = []
        self.ledgers: dict[str, CallLedger] = {}
        self.ran_cells: set[str] = set()
        self.store: PinStore | None = None
        self.outcome: SessionOutcome | None = None
        self.record_file: Path | None = None
        self.record_error: str | None = None
        self.worker_identities: set[Identity] = set()  # environments xdist workers ran in
        self.workers_merged: set[str] = set()
        self.workers_lost: set[str] = set()
        self.lost: list[str] = []
        self.github_problem: str | None = None
        self.report_problem: str | None = None
        self._records_by_cell: dict[str, list[CompileRecord]] = {}
        self.start_settings: dict[str, Any] = {}
        self._environment: JaxEnvironment | None = None
        self._torch_environment: TorchEnvironment | None = None

    @property
    def is_xdist_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    def environment(self) -> JaxEnvironment:
        if self._environment is None:
            self._environment = JaxEnvironment.detect(self.settings.hardware_override)
        problem = platform_problem(
            self.settings.requirements.platform, self._environment.hardware.platform
        )
        if problem is not None:  # every measurement fails, before it makes a row
            pytest.fail(problem, pytrace=False)
        return self._environment

    def add_record(self, record: CompileRecord) -> None:
        self.records.append(record)
        self._records_by_cell.setdefault(record.cell, []).append(record)

    def records_of(self, cell: str) -> list[CompileRecord]:
        return self._records_by_cell.get(cell, [])

    def context_for(self, item: pytest.Item, budget: CompileBudget) -> MeasureContext:
        path, line, _ = item.location
        mixed = budget.mixed_precision
        return MeasureContext(
            cell=item.nodeid,
            mixed_precision=self.settings.mixed_precision_default if mixed is None else mixed,
            tolerance=budget.tolerance,
            max_ops_growth=budget.max_ops_growth,
            location=(path, (line or 0) + 1),
            project_root=self.config.rootpath,
            trace_profile=self.settings.trace_profile,
            repeat=self.settings.repeat,
        )

    def probe_for(self, item: pytest.Item) -> JaxCompile:
        context = self.context_for(item, budget_of(item))
        return JaxCompile(
            self.monitor, self.environment, context, lambda record: self.measured(item, record)
        )

    def measured(self, item: pytest.Item, record: CompileRecord) -> None:
        self.add_record(record)
        # Appended as soon as the row exists, so a test that fails later keeps it;
        # junitxml writes them as <property> elements (also from xdist workers).
        item.user_properties.extend(junit_properties(record))

    def torch_environment(self) -> TorchEnvironment:
        if self._torch_environment is None:
            self._torch_environment = TorchEnvironment.detect(self.settings.hardware_override)
        problem = platform_problem(
            self.settings.requirements.platform, self._torch_environment.hardware.platform
        )
        if problem is not None:
            pytest.fail(problem.replace("JAX's default backend", "torch's device"), pytrace=False)
        return self._torch_environment

    def torch_probe_for(self, item: pytest.Item) -> TorchCompile:
        context = self.context_for(item, budget_of(item))
        probe = TorchCompile(
            self.torch_environment, context, lambda record: self.measured(item, record)
        )
        item.stash[torch_probe_key] = probe
        return probe

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # Snapshot what later compiles are compared with; JAX's own settings only when
        # the project already imported JAX (reading them must not import it).
        self.start_settings = (
            snapshot_settings()
            if "jax" in sys.modules
            else {"xla_flags": parse_xla_flags(os.environ.get(XLA_FLAGS_ENV))}
        )
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
        budget = budget_of(item)
        if not (self.settings.census or item.get_closest_marker(MARKER_NAME)):
            result = yield
            problems = over_budget(budget, self.records_of(item.nodeid))
        else:
            torch_since = torch_now_us()
            # JAX's events only when the suite imported JAX: a torch-only census must not
            # pay for (or depend on) a JAX import.
            capture = self.monitor.capture() if "jax" in sys.modules else nullcontext(None)
            with capture as log:
                start = time.perf_counter()
                try:
                    result = yield
                finally:  # a failing test keeps its census rows and its seconds
                    wall_s = time.perf_counter() - start
                    torch_frames = self.finish_torch_census(item, budget, torch_since)
                    self.finish_census(item, budget, log, wall_s, torch_frames)
            problems = over_budget(budget, self.records_of(item.nodeid))
            own = [m for m in log.module_compiles() if not m.nested] if log is not None else []
            problems += recompile_problems(budget.max_compiles, own)
            problems += torch_recompile_problems(budget.max_compiles, torch_frames)
        problems += self.requirement_problems(item, budget)
        if problems:
            pytest.fail("\n".join(problems), pytrace=False)
        return result

    def requirement_problems(self, item: pytest.Item, budget: CompileBudget) -> list[str]:
        """Required settings and cacheability, for every compile of this test."""
        requirements = self.settings.requirements
        cacheable = requirements.cacheable if budget.cacheable is None else budget.cacheable
        problems = []
        for record in self.records_of(item.nodeid):
            problems += settings_problems(record, requirements)
            reason = uncacheable_reason(record) if cacheable else None
            if reason is not None:
                problems.append(
                    f"transform {record.transform!r} can never be served from the persistent "
                    f"cache: {reason} (compile_budget(cacheable=True) / compile_require_cacheable)"
                )
        return problems

    def finish_torch_census(
        self, item: pytest.Item, budget: CompileBudget, since_us: int
    ) -> list[FrameCompile]:
        """torch frame compiles of the test, when the test used torch (never imported here)."""
        if "torch" not in sys.modules:
            return []
        probe = item.stash.get(torch_probe_key, None)
        measured = probe.frame_starts if probe is not None else set()
        frames = [f for f in torch_frames_since(since_us) if f.start_time_us not in measured]
        if frames:
            names = unique_names([frame.name for frame in frames])
            context = self.context_for(item, budget)
            for record in torch_frame_records(
                frames, names, context, self.torch_environment(), CENSUS_SOURCE
            ):
                self.measured(item, record)
        return frames

    def finish_census(
        self, item: pytest.Item, budget: CompileBudget, log: EventLog | None, wall_s: float,
        torch_frames: list[FrameCompile],
    ) -> None:
        """JAX census rows, and the test's ledger (torch's when only torch compiled)."""
        jax_compiles = [m for m in log.module_compiles() if not m.nested] if log else []
        if log is not None and jax_compiles:
            context = self.context_for(item, budget)
            cache = CacheSettings.current()
            for record in census_records(log, context, self.environment(), cache):
                self.measured(item, record)
        if torch_frames and not jax_compiles:
            self.ledgers[item.nodeid] = build_torch_ledger(torch_frames, item.nodeid, wall_s)
        elif log is not None:
            self.ledgers[item.nodeid] = build_ledger(log, item.nodeid, wall_s)

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
            # A failure or error is never overwritten by a later passing phase.
            for record in self.records_of(item.nodeid):
                if record.outcome in (None, "passed"):
                    record.outcome = outcome
            ledger = self.ledgers.get(item.nodeid)
            if ledger is not None and ledger.outcome in (None, "passed"):
                ledger.outcome = outcome
        return report

    def worker_payload(self) -> dict[str, Any]:
        """What an xdist worker sends to the controller (plain JSON-able data)."""
        return {
            "records": [record.to_dict() for record in self.records],
            "ledgers": [ledger.to_dict() for ledger in self.ledgers.values()],
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
        for data in payload.get("ledgers", []):
            ledger = CallLedger.from_dict(data)
            self.ledgers[ledger.cell] = ledger
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
            ledgers=self.ledgers.values(),
            clobbers=self.clobbers(),
        )
        self.outcome.lost = list(self.lost)
        if self.records and (
            self.settings.report_path is not None or self.settings.record_dir is not None
        ):  # one git call at most, and only in sessions that write records
            stamp_commit(self.records, session_commit(self.config.rootpath))
        if self.settings.report_path is not None:
            try:
                write_report(
                    self.settings.report_path,
                    build_report(
                        self.outcome, ordered(self.records), self.ledgers.values(), __version__
                    ),
                )
            except OSError as error:  # CI would upload nothing: that must not pass quietly
                self.report_problem = (
                    f"compile report NOT written to {self.settings.report_path}: {error}"
                )
        if self.settings.record_dir is not None:
            try:
                self.record_file = write_session_records(
                    self.settings.record_dir, ordered(self.records)
                )
            except OSError as error:
                self.record_error = (
                    f"{error.filename or self.settings.record_dir}: {error.strerror or error}"
                )
        github = self.github_targets()
        if github.step_summary is not None and self.outcome.has_news():
            try:
                append_step_summary(github.step_summary, step_summary(self.outcome))
            except OSError as error:
                self.github_problem = f"GitHub step summary not written: {error}"
        failed = (
            self.outcome.failed or self.record_error is not None
            or self.report_problem is not None
        )
        if failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def clobbers(self) -> list[Clobber]:
        """Settings that changed during the session; those affecting a requirement fail."""
        return [
            dataclasses.replace(
                clobber,
                fails=clobber_affects_requirements(clobber, self.settings.requirements),
            )
            for clobber in find_clobbers(self.start_settings, self.records)
        ]

    def github_targets(self) -> GitHubTargets:
        return GitHubTargets.from_environment(os.environ, self.settings.github)

    def measured_identities(self) -> set[Identity]:
        """(hardware, jax_version) this process ran under, also when it measured nothing."""
        identities = {(record.hardware, record.key.jax_version) for record in self.records}
        if self._environment is None and not identities and "jax" in sys.modules:
            self.environment()  # jax is loaded anyway: the tests ran without measuring
        if self._environment is not None:
            identities.add((self._environment.hardware.name, self._environment.jax_version))
        return identities

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        outcome = self.outcome
        if outcome is None:
            return
        problems = [
            (self.report_problem, {"red": True, "bold": True}),
            (self.github_problem, {"yellow": True}),
            (self.record_error and f"compile records NOT written: {self.record_error}; the "
             "session fails.", {"red": True, "bold": True}),
        ]
        if not outcome.has_news() and not any(text for text, _ in problems):
            return
        terminalreporter.write_sep("=", "jax compile times")
        verbose = self.config.get_verbosity() > 0
        lines = summary_lines(outcome, verbose) if outcome.has_news() else []
        for text, markup in lines + [(text, markup) for text, markup in problems if text]:
            terminalreporter.write_line(text, **markup)
        if self.record_file is not None:
            terminalreporter.write_line(
                f"compile records written: {relative(self.record_file, self.config.rootpath)}"
            )
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
