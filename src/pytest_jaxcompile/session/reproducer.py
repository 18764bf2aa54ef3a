"""Reproducer bundles written at the end of a session, on the controller only.

Each process keeps the modules it measured (`BackendSession.staged_module`); a pytest-xdist
worker sends the controller those of the rows it judged bundle-worthy (`worker_modules`,
in its payload). After the gate concluded, the controller writes one folder per row that
`gate.reproducer.bundle_rows` names, under ``compile_reproducer_dir``: the texts of
`gate.reproducer`, the modules (the row's, and its pin's from the module store where
stored) and the framework's script and environment (`BackendSession.reproducer_files`).
Each folder is written whole into a temporary folder and renamed into place; bundles of
an earlier session that this one did not write again are removed. `Outcome.reproducers`
names each, for every output to show (gate/view/).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from pytest_jaxcompile._constants import REPRODUCER_ALWAYS, REPRODUCER_NEVER
from pytest_jaxcompile.backends import BackendSession, StagedModule
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.modules import ModuleStore, StoredModuleProblem
from pytest_jaxcompile.gate.outcome import Outcome
from pytest_jaxcompile.gate.pins import PinStore
from pytest_jaxcompile.gate.reproducer import (
    MANIFEST,
    BundleRow,
    bundle_rows,
    bundle_texts,
    folder_name,
    module_files,
)
from pytest_jaxcompile.records import CompileRecord
from pytest_jaxcompile.session.paired import staged_modules
from pytest_jaxcompile.session.sources import explained

ModuleOf = Callable[[CompileRecord], StagedModule | None]


def worker_modules(
    records: Iterable[CompileRecord],
    backends: Mapping[str, BackendSession],
    store: PinStore,
    thresholds: Thresholds,
    mode: str,
) -> dict[str, StagedModule]:
    """An xdist worker's modules the controller may bundle, by fingerprint: those of the
    rows it judges failing, or unpinned after an upgrade (the controller decides which of
    those an upgrade block bundles), or every row's under ``always``; none under
    ``never``."""
    if mode == REPRODUCER_NEVER:
        return {}
    wanted = [
        record
        for record in records
        if mode == REPRODUCER_ALWAYS or explained(record, store, thresholds)
    ]
    return staged_modules(wanted, backends)


def module_getter(
    backends: Mapping[str, BackendSession], sent: Mapping[str, StagedModule]
) -> ModuleOf:
    """A row's module: this process's own, else the one a worker sent."""

    def module_of(record: CompileRecord) -> StagedModule | None:
        module = backends[record.framework].staged_module(record)
        if isinstance(module, StagedModule):
            return module
        return None if record.fingerprint is None else sent.get(record.fingerprint)

    return module_of


def write_reproducers(
    outcome: Outcome,
    mode: str,
    directory: Path,
    modules_dir: Path,
    module_of: ModuleOf,
    files_of: Callable[[str], dict[str, bytes]],
) -> None:
    """Write each bundle `bundle_rows` names that has its row's module; name them in
    `outcome.reproducers` (and the directory in `outcome.reproducers_dir`)."""
    rows = bundle_rows(outcome, mode)
    if mode != REPRODUCER_NEVER and not outcome.pin_update:
        outcome.reproducers_dir = directory
    store = ModuleStore(modules_dir, outcome.rootdir)
    framework_files: dict[str, dict[str, bytes]] = {}
    written: set[str] = set()
    for row in rows:
        record = row.record
        module = module_of(record)
        if module is None:
            continue
        name = folder_name(record)
        if name in written:
            continue
        pinned, missing = _pinned(row, store)
        if record.framework not in framework_files:
            framework_files[record.framework] = files_of(record.framework)
        texts = bundle_texts(row, module, pinned, missing, outcome.thresholds, outcome.rootdir)
        files = {
            **{file: text.encode() for file, text in texts.items()},
            **module_files(module, pinned),
            **framework_files[record.framework],
        }
        _write_folder(directory / name, files)
        written.add(name)
        outcome.reproducers[(record.key, record.row_id)] = directory / name
    _remove_others(directory, written)


def _pinned(row: BundleRow, store: ModuleStore) -> tuple[StagedModule | None, str | None]:
    """The pin's module from the module store, or why the bundle has none."""
    pins = row.pins()
    if not pins:
        return None, "its pin names no module (pinned before modules were fingerprinted)"
    problem = "no pin"
    for pin in pins:
        assert pin.fingerprint is not None
        if pin.fingerprint == row.record.fingerprint:
            return None, "the row's module is its pin's (the same fingerprint)"
        try:
            return store.read(pin.fingerprint), None
        except StoredModuleProblem as error:
            problem = str(error)
    return None, f"{problem}; a pin update with --compile-paired stores it"


def _write_folder(target: Path, files: Mapping[str, bytes]) -> None:
    """The folder whole or not at all: written beside its place, then renamed into it."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name[:40]}-", dir=target.parent))
    try:
        for file, data in files.items():
            (staging / file).write_bytes(data)
        os.chmod(staging, 0o755)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _remove_others(directory: Path, written: set[str]) -> None:
    """Remove the bundles of an earlier session that this one did not write (folders
    holding a bundle.json: nothing else in the directory is touched)."""
    if not directory.is_dir():
        return
    for path in directory.iterdir():
        if path.name not in written and (path / MANIFEST).is_file():
            shutil.rmtree(path, ignore_errors=True)
