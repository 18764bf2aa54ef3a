"""Concluding: the session's rows, handed to the gate, become the `Outcome` outputs render.

On the controller, at the end of the session: the rows of this process and of every xdist
worker, the environments they ran in, and the settings each framework saw change
(`clobbers`) go to `gate.conclude`; the records are stamped with the session's commit
when they are written anywhere.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path

import pytest

from pytest_jaxcompile.backends import BackendSession
from pytest_jaxcompile.backends.settings import Clobber
from pytest_jaxcompile.gate.conclude import GateSettings, conclude
from pytest_jaxcompile.gate.outcome import Identity, Outcome
from pytest_jaxcompile.gate.pins import PinStore
from pytest_jaxcompile.options import OPTIONS
from pytest_jaxcompile.output import in_github_actions
from pytest_jaxcompile.resolved import Settings
from pytest_jaxcompile.session.rows import SessionRows
from pytest_jaxcompile.session.xdist import Workers

# The options a re-pin repeats, as the session was given them on the command line: the gates
# whose figures a pin keeps (a stored module, an instruction count), what decides a pin's key
# and rows, and where pins are written. The ini file and the environment apply again anyway.
REPIN_OPTIONS = (
    "compile_paired",
    "compile_profile",
    "compile_instructions",
    "compile_instructions_timeout",
    "compile_census",
    "compile_repeat",
    "compile_hardware",
    "compile_mixed_precision",
    "compile_pins_dir",
    "compile_modules_dir",
)


def repin_arguments(config: pytest.Config) -> tuple[str, ...]:
    """The printed re-pin command's options: each of `REPIN_OPTIONS` given on pytest's
    command line, as given: a flag (a path as typed, relative to where pytest ran), or an
    ini key set with ``-o`` (``--override-ini=compile_x=VALUE``, one word)."""
    arguments = []
    for option in OPTIONS:
        if option.name not in REPIN_OPTIONS or not option.on_command_line:
            continue
        value = getattr(config.option, option.name, None)
        if value is None or value == "" or value is False:
            continue
        arguments.append(option.flag if option.kind == "flag" else f"{option.flag}={value}")
    for override in getattr(config.option, "override_ini", None) or ():
        if str(override).split("=", 1)[0].strip() in REPIN_OPTIONS:
            arguments.append(f"--override-ini={override}")
    return tuple(arguments)


def repin_environment(config: pytest.Config) -> tuple[str, ...]:
    """The variables the printed re-pin command sets before ``pytest`` (``NAME=value``):
    each of `REPIN_OPTIONS` this session took from its environment variable (the hardware
    name, JAXCOMPILE_HARDWARE), so that the command, run from another shell, pins under the
    same key. An option given on the command line wins over its variable and is repeated
    as an argument instead."""
    words = []
    for option in OPTIONS:
        if option.name not in REPIN_OPTIONS or not option.env:
            continue
        value = os.environ.get(option.env, "").strip()
        given = option.on_command_line and getattr(config.option, option.name, None) not in (
            None,
            "",
        )
        if value and not given:
            words.append(f"{option.env}={value}")
    return tuple(words)


def measured_identities(
    rows: SessionRows,
    backends: Iterable[BackendSession],
    store: PinStore | None,
    settings: Settings,
) -> set[Identity]:
    """(hardware, version) this process ran under. When it measured nothing, only where
    that serves something: its pins of tests that ran unmeasured are stale there, and a
    report lists its environment. Otherwise JAX is left alone: detecting the hardware
    starts its backend (an accelerator's memory) when the tests had only imported it."""
    identities = {(record.hardware, record.framework_version) for record in rows.records}
    measured = bool(identities)
    wanted = store is None or not store.is_empty() or settings.report_path is not None
    if not measured and not wanted:
        return identities
    for each in backends:
        identity = each.identity(measured)
        if identity is not None:
            identities.add(identity)
    return identities


def clobbers(
    rows: SessionRows, backends: Iterable[BackendSession], settings: Settings
) -> list[Clobber]:
    """Settings that changed during the session; those affecting a requirement fail."""
    if not rows.records:
        return []
    return [
        clobber
        for each in backends
        for clobber in each.clobbers(rows.records, settings.requirements)
    ]


def settings_notes(rows: SessionRows, backends: Iterable[BackendSession]) -> list[str]:
    """Settings in force that the session set and that are no clobber (said once each)."""
    if not rows.records:
        return []
    notes = (note for each in backends for note in each.settings_notes(rows.records))
    return list(dict.fromkeys(notes))


def conclude_session(
    rows: SessionRows,
    workers: Workers,
    backends: Iterable[BackendSession],
    store: PinStore,
    settings: Settings,
    *,
    rootdir: Path,
    started: float,
) -> Outcome:
    """The gate's conclusion over everything the session measured; `started`: the
    session's start on `time.perf_counter`."""
    backends = list(backends)
    outcome = conclude(
        rows.records,
        rows.ran_cells,
        measured_identities(rows, backends, store, settings) | workers.identities,
        store,
        GateSettings(
            settings.thresholds,
            settings.pin_update,
            settings.instructions and settings.instructions_required,
            unstored_modules_dir=(
                None if settings.paired or settings.profile else settings.module_store_dir
            ),
        ),
        rootdir=rootdir,
        ledgers=rows.ledgers.values(),
        clobbers=clobbers(rows, backends, settings),
    )
    outcome.settings_notes = settings_notes(rows, backends)
    outcome.github_actions = in_github_actions(os.environ)
    outcome.accept_label = settings.accept_label
    outcome.paired = settings.paired
    outcome.lost = list(workers.lost)
    outcome.session_s = time.perf_counter() - started
    outcome.workers = max(len(workers.merged), 1)
    if rows.records and (
        settings.report_path is not None or settings.record_dir is not None
    ):  # one git call at most, and only in sessions that write records
        from pytest_jaxcompile.corpus.commit import session_commit, stamp

        stamp(rows.records, session_commit(rootdir))
    return outcome
