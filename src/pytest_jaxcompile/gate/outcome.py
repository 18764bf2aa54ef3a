"""`Outcome`: what the gate concluded. Every output renders it; none re-derives it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pytest_jaxcompile.backends.settings import Clobber
from pytest_jaxcompile.gate.verdicts import (
    CompileCountChange,
    StalePin,
    Status,
    Thresholds,
    UpgradeReport,
    Verdict,
)
from pytest_jaxcompile.records import CallLedger

Identity = tuple[str, str]  # (hardware, framework version) a session ran under


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
    pins_written: list[Path] = field(default_factory=list)
    pin_error: str | None = None  # the pin update could not be written
    failed: bool = False
    ran_cells: list[str] = field(default_factory=list)  # tests whose call phase ran
    environments: list[Identity] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)  # workers or reports whose rows are missing
    upgrades: list[UpgradeReport] = field(default_factory=list)
    session_s: float | None = None  # the session's wall seconds, where known
    cache_saved_s: float | None = None  # JAX's compile_time_saved_sec, summed
    pins_exist: bool = False  # the pins directory holds pins (under any key)

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
        """Cold rows of modules unchanged since their warm pin (MISS when expected warm)."""
        return [verdict for verdict in self.verdicts if verdict.cache_lost]

    def mostly_unpinned(self) -> bool:
        """Most judged rows have no pin under their key although pins exist: the gate is
        close to silent (a new runner CPU, a renamed hardware, a new jax version)."""
        judged = [v for v in self.verdicts if v.status is not Status.NOT_JUDGED]
        unpinned = [v for v in judged if v.status is Status.UNPINNED]
        return self.pins_exist and not self.pin_update and 2 * len(unpinned) > len(judged)

    def has_news(self) -> bool:
        """Whether there is anything to show: a session that measured nothing, found no
        stale pin and wrote no pin adds no summary anywhere."""
        return bool(
            self.verdicts or self.stale or self.pins_written or self.lost or self.pin_error
            or self.ledgers or self.clobbers
        )
