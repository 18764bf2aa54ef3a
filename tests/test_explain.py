"""JAX's explanations of tracing-cache misses: parsing, attribution, and the user's logs.

The messages are JAX's own, as jax 0.4.30 (pjit) and jax >= 0.5 (partial_eval) write them;
the in-process tests run real JAX with a real log handler.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pytest_jaxcompile.backends import Recompile, recompiles
from pytest_jaxcompile.backends.jax.census import build_ledger, recompile_problems
from pytest_jaxcompile.backends.jax.explain import (
    MAX_SHOWN,
    NO_RETRACE,
    Retrace,
    differing,
    parse_explanation,
    recompile_explanations,
)
from pytest_jaxcompile.backends.jax.monitor import CompileMonitor

pytestmark = pytest.mark.integration

NEW_SHAPE = """TRACING CACHE MISS at /tmp/p/test_x.py:11:8 (test_f):
  for f defined at /tmp/p/test_x.py:6
  all previously seen cache keys differ. For the closest previous key:
  different input types:
  * at x, now f32[4] and before f32[3]"""

NEW_SHAPE_0_4_30 = """TRACING CACHE MISS at /tmp/p/test_x.py:11 (test_f) because:
  for f defined at /tmp/p/test_x.py:6
  never seen input type signature:
    x: f32[4]
  closest seen input type signature has 1 mismatches, including:
    * at x, seen f32[3], but now given f32[4]"""

FRESH_CLOSURE = """TRACING CACHE MISS at /tmp/p/test_x.py:13:8 (test_f):
  never seen function:
    <lambda> id=140430642802464 defined at /tmp/p/test_x.py:13
  but seen another function defined on the same line; maybe the function is
  being re-defined repeatedly, preventing caching?"""

STATIC_ARGUMENT = """TRACING CACHE MISS at /tmp/p/test_x.py:15:34 (test_f):
  for <lambda> defined at /tmp/p/test_x.py:14
  all previously seen cache keys differ. For the closest previous key:
  different input pytree:
  * at input path [0][1], now <class 'jax._src.tree_util.Static'> with pytree metadata \
Static(val=3) and before <class 'jax._src.tree_util.Static'> with pytree metadata \
Static(val=2), so the pytree node metadata does not match"""


def test_a_new_shape_is_named_with_both_shapes_in_every_wording() -> None:
    assert parse_explanation(NEW_SHAPE) == Retrace(
        "f", "test_x.py:6", "different input types: at x, now f32[4] and before f32[3]"
    )
    old = parse_explanation(NEW_SHAPE_0_4_30)
    assert old is not None and (old.function, old.defined_at) == ("f", "test_x.py:6")
    assert "at x, seen f32[3], but now given f32[4]" in old.why


def test_a_function_object_re_created_per_call_is_named_as_such() -> None:
    retrace = parse_explanation(FRESH_CLOSURE)
    assert retrace is not None and retrace.new_function
    assert retrace.function == "<lambda>" and retrace.defined_at == "test_x.py:13"
    assert "re-created" in retrace.why


def test_a_changed_static_argument_shows_its_values_not_jax_internals() -> None:
    retrace = parse_explanation(STATIC_ARGUMENT)
    assert retrace is not None
    assert retrace.why == "static argument 1 changed: now 3 and before 2"


WRAPPED_STATIC = """TRACING CACHE MISS at /site-packages/lib/_jit.py:240:15 (_call):
  for fun_wrapped defined at /site-packages/lib/_jit.py:43
  all previously seen cache keys differ. For the closest previous key:
  different input pytree:
  * at input path [0][1], now <class 'jax._src.tree_util.Static'> with pytree metadata \
Static(val=(((<function scale at 0x7f3a>,), PyTreeDef(*)), (('factor', 3.0), ('mode', 'full'), \
('names', ('alpha', 'beta', 'gamma', 'delta'))))) and before <class \
'jax._src.tree_util.Static'> with pytree metadata Static(val=(((<function scale at 0x7f3a>,), \
PyTreeDef(*)), (('factor', 2.0), ('mode', 'full'), ('names', ('alpha', 'beta', 'gamma', \
'delta'))))), so the pytree node metadata does not match"""


def test_a_wrappers_static_argument_shows_only_what_changed_and_names_the_users_function() -> None:
    retrace = parse_explanation(WRAPPED_STATIC)
    assert retrace is not None and retrace.wrapped == "scale"
    assert retrace.describe() == (
        "scale (via fun_wrapped, _jit.py:43): static argument 1 changed: "
        "now ...('factor', 3.0)... and before ...('factor', 2.0)..."
    )


def test_a_long_difference_is_cut_around_what_differs() -> None:
    assert differing("f32[3]", "f32[4]") == ("f32[3]", "f32[4]")  # short: whole
    now, before = differing("x" * 100 + "abc" + "y" * 100, "x" * 100 + "abd" + "y" * 100)
    assert "abc" in now and "abd" in before and len(now) <= MAX_SHOWN
    assert now.startswith("...") and now.endswith("...")
    wide, narrow = differing("(" + "a, " * 40 + "1)", "(" + "a, " * 40 + "2)")
    assert (wide, narrow) == ("...1...", "...2...")


def test_other_messages_are_not_explanations() -> None:
    assert parse_explanation("PERSISTENT COMPILATION CACHE MISS for 'jit_f' with key 'x'") is None
    assert parse_explanation("") is None


def test_recompiles_skip_each_functions_first_compile() -> None:
    found = recompiles(
        [("jit(f)", None), ("jit(g)", "x"), ("jit(f)", "new shape"), ("jit(f)", None)],
        "unexplained",
    )
    assert found == [Recompile("jit(f)", 2, "new shape"), Recompile("jit(f)", 3, "unexplained")]
    assert found[0].line() == "jit(f) compile 2: new shape"


@pytest.fixture
def user_records() -> Iterator[list[logging.LogRecord]]:
    """What a user's handler on the root logger receives (pytest's capture works so)."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(logging.DEBUG)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield records
    finally:
        root.removeHandler(handler)


def _three_shapes() -> None:
    def f(x: jax.Array) -> jax.Array:
        return jnp.sin(x) * 2

    compiled = jax.jit(f)
    for n in (3, 4, 5):
        compiled(np.ones(n, np.float32)).block_until_ready()


def test_an_explained_capture_attributes_each_new_shape_and_keeps_the_users_logs(
    user_records: list[logging.LogRecord],
) -> None:
    from jax._src import config as jax_config

    monitor = CompileMonitor()
    try:
        with monitor.capture(explain=True) as log:
            assert jax_config.explain_cache_misses.value  # on while the test runs
            _three_shapes()
    finally:
        monitor.uninstall()
    assert not jax_config.explain_cache_misses.value  # the user's setting again
    assert not [r for r in user_records if r.levelno >= logging.WARNING]
    found = recompile_explanations(log.own_compiles())
    assert [(r.function, r.ordinal) for r in found] == [("jit(f)", 2), ("jit(f)", 3)]
    assert "f32[4]" in found[0].why and "f32[5]" in found[1].why
    problems = recompile_problems(1, log.own_compiles(), explained=True)
    assert problems[1] == "  jit(f): 3x (3 compiled by XLA, 0 from the persistent cache)"
    # jax 0.4.30 names the function by its qualname (_three_shapes.<locals>.f)
    assert problems[2].startswith("    compile 2: ") and "f (test_explain.py:" in problems[2]
    assert not any("look for a fresh closure" in line for line in problems)
    ledger = build_ledger(log, "test_explain.py::t", wall_s=1.0)
    assert ledger.recompiles is not None and len(ledger.recompiles) == 2


def test_a_capture_without_explain_leaves_jax_alone() -> None:
    from jax._src import config as jax_config

    monitor = CompileMonitor()
    try:
        with monitor.capture() as log:
            assert not jax_config.explain_cache_misses.value
            _three_shapes()
    finally:
        monitor.uninstall()
    assert all(not module.retraces for module in log.own_compiles())
    assert build_ledger(log, "test_explain.py::t", wall_s=1.0).recompiles is None


def test_a_user_who_explains_misses_still_gets_every_record(
    user_records: list[logging.LogRecord],
) -> None:
    from jax._src import config as jax_config

    monitor = CompileMonitor()
    try:
        with jax_config.explain_cache_misses(True), monitor.capture(explain=True) as log:
            _three_shapes()
    finally:
        monitor.uninstall()
    theirs = [r for r in user_records if str(r.msg).startswith("TRACING CACHE MISS")]
    assert len(theirs) == 3  # the first trace and two new shapes, as without the plugin
    assert len(recompile_explanations(log.own_compiles())) == 2
    assert NO_RETRACE not in {r.why for r in recompile_explanations(log.own_compiles())}
