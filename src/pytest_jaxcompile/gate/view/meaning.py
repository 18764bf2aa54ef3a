"""What a status means for its rows, and what to do about it (the sentence before the
re-pin command).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pytest_jaxcompile._constants import (
    INSTRUCTIONS_PHASE,
    METRIC_CPU,
    PAIRED_PHASE,
)
from pytest_jaxcompile._numbers import percent
from pytest_jaxcompile.gate.band import Band
from pytest_jaxcompile.gate.judging import RSS_PHASE
from pytest_jaxcompile.gate.limits import Thresholds, limits_for
from pytest_jaxcompile.gate.paired import PairedComparison
from pytest_jaxcompile.gate.status import Status, Verdict, floor_decided
from pytest_jaxcompile.gate.view.repin import Repin

# --------------------------------------------------------------------------- statuses

_MEANING: dict[Status, tuple[str, str]] = {  # (one row, several rows)
    Status.MISS: (
        "compiled cold although its module is unchanged since its warm pin",
        "compiled cold although their module is unchanged since its warm pin",
    ),
    Status.GREW: (
        "compiled a module that grew beyond its limit",
        "compiled a module that grew beyond its limit",
    ),
    Status.DRIFT: (
        "compiled slower than its pin by more than the tolerance and by more than {floor:g} s",
        "compiled slower than their pin by more than the tolerance and by more than {floor:g} s",
    ),
    Status.IMPROVED: ("compiled faster than its pin", "compiled faster than their pin"),
    Status.UNPINNED: ("has no pin under its key", "have no pin under their key"),
    Status.NOISY: (
        "was measured above {max_load:g} load per core{cpu}; its wall seconds are "
        "not judged (strict judges them)",
        "were measured above {max_load:g} load per core{cpu}; their wall seconds "
        "are not judged (strict judges them)",
    ),
    Status.FAILED: (
        "failed to compile (its seconds and error kept; never judged against a pin)",
        "failed to compile (their seconds and errors kept; never judged against a pin)",
    ),
    Status.NOT_JUDGED: (
        "is not judged (an in-memory cache hit, or a cache state the evidence did not decide)",
        "are not judged (in-memory cache hits, or a cache state the evidence did not decide)",
    ),
    Status.BUDGET: (
        "is judged by its compile_budget only (its test asked for no seconds): never "
        "compared with a pin, never pinned",
        "are judged by their compile_budget only (their tests asked for no seconds): never "
        "compared with a pin, never pinned",
    ),
    Status.OK: ("is within tolerance", "are within tolerance"),
}
# Unpinned rows of budget-only tests whose budget sets a growth limit: pinned for it only.
_GROWTH_ONLY = (
    " (for its compile_budget's growth limits only: its seconds are not judged)",
    " ({count} for their compile_budget's growth limits only: their seconds are not judged)",
)
# In a pin update: what happened to a key's budget rows.
BUDGET_NOT_PINNED = "row(s) judged by their compile_budget only: not pinned"
_MEANING_DETAIL = {
    Status.MISS: ": the cache was not restored, was evicted or stopped applying",
    Status.GREW: " (op count, compiled temp bytes or flops)",
}
# A DRIFT on the process's memory during the compile (the verdict's phase is RSS_PHASE).
_RSS_DRIFT = (
    "grew the process's memory during the compile by more than the tolerance and {rss_floor:g} MiB"
)
# A DRIFT on the compile's instructions (the verdict's phase is INSTRUCTIONS_PHASE).
_INSTRUCTIONS_DRIFT = (
    "compiled with more instructions than their pin by more than "
    "{instructions:.2%}, whatever the load"
)
# A DRIFT the pairs decided (the verdict's phase is PAIRED_PHASE).
_PAIRED_DRIFT = (
    "compiled slower than their pin's module compiled beside them on this machine, by more "
    "than {paired_over} with confidence"
)
# Noisy rows the pairs did not decide (`Verdict.paired_not_decided`).
_PAIRED_NOT_DECIDED = (
    "was compiled beside its pin's module on this machine, and the pairs did not decide it: "
    "this runner's noise is too large for {paired_bound} within the pairs allowed",
    "were compiled beside their pin's module on this machine, and the pairs did not decide "
    "them: this runner's noise is too large for {paired_bound} within the pairs allowed",
)
# Improved rows faster than their pin by more than compile_max_speedup (`Verdict.pin_outrun`).
_OUTRUN = (
    "compiled faster than its pin by more than {max_speedup:g}x: its pin no longer judges it",
    "compiled faster than their pin by more than {max_speedup:g}x: their pin no longer judges them",
)
_OUTRUN_ADVICE = "Re-pin and commit the pin files, so that a pin judges them again:"
# Noisy rows their seconds did not decide (`Verdict.seconds_not_decided`, gate/band.py).
_SECONDS_NOT_DECIDED = (
    "was slower than its pin by a ratio inside {band} (compile_undecided_band), where one "
    "compile against one pinned compile cannot tell a regression from this runner's noise: "
    "not decided on its seconds (--compile-paired decides a changed module against its "
    "pin's stored module)",
    "were slower than their pin by a ratio inside {band} (compile_undecided_band), where "
    "one compile against one pinned compile cannot tell a regression from this runner's "
    "noise: not decided on their seconds (--compile-paired decides a changed module "
    "against its pin's stored module)",
)
# DRIFTs on a figure other than time: the phase of their verdict, what they mean.
_OTHER_DRIFTS = {
    RSS_PHASE: _RSS_DRIFT,
    INSTRUCTIONS_PHASE: _INSTRUCTIONS_DRIFT,
    PAIRED_PHASE: _PAIRED_DRIFT,
}
_ADVICE: dict[Status, str] = {
    Status.GREW: "If the growth is intended, re-pin and commit the pin files:",
    Status.DRIFT: "If the change is intended, re-pin and commit the pin files:",
    Status.IMPROVED: "Re-pin to lock the improvement in:",
    Status.UNPINNED: "Pin them with:",
}
# The same advice's opening in CI, where the CI's way replaces the command (`repin.ci_way`).
_CI_LEAD: dict[Status, str] = {
    Status.GREW: "If the growth is intended",
    Status.DRIFT: "If the change is intended",
    Status.IMPROVED: "To lock the improvement in",
    Status.UNPINNED: "To pin them",
}


def meaning(
    status: Status, verdicts: Sequence[Verdict], thresholds: Thresholds, plural: bool = True
) -> str:
    one, many = _MEANING[status]
    meanings = [(many if plural else one) + _MEANING_DETAIL.get(status, "")]
    growth_only = sum(1 for verdict in verdicts if verdict.record.budget_only)
    if status is Status.UNPINNED and growth_only:  # asked for a pin, not for seconds
        meanings = [meanings[0] + _GROWTH_ONLY[plural].format(count=growth_only)]
    if status is Status.DRIFT:  # named by the kinds of drift its rows have
        phases = {verdict.phase for verdict in verdicts}
        meanings = meanings if phases - set(_OTHER_DRIFTS) else []
        meanings += [text for phase, text in _OTHER_DRIFTS.items() if phase in phases]
    if status is Status.IMPROVED and any(verdict.pin_outrun for verdict in verdicts):
        judged = [verdict for verdict in verdicts if not verdict.pin_outrun]
        meanings = (meanings if judged else []) + [_OUTRUN[plural]]
    loaded = list(verdicts)
    if status is Status.NOISY:  # named by the kinds of noisy its rows have
        loaded = [v for v in verdicts if not (v.paired_not_decided or v.seconds_not_decided)]
        meanings = meanings if loaded else []
        meanings += [
            text[plural]
            for kind, text in (
                ("seconds_not_decided", _SECONDS_NOT_DECIDED),
                ("paired_not_decided", _PAIRED_NOT_DECIDED),
            )
            if any(getattr(verdict, kind) for verdict in verdicts)
        ]
    return ", or ".join(meanings).format(
        floor=thresholds.floor_s,
        max_load=thresholds.max_load or 0,
        rss_floor=thresholds.rss_floor_mib,
        cpu=_noisy_cpu(loaded, plural, thresholds),
        band=_bands(verdicts),
        instructions=thresholds.instructions_tolerance,
        max_speedup=thresholds.max_speedup,
        **_paired_bounds(verdicts, thresholds),
    )


def _bands(verdicts: Sequence[Verdict]) -> str:
    """The bands the rows' seconds landed in: ``the undecided band 1.30x-2.36x around the
    75% tolerance`` (several: ``the undecided bands 1.30x-2.36x around the 75% tolerance
    and 1.11x-2.03x around the 50% tolerance``)."""
    bands = sorted(
        {
            (verdict.tolerance, verdict.band)
            for verdict in verdicts
            if verdict.seconds_not_decided and verdict.tolerance is not None
        },
        key=lambda pair: (pair[0] or 0.0, pair[1] or 0.0),
    )
    spans = [Band(tolerance, width).span() for tolerance, width in bands if width is not None]
    if len(spans) == 1:
        return f"the undecided band {spans[0]}"
    return f"the undecided bands {', '.join(spans[:-1])} and {spans[-1]}" if spans else ""


def _paired_bounds(verdicts: Sequence[Verdict], thresholds: Thresholds) -> dict[str, str]:
    """What the pairs judged the rows against: the paired tolerance, or the paired floor
    where its share of a small module is larger (as `paired_over`, ``4%``, and as
    `paired_bound`, ``the 4% tolerance``)."""
    comparisons = (
        PairedComparison.of(verdict.record, thresholds)
        for verdict in verdicts
        if verdict.phase == PAIRED_PHASE
    )
    by_floor = {comparison.by_floor for comparison in comparisons if comparison is not None}
    tolerance = percent(thresholds.paired_tolerance)
    floor = f"the {thresholds.paired_floor_s:g} s paired floor"
    if by_floor == {True}:
        return {"paired_over": floor, "paired_bound": floor}
    if True in by_floor:
        return {
            "paired_over": f"{tolerance} or {floor}",
            "paired_bound": f"the {tolerance} tolerance or {floor}",
        }
    return {"paired_over": tolerance, "paired_bound": f"the {tolerance} tolerance"}


def _noisy_cpu(verdicts: Sequence[Verdict], plural: bool, thresholds: Thresholds) -> str:
    """What a noisy row's CPU seconds said: claimed only for rows judged on them, and the
    floor named where it, not the tolerance, kept them from DRIFT."""
    on_cpu = [verdict for verdict in verdicts if verdict.metric == METRIC_CPU]
    floored = [verdict for verdict in on_cpu if _floor_decided(verdict, thresholds)]
    floors = sorted({limits_for(v.record, v.pin, thresholds).floor_s for v in floored})
    floor = f"the {' / '.join(f'{value:g}' for value in floors)} s floor"
    within = len(on_cpu) - len(floored)
    if on_cpu and len(on_cpu) == len(verdicts):
        if not floored:
            return " and stayed within tolerance on CPU seconds"
        if not within:
            return f" and stayed within {floor} on CPU seconds"
        return (
            f" and stayed on CPU seconds within tolerance ({within}) or within {floor} "
            f"({len(floored)})"
        )
    if not on_cpu:
        return (
            " without CPU seconds to judge"
            if plural
            else " without CPU seconds to judge (its row or its pin has none)"
        )
    judged = f"{within} stayed within tolerance on CPU seconds" if within else ""
    judged += ", " if within and floored else ""
    judged += f"{len(floored)} within {floor} on CPU seconds" if floored else ""
    return f" ({judged}, {len(verdicts) - len(on_cpu)} have no CPU seconds to judge)"


def _floor_decided(verdict: Verdict, thresholds: Thresholds) -> bool:
    if verdict.pin is None:
        return False
    tolerance = (
        verdict.tolerance
        if verdict.tolerance is not None
        else limits_for(verdict.record, verdict.pin, thresholds).tolerance
    )
    return floor_decided(verdict.judged, verdict.pin, tolerance, METRIC_CPU)


def advice(
    status: Status,
    cells: Iterable[str],
    repin: Repin,
    hardware: Iterable[str] = (),
    *,
    fails: bool = False,
    outrun: bool = False,
) -> tuple[str, str | None] | None:
    """What to do about rows of this status: (the sentence, the re-pin command or None in
    CI), or None; `hardware`: the rows' hardware names, `fails`: whether they fail;
    `outrun`: a row among them its pin no longer judges (`Verdict.pin_outrun`)."""
    sentence = _OUTRUN_ADVICE if outrun and status is Status.IMPROVED else _ADVICE.get(status)
    if sentence is None:
        return None
    return repin.way_back(_CI_LEAD[status], sentence, cells, hardware, fails=fails)
