"""What every backend's rows are held to, framework-neutral: the settings a project requires.

`Requirements` (ini ``compile_required_xla_flags``, ``compile_require_cache``,
``compile_require_cacheable``, ``compile_expected_platform``), the settings that changed
during a session (`Clobber`); the choices of ``compile_clear_caches`` and the platform names
live in `_constants`. Pure logic over what records carry: the options, the session and the gate
read these without reaching a backend; what only one framework knows (XLA's flag rules, JAX's
settings) is its backend's.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import functools
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_jaxcompile._constants import PLATFORM_ALIASES
from pytest_jaxcompile.records import REASON_UNEXPLAINED, CacheState, CompileRecord


@dataclass(frozen=True)
class Requirements:
    """What a project declared must be in force for every compile."""

    xla_flags: dict[str, str | None] = field(default_factory=dict)
    cache: bool = False
    cacheable: bool = False
    platform: str | None = None  # gpu, tpu or cpu


def parse_xla_flags(raw: str | None) -> dict[str, str | None]:
    """``--a=1 --b`` -> ``{"--a": "1", "--b": None}``; the last occurrence wins, as in XLA."""
    return dict(_parsed_flags(raw)) if raw else {}


@functools.lru_cache(maxsize=32)
def _parsed_flags(raw: str) -> tuple[tuple[str, str | None], ...]:
    # Parsed once per value: a census reads XLA_FLAGS at every test that compiled.
    flags: dict[str, str | None] = {}
    try:
        words = shlex.split(raw)
    except ValueError:  # unbalanced quotes: fall back to whitespace, as XLA would see it
        words = raw.split()
    for word in words:
        name, sep, value = word.partition("=")
        flags[name] = value if sep else None
    return tuple(flags.items())


def render_flags(flags: Mapping[str, str | None]) -> str:
    return " ".join(name if value is None else f"{name}={value}" for name, value in flags.items())


def platform_problem(expected: str | None, actual: str, device: str) -> str | None:
    """`device` names what ran the compile, e.g. "JAX's default backend"."""
    if expected is None:
        return None
    normalized = PLATFORM_ALIASES.get(actual.lower(), actual.lower())
    if normalized == expected:
        return None
    return (
        f"compile_expected_platform = {expected}, but {device} is {actual}: "
        f"the job silently fell back (check the jaxlib/plugin install, JAX_PLATFORMS and "
        "that the accelerator is visible); no compile rows were recorded"
    )


def cache_problem(record: CompileRecord, requirements: Requirements) -> str | None:
    """Why this compile ran without the persistent cache ini compile_require_cache asks for."""
    without_cache = record.cache_state == CacheState.NONE.value or (
        record.cache.reason == "cache_not_consulted"
    )
    if requirements.cache and without_cache:
        return (
            f"transform {record.transform!r} compiled without a persistent compilation "
            f"cache ({record.cache.reason_detail}; required by ini compile_require_cache)"
        )
    return None


def uncacheable_reason(record: CompileRecord) -> str | None:
    """Why this module can never be served from the persistent cache, if its backend said so."""
    if record.cache_state == CacheState.NONE.value:
        return "no persistent compilation cache is configured"
    if (
        record.cache_state == CacheState.COLD.value
        and record.cache.persisted is False
        and record.cache.reason not in (None, REASON_UNEXPLAINED)
    ):
        return record.cache.reason_detail or record.cache.reason
    return None


def uncacheable_problem(record: CompileRecord, found: str | None = None) -> str | None:
    """The failure of a row that compile_budget(cacheable=True) or
    compile_require_cacheable asks to be persistent-cacheable and is not; `found`: a reason
    the gate found beyond the backend's (a key new in every process: `gate.always_cold`)."""
    reason = uncacheable_reason(record) or found
    if reason is None:
        return None
    return (
        f"transform {record.transform!r} can never be served from the persistent "
        f"cache: {reason} (compile_budget(cacheable=True) / compile_require_cacheable)"
    )


@dataclass(frozen=True)
class Clobber:
    """A setting that differed at a compile from what it was at session start.

    ``XLA_FLAGS`` is compared with its value when the plugin loaded, before any
    ``conftest.py`` (`since` says so): a clobber is a flag discarded (or changed) before
    XLA's backend started, or a change after it started (`late`: XLA does not apply it).
    """

    setting: str
    at_start: Any
    at_compile: Any
    first_cell: str
    discarded: tuple[str, ...] = ()  # env flags that were dropped (XLA_FLAGS only)
    fails: bool = False  # a required setting is affected
    # XLA_FLAGS only: the flags XLA read when its backend started (None: not known)
    at_backend_start: str | None = None
    # where `at_start` was seen: None at `since`, else the test of the session's first
    # compile (the framework was not imported when the session started)
    baseline_cell: str | None = None
    since: str = "session start"
    # where the variable was changed (a conftest.py, a module, a test phase), when known
    changed_by: str | None = None
    late: bool = False  # XLA_FLAGS changed after XLA's backend started

    @property
    def ignored_by_xla(self) -> bool:
        """XLA_FLAGS changed after XLA's backend started: XLA does not apply the change."""
        return self.late or (
            self.at_backend_start is not None
            and parse_xla_flags(self.at_backend_start) != parse_xla_flags(str(self.at_compile))
        )

    def _value(self, value: object) -> str:
        """A value as the line says it; XLA_FLAGS without a flag (unset or empty) as words,
        not as ``''``."""
        if self.setting == "XLA_FLAGS" and value in ("", None):
            return "no flags (XLA_FLAGS unset)"
        return repr(value)

    def describe(self) -> str:
        since = (
            self.since
            if self.baseline_cell is None
            else f"the session's first compile ({self.baseline_cell})"
        )
        by = f" (changed by {self.changed_by})" if self.changed_by else ""
        if self.late:
            text = (
                f"{self.setting} changed after JAX's backend started: XLA started with "
                f"{self._value(self.at_start)}; {self._value(self.at_compile)} from "
                f"{self.first_cell} on{by} is "
                "not in force: XLA read XLA_FLAGS once, when its backend started, and does "
                "not apply this change, but JAX hashes XLA_FLAGS into every persistent-cache "
                "key: compiles from then on miss the entries cached under the old value and "
                "compile cold"
            )
            if self.discarded:
                text += (
                    f"; flags removed from the environment: {', '.join(self.discarded)} "
                    "(XLA still compiles with the flags it started with)"
                )
            return text
        text = (
            f"{self.setting} changed during the session: {self._value(self.at_start)} at "
            f"{since}, {self._value(self.at_compile)} from {self.first_cell} on (the first "
            f"test that saw it){by}"
        )
        if self.ignored_by_xla:
            text += (
                f"; XLA read XLA_FLAGS once, when its backend started "
                f"({self._value(self.at_backend_start)}), and does not apply this change, but "
                "JAX hashes "
                "XLA_FLAGS into every persistent-cache key: compiles from then on miss the "
                "entries cached under the old value and compile cold"
            )
        if self.discarded:
            text += f"; flags set in the environment were DISCARDED: {', '.join(self.discarded)}"
        return text
