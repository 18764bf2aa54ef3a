"""pytest-jaxcompile's entry point: options, the marker, the fixtures, and what to register.

The work lives elsewhere: `session.SessionCollector` gathers rows and asks the gate for
the outcome; each output (terminal summary, JSON report, records dir, GitHub) is an object
registered in `pytest_configure` only when it is enabled. Nothing here imports jax or torch.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, cast

import pytest

from pytest_jaxcompile.gate.budget import MARKER_HELP, budget_of
from pytest_jaxcompile.options import Settings, add_pytest_options
from pytest_jaxcompile.session import (
    COLLECTOR_KEY,
    WORKER_INPUT_COUNTED_KEY,
    WORKER_OUTPUT_KEY,
    SessionCollector,
)

if TYPE_CHECKING:
    from pytest_jaxcompile.backends.jax.measure import JaxCompile
    from pytest_jaxcompile.backends.torch.measure import TorchCompile

__all__ = ["WORKER_OUTPUT_KEY", "SessionCollector"]

PLUGIN_NAME = "jaxcompile-session"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_pytest_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """Keep XLA_FLAGS as they are before any conftest.py, and watch for JAX's backend start
    (XLA_FLAGS as XLA reads them) before a conftest.py can import JAX; imports no JAX."""
    from pytest_jaxcompile.backends.jax.backendstart import watch

    watch(early_config)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    settings = Settings.from_config(config)
    collector = SessionCollector(config, settings)
    config.stash[COLLECTOR_KEY] = collector
    manager = config.pluginmanager
    manager.register(collector, PLUGIN_NAME)
    if manager.hasplugin("xdist"):
        manager.register(XdistHooks(collector), f"{PLUGIN_NAME}-xdist")
    if collector.is_xdist_worker:
        return  # workers send their rows; only the controller concludes and writes
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


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Bad compile_budget arguments are a collection error of the test that has them."""
    try:
        budget_of(metafunc.definition)
        problem = None
    except ValueError as error:
        problem = f"{metafunc.definition.nodeid}: {error}"
    if problem is not None:  # outside the except: no chained traceback in the report
        pytest.fail(problem, pytrace=False)


@pytest.fixture
def jax_compile(request: pytest.FixtureRequest) -> JaxCompile:
    """Measure compiles: ``jax_compile(lowered)`` or ``jax_compile(fn, *args)``.

    Returns the ``jax.stages.Compiled``; each call is one transform row of this test.
    """
    node = request.node
    assert isinstance(node, pytest.Item)
    return cast("JaxCompile", request.config.stash[COLLECTOR_KEY].probe("jax", node))


@pytest.fixture
def torch_compile(request: pytest.FixtureRequest) -> TorchCompile:
    """Measure ``torch.compile``: ``torch_compile(model_or_fn, *example_inputs, **kwargs)``.

    Compiles, runs the first call and returns the compiled callable; each compiled frame
    is a row of this test. Needs torch (``pip install pytest-jaxcompile[torch]``).
    """
    node = request.node
    assert isinstance(node, pytest.Item)
    return cast("TorchCompile", request.config.stash[COLLECTOR_KEY].probe("torch", node))


class XdistHooks:
    """Registered only when pytest-xdist is installed: its hooks exist only then."""

    def __init__(self, collector: SessionCollector) -> None:
        self._collector = collector

    def pytest_configure_node(self, node: Any) -> None:
        """Each worker learns which tests have a pinned compile count (only the controller
        reads the pins)."""
        node.workerinput[WORKER_INPUT_COUNTED_KEY] = sorted(self._collector.counted_cells)

    def pytest_testnodedown(self, node: Any, error: object) -> None:
        worker = str(getattr(getattr(node, "gateway", None), "id", None) or id(node))
        output = getattr(node, "workeroutput", None)
        if output:
            self._collector.merge_worker_output(worker, output)
        if error is not None:
            self._collector.worker_lost(worker, error)
