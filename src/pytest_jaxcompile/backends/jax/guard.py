"""Settings that silently stop applying: required flags, the cache, clobbering, platform.

Pure logic over what records carry; `snapshot_settings` is the one place that reads
the process's live settings (and imports jax).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_jaxcompile.backends import backend_of
from pytest_jaxcompile.backends.jax.classify import REASON_UNEXPLAINED
from pytest_jaxcompile.records import CacheState, CompileRecord

XLA_FLAGS_ENV = "XLA_FLAGS"
PLATFORM_ALIASES = {"cuda": "gpu", "rocm": "gpu", "gpu": "gpu", "tpu": "tpu", "cpu": "cpu"}
CACHE_SETTING_NAMES = (
    "jax_compilation_cache_dir",
    "jax_enable_compilation_cache",
    "jax_persistent_cache_min_compile_time_secs",
    "jax_persistent_cache_min_entry_size_bytes",
    "jax_compilation_cache_max_size",
)


def parse_xla_flags(raw: str | None) -> dict[str, str | None]:
    """``--a=1 --b`` -> ``{"--a": "1", "--b": None}``; the last occurrence wins, as in XLA."""
    flags: dict[str, str | None] = {}
    if not raw:
        return flags
    try:
        words = shlex.split(raw)
    except ValueError:  # unbalanced quotes: fall back to whitespace, as XLA would see it
        words = raw.split()
    for word in words:
        name, sep, value = word.partition("=")
        flags[name] = value if sep else None
    return flags


def snapshot_settings() -> dict[str, Any]:
    """The settings that decide compile time, as in force right now (imports jax)."""
    import jax

    config = jax.config
    raw_flags = os.environ.get(XLA_FLAGS_ENV)
    return {
        "xla_flags": parse_xla_flags(raw_flags),
        "cache": {name: _jsonable(getattr(config, name, None)) for name in CACHE_SETTING_NAMES},
        "x64": bool(getattr(config, "jax_enable_x64", False)),
        "default_matmul_precision": _jsonable(
            getattr(config, "jax_default_matmul_precision", None)
        ),
    }


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


@dataclass(frozen=True)
class Requirements:
    """What a project declared must be in force for every compile."""

    xla_flags: dict[str, str | None] = field(default_factory=dict)
    cache: bool = False
    cacheable: bool = False
    platform: str | None = None  # gpu, tpu or cpu


def missing_flags(
    required: Mapping[str, str | None], in_force: Mapping[str, str | None]
) -> list[str]:
    """Required flags absent from (or set differently in) the flags in force."""
    problems = []
    for name, value in required.items():
        if name not in in_force:
            problems.append(f"{name}={value}" if value is not None else name)
        elif value is not None and in_force[name] != value:
            problems.append(f"{name}={value} (in force: {name}={in_force[name]})")
    return problems


def settings_problems(record: CompileRecord, requirements: Requirements) -> list[str]:
    """Why this compile ran without a required setting; empty when all applied.

    XLA flags are checked on the rows of backends that compile with XLA only.
    """
    problems = []
    missing = (
        missing_flags(requirements.xla_flags, parse_xla_flags(record.xla_flags))
        if backend_of(record).xla_rules else []
    )
    if missing:
        problems.append(
            f"transform {record.transform!r} compiled without the required XLA flag(s) "
            f"{', '.join(missing)} (XLA_FLAGS in force: {record.xla_flags or 'unset'!r}; "
            "required by ini compile_required_xla_flags)"
        )
    without_cache = record.cache_state == CacheState.NONE.value or (
        record.cache.reason == "cache_not_consulted"
    )
    if requirements.cache and without_cache:
        problems.append(
            f"transform {record.transform!r} compiled without a persistent compilation "
            f"cache ({record.cache.reason_detail}; required by ini compile_require_cache)"
        )
    return problems


def uncacheable_reason(record: CompileRecord) -> str | None:
    """Why this module can never be served from the persistent cache, if JAX said so."""
    if record.cache_state == CacheState.NONE.value:
        return "no persistent compilation cache is configured"
    if (
        record.cache_state == CacheState.COLD.value
        and record.cache.persisted is False
        and record.cache.reason not in (None, REASON_UNEXPLAINED)
    ):
        return record.cache.reason_detail or record.cache.reason
    return None


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


@dataclass(frozen=True)
class Clobber:
    """A setting that differed at a compile from what it was at session start."""

    setting: str
    at_start: Any
    at_compile: Any
    first_cell: str
    discarded: tuple[str, ...] = ()  # env flags that were dropped (XLA_FLAGS only)
    fails: bool = False  # a required setting is affected

    def describe(self) -> str:
        text = (
            f"{self.setting} changed during the session: {self.at_start!r} at session start, "
            f"{self.at_compile!r} from {self.first_cell} on (the first test that saw it)"
        )
        if self.discarded:
            text += (
                f"; flags set in the environment were DISCARDED: {', '.join(self.discarded)}"
            )
        return text


def find_clobbers(
    start: Mapping[str, Any], records: Iterable[CompileRecord]
) -> list[Clobber]:
    """The first compile under different XLA_FLAGS or cache settings than at start.

    Only rows of backends that compile with XLA carry these settings.
    """
    clobbers: dict[str, Clobber] = {}
    start_flags: Mapping[str, str | None] = start.get("xla_flags", {})
    start_cache: Mapping[str, Any] = start.get("cache", {})
    for record in records:
        if not backend_of(record).xla_rules:
            continue
        settings = record.settings or {}
        flags = settings.get("xla_flags", {})
        if "XLA_FLAGS" not in clobbers and flags != start_flags:
            clobbers["XLA_FLAGS"] = Clobber(
                "XLA_FLAGS",
                _render_flags(start_flags),
                _render_flags(flags),
                record.cell,
                tuple(name for name in start_flags if name not in flags),
            )
        for name, value in (settings.get("cache") or {}).items():
            if name in start_cache and name not in clobbers and start_cache[name] != value:
                clobbers[name] = Clobber(name, start_cache[name], value, record.cell)
    return list(clobbers.values())


def _render_flags(flags: Mapping[str, str | None]) -> str:
    return " ".join(name if value is None else f"{name}={value}" for name, value in flags.items())


def clobber_affects_requirements(clobber: Clobber, requirements: Requirements) -> bool:
    if clobber.setting == "XLA_FLAGS":
        return any(name in clobber.discarded for name in requirements.xla_flags) or bool(
            requirements.xla_flags and missing_flags(
                requirements.xla_flags, parse_xla_flags(str(clobber.at_compile))
            )
        )
    return requirements.cache and clobber.setting in (
        "jax_compilation_cache_dir", "jax_enable_compilation_cache",
    )
