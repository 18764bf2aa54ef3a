"""xdist payloads: what each pytest-xdist worker sends the controller, and what it takes.

A worker measures and collects rows as any process does, then sends them as plain JSON-able
data (`payload`); the controller merges each worker's once (`Workers.merge`) and notes the
workers that went down before they sent theirs (`Workers.lost_worker`).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_jaxcompile._constants import WORKER_INPUT_COUNTED_KEY, WORKER_OUTPUT_KEY
from pytest_jaxcompile.backends import StagedModule
from pytest_jaxcompile.gate.outcome import Identity
from pytest_jaxcompile.records import CallLedger, CompileRecord
from pytest_jaxcompile.session.rows import SessionRows

__all__ = ["WORKER_INPUT_COUNTED_KEY", "WORKER_OUTPUT_KEY", "Workers", "payload"]


def payload(
    rows: SessionRows,
    identities: Iterable[Identity],
    modules: Mapping[str, StagedModule] | None = None,
    gate_s: Mapping[str, float] | None = None,
    profiled_rows: int = 0,
    reproducer_modules: Mapping[str, StagedModule] | None = None,
) -> dict[str, Any]:
    """What an xdist worker sends to the controller (plain JSON-able data); `modules`:
    its rows' modules by fingerprint, for the controller to store on a pin update;
    `gate_s`, `profiled_rows`: what the gate itself did in the worker after its tests;
    `reproducer_modules`: the modules of the rows the controller may bundle
    (session/reproducer.py)."""
    return {
        "gate_s": dict(gate_s or {}),
        "profiled_rows": profiled_rows,
        "records": [record.to_dict() for record in rows.records],
        "ledgers": [ledger.to_dict() for ledger in rows.ledgers.values()],
        "ran_cells": sorted(rows.ran_cells),
        "identities": [list(identity) for identity in sorted(identities)],
        "modules": _modules_data(modules or {}),
        "reproducer_modules": _modules_data(reproducer_modules or {}),
    }


def _modules_data(modules: Mapping[str, StagedModule]) -> dict[str, Any]:
    return {
        fingerprint: {
            "text": module.text,
            "options": base64.b64encode(module.options).decode("ascii"),
            "devices": module.devices,
            "platform": module.platform,
        }
        for fingerprint, module in modules.items()
    }


def _modules(data: Mapping[str, Any]) -> dict[str, StagedModule]:
    return {
        fingerprint: StagedModule(
            str(module["text"]),
            base64.b64decode(module["options"]),
            int(module["devices"]),
            str(module["platform"]),
        )
        for fingerprint, module in data.items()
    }


@dataclass
class Workers:
    """On the controller: the workers merged, those lost, the environments they ran in."""

    identities: set[Identity] = field(default_factory=set)  # environments workers ran in
    merged: set[str] = field(default_factory=set)
    lost_workers: set[str] = field(default_factory=set)
    lost: list[str] = field(default_factory=list)  # why rows are missing, for the Outcome
    modules: dict[str, StagedModule] = field(default_factory=dict)  # pin update: to store
    # the modules of rows the controller may bundle (session/reproducer.py)
    reproducer_modules: dict[str, StagedModule] = field(default_factory=dict)
    gate_s: dict[str, float] = field(default_factory=dict)  # the workers' gate work, summed
    profiled_rows: int = 0

    def merge(self, worker: str, output: dict[str, Any], rows: SessionRows) -> None:
        """Take one worker's rows, once (xdist may report a node down twice)."""
        if worker in self.merged:
            return
        data = output.get(WORKER_OUTPUT_KEY)
        if data is None:
            return
        self.merged.add(worker)
        for record in data.get("records", []):
            rows.add(CompileRecord.from_dict(record))
        for ledger in data.get("ledgers", []):
            rows.add_ledger(CallLedger.from_dict(ledger))
        rows.ran_cells.update(data.get("ran_cells", []))
        for work, seconds in (data.get("gate_s") or {}).items():
            self.gate_s[str(work)] = self.gate_s.get(str(work), 0.0) + float(seconds)
        self.profiled_rows += int(data.get("profiled_rows", 0))
        self.modules.update(_modules(data.get("modules") or {}))
        self.reproducer_modules.update(_modules(data.get("reproducer_modules") or {}))
        self.identities.update(
            (str(hardware), str(version)) for hardware, version in data.get("identities", [])
        )

    def lost_worker(self, worker: str, error: object) -> None:
        if worker not in self.merged and worker not in self.lost_workers:
            self.lost_workers.add(worker)
            self.lost.append(
                f"pytest-xdist worker {worker} went down ({error}) before it sent its compile "
                "rows; rows of the tests it ran are not judged"
            )
