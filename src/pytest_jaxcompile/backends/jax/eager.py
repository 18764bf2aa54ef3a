"""Which backend compiles JAX does for eager dispatch, told from the compiling thread's stack.

Outside ``jit`` JAX runs every operation by compiling it. A primitive goes through
``jax._src.dispatch.apply_primitive``, which jits a function named after the primitive
(``jnp.ones(5)`` compiles ``jit(convert_element_type)`` and ``jit(broadcast_in_dim)``);
``jax.numpy``'s operators and reductions are themselves jitted functions of JAX
(``x + 1`` compiles ``jit(add)``, ``x.sum()`` compiles ``jit(_reduce_sum)``). Which of
them compile in a test depends on which shapes earlier code already ran, and how JAX
implements an operation changes between releases: they are not the program's compiles.

JAX fires ``backend_compile_duration`` on the thread that compiles, inside the call that
triggered the compile, so the stack at that moment says which function is being compiled.
Walking out from the listener, the innermost frame of JAX's jit dispatch decides:

- ``_pjit_call_impl_python`` (the executable's compile for a jit call): the traced
  function's source file, from the jaxpr's debug info (``"add at .../jax/_src/...:12"``);
- ``cache_miss`` (the Python side of a jitted callable): the function it wraps
  (``fun``, or ``jit_info.fun`` in older releases), unwrapped from ``functools.partial``
  and ``__wrapped__``, and its module;
- ``apply_primitive``: always eager (releases that compile a primitive without ``jit``).

A function defined inside the ``jax`` or ``jaxlib`` packages is JAX's own: the compile is
eager dispatch. Anything else (the program's function, ``jax.jit(jax.grad(f))``'s ``f``,
a library's wrapper) is the program's own compile. Frames of the standard library and of
this plugin are passed over; reaching any other frame (the program's code) before a
deciding one means the program compiled directly (``jax.jit(f).lower(x).compile()``), so a
compile is never called eager on weak evidence: when in doubt it counts.

The same frames exist in jax 0.4.30, 0.10 and 0.12 (``cache_miss`` closes over ``fun``, or
over ``jit_info`` with ``jit_info.fun`` in some 0.4 releases; ``apply_primitive`` jits
``prim_fun``). jax 0.4.30 keeps no debug info on transposed jaxprs, so the backward pass of
its own jitted functions under an eager ``jax.grad`` is undecided there and counts as the
program's. tests/test_eager.py pins the classification for the installed JAX, so a release
that moves the frames fails there rather than counting silently.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass
from types import FrameType
from typing import Any

MAX_FRAMES = 400  # a compile's stack is a few dozen frames deep; bound the walk anyway
JAX_PACKAGES = ("jax", "jaxlib")
# Frames that never decide: the standard library (contextlib around JAX's timers) and
# this plugin's own listener.
_PASSED_OVER = frozenset(sys.stdlib_module_names) | {"pytest_jaxcompile"}


@dataclass(frozen=True)
class Dispatch:
    """Whose compile (or trace, or lowering) runs below a frame, and what JAX keeps it under.

    `owners` are the objects JAX's in-process caches key a program's work on, found in the
    dispatch frames between the event and the program's code: the function a jitted
    callable wraps (``cache_miss``, ``_infer_params``, ``jit_trace``, ``jit_lower``) and
    the jaxpr being compiled (``_pjit_call_impl_python``). While all of them are gone,
    nothing the program compiled there can be reused; none found means nobody can tell
    (see `residue`).
    """

    eager: bool
    owners: tuple[Any, ...] = ()
    site: str | None = None  # the program's frame the walk stopped at: file:line
    # Compiled from a ``Lowered`` (``jax.jit(f).lower(x).compile()``): its executable is
    # kept by that object, and its trace and lowering were noted (with their owners) when
    # they ran.
    ahead_of_time: bool = False


EAGER = Dispatch(eager=True)


def dispatch_of(frame: FrameType | None) -> Dispatch:
    """Walk out from `frame`: whether the work below it is JAX's eager dispatch of an
    operation, and, when it is the program's, the objects JAX caches it under."""
    decided: bool | None = None
    owners: list[Any] = []
    site = None
    ahead_of_time = False
    for _ in range(MAX_FRAMES):
        if frame is None:
            break
        module = frame.f_globals.get("__name__")
        if not isinstance(module, str):
            break
        top = module.partition(".")[0]
        if top in JAX_PACKAGES:
            if decided is None:
                decided = _dispatch_verdict(frame, module)
                if decided:
                    return EAGER
            owner = _cache_owner(frame)
            if owner is not None:
                owners.append(owner)
            elif frame.f_code.co_name == "compile" and module == "jax._src.stages":
                ahead_of_time = True
        elif top not in _PASSED_OVER:
            # The program's own code called the compile.
            site = f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
            break
        frame = frame.f_back
    return Dispatch(eager=False, owners=tuple(owners), site=site, ahead_of_time=ahead_of_time)


def _dispatch_verdict(frame: FrameType, module: str) -> bool | None:
    """True/False when this frame of JAX's says whose function compiles; None to go on."""
    name = frame.f_code.co_name
    if name == "apply_primitive" and module.endswith("dispatch"):
        return True
    if name == "_pjit_call_impl_python":
        source = _source_file(frame.f_locals.get("jaxpr"))
        if source is not None:
            return _in_jax_files(source)
    elif name == "cache_miss":
        fun = _wrapped_function(frame)
        if fun is not None:
            return _defined_in_jax(fun)
    return None


def _wrapped_function(frame: FrameType) -> Any:
    """The function a jitted callable wraps, in its ``cache_miss`` or ``_infer_params``."""
    local = frame.f_locals
    fun = local.get("fun")
    return getattr(local.get("jit_info"), "fun", None) if fun is None else fun


def _cache_owner(frame: FrameType) -> Any:
    """The object JAX keys this frame's caches on, in the frames that have one."""
    name = frame.f_code.co_name
    if name in ("cache_miss", "_infer_params"):
        return _wrapped_function(frame)
    if name == "_pjit_call_impl_python":
        return frame.f_locals.get("jaxpr")
    if name in ("jit_trace", "jit_lower"):  # jax.jit(f).trace(x), .lower(x)
        return getattr(frame.f_locals.get("jit_func"), "_fun", None)
    return None


def _source_file(jaxpr: Any) -> str | None:
    """The traced function's file from a ClosedJaxpr's debug info, when JAX recorded one."""
    debug = getattr(getattr(jaxpr, "jaxpr", None), "debug_info", None)
    info = getattr(debug, "func_src_info", None)
    if not isinstance(info, str) or " at " not in info:
        return None
    location = info.rpartition(" at ")[2]
    path = location.rpartition(":")[0] if location.rpartition(":")[2].isdigit() else location
    return path if os.path.isabs(path) else None


def _defined_in_jax(fun: Any) -> bool:
    for _ in range(32):  # unwrap partials and decorators down to the defining function
        if isinstance(fun, functools.partial):
            fun = fun.func
            continue
        wrapped = getattr(fun, "__wrapped__", None)
        if wrapped is None:
            break
        fun = wrapped
    fun = getattr(fun, "__func__", fun)  # a bound method: its function
    module = getattr(fun, "__module__", None)
    if not isinstance(module, str):
        module = type(fun).__module__
    return module.partition(".")[0] in JAX_PACKAGES


@functools.cache
def _jax_roots() -> tuple[str, ...]:
    """The jax and jaxlib package folders, as imported and with links resolved."""
    roots: set[str] = set()
    for name in JAX_PACKAGES:
        location = getattr(sys.modules.get(name), "__file__", None)
        if location:
            folder = os.path.dirname(location)
            roots.update({folder + os.sep, os.path.realpath(folder) + os.sep})
    return tuple(sorted(roots))


def _in_jax_files(path: str) -> bool:
    return path.startswith(_jax_roots())
