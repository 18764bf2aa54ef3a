"""What the program left in JAX's in-process caches, and when a census'd test must clear them.

A census'd test must compile every function it calls, whatever ran before it in the same
process: otherwise a module-level ``train_step`` counts one compile in the first test that
calls it and none in the next. ``jax.clear_caches()`` guarantees that, but it also drops
the executables of JAX's eager dispatch (``jnp.ones(5)``, ``x + 1``), which every test
then compiles again: on optax's ``alias_test.py`` that nearly doubled the suite's time.
So where it can, the plugin makes JAX forget only the program's work that is still in
memory (`forget_program_work`: the cache entries keyed on those functions and jaxprs), and
eager dispatch keeps its executables.

JAX keeps a program's traces and executables in caches keyed on the function a jitted
callable wraps and on its jaxprs, weakly or through strong references that keep those
objects alive. So the monitor notes, for every trace, lowering and compile of the program's
(not eager dispatch), the objects its dispatch frames name (`eager.Dispatch.owners`), as
weak references. While every one of them is gone, nothing the program compiled can be
reused and the caches need no clearing: a test that jits its own functions leaves nothing
behind (once the garbage collector has freed what a reference cycle still held). A work
whose owners the stack does not name (what ran before the plugin listened, a compile that
no jitted function or ``Lowered`` led to) counts as still in memory: when in doubt, clear.
``jax.jit(f).lower(x).compile()`` is not such a work: its trace and lowering noted ``f``.
JAX's eager dispatch stays cached; its compiles are counted apart and not pinned (see
census), except for a test whose ``count_eager`` makes them count: that test always starts
from cleared caches.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import threading
import weakref
from typing import Any

from pytest_jaxcompile._constants import CLEAR_ALWAYS, CLEAR_NEVER
from pytest_jaxcompile.backends.jax.eager import Dispatch

BEFORE_LISTENING = "the first census'd test in this process (what ran before it is unknown)"


def forget_program_work(owners: list[Any]) -> bool:
    """Make JAX forget what it traced, lowered and compiled for `owners` (functions a jitted
    callable wraps, jaxprs), and nothing else; False where this JAX cannot (the caller then
    clears every cache).

    JAX registers every staging and compile cache (``jax._src.util._caches``): those keyed
    weakly on a function or jaxpr drop its entries with ``evict_weakref``, the ``lu.cache``
    ones with ``evict_function`` (what ``jitted.clear_cache()`` does for one function, and
    ``jax.clear_caches()`` for all). Caches with strong keys hold JAX's own objects
    (shardings, devices, eager dispatch's jitted primitives) and are kept. The C++ fast
    paths have no eviction by key and are emptied: they refill from the Python caches
    above without compiling. A retrace of a forgotten function makes a new jaxpr, so its
    lowering and compile run again, as after ``jax.clear_caches()``.
    """
    parts = _forgetting_parts()
    if parts is None:
        return False
    evictions, fast_paths, function_caches = parts
    for evict in evictions:
        for owner in owners:
            with contextlib.suppress(TypeError):  # a key type this cache never holds
                evict(owner)
    for fast_path in fast_paths:
        fast_path.clear()
    function_caches.clear_all()
    return True


def can_forget_program_work() -> bool:
    """Whether this JAX lets `forget_program_work` forget one function's work."""
    return _forgetting_parts() is not None


def _forgetting_parts() -> tuple[list[Any], list[Any], Any] | None:
    """JAX's evictions by key (one per registered cache that has one), its C++ fast paths,
    and its C++ function caches; None where this JAX has not all of them."""
    try:
        from jax._src import pjit, util

        registry = list(util._caches)
        fast_paths = [pjit._cpp_pjit_cache_fun_only, pjit._cpp_pjit_cache_explicit_attributes]
        function_caches = importlib.import_module("jax._src.lib")._jax.PjitFunctionCache
    except (ImportError, AttributeError):
        return None
    evictions = [
        evict
        for cache in registry
        if (
            evict := getattr(cache, "evict_weakref", None) or getattr(cache, "evict_function", None)
        )
    ]
    # Releases with a second registry of weak caches (jax 0.4) evict nothing through this one.
    if hasattr(util, "_weakref_lru_caches") or not evictions:
        return None
    return evictions, fast_paths, function_caches


class ProgramResidue:
    """Weak references to what keeps the program's compiled work in JAX's caches."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owners: dict[int, weakref.ref[Any]] = {}
        self._untracked: str | None = BEFORE_LISTENING
        # Owners that outlived a garbage collection: held by the program, not by a cycle.
        self._held: dict[int, weakref.ref[Any]] = {}
        self._forgettable: bool | None = None  # can_forget_program_work(), asked once

    def forgettable(self) -> bool:
        """Whether this JAX can forget one function's work (`can_forget_program_work`)."""
        if self._forgettable is None:
            self._forgettable = can_forget_program_work()
        return self._forgettable

    def note(self, dispatch: Dispatch) -> None:
        """A trace, lowering or compile ran below `dispatch`: remember what keeps it."""
        if dispatch.eager:
            return
        with self._lock:
            if not dispatch.owners:
                # A Lowered's compile: what could reuse it is the Lowered itself (which
                # no cache clear resets) or its trace and lowering, noted when they ran.
                if not dispatch.ahead_of_time:
                    self._untracked = _untracked_reason(dispatch.site)
                return
            for owner in dispatch.owners:
                try:
                    self._owners[id(owner)] = weakref.ref(owner)
                except TypeError:  # an object without weak references: cannot be watched
                    self._untracked = f"{describe(owner)}, which cannot be watched"

    def still_in_memory(self, collect_all: bool = True) -> str | None:
        """Why the program's compiled work may still be in JAX's caches; None when it is not.

        An owner that looks alive may be held only by a reference cycle the garbage
        collector has not reached yet: a test's frames kept by an exception's traceback
        (unittest's ``SkipTest`` inside ``subTest``, as optax's tests raise) hold its jitted
        ``step``. A collection of the young generations settles most (a test's cycle is
        young; about 2 ms). With `collect_all`, where only clearing all of JAX's caches
        would help (then every eager operation compiles again), all generations are
        collected too (35-70 ms with JAX loaded); without it, forgetting the owners' work
        (a few ms) is cheaper than the full collection. An owner that outlives the
        collection is taken as held by the program (a module-level function, a library's
        cache) and is not collected for again.
        """
        with self._lock:
            reason = self._reason()
            if reason is None or self._untracked is not None or self._held_alive():
                return reason
        # Outside the lock: a finalizer may compile, and note() takes the lock.
        for generation in (1, 2) if collect_all else (1,):
            gc.collect(generation)
            with self._lock:
                if self._reason() is None:
                    return None
        with self._lock:
            self._held.update(self._alive())  # not collected for again
            return self._reason()

    def owners(self) -> list[Any] | None:
        """The program's objects still in memory that JAX keys its work on; None when some
        of the program's work is keyed on what nobody noted (then only a full clear helps).
        """
        with self._lock:
            if self._untracked is not None:
                return None
            return [owner for ref in self._alive().values() if (owner := ref()) is not None]

    def _reason(self) -> str | None:
        if self._untracked is not None:
            return self._untracked
        for ref in self._alive().values():
            owner = ref()
            if owner is not None:
                return f"{describe(owner)} is still in memory"
        return None

    def _alive(self) -> dict[int, weakref.ref[Any]]:
        self._owners = {key: ref for key, ref in self._owners.items() if ref() is not None}
        return self._owners

    def _held_alive(self) -> bool:
        """Whether an alive owner already outlived a collection (collecting cannot help)."""
        self._held = {key: ref for key, ref in self._held.items() if ref() is not None}
        return any(key in self._held for key in self._owners)

    def cleared(self) -> None:
        with self._lock:
            self._owners.clear()
            self._untracked = None


def clear_in_process_caches() -> None:
    """Forget every compiled and traced function of this process (``jax.clear_caches``):
    before a census'd test that needs it, and before each compile the ``jax_compile``
    fixture measures fresh. The persistent cache is untouched: a module compiled before is
    a persistent-cache hit.
    """
    import jax

    jax.clear_caches()  # type: ignore[no-untyped-call]


def clear_before_census(residue: ProgramResidue, mode: str, *, eager_counted: bool) -> str | None:
    """Clear JAX's in-process caches before a census'd test where what it compiles could
    otherwise depend on the tests before it; why they were cleared, None when they were not.

    Only the program's work still in memory is forgotten where JAX allows it (eager
    dispatch stays cached); everything is cleared under ``always``, for a test whose eager
    dispatch counts (``count_eager``: its eager compiles must happen in it), and when some
    of the program's work is not known to be keyed on a noted object.
    """
    if mode == CLEAR_NEVER:
        return None
    if mode == CLEAR_ALWAYS:
        reason: str | None = "compile_clear_caches = always"
    elif eager_counted:
        reason = "its eager dispatch counts against max_compiles (count_eager)"
    else:
        reason = residue.still_in_memory(collect_all=not residue.forgettable())
    if reason is not None:
        owners = residue.owners() if mode != CLEAR_ALWAYS and not eager_counted else None
        if owners is None or not forget_program_work(owners):
            clear_in_process_caches()
        residue.cleared()
    return reason


def describe(owner: Any) -> str:
    """A function as ``qualname (module)``; a jaxpr by the source JAX recorded for it."""
    debug = getattr(getattr(owner, "jaxpr", None), "debug_info", None)
    source = getattr(debug, "func_src_info", None)
    if isinstance(source, str):
        return f"the jaxpr of {source}"
    target = getattr(owner, "func", owner)  # functools.partial: its function
    name = getattr(target, "__qualname__", None) or type(target).__qualname__
    module = getattr(target, "__module__", None)
    return f"{name} ({module})" if isinstance(module, str) else str(name)


def _untracked_reason(site: str | None) -> str:
    where = f" at {site}" if site else ""
    return f"a compile{where} that names no jitted function"
