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

from collections.abc import Iterable, Mapping
from pathlib import Path

from pytest_jaxcompile.backends import BackendSession, PairJob, StagedModule
from pytest_jaxcompile.gate.modules import ModuleStore, StoredModuleProblem
from pytest_jaxcompile.gate.paired import pairing_target
from pytest_jaxcompile.gate.pins import PinStore
from pytest_jaxcompile.options import Settings
from pytest_jaxcompile.records import CompileRecord


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
        backends[framework].pair(framework_jobs, settings.paired_pairs, settings.paired_timeout_s)


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
