"""The CPU seconds of a compile: the process CPU clock, every thread, below psutil's tick."""

from __future__ import annotations

import threading
import time

import psutil
import pytest
from conftest import JaxProject

from pytest_jaxcompile.backends.jax.recompile import cpu_seconds

TICK_S = 0.01  # psutil's cpu_times() counts in ticks of 1/SC_CLK_TCK (100 per second)

SMALL_COMPILES = """
    import jax.numpy as jnp
    import pytest

    X = jnp.arange(8.0)

    @pytest.mark.parametrize("scale", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    def test_small(jax_compile, scale):
        jax_compile(lambda x: jnp.tanh(x * scale) + scale, X, transform="f")
"""


def _off_tick(seconds: float) -> bool:
    """Not a whole number of 10 ms ticks (a tick count differenced, rounded to 6 digits)."""
    ticks = seconds / TICK_S
    return abs(ticks - round(ticks)) > 1e-3


def test_compile_cpu_seconds_resolve_below_a_tick(project: JaxProject) -> None:
    """Cold and warm compiles of a few milliseconds: CPU seconds finer than 10 ms ticks.

    Read from psutil's tick counts, every figure was a multiple of 0.01 s and most warm
    compiles read 0.000 s; the process CPU clock resolves them.
    """
    project.conftest()
    project.tests(SMALL_COMPILES)
    project.run().assert_outcomes(passed=6)
    cold = list(project.rows().values())
    project.run().assert_outcomes(passed=6)
    warm = list(project.rows().values())
    assert {row["cache_state"] for row in cold} == {"cold"}
    assert {row["cache_state"] for row in warm} == {"warm"}
    rows = cold + warm
    figures = [row["compile_cpu_s"] for row in rows]
    assert all(figure > 0 for figure in figures), figures  # a warm hit costs CPU too
    assert any(_off_tick(figure) for figure in figures), figures
    process = [row["host_state"]["process_cpu_s"] for row in rows]
    assert any(_off_tick(figure) for figure in process), process


@pytest.mark.integration
def test_cpu_seconds_count_every_thread_of_the_process() -> None:
    """XLA compiles on threads of its own: the figure must count them, not the caller's."""
    work_s: list[float] = []

    def spin() -> None:
        start = time.thread_time()
        total = 0
        for index in range(2_000_000):
            total += index
        work_s.append(time.thread_time() - start)

    before = cpu_seconds()
    worker = threading.Thread(target=spin)
    worker.start()
    worker.join()
    # The process clock folds an exited thread's time in at the kernel's accounting, which can
    # trail the thread's own clock by a little on a loaded machine: the caller's thread alone
    # would read about 0, so 95 % of the thread's work still says every thread is counted.
    assert cpu_seconds() - before >= 0.95 * work_s[0] > 0

    import jax
    import jax.numpy as jnp

    def deep(x: jax.Array) -> jax.Array:
        for index in range(8):
            x = jnp.tanh(x @ x.T + index)
        return x.sum()

    jax.clear_caches()  # type: ignore[no-untyped-call]
    lowered = jax.jit(jax.value_and_grad(deep)).lower(jnp.ones((16, 16)))
    process = psutil.Process()
    # Each clock is read outside the one after it, so the process interval encloses the
    # caller's: where a JAX compiles on the caller's thread alone, the two differ only by the
    # reads themselves, and the process figure must still be the larger.
    ticks_before, before, caller_before = process.cpu_times(), cpu_seconds(), time.thread_time()
    lowered.compile(compiler_options={})  # a fresh compile, whatever JAX cached
    caller = time.thread_time() - caller_before
    measured = cpu_seconds() - before
    ticks_after = process.cpu_times()
    ticked = (ticks_after.user + ticks_after.system) - (ticks_before.user + ticks_before.system)
    # psutil sums every thread in whole ticks: the two agree within a tick at each end.
    assert abs(measured - ticked) <= 2 * TICK_S + 0.005, (measured, ticked, caller)
    assert measured >= caller
