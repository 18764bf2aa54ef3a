"""The undecided band: where one compile against one pinned compile decides nothing.

A pin holds one compile's seconds, and a plain row measures one more: their ratio carries
the run-to-run noise of two single samples (a log standard deviation of 0.093 measured on
issue 62's forward pass, 0.106-0.139 between recorded busy sessions of the same day:
docs/benchmarks.md#the-undecided-band). A row whose true ratio sits at its tolerance
lands on either side of it from run to run, `ok` on one and `DRIFT` on the next. So
within ``compile_undecided_band`` either side of ``1 + tolerance`` the seconds gate
decides nothing: the row is `noisy`, not decided (`Verdict.seconds_not_decided`), run
after run; more evidence decides it where the session has it (its pairs with
``--compile-paired``, its instruction count with ``--compile-instructions``: the judges
that run after the seconds'). Beyond the band the single samples decide, as before:
``DRIFT`` over its upper edge (and over the floor), ``ok`` at or under its lower edge.

The band is on the drift side only: `improved` never fails a session by default.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_jaxcompile._numbers import percent
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.pins import Pin
from pytest_jaxcompile.gate.status import Status, compared_seconds
from pytest_jaxcompile.records import CompileRecord


@dataclass(frozen=True)
class Band:
    """The band around a tolerance: ratios over ``low`` and up to ``high`` are not
    decided (``width`` 0: no band)."""

    tolerance: float
    width: float

    @property
    def low(self) -> float:
        return (1 + self.tolerance) / (1 + self.width)

    @property
    def high(self) -> float:
        return (1 + self.tolerance) * (1 + self.width)

    def holds(self, measured: float, pinned: float, floor_s: float) -> bool:
        """Whether a row's seconds land in the band: slower than its pin by a ratio over
        ``low`` and up to ``high``, and by more than the floor (a slowdown within the floor
        is `ok` whatever its ratio, as without a band)."""
        if self.width <= 0 or pinned <= 0:
            return False
        return pinned * self.low < measured <= pinned * self.high and measured - pinned > floor_s

    def describe(self) -> str:
        """``the undecided band 1.30x-2.36x around the 75% tolerance``."""
        return f"the undecided band {self.span()}"

    def span(self) -> str:
        """``1.30x-2.36x around the 75% tolerance``."""
        return f"{self.low:.2f}x-{self.high:.2f}x around the {percent(self.tolerance)} tolerance"


def band_note(
    record: CompileRecord, pin: Pin, metric: str, band: Band, phase: str = "compile_s"
) -> str:
    """A row its seconds did not decide: ``compile seconds not decided on one compile:
    1.87x its pin, inside the undecided band 1.30x-2.36x around the 75% tolerance``."""
    measured, pinned = compared_seconds(record, pin, metric, phase)
    assert measured is not None and pinned is not None
    return (
        f"{phase.removesuffix('_s')} seconds not decided on one compile: "
        f"{measured / pinned:.2f}x its pin, inside {band.describe()}"
    )


def undecided(status: Status, thresholds: Thresholds) -> float | None:
    """A verdict's `Verdict.band`: the band's width where the seconds left the row noisy
    (not decided), else None."""
    return thresholds.undecided_band if status is Status.NOISY else None
