"""XLA's and JAX's settings that silently stop applying: required flags, clobbering.

Pure logic over what records carry; `snapshot_settings` is the one place that reads
the process's live settings (and imports jax), with XLA_FLAGS as XLA read them at its
backend's start from `backendstart`. The framework-neutral types and rules (`Requirements`,
`Clobber`, the cache and platform checks) live in `backends/settings.py`.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from pytest_jaxcompile.backends import backend_of
from pytest_jaxcompile.backends.jax.backendstart import (
    CAPTURED_AT_BACKEND_START,
    XLA_FLAGS_ENV,
    at_backend_start,
)
from pytest_jaxcompile.backends.settings import (
    Clobber,
    Requirements,
    cache_problem,
    parse_xla_flags,
    render_flags,
)
from pytest_jaxcompile.records import CompileRecord

BACKEND_START_KEY = "xla_flags_at_backend_start"  # in a record's settings
CACHE_SETTING_NAMES = (
    "jax_compilation_cache_dir",
    "jax_enable_compilation_cache",
    "jax_persistent_cache_min_compile_time_secs",
    "jax_persistent_cache_min_entry_size_bytes",
    "jax_compilation_cache_max_size",
)


def snapshot_settings() -> dict[str, Any]:
    """The settings that decide compile time, as in force right now (imports jax).

    ``xla_flags`` is the environment's ``XLA_FLAGS`` now (what JAX hashes into cache keys);
    ``xla_flags_at_backend_start``, when known, is the value XLA read when its backend
    started (what XLA compiles with), with ``captured_at`` saying how it was known.
    """
    import jax

    config = jax.config
    raw_flags = os.environ.get(XLA_FLAGS_ENV)
    settings: dict[str, Any] = {
        "xla_flags": parse_xla_flags(raw_flags),
        "cache": {name: _jsonable(getattr(config, name, None)) for name in CACHE_SETTING_NAMES},
        "x64": bool(getattr(config, "jax_enable_x64", False)),
        "default_matmul_precision": _jsonable(
            getattr(config, "jax_default_matmul_precision", None)
        ),
    }
    started = at_backend_start()
    if started is not None:
        settings[BACKEND_START_KEY] = {
            "flags": parse_xla_flags(started.xla_flags),
            "captured_at": started.captured_at,
        }
    return settings


def flags_at_backend_start(
    settings: Mapping[str, Any] | None,
) -> tuple[dict[str, str | None], str] | None:
    """(flags XLA read when its backend started, captured_at) from a record's settings;
    None when the record does not know them (older records, torch rows)."""
    started = (settings or {}).get(BACKEND_START_KEY)
    if not isinstance(started, Mapping):
        return None
    flags, captured_at = started.get("flags"), started.get("captured_at")
    if not isinstance(flags, Mapping) or not isinstance(captured_at, str):
        return None
    return {str(name): None if value is None else str(value) for name, value in flags.items()}, (
        captured_at
    )


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


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
    flags_problem = (
        required_flags_problem(record, requirements.xla_flags)
        if backend_of(record).xla_rules
        else None
    )
    if flags_problem is not None:
        problems.append(flags_problem)
    without_cache = cache_problem(record, requirements)
    if without_cache is not None:
        problems.append(without_cache)
    return problems


def required_flags_problem(record: CompileRecord, required: Mapping[str, str | None]) -> str | None:
    """Required flags missing from the flags XLA compiled this row with, or None.

    XLA reads XLA_FLAGS once, when its backend starts: rows that know that value are judged
    on it; older rows on the environment's value at the compile.
    """
    started = flags_at_backend_start(record.settings)
    in_force = parse_xla_flags(record.xla_flags) if started is None else started[0]
    missing = missing_flags(required, in_force)
    if not missing:
        return None
    text = (
        f"transform {record.transform!r} compiled without the required XLA flag(s) "
        f"{', '.join(missing)} ("
    )
    if started is None:
        text += f"XLA_FLAGS in force: {record.xla_flags or 'unset'!r}"
    else:
        flags, captured_at = started
        when = (
            "JAX's backend started without it: XLA_FLAGS then"
            if captured_at == CAPTURED_AT_BACKEND_START
            else "XLA_FLAGS at session start (JAX's backend had already started; the closest "
            "known value to what XLA read)"
        )
        text += f"{when} was {render_flags(flags) or 'unset'!r}"
        if parse_xla_flags(record.xla_flags) != flags:
            text += (
                f"; XLA reads XLA_FLAGS only when its backend starts, so the later value "
                f"{record.xla_flags or 'unset'!r} is not in force"
            )
    return text + "; required by ini compile_required_xla_flags)"


def find_clobbers(start: Mapping[str, Any], records: Iterable[CompileRecord]) -> list[Clobber]:
    """The first compile under different XLA_FLAGS or cache settings than at start.

    Only rows of backends that compile with XLA carry these settings. JAX's cache settings
    are known at start only when the project imported JAX by then; otherwise the session's
    first compile is what later compiles are compared with.
    """
    clobbers: dict[str, Clobber] = {}
    start_flags: Mapping[str, str | None] = start.get("xla_flags", {})
    start_cache: dict[str, Any] = dict(start.get("cache", {}))
    baseline_cell: dict[str, str] = {}  # cache settings first seen at a compile, not at start
    for record in records:
        if not backend_of(record).xla_rules:
            continue
        settings = record.settings or {}
        flags = settings.get("xla_flags", {})
        if "XLA_FLAGS" not in clobbers and flags != start_flags:
            started = flags_at_backend_start(settings)
            clobbers["XLA_FLAGS"] = Clobber(
                "XLA_FLAGS",
                render_flags(start_flags),
                render_flags(flags),
                record.cell,
                tuple(name for name in start_flags if name not in flags),
                at_backend_start=None if started is None else render_flags(started[0]),
            )
        for name, value in (settings.get("cache") or {}).items():
            if name not in start_cache:
                start_cache[name], baseline_cell[name] = value, record.cell
            elif name not in clobbers and start_cache[name] != value:
                clobbers[name] = Clobber(
                    name,
                    start_cache[name],
                    value,
                    record.cell,
                    baseline_cell=baseline_cell.get(name),
                )
    return list(clobbers.values())


def _unmet(required: Mapping[str, str | None], flags: Mapping[str, str | None]) -> set[str]:
    """The required flags' names that `flags` lacks or sets differently."""
    return {
        name
        for name, value in required.items()
        if name not in flags or (value is not None and flags[name] != value)
    }


def clobber_affects_requirements(clobber: Clobber, requirements: Requirements) -> bool:
    """Whether the clobber left a required setting out of what was in force.

    With XLA_FLAGS known at XLA's backend start: whether the change took a required flag
    out of the flags XLA started with (a change after the start leaves XLA's flags alone).
    """
    if clobber.setting == "XLA_FLAGS" and clobber.at_backend_start is not None:
        return bool(
            _unmet(requirements.xla_flags, parse_xla_flags(clobber.at_backend_start))
            - _unmet(requirements.xla_flags, parse_xla_flags(str(clobber.at_start)))
        )
    if clobber.setting == "XLA_FLAGS":
        return any(name in clobber.discarded for name in requirements.xla_flags) or bool(
            requirements.xla_flags
            and missing_flags(requirements.xla_flags, parse_xla_flags(str(clobber.at_compile)))
        )
    return requirements.cache and clobber.setting in (
        "jax_compilation_cache_dir",
        "jax_enable_compilation_cache",
    )
