"""The pin store: every pin file of one directory (`gate.pinfile`), by comparability key;
updates written under a `filelock` lock, each file re-read inside it (two sessions
re-pinning at once lose nothing) and replaced atomically.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_jaxcompile._io import atomic_write_text
from pytest_jaxcompile.gate.pin import (
    MEMORY_PIN_FIELDS,
    Margins,
    Pin,
    RowId,
    kept_figures,
    within_repin_margin,
)
from pytest_jaxcompile.gate.pinfile import (
    PinFileError,
    PinGroup,
    pin_file_name,
    pin_line,
    read_pin_file,
)
from pytest_jaxcompile.records import ComparabilityKey, CompileRecord

# What callers have always imported from here, beside the store's own names.
__all__ = [
    "LOCK_TIMEOUT_S",
    "MEMORY_PIN_FIELDS",
    "OTHER_HARDWARE",
    "OTHER_SETTINGS",
    "OTHER_VERSION",
    "OWN_KEY",
    "UPGRADE",
    "Candidate",
    "JudgingPins",
    "LimitsOf",
    "Pin",
    "PinFileError",
    "PinGroup",
    "PinLockTimeout",
    "PinStore",
    "PinUpdate",
    "RowId",
    "kept_figures",
    "lock_path",
    "never_pinned",
    "pin_file_name",
    "pin_line",
    "read_pin_file",
    "within_repin_margin",
]

LOCK_TIMEOUT_S = 120.0


class PinLockTimeout(Exception):
    """Another session held the pins dir's lock for longer than LOCK_TIMEOUT_S."""


# How a pin that may judge a row relates to it, nearest first (`PinStore.judging`).
OWN_KEY = "own key"
OTHER_SETTINGS = "other settings"  # a variant's row: the same key's default settings' pin
UPGRADE = "upgrade"  # the same hardware under an earlier framework version
OTHER_VERSION = "other version"  # the same hardware under another (a later) version
OTHER_HARDWARE = "other hardware"  # another hardware name on the same platform and device
RELATIONS = (OWN_KEY, OTHER_SETTINGS, UPGRADE, OTHER_VERSION, OTHER_HARDWARE)


@dataclass(frozen=True)
class Candidate:
    """A pin that may judge a row (or, in `JudgingPins.refused`, one that may not)."""

    key: ComparabilityKey
    path: Path
    pin: Pin
    relation: str  # one of RELATIONS


@dataclass(frozen=True)
class JudgingPins:
    """The pins that may judge one row, nearest first (`PinStore.judging`), and the
    nearest pin under the row's hardware name that was refused because it was recorded on
    another platform or device."""

    candidates: tuple[Candidate, ...]
    device: str | None  # the row's ``platform:device kind``; None where nothing says
    refused: Candidate | None = None

    @property
    def own(self) -> Candidate | None:
        """The row's own key's pin, when it may judge the row."""
        first = self.candidates[0] if self.candidates else None
        return first if first is not None and first.relation == OWN_KEY else None

    @property
    def nearest(self) -> Candidate | None:
        """The closest pin under another key (or the default settings'), for an unpinned
        row's advisory comparison."""
        return next((each for each in self.candidates if each.relation != OWN_KEY), None)

    def refusal(self) -> str | None:
        """Why the row's own pin (or its upgrade's) does not judge it, in a row's words."""
        if self.refused is None:
            return None
        pinned_on = device_of_pin(self.refused.pin, self.refused.key)
        if pinned_on is None:
            return (
                f"its pin recorded no device (pins of release 0.1.0 do not); this row ran on "
                f"{spoken_device(self.device)}: not compared. A re-pin on this device "
                f"({REPIN_RECORDS}) records it"
            )
        return (
            f"pin recorded on {spoken_device(pinned_on)}; this row ran on "
            f"{spoken_device(self.device)}: not compared"
        )


REPIN_RECORDS = "pytest --compile-pin-update"  # the command's head; the summary's names the tests


def version_order(version: str) -> tuple[int, Any]:
    """Sort key of a version: PEP 440 where it parses, else the text after all of those."""
    from packaging.version import InvalidVersion, Version

    try:
        return (0, Version(version))
    except InvalidVersion:
        return (1, version)


def device_of_hardware(hardware: str) -> str | None:
    """``gpu:NVIDIA H200`` of a detected name ``gpu:NVIDIA H200 @ AMD EPYC x16``; None for a
    name set by hand (``--compile-hardware``), which says nothing about its device."""
    head, separator, _ = hardware.partition(" @ ")
    return head if separator and ":" in head else None


def device_of_row(record: CompileRecord) -> str | None:
    """The row's ``platform:device kind``, as measured (whatever its hardware name), else as
    its name gives it; None where neither says."""
    detail = record.hardware_detail
    if detail.get("platform") and detail.get("device_kind"):
        return f"{detail['platform']}:{detail['device_kind']}"
    return device_of_hardware(record.hardware)


def device_of_pin(pin: Pin, key: ComparabilityKey) -> str | None:
    """The ``platform:device kind`` a pin was made on: as it recorded them, else as its
    key's hardware name gives them; None where neither says (a hand-set name, an earlier
    release's pin)."""
    return pin.device or device_of_hardware(key.hardware)


def spoken_device(device: str | None) -> str:
    """``gpu NVIDIA A100-SXM4-80GB``, ``cpu``: a device as a row's note says it."""
    if device is None:
        return "an unknown device"
    platform, _, kind = device.partition(":")
    return platform if kind in ("", platform) else f"{platform} {kind}"


# The limits the gate judges a row with, given its pin (`gate.limits.limits_for`).
LimitsOf = Callable[[CompileRecord, "Pin | None"], Margins]


@dataclass
class PinUpdate:
    """What a pin update did: the files it wrote, how many re-pinned pins it kept as they
    were (every figure within a third of its margin), and the rows each key's file now pins
    from this update (written or kept as they were)."""

    written: list[Path] = field(default_factory=list)
    kept: int = 0
    pinned: dict[ComparabilityKey, frozenset[RowId]] = field(default_factory=dict)


def never_pinned(record: CompileRecord) -> str | None:
    """Why no pin update pins this row, in a few words (None: it can be pinned): a failed
    row, a row without a compile figure, a cache state that compiled nothing or is unknown."""
    if record.error is not None:
        return "failed"
    if record.unmeasured is not None:
        return "no compile time"
    if not record.state.judged:
        return f"{record.cache_state} cache state"
    return None


class PinStore:
    """All pin files of one directory, indexed by comparability key."""

    def __init__(self, directory: Path, groups: Iterable[PinGroup] = ()) -> None:
        self.directory = directory
        self._groups: dict[ComparabilityKey, PinGroup] = {}
        for group in groups:
            self._add(group)

    def _add(self, group: PinGroup) -> None:
        existing = self._groups.get(group.key)
        if existing is not None and existing.path != group.path:
            raise PinFileError(
                group.path,
                f"holds the same [key] as {existing.path}; merge the two files into one",
                1,
            )
        self._groups[group.key] = group

    @classmethod
    def load(cls, directory: Path) -> PinStore:
        """Read every ``*.toml`` file; a missing directory is an empty store."""
        if not directory.is_dir():
            return cls(directory)
        return cls(directory, (read_pin_file(path) for path in sorted(directory.glob("*.toml"))))

    def is_empty(self) -> bool:
        """Whether no pin file was read."""
        return not self._groups

    def groups(self) -> Iterator[PinGroup]:
        yield from sorted(self._groups.values(), key=lambda group: group.key)

    def get(
        self, key: ComparabilityKey, cell: str, transform: str, variant: str = ""
    ) -> Pin | None:
        group = self._groups.get(key)
        return None if group is None else group.get(cell, transform, variant)

    def has_pins(self, key: ComparabilityKey) -> bool:
        """Whether any row is pinned under this key."""
        group = self._groups.get(key)
        return group is not None and bool(group.pins)

    def path_for(self, key: ComparabilityKey) -> Path:
        group = self._groups.get(key)
        return group.path if group is not None else self.directory / pin_file_name(key)

    def pins_of(self, cell: str, transform: str, variant: str = "") -> Iterator[tuple[Path, Pin]]:
        """Every pin of this cell, transform and variant, under any key (in key order)."""
        for group in self.groups():
            pin = group.get(cell, transform, variant)
            if pin is not None:
                yield group.path, pin

    def keys_pinning(self, cell: str, transform: str, variant: str = "") -> list[ComparabilityKey]:
        """Every key under which this cell, transform and variant has a pin."""
        return sorted(
            key
            for key, group in self._groups.items()
            if group.get(cell, transform, variant) is not None
        )

    def judging(self, record: CompileRecord, cache_state: str | None = None) -> JudgingPins:
        """The pins that may judge this row, nearest first: the one home of the rule that
        a pin judges only rows of its own platform and device kind, whatever the hardware
        name. The verdict, the nearest pin, the upgrade block and the paired gate's target
        all ask it. `cache_state`: the same question under another cache state (the warm
        pin an expected-warm row is held to).

        Nearest first: the row's own key's pin; a settings variant's row, the same key's
        default settings' pin; the same hardware name under the latest earlier framework
        version (an upgrade), then under other versions; then other hardware names under
        the same version whose pins recorded the row's platform and device (so a CI runner
        named by hand is compared with the pins made on a laptop's CPU). Precision, cache
        state and framework always match. Under the row's own hardware name a pin that
        recorded another platform or device, or none (release 0.1.0's pins under a name set
        by hand), is refused when the row's device is known (`JudgingPins.refused`, which
        the row's note names with the re-pin that records it); a row that says nothing of
        its device takes a pin under its own name, never under another name.
        """
        key = record.key if cache_state is None else replace(record.key, cache_state=cache_state)
        device = device_of_row(record)
        own_version = version_order(key.framework_version)
        ranked: list[Candidate] = []
        refused: list[Candidate] = []
        for other, group in self._groups.items():
            if (other.framework, other.mixed_precision, other.cache_state) != (
                key.framework,
                key.mixed_precision,
                key.cache_state,
            ):
                continue
            pin = group.get(record.cell, record.transform, record.variant)
            relation = None
            if other == key and pin is not None:
                relation = OWN_KEY
            elif other == key and record.variant:
                pin, relation = group.get(record.cell, record.transform), OTHER_SETTINGS
            elif pin is not None and other.hardware == key.hardware:
                earlier = version_order(other.framework_version) < own_version
                relation = UPGRADE if earlier else OTHER_VERSION
            elif pin is not None and other.framework_version == key.framework_version:
                relation = OTHER_HARDWARE
            if pin is None or relation is None:
                continue
            candidate = Candidate(other, group.path, pin, relation)
            pinned_on = device_of_pin(pin, other)
            if relation == OTHER_HARDWARE:
                if device is not None and pinned_on == device:
                    ranked.append(candidate)
            elif device is not None and pinned_on != device:
                # Another device, or none recorded (a pin of release 0.1.0 under a name set
                # by hand): it says nothing of what it was measured on, so it never judges
                # a row whose device is known.
                refused.append(candidate)
            else:
                ranked.append(candidate)
        return JudgingPins(
            tuple(nearest_first(ranked)), device, next(iter(nearest_first(refused)), None)
        )

    def compiles_pinned(self, key: ComparabilityKey, cell: str) -> int | None:
        group = self._groups.get(key)
        return None if group is None else group.compiles.get(cell)

    def cells_with_compile_counts(self) -> set[str]:
        """The tests whose compile count is pinned under some key."""
        return {cell for group in self._groups.values() for cell in group.compiles}

    def update(
        self, records: Iterable[CompileRecord], compiles: Mapping[str, int] | None = None
    ) -> list[Path]:
        """Pin these records, every figure as measured (`repin`). Returns the files
        written."""
        return self.repin(records, compiles).written

    def repin(
        self,
        records: Iterable[CompileRecord],
        compiles: Mapping[str, int] | None = None,
        limits_of: LimitsOf | None = None,
    ) -> PinUpdate:
        """Pin these records (one per cell/transform/variant/key; the last wins).

        Rows `never_pinned` names (failed, unmeasured, `unknown` and `memory` rows) are
        never pinned; other pins are left untouched.
        `compiles` (per cell) is pinned in every file that receives a row of that cell.
        With `limits_of` (the limits the gate judges a row and its pin with), a re-pinned
        unchanged module keeps each measured figure that moved by less than a third of its
        margin (`kept_figures`), and a pin kept whole is counted in `PinUpdate.kept`.
        """
        compiles = compiles or {}
        by_key: dict[ComparabilityKey, dict[RowId, CompileRecord]] = {}
        for record in records:
            if never_pinned(record) is None:
                by_key.setdefault(record.key, {})[record.row_id] = record
        if not by_key:
            return PinUpdate()
        self.directory.mkdir(parents=True, exist_ok=True)
        update = PinUpdate(pinned={key: frozenset(rows) for key, rows in by_key.items()})
        from filelock import FileLock, Timeout  # only when pinning: start-up stays light

        lock = FileLock(str(lock_path(self.directory)))
        try:
            lock.acquire(timeout=LOCK_TIMEOUT_S)
        except Timeout:
            raise PinLockTimeout(
                f"{self.directory}: another pytest session has held the pins lock "
                f"({lock.lock_file}) for {LOCK_TIMEOUT_S:g} s; let it finish, or delete the "
                "lock file if no session is running"
            ) from None
        try:
            # Read every file first (inside the lock: another session may have re-pinned
            # meanwhile), so a broken file stops the update before anything is written.
            groups = {key: self._read_for_update(key) for key in sorted(by_key)}
            for key, group in groups.items():
                for (cell, transform, variant), record in by_key[key].items():
                    pins = group.pins_of(variant)
                    previous = pins.get((cell, transform))
                    limits = None if limits_of is None else limits_of(record, previous)
                    pin = Pin.from_record(record, previous, limits)
                    if limits is not None and pin == previous:
                        update.kept += 1
                    pins[(cell, transform)] = pin
                    if record.cell in compiles:
                        group.compiles[record.cell] = compiles[record.cell]
                if atomic_write_text(group.path, group.render()):
                    update.written.append(group.path)
                self._groups[key] = group
        finally:
            lock.release()
        return update

    def _read_for_update(self, key: ComparabilityKey) -> PinGroup:
        path = self.path_for(key)
        if not path.exists():
            return PinGroup(key=key, path=path)
        group = read_pin_file(path)
        if group.key != key:
            raise PinFileError(path, f"[key] changed on disk to {group.key.describe()}", 1)
        return group


def nearest_first(candidates: list[Candidate]) -> list[Candidate]:
    """By relation (`RELATIONS`), then the latest framework version, then the key."""
    by_version = sorted(
        candidates, key=lambda c: (version_order(c.key.framework_version), c.key), reverse=True
    )
    return sorted(by_version, key=lambda candidate: RELATIONS.index(candidate.relation))


def lock_path(directory: Path) -> Path:
    """One lock per pins dir, outside it, so the pins dir holds only pin files."""
    digest = hashlib.sha256(str(directory.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"pytest-jaxcompile-{digest}.lock"
