"""XLA's and JAX's settings that silently stop applying: required flags, clobbering.

Pure logic over what records carry; `snapshot_settings` is the one place that reads
the process's live settings (and imports jax), with XLA_FLAGS as XLA read them at its
backend's start from `backendstart`. The framework-neutral types and rules (`Requirements`,
`Clobber`, the cache and platform checks) live in `backends/settings.py`.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pytest_jaxcompile.backends import backend_of
from pytest_jaxcompile.backends.jax.backendstart import (
    CAPTURED_AT_BACKEND_START,
    XLA_FLAGS_ENV,
    FlagsChange,
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


def find_clobbers(
    start: Mapping[str, Any],
    records: Iterable[CompileRecord],
    changes: Sequence[FlagsChange] = (),
) -> list[Clobber]:
    """The first compile under different XLA_FLAGS or cache settings than at start.

    XLA_FLAGS are compared with ``start["xla_flags"]`` (taken at plugin load, before any
    conftest.py, where ``start["xla_flags_since"]`` says so): flags discarded or changed
    before XLA's backend started, and a change after it started (not in force), are
    clobbers; flags only added before the start are not (`startup_notes`). `changes`: where
    the environment's value changed (`FlagsWatch`), to name who clobbered it.

    Only rows of backends that compile with XLA carry these settings. JAX's cache settings
    are known at start only when the project imported JAX by then; otherwise the session's
    first compile is what later compiles are compared with.
    """
    clobbers, _ = _flag_findings(start, records, changes)
    start_cache: dict[str, Any] = dict(start.get("cache", {}))
    baseline_cell: dict[str, str] = {}  # cache settings first seen at a compile, not at start
    found: dict[str, Clobber] = {}
    for record in records:
        if not backend_of(record).xla_rules:
            continue
        for name, value in ((record.settings or {}).get("cache") or {}).items():
            if name not in start_cache:
                start_cache[name], baseline_cell[name] = value, record.cell
            elif name not in found and start_cache[name] != value:
                found[name] = Clobber(
                    name,
                    start_cache[name],
                    value,
                    record.cell,
                    baseline_cell=baseline_cell.get(name),
                )
    return clobbers + list(found.values())


def startup_notes(
    start: Mapping[str, Any],
    records: Iterable[CompileRecord],
    changes: Sequence[FlagsChange] = (),
) -> list[str]:
    """XLA flags added (none discarded) between plugin load and XLA's backend start, e.g.
    by a library imported in conftest.py: in force, said once, never a clobber."""
    return _flag_findings(start, records, changes)[1]


def _flag_findings(
    start: Mapping[str, Any], records: Iterable[CompileRecord], changes: Sequence[FlagsChange]
) -> tuple[list[Clobber], list[str]]:
    baseline: Mapping[str, str | None] = start.get("xla_flags", {})
    since = str(start.get("xla_flags_since") or "session start")
    clobbers: list[Clobber] = []
    notes: list[str] = []
    seen_start = seen_late = False
    for record in records:
        if not backend_of(record).xla_rules:
            continue
        settings = record.settings or {}
        now: Mapping[str, str | None] = settings.get("xla_flags", {})
        started = flags_at_backend_start(settings)
        # what XLA compiles with: the flags it started with, else (unknown) those now
        in_force = now if started is None else started[0]
        if not seen_start and in_force != baseline:
            seen_start = True
            discarded = tuple(
                name
                for name in baseline
                if name not in in_force or in_force[name] != baseline[name]
            )
            by = _changed_by(changes, in_force, discarded)
            if discarded:
                clobbers.append(
                    Clobber(
                        "XLA_FLAGS",
                        render_flags(baseline),
                        render_flags(in_force),
                        record.cell,
                        discarded,
                        at_backend_start=None if started is None else render_flags(started[0]),
                        since=since,
                        changed_by=by,
                    )
                )
            else:
                added = render_flags({k: v for k, v in in_force.items() if k not in baseline})
                if started is None:
                    when = (
                        "in force if set before JAX's backend started: this jax does not "
                        "say when it started"
                    )
                elif started[1] == CAPTURED_AT_BACKEND_START:
                    when = "in force"
                else:  # the value when the plugin began watching, after the start
                    when = (
                        "in force only if set before JAX's backend started, which was before "
                        "the plugin began watching: what XLA read is not known"
                    )
                by_text = f", by {by}" if by else ""
                notes.append(f"XLA flags set during start-up{by_text}: {added} ({when})")
        if started is not None and not seen_late and now != started[0]:
            seen_late = True
            clobbers.append(
                Clobber(
                    "XLA_FLAGS",
                    render_flags(started[0]),
                    render_flags(now),
                    record.cell,
                    tuple(name for name in started[0] if name not in now),
                    at_backend_start=render_flags(started[0]),
                    since="JAX's backend start",
                    changed_by=_changed_by(changes, now, ()),
                    late=True,
                )
            )
    return clobbers, notes


def _changed_by(
    changes: Sequence[FlagsChange], flags: Mapping[str, str | None], discarded: Sequence[str]
) -> str | None:
    """Where the environment first held `flags` (else first lost a discarded flag)."""
    for change in changes:
        if parse_xla_flags(change.value) == flags:
            return change.where
    for change in changes:
        if any(name not in parse_xla_flags(change.value) for name in discarded):
            return change.where
    return None


def _unmet(required: Mapping[str, str | None], flags: Mapping[str, str | None]) -> set[str]:
    """The required flags' names that `flags` lacks or sets differently."""
    return {
        name
        for name, value in required.items()
        if name not in flags or (value is not None and flags[name] != value)
    }


def clobber_affects_requirements(clobber: Clobber, requirements: Requirements) -> bool:
    """Whether the clobber left a required setting out of what was in force.

    For XLA_FLAGS: whether the change took a required flag out of the flags XLA started
    with (a change after the start leaves XLA's flags alone).
    """
    if clobber.setting == "XLA_FLAGS":
        # a required flag met at the baseline and not in what XLA compiled with; a flag
        # unmet from the start fails its rows (`required_flags_problem`), not the clobber
        return not clobber.late and bool(
            _unmet(requirements.xla_flags, parse_xla_flags(str(clobber.at_compile)))
            - _unmet(requirements.xla_flags, parse_xla_flags(str(clobber.at_start)))
        )
    return requirements.cache and clobber.setting in (
        "jax_compilation_cache_dir",
        "jax_enable_compilation_cache",
    )
