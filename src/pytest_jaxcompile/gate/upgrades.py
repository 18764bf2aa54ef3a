"""Upgrade blocks: unpinned rows under a new framework version, compared with their
pins under the previous one.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from pytest_jaxcompile.gate.grouping import severity_order
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.nearest import UPGRADE
from pytest_jaxcompile.gate.status import Status, Verdict


@dataclass(frozen=True)
class UpgradeReport:
    """Rows under a new framework version compared with their pins under the previous one.

    It replaces a per-row note: one block says how the upgrade changed compile time, and
    with `Thresholds.max_upgrade_slowdown` it is a gate for the job that bumps jax.
    """

    framework: str
    hardware: str
    old: str
    new: str
    verdicts: tuple[Verdict, ...]

    def ratios(self) -> list[float]:
        return sorted(
            v.nearest.ratio
            for v in self.verdicts
            if v.nearest is not None and v.nearest.ratio is not None
        )

    @property
    def median_ratio(self) -> float | None:
        return statistics.median(self.ratios()) if self.ratios() else None

    def worst(self, count: int = 5) -> list[Verdict]:
        return sorted(self.verdicts, key=lambda v: -_nearest_ratio(v))[:count]

    def fails(self, thresholds: Thresholds) -> bool:
        return not thresholds.accept and self.slower_than_allowed(thresholds)

    def slower_than_allowed(self, thresholds: Thresholds) -> bool:
        """Over compile_max_upgrade_slowdown, accepted or not."""
        limit = thresholds.max_upgrade_slowdown
        median = self.median_ratio
        return limit is not None and median is not None and median > 1 + limit


def _nearest_ratio(verdict: Verdict) -> float:
    return verdict.nearest.ratio or 0.0 if verdict.nearest is not None else 0.0


def upgrade_reports(verdicts: Iterable[Verdict]) -> list[UpgradeReport]:
    """One report per (framework, hardware, previous version, new version) of unpinned rows
    whose nearest pin is the same hardware under an earlier version."""
    groups: dict[tuple[str, str, str, str], list[Verdict]] = {}
    for verdict in verdicts:
        nearest = verdict.nearest
        if (
            verdict.status is Status.UNPINNED
            and nearest is not None
            and (nearest.relation == UPGRADE)
        ):
            key = verdict.record.key
            group = (
                key.framework,
                key.hardware,
                nearest.key.framework_version,
                key.framework_version,
            )
            groups.setdefault(group, []).append(verdict)
    return [
        UpgradeReport(*group, verdicts=tuple(sorted(rows, key=severity_order)))
        for group, rows in sorted(groups.items())
    ]
