"""pytest-jaxcompile's entry point: options, the marker, the fixtures, and the hooks that
start the session's machinery.

Loading it costs a project that never uses the plugin the option table and little else:
`activation.Activation` starts the session's machinery (`session.SessionCollector`, the
backends, each enabled output) only once the session uses it. Nothing here imports jax or
torch. The entry point's hooks are functions of this module, and it imports modules, not their
names: pytest scans each registered plugin's every attribute for fixtures, and no further
object is registered until the session uses the plugin, but pytest-xdist's hooks where xdist
is installed (`benchmarks/startup.py`).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, cast

import pytest

# Each submodule by its full name: `from pytest_jaxcompile import options` would first ask the
# package's __getattr__ (the public names, `_api`) and import that too.
import pytest_jaxcompile._constants as _constants
import pytest_jaxcompile.activation as activation
import pytest_jaxcompile.options as options
from pytest_jaxcompile import PlainImports

if TYPE_CHECKING:
    from pytest_jaxcompile.backends.jax.measure import JaxCompile
    from pytest_jaxcompile.backends.torch.measure import TorchCompile


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    # Called as the plugin registers, right after its import: the earliest moment it runs.
    activation.keep_xla_flags_at_registration(pluginmanager)
    options.add_pytest_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """Keep XLA_FLAGS as they were before any plugin or conftest.py, where known (the
    settings guard's baseline); where the session uses the plugin, also watch for JAX's
    backend start (XLA_FLAGS as XLA reads them) before a conftest.py can import JAX and
    start it; imports no JAX."""
    baseline = activation.xla_flags_baseline(early_config)
    early_config.stash[_constants.XLA_FLAGS_AT_LOAD_KEY] = baseline
    if activation.in_use(early_config, early_config.known_args_namespace):
        from pytest_jaxcompile.backends.jax.backendstart import watch

        watch(early_config)


def pytest_configure(config: pytest.Config) -> None:
    if not any(type(finder).__qualname__ == "PlainImports" for finder in sys.meta_path):
        sys.meta_path.insert(0, PlainImports())  # a second session in this process (pytester)
    config.addinivalue_line("markers", _constants.MARKER_HELP)
    config.stash[activation.ACTIVATION_KEY] = started = activation.Activation(config)
    if config.pluginmanager.hasplugin("xdist"):  # its hooks exist only then
        config.pluginmanager.register(activation.XdistHooks(started), "jaxcompile-xdist")
    if activation.in_use(config):
        started.start()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[activation.ACTIVATION_KEY].session_started(session)


@pytest.hookimpl(trylast=True)  # after deselection: the tests that will run
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    config.stash[activation.ACTIVATION_KEY].collected(items)


@pytest.hookimpl(trylast=True)  # after every other unconfigure, which may still import
def pytest_unconfigure() -> None:
    """The package's finder leaves with the session (`_api` says why)."""
    sys.meta_path[:] = [f for f in sys.meta_path if type(f).__qualname__ != "PlainImports"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Bad compile_budget arguments are a collection error of the test that has them."""
    if metafunc.definition.get_closest_marker(_constants.MARKER_NAME) is None:
        return
    from pytest_jaxcompile.gate.budget import budget_of

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
    probe = request.config.stash[activation.ACTIVATION_KEY].start().probe("jax", node)
    return cast("JaxCompile", probe)


@pytest.fixture
def torch_compile(request: pytest.FixtureRequest) -> TorchCompile:
    """Measure ``torch.compile``: ``torch_compile(model_or_fn, *example_inputs, **kwargs)``.

    Compiles, runs the first call and returns the compiled callable; each compiled frame
    is a row of this test. Needs torch (``pip install pytest-jaxcompile[torch]``).
    """
    node = request.node
    assert isinstance(node, pytest.Item)
    probe = request.config.stash[activation.ACTIVATION_KEY].start().probe("torch", node)
    return cast("TorchCompile", probe)
