"""Why a function compiled again: JAX's own explanation of each tracing-cache miss.

JAX explains a tracing-cache miss (new input shapes or dtypes, a changed static argument,
a new function object) in a WARNING log record, and only while `jax_explain_cache_misses`
is on. A test with a ``max_compiles`` budget or a pinned compile count has it turned on
for its own thread while it runs (`explaining`, used by `CompileMonitor.capture`); the
records that exist only because of that are read and kept from the user's handlers, and
the setting is the user's again afterwards. Nothing else ever turns it on: it costs a
diff of cache keys on every miss.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pytest_jaxcompile.backends import Recompile, recompiles

# The loggers JAX explains tracing-cache misses in: jax >= 0.5 in partial_eval's
# trace_to_jaxpr, jax 0.4.30 in pjit's _create_pjit_jaxpr.
RETRACE_LOGGERS = ("jax._src.interpreters.partial_eval", "jax._src.pjit")
RETRACE_HEADER = "TRACING CACHE MISS"

# Records JAX's compiler and cache modules raise from DEBUG to WARNING while the setting is
# on: with the plugin's explanation they still reach the user's handlers only as DEBUG.
EXPLAIN_RAISED_PREFIXES = (
    "PERSISTENT COMPILATION CACHE MISS",
    "Not writing persistent cache entry",
    "Writing ",
    "_get_cache: Unsupported runtime",
)

_FIRST_SEEN = re.compile(r"never seen function:\s+(?P<name>.+?) id=\d+(?: defined at (?P<at>\S+))?")
_SEEN_FOR = re.compile(r"for (?P<name>.+?)(?: defined at (?P<at>\S+))?$")
_SAME_LINE = "but seen another function defined on the same line"
# "<class 'jax._src.tree_util.Static'> with pytree metadata Static(val=3)": the value says it.
_PYTREE_NODE = re.compile(r"<class '[^']+'> with pytree metadata ")
# Lines of JAX's message that introduce rather than explain.
_PREAMBLE = ("all previously seen cache keys differ", "For the closest previous key")


@dataclass(frozen=True)
class Retrace:
    """One tracing-cache miss as JAX explained it."""

    function: str
    defined_at: str | None
    why: str
    new_function: bool = False  # JAX had never traced this function object

    def describe(self) -> str:
        where = f" ({self.defined_at})" if self.defined_at else ""
        return f"{self.function}{where}: {self.why}"


def parse_explanation(message: str) -> Retrace | None:
    """A `Retrace` from JAX's "TRACING CACHE MISS ..." message; None for anything else.

    The wording differs between jax versions (0.4.30 says "seen f32[3], but now given
    f32[4]", later ones "now f32[4] and before f32[3]"): what explains is kept as JAX
    wrote it, only the lines are joined.
    """
    lines = [line.strip() for line in message.splitlines()]
    if not lines or not lines[0].startswith(RETRACE_HEADER):
        return None
    body = [line for line in lines[1:] if line]
    text = " ".join(body)
    first = _FIRST_SEEN.search(text)
    if first is not None:
        same_line = _SAME_LINE in text
        why = (
            "a new function object, defined where an earlier one was: it is re-created "
            "(a fresh closure, lambda or jax.jit) on every call, so JAX cannot reuse its trace"
            if same_line
            else "first trace of this function object"
        )
        return Retrace(first["name"], _short_path(first["at"]), why, new_function=True)
    seen_for = _SEEN_FOR.match(body[0]) if body else None
    if seen_for is None:
        return Retrace("<unknown>", None, _explanation(body))
    return Retrace(seen_for["name"], _short_path(seen_for["at"]), _explanation(body[1:]))


def _explanation(lines: Sequence[str]) -> str:
    """JAX's lines joined: a line ending in ":" introduces the next, others are separate."""
    text = ""
    for line in lines:
        if line.startswith(_PREAMBLE):
            continue
        if "explanation unavailable" in line:
            line = "JAX gave no explanation"
        line = _PYTREE_NODE.sub("", line.removeprefix("* "))
        text += line if not text or text.endswith(": ") else f"; {line}"
        if text.endswith(":"):
            text += " "
    return text.rstrip(": ") or "JAX gave no explanation"


def _short_path(location: str | None) -> str | None:
    """`file.py:12` for `/abs/dir/file.py:12`: the test file is named in the failure."""
    if not location:
        return None
    path, colon, line = location.rpartition(":")
    if not colon or not line.isdigit():
        return Path(location).name
    return f"{Path(path).name}:{line}"


class _Compiled(Protocol):
    """What `recompile_explanations` needs of a module compile (`monitor.ModuleCompile`)."""

    @property
    def fun_name(self) -> str: ...

    @property
    def retraces(self) -> list[Retrace]: ...


# A compile with no tracing-cache miss before it reused its trace.
NO_RETRACE = (
    "JAX reused its trace (no tracing-cache miss): a lowering or executable cache missed, "
    "or the caches were cleared"
)


def recompile_explanations(compiles: Sequence[_Compiled]) -> list[Recompile]:
    """Each compile of a module after its first, with JAX's explanations of the
    tracing-cache misses that led to it."""
    return recompiles(
        (
            (module.fun_name, "; ".join(r.describe() for r in module.retraces) or None)
            for module in compiles
        ),
        NO_RETRACE,
    )


@contextlib.contextmanager
def explaining() -> Iterator[bool]:
    """Turn on `jax_explain_cache_misses` for the current thread until the block exits.

    Yields True when the plugin turned it on, False when the user already had it on (their
    records then reach their handlers as they always do). JAX's setting is thread-local
    inside the block and is restored on exit.
    """
    from jax._src import config as jax_config

    setting = jax_config.explain_cache_misses
    if setting.value:
        yield False
        return
    with setting(True):
        yield True
