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

import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from pytest_jaxcompile.backends import BackendSession, PairingPlan, PairJob, StagedModule
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.modules import ModuleStore, StoredModuleProblem
from pytest_jaxcompile.gate.paired import pairing_target
from pytest_jaxcompile.gate.pins import Pin, PinStore
from pytest_jaxcompile.gate.sequential import looks_up_to
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
    ranked: list[tuple[tuple[float, float, float], PairJob]] = []
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
        job = PairJob(record, base, new, target.describe(root))
        ranked.append((likelihood(record.twin() or record, target.pin), job))
    ranked.sort(key=lambda item: item[0], reverse=True)

    def pair(jobs: list[PairJob], plan: PairingPlan, timeout_s: float) -> None:
        backends[jobs[0].record.framework].pair(jobs, plan, timeout_s)

    pair_in_order(
        pair,
        [job for _, job in ranked],
        settings.thresholds,
        settings.thresholds.paired_max_pairs,
        settings.paired_budget_s,
        settings.paired_timeout_s,
    )


def likelihood(record: CompileRecord, pin: Pin) -> tuple[float, float, float]:
    """How likely a changed row is to have regressed, to pair the likeliest first: its
    compile seconds over its pin's (measured another time, maybe on another machine, but
    the best early sign), then its op count's growth over the pin's, then its size (its
    seconds: a large module's regression costs the most). The seconds ratio is rounded to
    a tenth, so that ratios within the noise of another day fall to the op growth."""
    now = record.compile_s or 0.0
    seconds = now / pin.compile_s if pin.compile_s > 0 else 1.0
    ops = record.op_count / pin.op_count if record.op_count is not None and pin.op_count else 1.0
    return (round(seconds, 1), ops, now)


def pair_in_order(
    pair: Callable[[list[PairJob], PairingPlan, float], None],
    jobs: list[PairJob],
    thresholds: Thresholds,
    max_pairs: int,
    budget_s: float | None,
    timeout_s: float,
) -> None:
    """Pair `jobs` in their order (`pair`: a backend's `BackendSession.pair`, given jobs of
    one framework), each until a look of the sequential rule decides it, up to `max_pairs`;
    with `budget_s`, no look starts once that many seconds have passed since this call
    (but the first row's first: backends/jax/paired_child.py)."""
    deadline = None if budget_s is None else time.time() + budget_s
    plan = PairingPlan(
        looks=tuple(looks_up_to(max_pairs)),
        tolerance=thresholds.paired_tolerance,
        floor_s=thresholds.paired_floor_s,
        deadline=deadline,
    )
    frameworks: dict[str, list[PairJob]] = {}
    for job in jobs:  # one child per framework (and platform), each in the jobs' order
        frameworks.setdefault(job.record.framework, []).append(job)
    started = time.monotonic()
    for framework_jobs in frameworks.values():
        left_s = timeout_s - (time.monotonic() - started)
        pair(framework_jobs, plan, max(left_s, 0.0))


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
