"""Why a function compiled again: JAX's own explanation of each tracing-cache miss.

JAX explains a tracing-cache miss (new input shapes or dtypes, a changed static argument,
a new function object) in a WARNING log record, and only while `jax_explain_cache_misses`
is on. A test with a ``max_compiles`` budget or a pinned compile count has it turned on
for its own thread while it runs (`explaining`, used by `CompileMonitor.capture`); the
records that exist only because of that are read and kept from the user's handlers, and
the setting is the user's again afterwards. Nothing else ever turns it on: it costs a
diff of cache keys on every miss.

PYTEST_DONT_REWRITE
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
_PYTREE_HEADER = "different input pytree:"
# "at input path [0][1], now A and before B, so the pytree node metadata does not match"
_PYTREE_DIFF = re.compile(
    r"^at input path (?P<path>\S+), now (?P<now>.*) and before (?P<before>.*), "
    r"so (?P<so>[^,]+)$"
)
# "at x, now f32[4] and before f32[3]"
_TYPE_DIFF = re.compile(r"^at (?P<name>[^,]+), now (?P<now>.*) and before (?P<before>.*)$")
# JAX's input pytree is (args, kwargs): [0][1] is the second positional argument.
_ARGUMENT_PATH = re.compile(
    r"^\[0\]\[(?P<index>\d+)\](?P<rest>.*)$|^\[1\]\[(?P<key>'[^']+')\](?P<kwrest>.*)$"
)
_FUNCTION_REPR = re.compile(r"<function (?P<name>[\w.<>]+) at 0x[0-9a-f]+>")
_STATIC = "Static(val="  # JAX's wrapper of a static argument's value in its pytree
MAX_SHOWN = 60  # characters of a value shown in a recompile's explanation, each side
CONTEXT = 20  # characters kept either side of a difference found in no small group


@dataclass(frozen=True)
class Retrace:
    """One tracing-cache miss as JAX explained it."""

    function: str
    defined_at: str | None
    why: str
    new_function: bool = False  # JAX had never traced this function object
    # The user's function a wrapper jits under its own name (equinox's filter_jit keeps it
    # in its static argument: JAX's explanation names it there); None when not named.
    wrapped: str | None = None

    def describe(self) -> str:
        where = f", {self.defined_at}" if self.defined_at else ""
        if self.wrapped is not None:
            return f"{self.wrapped} (via {self.function}{where}): {self.why}"
        return f"{self.function}{f' ({self.defined_at})' if self.defined_at else ''}: {self.why}"


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
    function = seen_for["name"]
    named = [m["name"] for m in _FUNCTION_REPR.finditer(text)]
    wrapped = next((name for name in named if name.rpartition(".")[2] != function), None)
    return Retrace(
        function,
        _short_path(seen_for["at"]),
        _explanation(body[1:]),
        wrapped=None if wrapped is None else wrapped.rpartition(".")[2],
    )


def _explanation(lines: Sequence[str]) -> str:
    """JAX's lines joined: a line ending in ":" introduces the next, others are separate."""
    text = ""
    for line in lines:
        if line.startswith(_PREAMBLE) or line == _PYTREE_HEADER:
            continue  # each pytree line names itself (`_shortened`)
        if "explanation unavailable" in line:
            line = "JAX gave no explanation"
        line = _shortened(_PYTREE_NODE.sub("", line.removeprefix("* ")))
        text += line if not text or text.endswith(": ") else f"; {line}"
        if text.endswith(":"):
            text += " "
    return text.rstrip(": ") or "JAX gave no explanation"


def _shortened(line: str) -> str:
    """One of JAX's "at ..., now A and before B" lines with the argument named and only
    the part of A and B that differs shown, shortened (a wrapper's static argument holds
    its whole configuration: hundreds of characters, twice)."""
    pytree = _PYTREE_DIFF.match(line)
    if pytree is not None:
        now, before = pytree["now"], pytree["before"]
        static = now.startswith(_STATIC) and before.startswith(_STATIC)
        while now.startswith(_STATIC) and before.startswith(_STATIC):
            now, before = now[len(_STATIC) : -1], before[len(_STATIC) : -1]
        now, before = differing(now, before)
        if static:
            return f"static {_argument(pytree['path'])} changed: now {now} and before {before}"
        return (
            f"input pytree at {_argument(pytree['path'])}: now {now} and before {before}, "
            f"so {pytree['so']}"
        )
    types = _TYPE_DIFF.match(line)
    if types is not None:
        now, before = differing(types["now"], types["before"])
        return f"at {types['name']}, now {now} and before {before}"
    return line


def _argument(path: str) -> str:
    """``argument 1`` for JAX's input path ``[0][1]``, ``argument 'k'`` for ``[1]['k']``."""
    found = _ARGUMENT_PATH.match(path)
    if found is None:
        return f"input path {path}"
    if found["index"] is not None:
        return f"argument {found['index']}" + (f" at {found['rest']}" if found["rest"] else "")
    return f"argument {found['key']}" + (f" at {found['kwrest']}" if found["kwrest"] else "")


_OPENERS, _CLOSERS = "([{", ")]}"


def differing(now: str, before: str, limit: int = MAX_SHOWN) -> tuple[str, str]:
    """The part of two values' texts that differs, in the smallest bracketed group around
    it (``('factor', 3.0)``), each side at most `limit` characters; ``...`` marks what is
    left out. Values short enough are kept whole."""
    if len(now) <= limit and len(before) <= limit:
        return now, before
    prefix = 0
    while prefix < min(len(now), len(before)) and now[prefix] == before[prefix]:
        prefix += 1
    suffix = 0
    while suffix < min(len(now), len(before)) - prefix and now[-1 - suffix] == before[-1 - suffix]:
        suffix += 1
    start = _group_start(now, prefix)
    while start is not None:  # outward, to the first group holding the whole difference
        end_now, end_before = _group_end(now, start), _group_end(before, start)
        if end_now is None or end_before is None:
            break
        if end_now >= len(now) - suffix and end_before >= len(before) - suffix:
            if max(end_now, end_before) - start <= limit:
                return _part(now, start, end_now), _part(before, start, end_before)
            break
        start = _group_start(now, start)
    # No small group: the differing tokens, with at most CONTEXT characters either side.
    start = max(_token_start(now, prefix), prefix - CONTEXT)
    return tuple(  # type: ignore[return-value]
        _part(text, start, min(_token_end(text, len(text) - suffix), len(text) - suffix + CONTEXT))
        for text in (now, before)
    )


def _group_start(text: str, position: int) -> int | None:
    """The opening bracket of the innermost group holding `position`."""
    depth = 0
    for index in range(min(position, len(text)) - 1, -1, -1):
        if text[index] in _CLOSERS:
            depth += 1
        elif text[index] in _OPENERS:
            if depth == 0:
                return index
            depth -= 1
    return None


def _group_end(text: str, start: int) -> int | None:
    """One past the bracket closing the group opened at `start`."""
    depth = 0
    for index in range(start, len(text)):
        if text[index] in _OPENERS:
            depth += 1
        elif text[index] in _CLOSERS:
            depth -= 1
            if depth == 0:
                return index + 1
    return None


def _token_start(text: str, position: int) -> int:
    while position > 0 and text[position - 1] not in " ,=" + _OPENERS:
        position -= 1
    return position


def _token_end(text: str, position: int) -> int:
    while position < len(text) and text[position] not in " ," + _CLOSERS:
        position += 1
    return position


def _part(text: str, start: int, end: int, limit: int = MAX_SHOWN) -> str:
    shown = text[start:end]
    if len(shown) > limit:
        half = (limit - 3) // 2
        shown = f"{shown[:half]}...{shown[-half:]}"
    return ("..." if start > 0 else "") + shown + ("..." if end < len(text) else "")


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
