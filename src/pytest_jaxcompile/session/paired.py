"""``--compile-paired`` in a session: which rows are paired, and the module store's upkeep.

At the end of the session, in every process that measured rows (each xdist worker pairs
its own, as it counts its own instructions), `pair_changed_rows` finds each row whose
module changed since the pin it is compared with (`gate.paired.pairing_target`), reads
that pin's module from the module store and hands both to the row's backend, which
compiles them alternately in a child and fills the row's ``paired_*`` fields; the gate
then judges them. On a pin update, `staged_modules` are what each process sends (workers:
in their payload) and `store_modules` writes them on the controller, beside the pins.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from pytest_jaxcompile.backends import BackendSession, PairJob, StagedModule
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.modules import ModuleStore, StoredModuleProblem
from pytest_jaxcompile.gate.paired import PairedComparison, pairing_target
from pytest_jaxcompile.gate.pins import PinStore
from pytest_jaxcompile.records import CompileRecord
from pytest_jaxcompile.resolved import Settings


def pair_changed_rows(
    records: Iterable[CompileRecord],
    backends: Mapping[str, BackendSession],
    store: PinStore,
    settings: Settings,
    root: Path,
) -> None:
    """Pair this process's rows whose module changed since their pin (see module doc)."""
    modules = ModuleStore(settings.module_store_dir, root)
    jobs: dict[str, list[PairJob]] = {}
    for record in records:
        if record.paired_against is not None or record.paired_note is not None:
            continue  # paired where it was measured (an xdist worker)
        target = pairing_target(record, store)
        if target is None:
            continue
        if isinstance(target, str):
            record.paired_note = f"not paired: {target}"
            continue
        new = backends[record.framework].staged_module(record)
        if new is None:
            continue
        if isinstance(new, str):
            record.paired_note = f"not paired: {new}"
            continue
        assert target.pin.fingerprint is not None
        try:
            base = modules.read(target.pin.fingerprint)
        except StoredModuleProblem as problem:
            record.paired_note = (
                f"not paired with {target.describe(root)}: {problem}; a pin update with "
                "--compile-paired stores it"
            )
            continue
        if base.platform != new.platform:
            record.paired_note = (
                f"not paired: its pin's module compiled for {base.platform}, this row for "
                f"{new.platform}"
            )
            continue
        jobs.setdefault(record.framework, []).append(
            PairJob(record, base, new, target.describe(root))
        )
    for framework, framework_jobs in jobs.items():
        _pair_until_decided(backends[framework], framework_jobs, settings)


# The record fields one pairing fills, which a second round of pairs extends.
_PAIRS_FIELDS = ("paired_base_cpu_s", "paired_new_cpu_s", "paired_base_wall_s", "paired_new_wall_s")


def _pair_until_decided(backend: BackendSession, jobs: list[PairJob], settings: Settings) -> None:
    pair_until_decided(
        backend.pair,
        jobs,
        settings.thresholds,
        settings.paired_pairs,
        settings.paired_max_pairs,
        settings.paired_timeout_s,
    )


def pair_until_decided(
    pair: Callable[[list[PairJob], int, float], None],
    jobs: list[PairJob],
    thresholds: Thresholds,
    pairs: int,
    max_pairs: int,
    timeout_s: float,
) -> None:
    """Pair `jobs` (`pair`: a backend's `BackendSession.pair`), then once more, in one
    child, those the first `pairs` left not decided: as many pairs as the widest such
    interval says would decide it, up to `max_pairs` in all, within what is left of
    `timeout_s`. ``benchmarks/paired_gate.py`` pairs through this too."""
    started = time.monotonic()
    pair(jobs, pairs, timeout_s)
    wanted = [(job, more_pairs_wanted(job.record, thresholds, max_pairs)) for job in jobs]
    undecided = [(job, extra) for job, extra in wanted if extra > 0]
    left_s = timeout_s - (time.monotonic() - started)
    if not undecided or left_s <= 0:
        return
    scratch = [
        dataclasses.replace(job, record=dataclasses.replace(job.record, paired_note=None))
        for job, _ in undecided
    ]
    pair(scratch, max(extra for _, extra in undecided), left_s)
    for (job, _), again in zip(undecided, scratch, strict=True):
        extend_pairs(job.record, again.record)


def more_pairs_wanted(record: CompileRecord, thresholds: Thresholds, max_pairs: int) -> int:
    """How many more pairs a paired row wants: 0 when its pairs decided it (or it has
    none), else about what its interval says would decide it, within `max_pairs` in all."""
    comparison = PairedComparison.of(record)
    if comparison is None:
        return 0
    if comparison.status(thresholds.paired_tolerance, thresholds.floor_s) is not None:
        return 0
    needed = comparison.pairs_to_decide(thresholds.paired_tolerance)
    wanted = max_pairs if needed is None else needed
    return max(0, min(wanted, max_pairs) - comparison.pairs)


def extend_pairs(record: CompileRecord, again: CompileRecord) -> None:
    """The second round's pairs appended to the first's, where it made some on every side
    the first did (else the first round's pairs stand alone)."""
    for name in _PAIRS_FIELDS:
        if (getattr(record, name) is None) != (getattr(again, name) is None):
            return
    if again.paired_note is not None or not again.paired_new_wall_s:
        return
    for name in _PAIRS_FIELDS:
        first, second = getattr(record, name), getattr(again, name)
        if first is not None and second is not None:
            setattr(record, name, [*first, *second])
    if record.paired_cost_s is not None and again.paired_cost_s is not None:
        record.paired_cost_s = round(record.paired_cost_s + again.paired_cost_s, 3)


def staged_modules(
    records: Iterable[CompileRecord], backends: Mapping[str, BackendSession]
) -> dict[str, StagedModule]:
    """This process's rows' modules by fingerprint, to store on a pin update."""
    found: dict[str, StagedModule] = {}
    for record in records:
        if record.fingerprint is None or record.fingerprint in found:
            continue
        module = backends[record.framework].staged_module(record)
        if isinstance(module, StagedModule):
            found[record.fingerprint] = module
    return found


def store_modules(
    modules: Mapping[str, StagedModule], store: PinStore, settings: Settings
) -> tuple[list[Path], list[Path]]:
    """On the controller after a pin update: store the pinned rows' modules and remove
    those no pin names any more; (written, removed)."""
    pinned = {
        pin.fingerprint
        for group in store.groups()
        for _, pin in group.all_pins()
        if pin.fingerprint is not None
    }
    module_store = ModuleStore(settings.module_store_dir)
    written = module_store.write_all(
        {fingerprint: module for fingerprint, module in modules.items() if fingerprint in pinned}
    )
    return written, module_store.prune(pinned)
