"""Rows that can never be served from the persistent cache, and why.

Two kinds, each from evidence the plugin already keeps:

- the backend never writes the module, whatever the settings (JAX before 0.11: a module
  with host callbacks, ``jax.debug.print``, ``jax.pure_callback``), as it reported at the
  compile (`Backend.never_persisted`);
- the module gets a new persistent-cache key in every process: JAX wrote it, yet it has
  no warm pin although its key holds warm pins (it stayed cold in the session that pinned
  them), and its key's parts differ from those of its own cold pin, written by an earlier
  session (a function closing over a value made afresh in each process, such as unseeded
  random data, is a new computation every time).

`always_cold` is the one test of a row: the gate's expected-warm judging, the session's
``compile_budget(cacheable=True)`` check and the summary's block all call it.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pytest_jaxcompile.gate.pins import PinStore
from pytest_jaxcompile.records import CacheState, CompileRecord

NEW_KEY = "new cache key"  # AlwaysCold.cause of a key that differs in every process


@dataclass(frozen=True)
class AlwaysCold:
    """A cold row that no persistent cache can serve: why, and for a new key which parts."""

    cell: str
    transform: str
    cause: str  # the backend's words ("host callbacks"), or NEW_KEY
    parts: tuple[str, ...] = ()  # NEW_KEY: the key parts that changed between processes

    @property
    def new_key(self) -> bool:
        return self.cause == NEW_KEY

    def parts_text(self) -> str:
        return ", ".join(f"the {part} part" for part in self.parts)

    def brief(self) -> str:
        """``tests/test_x.py::test_y [jit(f)]: host callbacks``: one line per row."""
        cause = f"{NEW_KEY} in every process ({self.parts_text()})" if self.new_key else self.cause
        return f"{self.cell} [{self.transform}]: {cause}"

    def describe(self) -> str:
        """Why, in a sentence without its subject: "it uses host callbacks, ..."."""
        if self.new_key:
            return (
                f"it gets a new cache key in every process ({self.parts_text()} differs from "
                "its cold pin's, and it has no warm pin where other rows have one): look for "
                "a value made afresh in each process (unseeded random data, a pid, a time) "
                "that the function closes over"
            )
        return f"it uses {self.cause}, which {_backend_words(self.cause)}"


def _backend_words(cause: str) -> str:
    return (
        "JAX before 0.11 never persists"
        if cause == "host callbacks"
        else ("its framework never persists")
    )


def always_cold(record: CompileRecord, store: PinStore) -> AlwaysCold | None:
    """Why this row can never be served from the persistent cache; None when it can be
    (or the evidence does not say)."""
    if record.cache_state != CacheState.COLD.value:
        return None
    from pytest_jaxcompile.backends import backend_of

    backend = backend_of(record)
    cause = backend.never_persisted(record)
    if cause is not None:
        return AlwaysCold(record.cell, record.transform, cause)
    if record.cache.persisted is not True:
        return None
    warm_key = dataclasses.replace(record.key, cache_state=CacheState.WARM.value)
    if store.get(warm_key, record.cell, record.transform) is not None:
        return None  # it was warm once: a cold row now is the gate's MISS or a changed module
    if not store.has_pins(warm_key):
        return None  # no session pinned warm rows: nothing says this one stayed cold
    pin = store.get(record.key, record.cell, record.transform)
    parts = None if pin is None else backend.differing_parts(record.cache_key_parts, pin.key_parts)
    if not parts:
        return None
    return AlwaysCold(record.cell, record.transform, NEW_KEY, tuple(parts))


def find_always_cold(records: Iterable[CompileRecord], store: PinStore) -> list[AlwaysCold]:
    return [found for record in records if (found := always_cold(record, store)) is not None]


def always_cold_text(rows: Sequence[AlwaysCold]) -> str | None:
    """``3 row(s) can never be served from the persistent cache: 2 use host callbacks; 1
    gets a new cache key in every process: the computation part``; None for no rows."""
    if not rows:
        return None
    causes = Counter(row.cause for row in rows if not row.new_key)
    said = [
        f"{count} use{'s' if count == 1 else ''} {cause} ({_backend_words(cause)} them)"
        for cause, count in sorted(causes.items())
    ]
    parts = Counter(row.parts_text() for row in rows if row.new_key)
    if parts:
        count = sum(parts.values())
        said.append(
            f"{count} get{'s' if count == 1 else ''} a new cache key in every process: "
            + "; ".join(
                text if len(parts) == 1 else f"{text} ({n})" for text, n in sorted(parts.items())
            )
        )
    return f"{len(rows)} row(s) can never be served from the persistent cache: " + "; ".join(said)
