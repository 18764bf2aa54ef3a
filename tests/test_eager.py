"""Eager dispatch told apart from a program's own compiles, with the installed JAX.

These run JAX in this process: the monitor's listeners see every compile on this thread.
Each test starts from cleared in-process caches, so each operation compiles here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from pytest_jaxcompile.backends.jax.monitor import CompileMonitor, ModuleCompile

pytestmark = pytest.mark.integration


@pytest.fixture
def compiles() -> Iterator[Callable[[Callable[[], object]], list[ModuleCompile]]]:
    """Run a block under a capture with cleared caches: the compiles it made."""
    import jax

    monitor = CompileMonitor()

    def run(block: Callable[[], object]) -> list[ModuleCompile]:
        jax.clear_caches()  # type: ignore[no-untyped-call]
        with monitor.capture() as log:
            block()
        return [module for module in log.module_compiles() if not module.nested]

    yield run
    monitor.uninstall()


def test_eager_operations_outside_jit_are_eager_dispatch(
    compiles: Callable[[Callable[[], object]], list[ModuleCompile]],
) -> None:
    import jax
    import jax.numpy as jnp

    def eager() -> None:
        x = jnp.ones(5)  # primitives: apply_primitive
        y = (x + 1.0) * 2.0  # jax.numpy's jitted operators
        assert float(y.sum()) == 20.0  # a jitted reduction
        assert bool(jnp.allclose(y, y))  # a jitted function of JAX called directly
        assert float(y[1:3][0]) == 4.0  # indexing
        jax.vmap(lambda v: v * 3.0)(x)  # vmap outside jit: op by op
        jax.lax.fori_loop(0, 2, lambda i, v: v + i, x)  # control flow outside jit

    modules = compiles(eager)
    assert modules, "no compile seen: the capture or the cache clearing did not work"
    assert [m.fun_name for m in modules if not m.eager] == []
    names = {m.fun_name for m in modules}
    assert {
        "jit(broadcast_in_dim)",
        "jit(add)",
        "jit(_reduce_sum)",
        "jit(allclose)",
        "jit(scan)",
    } <= names


def _jax_version() -> tuple[int, ...]:
    import jax

    return tuple(int(part) for part in jax.__version__.split(".")[:3])


def test_grad_outside_jit_is_eager_dispatch(
    compiles: Callable[[Callable[[], object]], list[ModuleCompile]],
) -> None:
    import jax
    import jax.numpy as jnp

    x = jnp.ones(5)
    modules = compiles(lambda: jax.grad(lambda w: jnp.sum(jnp.tanh(w) ** 2))(x * 2.5))
    own = [m.fun_name for m in modules if not m.eager]
    assert any(m.eager for m in modules)
    if _jax_version() <= (0, 4, 30):
        # jax 0.4.30 keeps no source for the transposed jaxprs of its own jitted functions
        # (the backward pass of jnp.sum, jnp.tanh): those count as the program's, never
        # uncounted on weak evidence (docs/census.md).
        assert set(own) <= {"jit(_reduce_sum)", "jit(tanh)"}
    else:
        assert own == []


def test_the_programs_compiles_are_its_own(
    compiles: Callable[[Callable[[], object]], list[ModuleCompile]],
) -> None:
    import functools

    import jax
    import jax.numpy as jnp

    x = jnp.ones(6)  # made before the capture: no eager compile inside it

    def double(v: jax.Array) -> jax.Array:
        return v * 2.0

    def loss(w: jax.Array) -> jax.Array:
        return jnp.sum(jnp.tanh(w) ** 2)

    def scale(factor: float, v: jax.Array) -> jax.Array:
        return v * factor

    def own() -> None:
        jax.jit(double)(x)
        jax.jit(jax.grad(loss))(x)  # JAX's transformation of the program's function
        jax.jit(functools.partial(scale, 3.0))(x)
        jax.jit(jax.vmap(double))(x)
        jax.jit(lambda v: v - 1.0).lower(x).compile()  # ahead of time

    modules = compiles(own)
    assert [m.eager for m in modules] == [False] * 5
    # (jax 0.4.30 names the partial's module "jit(<unnamed wrapped function>)")
    assert [modules[i].fun_name for i in (0, 1, 3, 4)] == [
        "jit(double)",
        "jit(loss)",
        "jit(double)",
        "jit(<lambda>)",
    ]


def test_jit_of_a_program_function_under_grad_is_its_own_and_the_arithmetic_eager(
    compiles: Callable[[Callable[[], object]], list[ModuleCompile]],
) -> None:
    import jax
    import jax.numpy as jnp

    x = jnp.ones(7)

    def loss(w: jax.Array) -> jax.Array:
        return jnp.sum(w * w)

    modules = compiles(lambda: jax.grad(jax.jit(loss))(x * 1.5))
    own = [m.fun_name for m in modules if not m.eager]
    assert own and set(own) == {"jit(loss)"}  # forward and backward of the program's jit
    assert "jit(multiply)" in {m.fun_name for m in modules if m.eager}  # x * 1.5
