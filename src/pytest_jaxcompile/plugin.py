"""pytest-jaxcompile's entry point: options, the marker, the fixtures, and what to register.

Loading it costs a project that never uses the plugin the option table and little else:
`activation.Activation` starts the session's machinery (`session.SessionCollector`, the
backends, each enabled output) only once the session uses it. Nothing here imports jax or
torch.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, cast

import pytest

from pytest_jaxcompile._names import MARKER_HELP, MARKER_NAME, XLA_FLAGS_AT_LOAD_KEY, XLA_FLAGS_ENV
from pytest_jaxcompile.activation import ACTIVATION_KEY, Activation, XdistHooks, in_use
from pytest_jaxcompile.options import add_pytest_options

if TYPE_CHECKING:
    from pytest_jaxcompile.backends.jax.measure import JaxCompile
    from pytest_jaxcompile.backends.torch.measure import TorchCompile

PLUGIN_NAME = "jaxcompile-activation"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_pytest_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """Keep XLA_FLAGS as they are before any conftest.py (the settings guard's baseline);
    where the session uses the plugin, also watch for JAX's backend start (XLA_FLAGS as XLA
    reads them) before a conftest.py can import JAX and start it; imports no JAX."""
    if in_use(early_config, early_config.known_args_namespace):
        from pytest_jaxcompile.backends.jax.backendstart import watch

        watch(early_config)
    else:  # the baseline alone: a session that starts later compares with it
        early_config.stash[XLA_FLAGS_AT_LOAD_KEY] = os.environ.get(XLA_FLAGS_ENV)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    activation = Activation(config)
    config.stash[ACTIVATION_KEY] = activation
    manager = config.pluginmanager
    manager.register(activation, PLUGIN_NAME)
    if manager.hasplugin("xdist"):
        manager.register(XdistHooks(activation), f"{PLUGIN_NAME}-xdist")
    if in_use(config):
        activation.start()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Bad compile_budget arguments are a collection error of the test that has them."""
    if metafunc.definition.get_closest_marker(MARKER_NAME) is None:
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
    return cast("JaxCompile", request.config.stash[ACTIVATION_KEY].start().probe("jax", node))


@pytest.fixture
def torch_compile(request: pytest.FixtureRequest) -> TorchCompile:
    """Measure ``torch.compile``: ``torch_compile(model_or_fn, *example_inputs, **kwargs)``.

    Compiles, runs the first call and returns the compiled callable; each compiled frame
    is a row of this test. Needs torch (``pip install pytest-jaxcompile[torch]``).
    """
    node = request.node
    assert isinstance(node, pytest.Item)
    return cast("TorchCompile", request.config.stash[ACTIVATION_KEY].start().probe("torch", node))
