"""Nearest pins: for an unpinned row, the pin of the same cell and transform under the
closest other key (an upgrade, another version, other hardware), or, for a settings
variant's row, the same key's default settings' pin.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_jaxcompile.gate.notes import key_change
from pytest_jaxcompile.gate.pins import (
    OTHER_HARDWARE,
    OTHER_SETTINGS,
    OTHER_VERSION,
    UPGRADE,
    JudgingPins,
    Pin,
    PinStore,
)
from pytest_jaxcompile.records import ComparabilityKey, CompileRecord

__all__ = [
    "OTHER_HARDWARE",
    "OTHER_SETTINGS",
    "OTHER_VERSION",
    "UPGRADE",
    "NearestPin",
    "nearest_of",
    "nearest_pin",
]


@dataclass(frozen=True)
class NearestPin:
    """For an unpinned row: the pin of the same cell and transform under the closest key.

    An advisory comparison: it never fails a row by itself (see `nearest_pin`).
    """

    key: ComparabilityKey
    pin: Pin
    # UPGRADE (same hardware, an earlier version), OTHER_VERSION, OTHER_HARDWARE, or
    # OTHER_SETTINGS (the same key's default settings, for a settings variant's row)
    relation: str
    ratio: float | None  # the row's wall seconds over the pin's
    key_change: str | None = None  # OTHER_SETTINGS: the cache-key parts that differ

    def describe(self) -> str:
        ratio = "" if self.ratio is None else f" ({self.ratio:.2f}x)"
        if self.relation == OTHER_SETTINGS:
            text = f"nearest pin: the default settings' under this key: {self.pin.compile_s:.3f} s"
            changed = f"; its cache key changed: {self.key_change}" if self.key_change else ""
            return f"{text}{ratio}{changed}"
        return f"nearest pin {self.key.describe()}: {self.pin.compile_s:.3f} s{ratio}"


def nearest_pin(record: CompileRecord, store: PinStore) -> NearestPin | None:
    """The pin of this cell and transform under the closest other key, for an advisory:
    the nearest of the pins that may judge the row other than its own key's
    (`PinStore.judging`, the one home of which pins those are and in what order).
    So a GPU row is never compared with a CPU pin, whatever the hardware names."""
    return nearest_of(record, store.judging(record))


def nearest_of(record: CompileRecord, pins: JudgingPins) -> NearestPin | None:
    """`nearest_pin`, from the answer of `PinStore.judging` the caller already has."""
    candidate = pins.nearest
    if candidate is None:
        return None
    pin, relation = candidate.pin, candidate.relation
    changed = key_change(record, pin) if relation == OTHER_SETTINGS else None
    return NearestPin(candidate.key, pin, relation, _ratio(record, pin), changed)


def _ratio(record: CompileRecord, pin: Pin) -> float | None:
    if pin.compile_s > 0 and record.compile_s is not None:
        return record.compile_s / pin.compile_s
    return None
