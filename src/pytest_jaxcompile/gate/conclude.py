"""The gate's conclusion from a set of records: one rule set for pytest and ``merge``.

Both the plugin (at the end of a session, also with pytest-xdist) and the ``merge``
subcommand (over the JSON reports of several CI jobs) call `conclude`, so a merged
verdict is decided exactly as an unsharded session would decide it.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pytest_jaxcompile.backends.settings import Clobber
from pytest_jaxcompile.gate.always_cold import find_always_cold
from pytest_jaxcompile.gate.dropping import dropped_figures, kept_options
from pytest_jaxcompile.gate.grouping import shown_key
from pytest_jaxcompile.gate.instructions import instructions_pin
from pytest_jaxcompile.gate.judging import judge_all, judged_by_budget
from pytest_jaxcompile.gate.limits import Thresholds, limits_for
from pytest_jaxcompile.gate.modules import ModuleStore
from pytest_jaxcompile.gate.outcome import Identity, Outcome, coverage
from pytest_jaxcompile.gate.pins import PinFileError, PinLockTimeout, PinStore
from pytest_jaxcompile.gate.stale import compile_count_changes, find_stale
from pytest_jaxcompile.gate.status import Status, session_failed
from pytest_jaxcompile.gate.upgrades import upgrade_reports
from pytest_jaxcompile.records import CallLedger, CompileRecord


@dataclass(frozen=True)
class GateSettings:
    """What decides the verdicts, wherever the records come from."""

    thresholds: Thresholds
    pin_update: bool
    instructions_required: bool = False  # --compile-instructions-required: uncounted fails
    # A session that stores no modules: where pinned modules are kept, so that its pin
    # update refuses to leave a paired row's pin without one, and its printed re-pin stores
    # them (None: it stores them, or none kept)
    unstored_modules_dir: Path | None = None


def ordered(records: Iterable[CompileRecord]) -> list[CompileRecord]:
    """Records by cell and transform; measurement order is kept among equal ones.

    The order of records must not depend on how pytest-xdist spread the tests over its
    workers or how a suite was sharded, so reports and pin updates come out the same.
    """
    return sorted(records, key=lambda record: record.row_id)


def conclude(
    records: Iterable[CompileRecord],
    ran_cells: Iterable[str],
    identities: Iterable[Identity],
    store: PinStore,
    settings: GateSettings,
    *,
    rootdir: Path,
    ledgers: Iterable[CallLedger] = (),
    clobbers: Iterable[Clobber] = (),
) -> Outcome:
    """Stale pins, the pin update (if asked), the verdicts, and whether the gate fails.

    `ledgers` (census'd tests) pin and check compile counts; `clobbers` that affect a
    required setting fail the gate.
    """
    rows = ordered(records)
    outcome = Outcome(
        rootdir=rootdir,
        pins_dir=store.directory,
        thresholds=settings.thresholds,
        pin_update=settings.pin_update,
    )
    ran = set(ran_cells)
    measured = {record.row_id for record in rows}
    known = {(record.hardware, record.framework_version) for record in rows} | set(identities)
    outcome.ran_cells = sorted(ran)
    outcome.environments = sorted(known)
    outcome.ledgers = sorted(ledgers, key=lambda ledger: ledger.cell)
    censused = {ledger.cell for ledger in outcome.ledgers}
    for hardware, version in outcome.environments:
        outcome.stale += find_stale(store, ran, measured, hardware, version, censused)
    # Before a pin update: its new pins would hide the key that changed since the last.
    outcome.always_cold = find_always_cold(rows, store)
    # A budget-only row that no growth limit judges is judged by its budget alone: its pin
    # would hold figures no one judges.
    to_pin = [row for row in rows if not judged_by_budget(row, settings.thresholds)]
    # A changed module is accepted in every cache state at once: each row's twin (its
    # compile in the other cache state, gate/twins.py) is pinned beside it; a row measured
    # in that state itself wins (pinned last).
    to_pin = [twin for row in to_pin if (twin := row.twin()) is not None] + to_pin
    # What re-pinning these rows would drop: a pin update refuses it; every printed re-pin
    # (a failing session's, a refused update's) adds the options that keep it.
    modules_dir = settings.unstored_modules_dir
    dropped = dropped_figures(
        to_pin, store, modules=None if modules_dir is None else ModuleStore(modules_dir)
    )
    outcome.repin_keeps = kept_options(dropped)
    if settings.pin_update:
        outcome.dropped = dropped
        if outcome.dropped:
            outcome.pin_error = (
                "; ".join(dropped.text() for dropped in outcome.dropped) + ". Nothing was written"
            )
    if settings.pin_update and not outcome.dropped:
        compiles = {ledger.cell: ledger.compiles for ledger in outcome.ledgers}
        try:
            update = store.repin(
                to_pin,
                compiles,
                lambda record, pin: limits_for(record, pin, settings.thresholds),
            )
            outcome.pins_written, outcome.pins_kept = update.written, update.kept
            outcome.pinned = update.pinned
        except (PinFileError, PinLockTimeout) as error:
            outcome.pin_error = f"{error}. Nothing was written; fix it and re-run."
    outcome.verdicts = judge_all(rows, store, settings.thresholds)
    outcome.instructions_unpinned = [
        verdict.record
        for verdict in outcome.verdicts
        if verdict.record.compile_instructions is not None
        and verdict.status is not Status.BUDGET  # never pinned: nothing to ask
        and instructions_pin(verdict.record, store) is None
    ]
    shown = {shown_key(verdict) for verdict in outcome.verdicts} | set(outcome.pinned)
    outcome.pin_files = {key: store.path_for(key) for key in shown}
    outcome.upgrades = upgrade_reports(outcome.verdicts)
    saved = [ledger.overlays.get("cache_saved_s") for ledger in outcome.ledgers]
    outcome.cache_saved_s = sum(figure for figure in saved if figure) or None
    outcome.coverage = coverage(outcome.verdicts, store)
    outcome.compile_count_changes = compile_count_changes(outcome.ledgers, rows, store)
    outcome.clobbers = list(clobbers)
    outcome.instructions_required = settings.instructions_required
    outcome.failed = (
        outcome.pin_error is not None
        or any(clobber.fails for clobber in outcome.clobbers)
        or outcome.uncounted_fails
        or (
            not settings.pin_update
            and (
                session_failed(outcome.verdicts, settings.thresholds)
                or any(upgrade.fails(settings.thresholds) for upgrade in outcome.upgrades)
            )
        )
    )
    return outcome
