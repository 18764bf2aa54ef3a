"""What the program leaves in JAX's caches, and when a census'd test clears them.

The bookkeeping is pure logic over weak references; the stacks it reads come from real JAX
compiles on this thread (the order tests check the whole loop in pytest sessions).
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable, Iterator

import pytest

from pytest_jaxcompile._constants import CLEAR_ALWAYS, CLEAR_AUTO, CLEAR_NEVER
from pytest_jaxcompile.backends.jax.eager import EAGER, Dispatch
from pytest_jaxcompile.backends.jax.monitor import CompileMonitor
from pytest_jaxcompile.backends.jax.residue import (
    BEFORE_LISTENING,
    ProgramResidue,
    clear_before_census,
    describe,
)


def step(v: object) -> object:
    return v


def fresh() -> ProgramResidue:
    residue = ProgramResidue()
    residue.cleared()
    return residue


def test_nothing_is_known_before_the_plugin_listened() -> None:
    assert ProgramResidue().still_in_memory() == BEFORE_LISTENING


def test_a_function_still_alive_is_named_and_a_dead_one_leaves_nothing() -> None:
    residue = fresh()

    def local_step(v: object) -> object:
        return v

    residue.note(Dispatch(eager=False, owners=(local_step,)))
    assert residue.still_in_memory() == (
        "test_a_function_still_alive_is_named_and_a_dead_one_leaves_nothing.<locals>."
        "local_step (test_residue) is still in memory"
    )
    del local_step
    gc.collect()
    assert residue.still_in_memory() is None


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """The generation of each garbage collection, with automatic ones switched off."""
    generations: list[int] = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            generations.append(info["generation"])

    was_enabled = gc.isenabled()
    gc.disable()
    gc.callbacks.append(note)
    try:
        yield generations
    finally:
        gc.callbacks.remove(note)
        if was_enabled:
            gc.enable()


def test_an_owner_kept_only_by_a_reference_cycle_is_collected_not_reported(
    collections: list[int],
) -> None:
    residue = fresh()

    def local_step(v: object) -> object:
        return v

    residue.note(Dispatch(eager=False, owners=(local_step,)))
    cycle: list[object] = [local_step]
    cycle.append(cycle)  # as a kept traceback's frames hold a test's locals
    del local_step, cycle
    assert residue.still_in_memory() is None
    assert collections == [1]  # a young cycle: the cheap collection was enough


@pytest.mark.parametrize(
    ("collect_all", "generations"),
    [
        (True, [1, 2]),  # JAX cannot forget one function: everything would be cleared
        (False, [1]),  # it can: forgetting (a few ms) beats a full collection (35-70 ms)
    ],
)
def test_an_owner_that_outlives_a_collection_is_not_collected_for_again(
    collections: list[int], collect_all: bool, generations: list[int]
) -> None:
    residue = fresh()
    for _ in range(3):
        residue.note(Dispatch(eager=False, owners=(step,)))
        assert residue.still_in_memory(collect_all=collect_all) == (
            "step (test_residue) is still in memory"
        )
    assert collections == generations
    # Nothing alive, or work that names no function: no collection can help, none runs.
    residue.cleared()
    assert residue.still_in_memory(collect_all=collect_all) is None
    residue.note(Dispatch(eager=False, owners=(), site="test_models.py:12"))
    assert residue.still_in_memory(collect_all=collect_all) is not None
    assert collections == generations


@pytest.mark.integration
def test_the_census_collects_everything_only_where_jax_cannot_forget_one_function() -> None:
    import jax

    from pytest_jaxcompile.backends.jax.residue import can_forget_program_work

    version = tuple(int(part) for part in jax.__version__.split(".")[:2])
    if (0, 4) < version < (0, 9):
        pytest.skip("measured on jax 0.4.30 (cannot) and 0.9.2 and later (can)")
    # jax 0.4 keeps a second registry of weak caches, which evicts nothing by key.
    assert can_forget_program_work() is (version >= (0, 9))


def test_eager_dispatch_is_never_noted() -> None:
    residue = fresh()
    residue.note(EAGER)
    assert residue.still_in_memory() is None


def test_work_that_names_no_function_counts_as_still_in_memory_until_cleared() -> None:
    residue = fresh()
    residue.note(Dispatch(eager=False, owners=(), site="test_models.py:12"))
    assert residue.still_in_memory() == (
        "a compile at test_models.py:12 that names no jitted function"
    )
    residue.cleared()
    assert residue.still_in_memory() is None


def test_an_owner_without_weak_references_cannot_be_watched() -> None:
    residue = fresh()
    residue.note(Dispatch(eager=False, owners=(3,)))
    assert residue.still_in_memory() == "int, which cannot be watched"


@pytest.mark.integration
def test_describe_names_functions_partials_and_jaxprs() -> None:
    import jax

    assert describe(step) == "step (test_residue)"
    assert describe(functools.partial(step, 1)) == "step (test_residue)"
    jaxpr = jax.make_jaxpr(step)(1.0)
    assert describe(jaxpr).startswith("the jaxpr of step at ")


@pytest.fixture
def monitor() -> Iterator[CompileMonitor]:
    import jax

    monitor = CompileMonitor()
    monitor.install()
    jax.clear_caches()  # type: ignore[no-untyped-call]
    monitor.residue.cleared()
    yield monitor
    monitor.uninstall()


@pytest.mark.integration
def test_the_monitor_notes_the_programs_jitted_functions_not_eager_dispatch(
    monitor: CompileMonitor,
) -> None:
    import jax
    import jax.numpy as jnp

    x = jnp.arange(7.0) * 2.0  # eager dispatch only
    assert monitor.residue.still_in_memory() is None

    def local(v: jax.Array) -> jax.Array:
        return v * 3.0

    jitted: Callable[[jax.Array], jax.Array] | None = jax.jit(local)
    assert jitted is not None
    jitted(x)
    assert "local" in str(monitor.residue.still_in_memory())
    del jitted, local
    gc.collect()
    assert monitor.residue.still_in_memory() is None  # nothing left to reuse


@pytest.mark.integration
def test_a_module_level_function_stays_and_an_aot_compile_goes_with_its_function(
    monitor: CompileMonitor,
) -> None:
    import jax
    import jax.numpy as jnp

    jax.jit(step)(jnp.ones(9))
    assert monitor.residue.still_in_memory() == "step (test_residue) is still in memory"
    monitor.residue.cleared()

    def aot(v: jax.Array) -> jax.Array:
        return v + 1.0

    compiled = jax.jit(aot).lower(jnp.ones(9)).compile()
    if jax.__version__.startswith("0.4."):
        # jax 0.4's .lower() runs through frames that name no jitted function: when in
        # doubt, the census clears everything, as it always did there.
        assert "names no jitted function" in str(monitor.residue.still_in_memory())
        return
    assert "aot" in str(monitor.residue.still_in_memory())  # noted by its trace
    del compiled, aot
    gc.collect()
    assert monitor.residue.still_in_memory() is None  # nothing left that could reuse it


@pytest.mark.parametrize(
    ("mode", "eager_counted", "cleared"),
    [
        (CLEAR_NEVER, True, None),
        (CLEAR_ALWAYS, False, "compile_clear_caches = always"),
        (CLEAR_AUTO, True, "its eager dispatch counts against max_compiles (count_eager)"),
        (CLEAR_AUTO, False, "step (test_residue) is still in memory"),
    ],
)
def test_clear_before_census_by_mode(mode: str, eager_counted: bool, cleared: str | None) -> None:
    residue = fresh()
    residue.note(Dispatch(eager=False, owners=(step,)))
    assert clear_before_census(residue, mode, eager_counted=eager_counted) == cleared
    # Cleared caches forget what was noted; caches left alone still hold it.
    expected_left = None if cleared else "step (test_residue) is still in memory"
    assert residue.still_in_memory() == expected_left


def test_auto_leaves_the_caches_alone_when_nothing_is_left() -> None:
    residue = fresh()
    assert clear_before_census(residue, CLEAR_AUTO, eager_counted=False) is None


@pytest.mark.integration
def test_forgetting_the_programs_work_recompiles_it_and_keeps_eager_dispatch(
    monitor: CompileMonitor,
) -> None:
    """What a census'd test after a shared function's test gets: that function compiles
    again (as after jax.clear_caches()), eager operations do not."""
    import jax
    import jax.numpy as jnp

    from pytest_jaxcompile.backends.jax.monitor import EVENT_BACKEND_COMPILE
    from pytest_jaxcompile.backends.jax.residue import forget_program_work

    def loss(w: jax.Array, x: jax.Array) -> jax.Array:
        return jnp.sum(jnp.tanh(x @ w))

    shared = jax.jit(jax.grad(loss))

    def program() -> None:
        shared(jnp.ones((4, 4)), jnp.ones((2, 4))).block_until_ready()

    def eager() -> None:
        ((jnp.ones((3, 3)) + 1.0) * 2.0).sum().block_until_ready()

    def compiles(block: Callable[[], None]) -> int:
        with monitor.capture() as log:
            block()
        return log.count(EVENT_BACKEND_COMPILE)

    program()
    eager()
    assert (compiles(program), compiles(eager)) == (0, 0)  # both cached
    owners = monitor.residue.owners()
    assert owners  # the function the jitted step wraps (and its jaxprs)
    if not forget_program_work(owners):
        pytest.skip("this jax has no per-function eviction: the census clears every cache")
    assert compiles(program) == 1  # the shared step: forgotten, compiled again
    assert compiles(eager) == 0  # eager dispatch kept its executables


def test_a_residue_with_untracked_work_has_no_owners_to_forget() -> None:
    residue = fresh()
    residue.note(Dispatch(eager=False, owners=(step,)))
    assert residue.owners() == [step]
    residue.note(Dispatch(eager=False, owners=(), site="test_x.py:3"))
    assert residue.owners() is None  # only a full clear is safe
