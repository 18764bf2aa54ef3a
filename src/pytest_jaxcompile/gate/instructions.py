"""The instruction gate's judging: a row's compile instructions against the pin counted
by an equal instrument identity (`--compile-instructions`, docs/instructions.md).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pytest_jaxcompile._constants import INSTRUCTIONS_PHASE, METRIC_INSTRUCTIONS
from pytest_jaxcompile._numbers import giga
from pytest_jaxcompile.gate.limits import Thresholds, limits_for
from pytest_jaxcompile.gate.notes import what_changed
from pytest_jaxcompile.gate.pins import Pin, PinStore
from pytest_jaxcompile.gate.status import Status, Verdict
from pytest_jaxcompile.records import CompileRecord


def instructions_pin(record: CompileRecord, store: PinStore) -> tuple[Path, Pin] | None:
    """The pin a row's instruction count is compared with: of the same cell and transform,
    with a count made by an equal instrument identity, under the row's own key first, else
    under any key (a count does not depend on the hardware name, the cache state or load)."""
    identity = record.compile_instructions_identity
    if identity is None:
        return None
    own = store.get(record.key, record.cell, record.transform, record.variant)
    candidates = [(store.path_for(record.key), own)] if own is not None else []
    candidates += list(store.pins_of(record.cell, record.transform, record.variant))
    return next(
        (
            (path, pin)
            for path, pin in candidates
            if pin.compile_instructions is not None
            and pin.compile_instructions_identity == identity
        ),
        None,
    )


def carried_instructions(record: CompileRecord, store: PinStore) -> int | None:
    """The pinned count a row takes without being counted again: that of the pin its count
    would be judged against (`instructions_pin`, an equal instrument identity), when the
    row's module (fingerprint) and compile options (their digest) are that pin's too; else
    None (counted). `compile_instructions_recount` counts every row."""
    found = instructions_pin(record, store)
    if found is None or record.fingerprint is None or record.compile_options_digest is None:
        return None
    _, pin = found
    if (pin.fingerprint, pin.compile_options_digest) != (
        record.fingerprint,
        record.compile_options_digest,
    ):
        return None
    return pin.compile_instructions


def judge_instructions(verdict: Verdict, store: PinStore, thresholds: Thresholds) -> Verdict:
    """The row's compile instructions against the pin of an equal instrument identity.

    Grown beyond the instructions tolerance: DRIFT, whatever the load (never noisy); shrunk
    beyond it: improved. Within it, a row the seconds gate called noisy is ok: the count
    says the compiler did the same work. A seconds DRIFT stays a DRIFT; MISS and GREW stay.
    A row not counted, or without such a pin, keeps its verdict with a note saying so.
    """
    record = verdict.record
    count = record.compile_instructions
    if count is None:
        note = record.compile_instructions_note
        return verdict if note is None else verdict.with_note(f"compile instructions {note}")
    found = instructions_pin(record, store)
    if found is None:
        floor = record.compile_instructions_floor
        beside = "" if floor is None else f" (compiler floor {giga(floor)})"
        return verdict.with_note(
            f"compile instructions {count:,}{beside} not pinned with this "
            f"instrument ({record.compile_instructions_identity})",
        )
    path, pin = found
    pinned = pin.compile_instructions
    assert pinned is not None
    tolerance = limits_for(record, pin, thresholds).instructions_tolerance
    change = count / pinned - 1 if pinned else 0.0
    carried = f"; {record.compile_instructions_note}" if record.compile_instructions_note else ""
    floor = record.compile_instructions_floor
    beside = "" if floor is None else f"; compiler floor {giga(floor)}"
    text = (
        f"compile instructions {pinned:,} -> {count:,} ({change:+.2%}, tolerance "
        f"{tolerance:.2%}{beside}; {record.compile_instructions_identity}){carried}"
    )
    if verdict.status in (Status.MISS, Status.GREW) or (
        verdict.status is Status.DRIFT
        and verdict.phase != INSTRUCTIONS_PHASE
        and count <= pinned * (1 + tolerance)
    ):
        return verdict.with_note(text)
    if count > pinned * (1 + tolerance):
        status = Status.DRIFT
    elif count < pinned / (1 + tolerance):
        status = Status.IMPROVED
    elif verdict.status in (Status.NOISY, Status.UNPINNED, Status.IMPROVED):
        status = Status.OK
    else:
        return verdict.with_note(text)
    prefix = "DRIFT in " if status is Status.DRIFT else ""
    change_note = what_changed(record, pin) if status is Status.DRIFT else None
    note = "; ".join(part for part in (prefix + text, change_note, verdict.note) if part)
    return dataclasses.replace(
        verdict,
        status=status,
        pin=pin,
        pin_file=path,
        tolerance=tolerance,
        note=note,
        metric=METRIC_INSTRUCTIONS,
        phase=INSTRUCTIONS_PHASE,
        nearest=None,
    )
