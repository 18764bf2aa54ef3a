"""Verdicts and their status: `Status` (ordered by severity, each with a `Tone`),
`row_fails` (whether a status fails the gate), `Verdict` (one row's status, its pin and
the figures compared).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from pytest_jaxcompile._constants import (
    INSTRUCTIONS_PHASE,
    METRIC_CPU,
    METRIC_WALL,
    PAIRED_PHASE,
)
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.nearest import NearestPin
from pytest_jaxcompile.gate.pins import Pin
from pytest_jaxcompile.records import CompileRecord


class Tone(str, Enum):
    """How a status reads wherever it is shown (colour, annotation level, headline)."""

    BAD = "bad"  # a regression: fails the gate (DRIFT only unless time-advisory)
    GOOD = "good"  # better than pinned
    WARN = "warn"  # needs a look: not judged as asked, or nothing to judge against
    PLAIN = "plain"


class Status(str, Enum):
    """Verdicts. Their order is their severity, most severe first: every output lists
    rows in this order and counts them in it."""

    MISS = "MISS"  # --compile-expect-warm: an unchanged module compiled cold; always fails
    GREW = "GREW"  # op count over the pin beyond max_ops_growth: deterministic, always fails
    DRIFT = "DRIFT"  # slower than the pin beyond tolerance and floor
    FAILED = "failed"  # tracing, lowering or the compile raised: its seconds and error, unjudged
    IMPROVED = "improved"
    UNPINNED = "unpinned"
    NOISY = "noisy"  # measured above compile_max_load and within tolerance on CPU seconds
    NOT_JUDGED = "not judged"  # unknown and memory rows are shown, never judged
    # A budget-only test's census row (`CompileRecord.budget_only`, no growth limit): its
    # compile_budget judges it, in its test; never compared with a pin, never pinned.
    BUDGET = "budget"
    OK = "ok"

    @property
    def severity(self) -> int:
        """0 for the most severe; sorts rows failing-first."""
        return list(Status).index(self)

    @property
    def tone(self) -> Tone:
        return _TONES[self]


_TONES = {
    Status.MISS: Tone.BAD,
    Status.GREW: Tone.BAD,
    Status.DRIFT: Tone.BAD,
    Status.FAILED: Tone.BAD,
    Status.IMPROVED: Tone.GOOD,
    Status.UNPINNED: Tone.WARN,
    Status.NOISY: Tone.WARN,
    Status.NOT_JUDGED: Tone.PLAIN,
    Status.BUDGET: Tone.PLAIN,
    Status.OK: Tone.PLAIN,
}


def row_fails(status: Status, thresholds: Thresholds) -> bool:
    """Whether a row with this status fails the gate: the one rule every output shows.

    MISS and GREW are deterministic and always fail; time verdicts fail unless
    time-advisory; an improvement fails only when asked. Noisy rows never fail: a loaded
    row that drifted on CPU seconds too is DRIFT, not noisy. Budget rows never fail the
    gate: a compile_budget over its limit fails its own test. Under compile_accept (a change
    accepted, e.g. by a pull request's label) no row fails: `would_fail` says which would.
    """
    if thresholds.accept:
        return False
    if status in (Status.MISS, Status.GREW):
        return True
    if status in (Status.FAILED, Status.BUDGET):
        return False  # its test fails on its own: the compile's error, or its budget
    if status is Status.UNPINNED:
        return thresholds.require_pinned
    if thresholds.time_advisory:
        return False
    return status is Status.DRIFT or (status is Status.IMPROVED and thresholds.fail_on_improvement)


@dataclass(frozen=True)
class Verdict:
    record: CompileRecord
    status: Status
    pin: Pin | None = None
    pin_file: Path | None = None
    tolerance: float | None = None
    note: str | None = None

    metric: str = METRIC_WALL
    # The figure the status is about: compile_s, trace_s or lower_s; for a memory verdict
    # compiled_temp_bytes or flops (GREW) or compile_rss_growth_mib (DRIFT).
    phase: str = "compile_s"
    nearest: NearestPin | None = None  # unpinned rows: the closest other key's pin
    cache_lost: bool = False  # cold, though the module is unchanged since its warm pin
    # Judged on the row's twin (`CompileRecord.twin`): its module, changed since its pin,
    # hit the cache and was compiled again with the persistent cache bypassed (gate/twins.py)
    twin: bool = False
    # Improved beyond compile_max_speedup: the pin is so far above the row that it no longer
    # judges it (judging.outrun_pin); a re-pin is asked for, and compile_strict fails it
    pin_outrun: bool = False
    # Not decided by its seconds (noisy): the width of the undecided band around the
    # tolerance its seconds landed in (gate/band.py, compile_undecided_band); else None
    band: float | None = None

    @property
    def judged(self) -> CompileRecord:
        """The record whose figures the verdict compared: the row, or its twin."""
        twin = self.record.twin() if self.twin else None
        return self.record if twin is None else twin

    def fails(self, thresholds: Thresholds) -> bool:
        """`row_fails`; and a paired row not decided, with compile_paired_required; and a
        row its pin no longer judges (`pin_outrun`), with compile_strict."""
        if self.paired_not_decided and thresholds.paired_required:
            return not thresholds.time_advisory and not thresholds.accept
        if self.pin_outrun and thresholds.strict:
            return not thresholds.time_advisory and not thresholds.accept
        return row_fails(self.status, thresholds)

    def would_fail(self, thresholds: Thresholds) -> bool:
        """Whether it would fail but for compile_accept: a row the acceptance covers."""
        return self.fails(dataclasses.replace(thresholds, accept=False))

    @property
    def paired_not_decided(self) -> bool:
        """Paired (--compile-paired), and the pairs did not decide it: noisy, it passes
        unless compile_paired_required (gate/paired.py: judge_paired)."""
        return self.phase == PAIRED_PHASE and self.status is Status.NOISY

    @property
    def seconds_not_decided(self) -> bool:
        """Its seconds landed in the undecided band around the tolerance (gate/band.py),
        and nothing after them decided it (its pairs, its instruction count): noisy, it
        passes, saying so."""
        return self.band is not None and self.status is Status.NOISY and not self.judged_further

    @property
    def judged_further(self) -> bool:
        """Judged by evidence after its seconds: its pairs or its instruction count."""
        return self.phase in (PAIRED_PHASE, INSTRUCTIONS_PHASE)

    def with_note(self, note: str) -> Verdict:
        """The same verdict with `note` after its own."""
        return dataclasses.replace(self, note=note if self.note is None else f"{self.note}; {note}")


def compared_seconds(
    record: CompileRecord, pin: Pin, metric: str, phase: str = "compile_s"
) -> tuple[float | None, float | None]:
    """The figures a verdict compares: CPU seconds when chosen and both sides have them.

    Trace and lowering are compared in wall seconds (no CPU figure is kept for them);
    either side may lack them (None: not judged).
    """
    if phase != "compile_s":
        return getattr(record, phase), getattr(pin, phase)
    if metric == METRIC_CPU and record.compile_cpu_s is not None and pin.compile_cpu_s is not None:
        return record.compile_cpu_s, pin.compile_cpu_s
    return record.compile_s, pin.compile_s


def session_failed(verdicts: Iterable[Verdict], thresholds: Thresholds) -> bool:
    return any(verdict.fails(thresholds) for verdict in verdicts)


def floor_decided(record: CompileRecord, pin: Pin, tolerance: float, metric: str) -> bool:
    """Whether the row's seconds are beyond the tolerance of its pin's, so that only the
    floor kept it from DRIFT or improved."""
    measured, pinned = compared_seconds(record, pin, metric)
    if measured is None or pinned is None:
        return False
    return measured > pinned * (1 + tolerance) or measured < pinned / (1 + tolerance)
