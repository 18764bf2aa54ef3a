"""What a row records of its lowered module's text: name, fingerprint, op count and ops.

A module can embed megabytes of constants (``dense<"0x...">`` payloads of the arrays a
function closes over), so its text is read once and only as far as each figure needs:
`ModuleText` computes each figure on first use and keeps it. The ops are found where the
text says ``stablehlo.`` (a substring search, which passes over constant payloads at memory
speed) and each occurrence is judged by the same expression that once ran over the whole
text, so the count, the histogram and the fingerprint are what pins have always stored.

Printing a module is itself the cost (tens of milliseconds for a module of MB of constants
or 10k ops): `ModuleText.of` a Lowered reads the name from the module's symbol and prints
the text only when a figure or a consumer first asks for it. A row whose module JAX's
cache key shows is a pinned one takes that pin's figures and is never printed
(backends/jax/measure.py).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cached_property
from typing import Any

from pytest_jaxcompile.backends import fingerprint_of

_MODULE_NAME = re.compile(r"module @([\w.$-]+)")
_BARE_NAME = re.compile(r"[\w.$-]+")  # a symbol the text prints bare, as _MODULE_NAME reads it
# An op is "stablehlo.name" in operation position: not an attribute ("#stablehlo.") or type.
STABLEHLO_OP = re.compile(r"(?<![#\w.!])\"?stablehlo\.[a-z_0-9]+")
_OP_PREFIX = "stablehlo."
# An op's match at the prefix itself: the expression above, its optional quote left out. A
# quote before the prefix passes the look-behind there, so every match of the expression
# has one, at its prefix, with the same name.
_OP_AT_PREFIX = re.compile(r"(?<![#\w.!])stablehlo\.[a-z_0-9]+")


def op_histogram(module_text: str) -> dict[str, int]:
    """StableHLO operations of a lowered module by name, e.g. ``{"stablehlo.tanh": 36}``:
    what ``STABLEHLO_OP.findall`` finds, without running it over the constants."""
    names: dict[str, int] = {}
    find, match = module_text.find, _OP_AT_PREFIX.match
    start = find(_OP_PREFIX)
    while start >= 0:
        found = match(module_text, start)
        if found is not None:
            name = found.group()
            names[name] = names.get(name, 0) + 1
            start = find(_OP_PREFIX, found.end())
        else:
            start = find(_OP_PREFIX, start + len(_OP_PREFIX))
    return dict(sorted(names.items()))


def module_name_of(module_text: str) -> str | None:
    """``jit_f``: the name in the module's first line (``module @jit_f``), or None."""
    match = _MODULE_NAME.search(module_text[:500])
    return match.group(1) if match else None


class ModuleText:
    """A lowered module's text and the figures a row records of it, each computed once, on
    first use (a compile that raised needs its name and fingerprint only). The text is
    given, or printed on first use by the function given."""

    def __init__(self, text: str | Callable[[], str], name: str | None = None) -> None:
        self._text = text
        self._symbol = name  # the name read without the text, where it was

    @classmethod
    def of(cls, lowered: Any) -> ModuleText:
        """A Lowered's module, printed (``as_text()``) only when first read."""
        return cls(lowered.as_text, name=symbol_name(lowered))

    @cached_property
    def text(self) -> str:
        return self._text if isinstance(self._text, str) else self._text()

    @cached_property
    def name(self) -> str | None:
        return self._symbol if self._symbol is not None else module_name_of(self.text)

    @cached_property
    def fingerprint(self) -> str:
        return fingerprint_of(self.text)

    @cached_property
    def ops(self) -> dict[str, int]:
        """The op histogram (`op_histogram`)."""
        return op_histogram(self.text)

    @property
    def op_count(self) -> int:
        return sum(self.ops.values())


def symbol_name(lowered: Any) -> str | None:
    """The module's name as its text's first line prints it (`module_name_of`), read from
    its symbol without printing it; None where the symbol is not one printed bare (the text
    is read then)."""
    try:
        value = lowered.compiler_ir("stablehlo").operation.attributes["sym_name"].value
    except Exception:  # no such dialect or attribute in this jax: the text says
        return None
    return value if isinstance(value, str) and _BARE_NAME.fullmatch(value) else None
