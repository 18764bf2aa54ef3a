"""Nearest pins: for an unpinned row, the pin of the same cell and transform under the
closest other key (an upgrade, another version, other hardware), or, for a settings
variant's row, the same key's default settings' pin.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_jaxcompile.gate.notes import key_change
from pytest_jaxcompile.gate.pins import Pin, PinStore
from pytest_jaxcompile.records import ComparabilityKey, CompileRecord


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


UPGRADE = "upgrade"  # the same hardware under an earlier framework version
OTHER_VERSION = "other version"
OTHER_HARDWARE = "other hardware"
OTHER_SETTINGS = "other settings"  # a variant's row: the same key's default settings' pin


def _version_order(version: str) -> tuple[int, Any]:
    """Sort key of a version: PEP 440 where it parses, else the text after all of those."""
    from packaging.version import InvalidVersion, Version

    try:
        return (0, Version(version))
    except InvalidVersion:
        return (1, version)


def _platform_of(hardware: str) -> str | None:
    """``gpu:NVIDIA H200`` of a detected name ``gpu:NVIDIA H200 @ AMD EPYC x16``; None for a
    name set by hand (``JAXCOMPILE_HARDWARE``), which says nothing about its device."""
    head, separator, _ = hardware.partition(" @ ")
    return head if separator and ":" in head else None


def _device_of(record: CompileRecord) -> str | None:
    """The row's ``platform:device kind``, as measured (whatever its hardware name), else as
    its name gives it; None where neither says."""
    detail = record.hardware_detail
    if detail.get("platform") and detail.get("device_kind"):
        return f"{detail['platform']}:{detail['device_kind']}"
    return _platform_of(record.hardware)


def _pin_device(store: PinStore, key: ComparabilityKey, record: CompileRecord) -> str | None:
    """The ``platform:device kind`` a pin was made on: as its pin records it, else as its
    key's hardware name gives it; None where neither says (a hand-set name, an earlier
    release's pin)."""
    pin = store.get(key, record.cell, record.transform, record.variant)
    recorded = pin.device if pin is not None else None
    return recorded or _platform_of(key.hardware)


def nearest_pin(record: CompileRecord, store: PinStore) -> NearestPin | None:
    """The pin of this cell and transform under the closest other key, for an advisory.

    Closest is: the same hardware under the latest earlier version (an upgrade); else the
    same hardware under another version; else the key that differs only in its hardware
    name, on the same platform and device kind: the row's as measured, the pin's as it
    recorded them (else as its hardware name gives them). So a CI runner named by hand is
    compared with the pins made on a laptop's CPU, and a GPU row never with a CPU pin; a
    pin that says nothing of its device (a hand-set name in an earlier release) is never
    taken. Precision, cache state and framework always match: a warm row is
    never compared with a cold pin.
    """
    key = record.key
    if record.variant:
        default = store.get(key, record.cell, record.transform)
        if default is not None:
            return NearestPin(
                key, default, OTHER_SETTINGS, _ratio(record, default), key_change(record, default)
            )
    own = _version_order(key.framework_version)
    same_kind = [
        other
        for other in store.keys_pinning(record.cell, record.transform, record.variant)
        if (other.framework, other.mixed_precision, other.cache_state)
        == (key.framework, key.mixed_precision, key.cache_state)
        and other != key
    ]
    same_hardware = [other for other in same_kind if other.hardware == key.hardware]
    earlier = [o for o in same_hardware if _version_order(o.framework_version) < own]
    device = _device_of(record)
    elsewhere = [
        other
        for other in same_kind
        if other.hardware != key.hardware
        and other.framework_version == key.framework_version
        and device is not None
        and _pin_device(store, other, record) == device
    ]
    for candidates, relation in (
        (earlier, UPGRADE),
        (same_hardware, OTHER_VERSION),
        (elsewhere, OTHER_HARDWARE),
    ):
        if candidates:
            other = max(candidates, key=lambda k: (_version_order(k.framework_version), k))
            pin = store.get(other, record.cell, record.transform, record.variant)
            assert pin is not None
            return NearestPin(other, pin, relation, _ratio(record, pin))
    return None


def _ratio(record: CompileRecord, pin: Pin) -> float | None:
    if pin.compile_s > 0 and record.compile_s is not None:
        return record.compile_s / pin.compile_s
    return None
