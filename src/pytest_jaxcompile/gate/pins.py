"""The pin store: every pin file of one directory (`gate.pinfile`), by comparability key;
updates written under a `filelock` lock, each file re-read inside it (two sessions
re-pinning at once lose nothing) and replaced atomically.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

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
    "LimitsOf",
    "Pin",
    "PinFileError",
    "PinGroup",
    "PinLockTimeout",
    "PinStore",
    "PinUpdate",
    "kept_figures",
    "lock_path",
    "pin_file_name",
    "pin_line",
    "read_pin_file",
    "within_repin_margin",
]

LOCK_TIMEOUT_S = 120.0


class PinLockTimeout(Exception):
    """Another session held the pins dir's lock for longer than LOCK_TIMEOUT_S."""


# The limits the gate judges a row with, given its pin (`gate.limits.limits_for`).
LimitsOf = Callable[[CompileRecord, "Pin | None"], Margins]


@dataclass
class PinUpdate:
    """What a pin update did: the files it wrote, and how many re-pinned pins it kept as
    they were (every figure within a third of its margin)."""

    written: list[Path] = field(default_factory=list)
    kept: int = 0


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

        `unknown` and `memory` rows are never pinned; other pins are left untouched.
        `compiles` (per cell) is pinned in every file that receives a row of that cell.
        With `limits_of` (the limits the gate judges a row and its pin with), a re-pinned
        unchanged module keeps each measured figure that moved by less than a third of its
        margin (`kept_figures`), and a pin kept whole is counted in `PinUpdate.kept`.
        """
        compiles = compiles or {}
        by_key: dict[ComparabilityKey, dict[RowId, CompileRecord]] = {}
        for record in records:
            if record.state.judged and record.unmeasured is None:
                by_key.setdefault(record.key, {})[record.row_id] = record
        if not by_key:
            return PinUpdate()
        self.directory.mkdir(parents=True, exist_ok=True)
        update = PinUpdate()
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


def lock_path(directory: Path) -> Path:
    """One lock per pins dir, outside it, so the pins dir holds only pin files."""
    digest = hashlib.sha256(str(directory.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"pytest-jaxcompile-{digest}.lock"
