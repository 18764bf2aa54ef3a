"""`Outcome`: what the gate concluded. Every output renders it; none re-derives it.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pytest_jaxcompile.backends.settings import Clobber
from pytest_jaxcompile.gate.always_cold import AlwaysCold
from pytest_jaxcompile.gate.dropping import Dropped
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.pins import PinStore, RowId
from pytest_jaxcompile.gate.stale import CompileCountChange, StalePin
from pytest_jaxcompile.gate.status import Status, Verdict
from pytest_jaxcompile.gate.upgrades import UpgradeReport
from pytest_jaxcompile.records import CallLedger, ComparabilityKey, CompileRecord

NOT_COUNTED = "not counted: "  # how the instruction stager's note of an uncounted row starts

Identity = tuple[str, str]  # (hardware, framework version) a session ran under


@dataclass(frozen=True)
class Coverage:
    """Why the unpinned rows have no pin under their key, counted."""

    judged: int = 0  # rows judged against pins (all but not judged and budget rows)
    new_tests: int = 0  # no pin under any key: tests not pinned yet
    new_runner: int = 0  # pinned only under other hardware
    upgrade: int = 0  # pinned on this hardware, only under other framework versions
    other: int = 0  # pinned on this hardware and version, under another precision or cache

    @property
    def unpinned_elsewhere(self) -> int:
        """Rows the pins directory has figures for, under a runner or a version not pinned."""
        return self.new_runner + self.upgrade


def coverage(verdicts: list[Verdict], store: PinStore) -> Coverage:
    """Count each unpinned row by what its cell and transform are pinned under instead."""
    judged = [
        verdict for verdict in verdicts if verdict.status not in (Status.NOT_JUDGED, Status.BUDGET)
    ]
    counts = {"new_tests": 0, "new_runner": 0, "upgrade": 0, "other": 0}
    for verdict in judged:
        if verdict.status is not Status.UNPINNED:
            continue
        key = verdict.record.key
        pinned = [
            other
            for other in store.keys_pinning(*verdict.record.row_id)
            if other.framework == key.framework
        ]
        here = [other for other in pinned if other.hardware == key.hardware]
        if not pinned:
            counts["new_tests"] += 1
        elif not here:
            counts["new_runner"] += 1
        elif all(other.framework_version != key.framework_version for other in here):
            counts["upgrade"] += 1
        else:
            counts["other"] += 1
    return Coverage(judged=len(judged), **counts)


@dataclass
class Outcome:
    """The verdicts of a session (or of merged reports, or of a records corpus)."""

    rootdir: Path
    pins_dir: Path
    thresholds: Thresholds
    pin_update: bool
    verdicts: list[Verdict] = field(default_factory=list)
    stale: list[StalePin] = field(default_factory=list)
    ledgers: list[CallLedger] = field(default_factory=list)
    compile_count_changes: list[CompileCountChange] = field(default_factory=list)
    clobbers: list[Clobber] = field(default_factory=list)
    # settings in force that the session set, no clobber ("XLA flags set during start-up")
    settings_notes: list[str] = field(default_factory=list)
    pins_written: list[Path] = field(default_factory=list)
    # --compile-paired pin update: the module store's files written and removed, and where
    modules_written: list[Path] = field(default_factory=list)
    modules_removed: list[Path] = field(default_factory=list)
    modules_dir: Path | None = None
    # --compile-instructions: rows counted whose count no pin of their instrument holds
    instructions_unpinned: list[CompileRecord] = field(default_factory=list)
    # --compile-instructions-required: a row not counted fails the session
    instructions_required: bool = False
    pins_kept: int = 0  # re-pinned pins left as they were (every figure within a third)
    # A pin update: the rows each key's pin file now pins from this session (a changed
    # row's twin under its twin's key too); a key absent here was written nothing
    pinned: dict[ComparabilityKey, frozenset[RowId]] = field(default_factory=dict)
    pin_error: str | None = None  # the pin update could not be written
    # A pin update refused: the kinds of figure it would have dropped (pin_error says so)
    dropped: list[Dropped] = field(default_factory=list)
    # The command-line options the printed re-pin command repeats: the session's gates and
    # where and under which key its pins live (the session's own words, from pytest's)
    repin_arguments: tuple[str, ...] = ()
    # Variables the re-pin must be run with, ``NAME=value`` (the hardware name the session's
    # environment gave it: JAXCOMPILE_HARDWARE), printed before the command
    repin_environment: tuple[str, ...] = ()
    # Per test: the options a re-pin of it must add so that its pins keep every kind of
    # figure they hold (a count, a stored module), decided by `conclude` from the pins
    repin_keeps: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Under GitHub Actions the way back is the CI's, never a command that pins a laptop:
    # the pull-request label that accepts a change (compile_accept_label), where there is one
    github_actions: bool = False
    accept_label: str | None = None
    paired: bool = False  # --compile-paired: changed rows were paired with their pins' modules
    failed: bool = False
    ran_cells: list[str] = field(default_factory=list)  # tests whose call phase ran
    environments: list[Identity] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)  # workers or reports whose rows are missing
    upgrades: list[UpgradeReport] = field(default_factory=list)
    session_s: float | None = None  # the session's wall seconds, where known
    # What the gate itself spent after the tests, wall seconds by work ("counting
    # instructions", "pairing", "profiling"; this process's), and the rows it profiled
    gate_s: dict[str, float] = field(default_factory=dict)
    profiled_rows: int = 0
    workers: int = 1  # processes that compiled side by side (pytest-xdist workers)
    cache_saved_s: float | None = None  # JAX's compile_time_saved_sec, summed
    coverage: Coverage = field(default_factory=Coverage)  # why unpinned rows are unpinned
    # Rows no persistent cache can serve, found against the pins as the session started
    always_cold: list[AlwaysCold] = field(default_factory=list)
    # Each shown key's own pin file (where its pins live, or will once pinned; the keys
    # rows are shown under, `grouping.shown_key`, and those a pin update pinned): a MISS
    # row is compared with its own (cold) key's pin, and listed there.
    pin_files: dict[ComparabilityKey, Path] = field(default_factory=dict)
    # compile_reproducer: each bundled row's folder by (key, row id), and where they go
    reproducers: dict[tuple[ComparabilityKey, RowId], Path] = field(default_factory=dict)
    reproducers_dir: Path | None = None

    def instructions_uncounted(self) -> list[tuple[CompileRecord, str]]:
        """--compile-instructions: each row not counted under valgrind, with why."""
        return [
            (verdict.record, note.removeprefix(NOT_COUNTED))
            for verdict in self.verdicts
            if verdict.record.compile_instructions is None
            and (note := verdict.record.compile_instructions_note) is not None
        ]

    @property
    def uncounted_fails(self) -> bool:
        """Whether rows not counted fail the session (--compile-instructions-required)."""
        return (
            self.instructions_required
            and not self.pin_update
            and bool(self.instructions_uncounted())
        )

    def count(self, status: Status) -> int:
        return sum(1 for verdict in self.verdicts if verdict.status is status)

    def counts(self) -> list[tuple[Status, int]]:
        """(status, rows) for every status present, most severe first."""
        return [(status, n) for status in Status if (n := self.count(status))]

    def with_status(self, status: Status) -> list[Verdict]:
        return [verdict for verdict in self.verdicts if verdict.status is status]

    def failing(self) -> list[Verdict]:
        """The rows that fail the gate (none while pinning)."""
        if self.pin_update:
            return []
        return [verdict for verdict in self.verdicts if verdict.fails(self.thresholds)]

    def cache_lost(self) -> list[Verdict]:
        """Cold rows of modules unchanged since their warm pin, not expected warm (those
        are MISS rows, which say so themselves)."""
        return [
            verdict
            for verdict in self.verdicts
            if verdict.cache_lost and verdict.status is not Status.MISS
        ]

    def mostly_unpinned(self) -> bool:
        """Most rows that have pins have them only under another key: the gate is close to
        silent (a new runner, a renamed hardware, a new jax version). Tests not pinned under
        any key yet (new tests) are counted apart, never as this."""
        counted = self.coverage
        pinnable = counted.judged - counted.new_tests
        return (
            not self.pin_update
            and counted.unpinned_elsewhere > 0
            and 2 * counted.unpinned_elsewhere > pinnable
        )

    @property
    def pinned_nothing(self) -> bool:
        """A pin update that measured no compile: it wrote nothing, and must say so (a
        silent one reads as done). Without rows it can neither write a pin nor fail to."""
        return self.pin_update and not self.verdicts

    def has_news(self) -> bool:
        """Whether there is anything to show: a session that measured nothing, found no
        stale pin and wrote no pin adds no summary anywhere, unless it was asked to pin."""
        return bool(
            self.pin_update  # pins written, refused or nothing measured: always said
            or self.verdicts
            or self.stale
            or self.lost
            or self.ledgers
            or self.clobbers
        )
