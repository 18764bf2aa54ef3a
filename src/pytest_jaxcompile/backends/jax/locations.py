"""Where in the user's code a lowered module's operations come from.

Every operation of a lowered module carries its location: the Python frames that made it
(JAX keeps the user's frames, each a function's name and its file and line, innermost
first) and the name stack of the transformations. Printed with debug info
(``Lowered.as_text(debug_info=True)``), an operation ends with ``loc(#locN)`` and the
module ends with the aliases::

    #loc5 = loc("/src/model.py":41:8 to :23)
    #loc12 = loc("loss"(#loc5))                     a frame: the function and where
    #loc18 = loc(callsite(#loc12 at #loc11))          callee at caller
    #loc23 = loc("jit(loss)/jvp()/tanh"(#loc18))    the op's name stack, around its frames

`source_histogram` counts the StableHLO operations by their innermost frame outside jax and
site-packages (``model.py:41 (loss)``), relative to the project root where inside it, the
largest `KEPT` locations kept (a compact histogram: the pin holds it). The session reads it
only for a pin update's rows and for failing rows, after the tests, from the module each
row compiled (`read_sources`); the row's fingerprint is of its text without locations, so
moving code changes no fingerprint.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KEPT = 30  # locations a histogram keeps: the largest
# An op is "stablehlo.name" in operation position (as measure.count_ops counts them)
_OP = re.compile(r"(?<![#\w.!])\"?stablehlo\.[a-z_0-9]+")
_ALIAS = re.compile(r"^(#loc\d*) = loc\((.*)\)\s*$")
_TRAILING = re.compile(r"loc\((#loc\d*|.*)\)\s*$")
_FILE = re.compile(r'^"((?:[^"\\]|\\.)*)":(\d+)(?::\d+)?(?: to .*)?$')
_NAMED = re.compile(r'^"((?:[^"\\]|\\.)*)"\((.*)\)$')
# jax, site-packages, the plugin (it calls the jitted function) and pytest are not the user's
_NOT_USER = (
    "/site-packages/",
    "/dist-packages/",
    "/jax/_src/",
    "/jaxlib/",
    "/pytest_jaxcompile/",
    "/_pytest/",
    "/pluggy/",
    "<frozen ",
)


@dataclass(frozen=True)
class Frame:
    function: str | None
    file: str
    line: int


class _Locations:
    """The module's location aliases, each resolved to its frames once, innermost first."""

    def __init__(self, aliases: dict[str, str]) -> None:
        self.aliases = aliases
        self.resolved: dict[str, list[Frame]] = {}

    def frames(self, body: str, depth: int = 0) -> list[Frame]:
        body = body.strip()
        if depth > 200:  # a cycle cannot be printed, but a damaged text must not hang
            return []
        if body.startswith("#loc"):
            if body not in self.resolved:
                self.resolved[body] = []  # a self-reference resolves to nothing
                self.resolved[body] = self.frames(self.aliases.get(body, "unknown"), depth + 1)
            return self.resolved[body]
        if body.startswith("loc(") and body.endswith(")"):
            return self.frames(body[4:-1], depth + 1)
        if body.startswith("callsite(") and body.endswith(")"):
            callee, _, caller = body[9:-1].partition(" at ")
            return self.frames(callee, depth + 1) + self.frames(caller, depth + 1)
        if body.startswith("fused"):
            inside = body[body.find("[") + 1 : body.rfind("]")]
            return [frame for part in _split(inside) for frame in self.frames(part, depth + 1)]
        file = _FILE.match(body)
        if file:
            return [Frame(None, file.group(1), int(file.group(2)))]
        named = _NAMED.match(body)
        if named:
            inner = self.frames(named.group(2), depth + 1)
            if self._is_file(named.group(2)) and inner:  # a frame: its function, its place
                return [Frame(named.group(1), inner[0].file, inner[0].line), *inner[1:]]
            return inner  # an op's name stack around its frames
        return []

    def _is_file(self, body: str) -> bool:
        body = body.strip()
        if body.startswith("#loc"):
            body = self.aliases.get(body, "").strip()
        if body.startswith("loc(") and body.endswith(")"):
            body = body[4:-1]
        return _FILE.match(body) is not None


def _split(text: str) -> list[str]:
    """A fused location's parts, split at top-level commas."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return [part for part in parts if part.strip()]


def user_frame(frames: list[Frame]) -> Frame | None:
    """The innermost frame outside jax and site-packages."""
    return next((frame for frame in frames if not any(n in frame.file for n in _NOT_USER)), None)


def label(frame: Frame, root: Path | None) -> str:
    """``model.py:41 (loss)``: the file relative to the project root where inside it."""
    path = frame.file
    if root is not None:
        with contextlib.suppress(ValueError):  # outside the project: the path as it is
            path = Path(frame.file).resolve().relative_to(root.resolve()).as_posix()
    return f"{path}:{frame.line} ({frame.function or '?'})"


def source_histogram(debug_text: str, root: Path | None = None) -> dict[str, int]:
    """A module's StableHLO operations by their innermost user frame (see the module doc),
    the `KEPT` largest locations; operations with no user frame are not counted."""
    lines = debug_text.splitlines()
    aliases = {}
    for line in reversed(lines):  # the aliases close the text
        match = _ALIAS.match(line)
        if match is None:
            if line.startswith("#loc") or not line.strip():
                continue
            break
        aliases[match.group(1)] = match.group(2)
    for line in lines:  # printed before the module too (its arguments' locations)
        match = _ALIAS.match(line)
        if match is None:
            break
        aliases[match.group(1)] = match.group(2)
    locations = _Locations(aliases)
    labels: dict[str, str | None] = {}
    counts: Counter[str] = Counter()
    for line in lines:
        ops = len(_OP.findall(line))
        if not ops or line.startswith("#loc"):
            continue
        trailing = _TRAILING.search(line)
        if trailing is None:
            continue
        where = trailing.group(1)
        if where not in labels:
            frame = user_frame(locations.frames(where))
            labels[where] = None if frame is None else label(frame, root)
        named = labels[where]
        if named is not None:
            counts[named] += ops
    return dict(counts.most_common(KEPT))


def read_sources(module: Any, root: Path | None) -> dict[str, int]:
    """The source histogram of an MLIR module object (as JAX compiled it), printed with
    its locations."""
    text = module.operation.get_asm(enable_debug_info=True)
    return source_histogram(str(text), root)
