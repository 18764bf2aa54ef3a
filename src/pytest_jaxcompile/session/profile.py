"""Compile profiles in a session: which rows are profiled, and against which pin's module.

At the end of the session, after the pairing and in every process that measured rows (each
xdist worker profiles its own, as it pairs its own), `profile_rows` judges each row against
the pins, and hands every failing row (but one failing only for want of a pin; every
row under ``--compile-profile``) whose module
its backend staged to that backend, with its pin's module where the module store holds it;
the backend compiles them once more in a child with the compiler's pass timers on and
fills each row's ``profile``, which the gate notes on the verdict (gate/profile.py,
docs/profile.md). The profiling is never in a test's own timing.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pytest_jaxcompile.backends import BackendSession, ProfileJob, StagedModule
from pytest_jaxcompile.gate.judging import judge
from pytest_jaxcompile.gate.modules import ModuleStore, StoredModuleProblem
from pytest_jaxcompile.gate.pins import PinStore
from pytest_jaxcompile.gate.status import Status
from pytest_jaxcompile.records import CompileRecord
from pytest_jaxcompile.resolved import Settings


def profile_rows(
    records: Iterable[CompileRecord],
    backends: Mapping[str, BackendSession],
    store: PinStore,
    settings: Settings,
) -> int:
    """Profile this process's failing rows, or all of them (see the module doc); the rows
    handed to be profiled. ``compile_profile_failing = never`` profiles no failing row (only
    every row, under ``--compile-profile``)."""
    modules = ModuleStore(settings.module_store_dir)
    thresholds = settings.thresholds
    jobs: dict[str, list[ProfileJob]] = {}
    for record in records:
        if record.profile is not None:
            continue  # profiled where it was measured (an xdist worker)
        verdict = judge(record, store, thresholds)
        # A row failing only for want of a pin (compile_require_pinned) has no compile
        # change to explain, nor has a MISS (the cache's story, not the compiler's).
        failing = verdict.fails(thresholds) and verdict.status not in (
            Status.UNPINNED,
            Status.MISS,
        )
        if not (settings.profile or (failing and settings.profile_failing)):
            continue
        new = backends[record.framework].staged_module(record)
        if not isinstance(new, StagedModule):
            continue  # not staged (a census row, a torch row): nothing to compile again
        pin = verdict.pin or (verdict.nearest.pin if verdict.nearest is not None else None)
        base = None
        if pin is not None and pin.fingerprint is not None:
            try:
                base = modules.read(pin.fingerprint)
            except StoredModuleProblem:
                base = None  # the row's own passes, and the note says its pin's is not stored
        jobs.setdefault(record.framework, []).append(ProfileJob(record, new, base))
    for framework, framework_jobs in jobs.items():
        backends[framework].profile(framework_jobs, settings.paired_timeout_s)
    return sum(len(framework_jobs) for framework_jobs in jobs.values())
