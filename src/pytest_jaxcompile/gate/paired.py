"""The paired verdict: a changed row's module and its pin's, compiled side by side.

``--compile-paired`` (docs/paired.md) re-compiles, at the end of the session and on the
same machine, the module of the pin a row is compared with beside the row's own module,
alternately (`backends/jax/paired.py`). The machine and the moment are then the same on
both sides of every pair: what differs is the modules. This module says which rows are
paired and against which pin (`pairing_target`), reads the pairs as one comparison with
its uncertainty (`PairedComparison`), and judges it (`judge_paired`).

The statistic (gate/sequential.py): each pair's ratio (new over base, in the process's CPU
seconds, which waiting for a core does not inflate), taken as a log, read with Wilcoxon's
signed-rank statistic at a schedule of looks (6, 8, ... 60 pairs), the pairing stopping at
the first look that decides: the Hodges-Lehmann estimate of the centre and its interval
from the Walsh averages' order statistics, the ranks those of a group-sequential test that
spends 2.5 % of error on each side over all the looks. The row is DRIFT when the whole
interval is above ``1 + bound``, improved when it is wholly below ``1 / (1 + bound)``, ok
when it is wholly below ``1 + bound``, the bound the larger of `compile_paired_tolerance`
and `compile_paired_floor` over the pin's module's seconds (an interval under the floor in
seconds); otherwise it is not decided (the pairs allowed ran out, or the rule found the
looks left could not decide it): the row passes as noisy, saying this runner's noise per
compile and what would decide it (`compile_paired_required` fails such a session).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pytest_jaxcompile._constants import DEFAULT_MAX_PAIRS, PAIRED_PHASE
from pytest_jaxcompile._io import relative
from pytest_jaxcompile._numbers import percent
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.notes import what_changed
from pytest_jaxcompile.gate.pins import OWN_KEY, Pin, PinStore
from pytest_jaxcompile.gate.sequential import (
    LOOKS,
    ONE_SIDED_ERROR,
    judge_pairs,
    judged_seconds,
    resolvable,
)
from pytest_jaxcompile.gate.status import Status, Verdict
from pytest_jaxcompile.gate.twins import accepted_pin
from pytest_jaxcompile.records import (
    CENSUS_SOURCE,
    ComparabilityKey,
    CompileRecord,
)

SEQUENTIAL_CONFIDENCE = 1 - 2 * ONE_SIDED_ERROR  # the rule's interval, over all its looks
# The census listens to JAX's events and holds no compile's module (docs/paired.md)
CENSUS_NOT_PAIRED = (
    "a census row (the census holds no module to pair; measure it with the jax_compile "
    "fixture to pair it)"
)
# Rows paired where their module changed: real compiles, and cache hits (the pairs compile
# both modules afresh, whatever the cache held: gate/twins.py)
PAIRED_STATES = ("cold", "none", "warm", "memory")
# Verdicts the pairs decide: the compile's seconds (not trace or lowering, which the pairs
# do not measure; not a deterministic verdict: MISS, GREW, an instruction count).
_DECIDED_BY_PAIRS = (Status.DRIFT, Status.IMPROVED, Status.OK, Status.NOISY, Status.UNPINNED)


@dataclass(frozen=True)
class PairingTarget:
    """The pin a changed row is paired against, and where it lives."""

    key: ComparabilityKey
    path: Path
    pin: Pin
    own_key: bool  # the row's own key's pin (else the nearest key's: other hardware)

    def describe(self, root: Path | None = None) -> str:
        where = self.path.name if root is None else relative(self.path, root)
        return f"{where} ({self.key.describe()})"


def pairing_target(record: CompileRecord, store: PinStore) -> PairingTarget | str | None:
    """The pin a row is paired against: the pin of its accepted module (gate/twins.py),
    the row's newest pin under its own hardware name whatever its cache state, else the
    nearest key's that differs only in the hardware name (the same platform and device
    kind; `PinStore.judging`).

    The pairs compile both modules afresh, so a module pinned warm is as good a base as
    one pinned cold, and a row that hit the cache is paired as a cold one is: what the
    cache held decides nothing. A re-pin writes every cache state's pin with the accepted
    module (a changed row that hit the cache pins its twin cold), so the next regression
    is paired with the module last accepted, never an older pin's.

    None: nothing to pair (no such pin, an unchanged module, a settings variant or version
    judged against another key); a string: why a row that changed cannot be paired (a
    census row among them: the census holds no module to pair).
    """
    if record.cache_state not in PAIRED_STATES:
        return None
    if record.unmeasured is not None or record.fingerprint is None:
        return None
    accepted = accepted_pin(record, store)
    if accepted is None:
        return None  # an upgrade or a settings change is not the module's change
    target = PairingTarget(
        accepted.key, accepted.path, accepted.pin, own_key=accepted.relation == OWN_KEY
    )
    if target.pin.fingerprint == record.fingerprint:
        return None  # the same module: nothing changed that pairing could measure
    if record.source == CENSUS_SOURCE:
        return CENSUS_NOT_PAIRED
    if target.pin.fingerprint is None:
        return "its pin has no fingerprint to find its module by"
    return target


@dataclass(frozen=True)
class PairedComparison:
    """A row's pairs, read as one comparison with its uncertainty: the sequential rule's
    look that decided them, else the last look they reached (gate/sequential.py)."""

    metric: str  # cpu (both sides' CPU seconds measured), else wall
    base_s: float  # the pin's module: median seconds over the look's pairs
    new_s: float  # the row's module: median seconds over the look's pairs
    ratio: float  # the pairs' ratio (new over base): Hodges-Lehmann, on log ratios
    low: float  # the look's interval (the sequential rule's, 95 % over all its looks)
    high: float
    pairs: int  # the pairs the look judged
    made: int  # the pairs made (more than `pairs` only where the pairing stopped between looks)
    status: Status | None  # DRIFT, improved or ok where the look decided; None: not decided
    cost_s: float | None  # the child's seconds for this row's compiles
    against: str  # the pin paired against
    bound: float = 0.0  # the ratio over 1 judged against: the tolerance or the floor's share
    by_floor: bool = False  # the floor (compile_paired_floor), not the tolerance, set it
    noise: float = 0.0  # the pairs' noise per compile, measured (0.03: 3 %)
    futile: bool = False  # stopped not decided: the looks left could not have decided it
    max_pairs: int = DEFAULT_MAX_PAIRS  # the pairs the row was allowed

    @classmethod
    def of(cls, record: CompileRecord, thresholds: Thresholds) -> PairedComparison | None:
        """The comparison of a row's pairs; None when it was not paired (or made fewer
        pairs than the first look)."""
        judged = judged_seconds(
            (record.paired_base_cpu_s, record.paired_new_cpu_s),
            (record.paired_base_wall_s, record.paired_new_wall_s),
        )
        if judged is None:
            return None
        metric, base, new = judged
        max_pairs = thresholds.paired_max_pairs
        look = judge_pairs(
            base, new, thresholds.paired_tolerance, thresholds.paired_floor_s, max_pairs
        )
        if look is None:
            return None
        return cls(
            metric=metric,
            base_s=look.base_s,
            new_s=look.new_s,
            ratio=look.ratio,
            low=look.low,
            high=look.high,
            pairs=look.pairs,
            made=len(base),
            status=None if look.status is None else Status(look.status),
            cost_s=record.paired_cost_s,
            against=record.paired_against or "its pin",
            bound=look.bound,
            by_floor=look.by_floor,
            noise=look.noise,
            futile=look.futile,
            max_pairs=max_pairs,
        )

    def pairs_to_decide(self) -> int | None:
        """About how many pairs in all would decide it (the interval narrows as one over
        the square root of the pairs); None when the median sits on the bound it was
        judged against (the tolerance, or the floor's share where that is larger)."""
        bound = 1 + self.bound if self.ratio >= 1 else 1 / (1 + self.bound)
        distance = abs(self.ratio - bound)
        half_width = max(self.ratio - self.low, self.high - self.ratio)
        if distance <= 0 or half_width <= 0:
            return None
        return max(math.ceil(self.pairs * (half_width / distance) ** 2), self.pairs + 1)

    def describe(self, tolerance: float) -> str:
        """``paired with pins/x.toml (...): 8 pairs, cpu 1.204 s -> 1.431 s (medians), pairs'
        ratio 1.19x (95% sequential interval 1.15x-1.24x, paired tolerance 4%), cost 26.3 s``:
        the pairs' ratio is theirs (`judge_look`), not that of the two medians; where the
        floor set the bound, ``paired floor 0.05 s: 17%`` in place of the tolerance."""
        cost = "" if self.cost_s is None else f", cost {self.cost_s:.1f} s"
        made = f" ({self.made} made)" if self.made != self.pairs else ""
        return (
            f"paired with {self.against}: {self.pairs} pairs{made}, {self.metric} "
            f"{self.base_s:.3f} s -> {self.new_s:.3f} s (medians), pairs' ratio {self.ratio:.2f}x "
            f"({SEQUENTIAL_CONFIDENCE:.0%} sequential interval {self.low:.2f}x-{self.high:.2f}x, "
            f"{self.bound_text(tolerance)}){cost}"
        )

    def bound_text(self, tolerance: float) -> str:
        """The bound the pairs were judged against: ``paired tolerance 4%``, or where the
        floor set it `floor_bound_text`."""
        return self.floor_bound_text or f"paired tolerance {percent(tolerance)}"

    @property
    def floor_bound_text(self) -> str | None:
        """``paired floor 0.05 s: 17%`` (of this module's seconds) where the floor, not the
        tolerance, set the bound; else None."""
        return f"paired floor {self.floor_s:.2g} s: {self.bound:.0%}" if self.by_floor else None

    @property
    def floor_s(self) -> float:
        """The floor in seconds the bound stands for, where the floor set it."""
        return self.bound * self.base_s

    def floor_text(self, tolerance: float) -> str | None:
        """Where the floor, not the tolerance, passed the row (its interval under the floor
        in seconds, not under the tolerance): says so."""
        if not (self.by_floor and self.status is Status.OK and self.high >= 1 + tolerance):
            return None
        return (
            f"ok by the floor: its whole interval is under {self.floor_s:.2g} s slower "
            f"(compile_paired_floor), {self.bound:.0%} of this module"
        )

    def undecided_text(self, tolerance: float) -> str:
        """Why the row is not decided and what would decide it: this runner's noise, and
        more pairs or a wider tolerance."""
        allowed = min(self.max_pairs, LOOKS[-1])
        against = (
            f"the {self.floor_s:.2g} s floor ({self.bound:.0%})"
            if self.by_floor
            else f"the {percent(tolerance)} tolerance"
        )
        head = (
            f"not decided within {allowed} pairs: this runner's noise ({self.noise:.1%} per "
            f"compile, measured) is too large to judge {self.ratio:.2f}x against {against} "
            f"(it resolves {resolution(resolvable(self.noise, allowed))} in {allowed} pairs)"
        )
        needed = self.pairs_to_decide()
        more = "more pairs"
        if needed is not None and needed <= LOOKS[-1] and needed > allowed:
            look = next(pairs for pairs in LOOKS if pairs >= needed)
            more = f"more pairs (about {needed}: compile_paired_max_pairs = {look})"
        # Only the option that set the bound moves it: a wider tolerance under a larger
        # floor's share changes nothing.
        option = (
            "a lower compile_paired_floor" if self.by_floor else "a wider compile_paired_tolerance"
        )
        return f"{head}; to decide it: a quieter runner, {more} or {option}"


@dataclass(frozen=True)
class PairingCost:
    """What the session's pairing cost and found: its rows' pairs and compile seconds, the
    rows not decided and decided by the floor, and the noise it measured."""

    rows: int  # rows paired (at least one pair made)
    pairs: tuple[int, ...]  # the pairs each made, in the rows' order
    seconds: float  # the pairing child's seconds for those rows (its start-up aside)
    plain_compiles: float  # a row's seconds over one compile of its pin's module, median
    not_decided: int = 0  # rows the pairs did not decide (the runner too noisy for them)
    by_floor: int = 0  # rows the floor, not the tolerance, passed
    noise: float | None = None  # the rows' noise per compile, median (0.03: 3 %)
    resolves: float | None = None  # the tolerance that noise resolves within max_pairs
    max_pairs: int = DEFAULT_MAX_PAIRS
    workers: int = 1  # > 1: pytest-xdist's workers paired their own rows, `seconds` summed

    def describe(self) -> str:
        """``paired 2 changed rows in 48 s: 14 plain compiles a row (6 and 8 pairs), 1 not
        decided; noise 3.1% per compile: this runner resolves about 4% in 20 pairs``; under
        xdist ``in 15 s summed over 2 workers``."""
        pairs = [str(count) for count in self.pairs]
        listed = pairs[0] if len(pairs) == 1 else f"{', '.join(pairs[:-1])} and {pairs[-1]}"
        summed = f" summed over {self.workers} workers" if self.workers > 1 else ""
        text = (
            f"paired {self.rows} changed row{'s' if self.rows != 1 else ''} in "
            f"{self.seconds:.0f} s{summed}: {self.plain_compiles:.0f} plain compiles a row "
            f"({listed} pairs)"
        )
        if self.by_floor:
            text += f", {self.by_floor} ok by the floor"
        if self.not_decided:
            text += f", {self.not_decided} not decided"
        if self.noise is not None and self.resolves is not None:
            text += (
                f"; noise {self.noise:.1%} per compile: this runner resolves "
                f"{resolution(self.resolves)} in {self.max_pairs} pairs"
            )
        return text


def pairing_cost(
    records: Iterable[CompileRecord], thresholds: Thresholds, workers: int = 1
) -> PairingCost | None:
    """The session's pairing cost from its rows' own figures (so merged reports and xdist
    workers' rows add up the same; `workers` > 1: said summed over them); None when no row
    was paired. A row's plain compile is
    its pin's module's, the median of its paired wall seconds: a changed row costs its
    pairs' two compiles each, the new module's as large as it has become."""
    paired = [
        record
        for record in records
        if record.paired_new_wall_s and record.paired_cost_s is not None
    ]
    if not paired:
        return None
    plain = [
        record.paired_cost_s / median
        for record in paired
        if record.paired_cost_s is not None
        and (median := statistics.median(record.paired_base_wall_s or [0.0])) > 0
    ]
    judged = [
        comparison
        for record in paired
        if record.paired_note is None
        and (comparison := PairedComparison.of(record, thresholds)) is not None
    ]
    noise = statistics.median(c.noise for c in judged) if judged else None
    max_pairs = min(thresholds.paired_max_pairs, LOOKS[-1])
    return PairingCost(
        rows=len(paired),
        pairs=tuple(len(record.paired_new_wall_s or ()) for record in paired),
        seconds=sum(record.paired_cost_s or 0.0 for record in paired),
        plain_compiles=statistics.median(plain) if plain else 0.0,
        not_decided=sum(1 for comparison in judged if comparison.status is None),
        by_floor=sum(1 for c in judged if c.floor_text(thresholds.paired_tolerance) is not None),
        noise=noise,
        resolves=None if noise is None else resolvable(noise, max_pairs),
        max_pairs=max_pairs,
        workers=workers,
    )


def judge_paired(verdict: Verdict, thresholds: Thresholds) -> Verdict:
    """A paired row's verdict: the pairs decide its compile-time status (DRIFT, improved
    or ok, replacing the seconds gate's, which compared with another moment); not decided,
    noisy (`Verdict.paired_not_decided`: it passes unless compile_paired_required), with a
    note saying this runner's noise and what would decide it. MISS, GREW, an
    instruction-count verdict and a trace or lowering drift are kept, noted."""
    record = verdict.record
    if record.paired_note is not None:
        return verdict.with_note(f"{record.paired_note}; judged on seconds alone")
    comparison = PairedComparison.of(record, thresholds)
    if comparison is None:
        return verdict
    tolerance = thresholds.paired_tolerance
    text = comparison.describe(tolerance)
    if verdict.status not in _DECIDED_BY_PAIRS or verdict.phase != "compile_s":
        return verdict.with_note(text)
    status = comparison.status
    pin = verdict.pin or (verdict.nearest.pin if verdict.nearest is not None else None)
    if status is None:  # passes as noisy, saying why and what would decide it
        status = Status.NOISY
        text = f"{text}: {comparison.undecided_text(tolerance)}"
    change = what_changed(record, pin) if pin is not None and status is Status.DRIFT else None
    prefix = "DRIFT " if status is Status.DRIFT else ""
    seconds = verdict.note if verdict.status is not Status.UNPINNED else None
    if change is not None and seconds is not None and said_already(change, seconds):
        change = None  # the seconds verdict's note says what changed in the module
    floor = comparison.floor_text(tolerance)
    note = "; ".join(part for part in (prefix + text, floor, change, seconds) if part)
    return dataclasses.replace(
        verdict,
        status=status,
        pin=pin,
        tolerance=tolerance,
        note=note,
        metric=comparison.metric,
        phase=PAIRED_PHASE,
    )


def said_already(change: str, note: str) -> bool:
    """Whether `note` already says `change` (``module grew: 60 -> 466 ops``), with its own
    figures in parentheses (the seconds verdict's limit)."""
    return change.split(" (", 1)[0] in note


def resolution(change: float) -> str:
    """The smallest change a runner resolves, as said: ``about 12%``; ``under 1%`` where it
    rounds to nothing (a quiet runner: never ``about 0%``)."""
    return "under 1%" if change < 0.005 else f"about {change:.0%}"
