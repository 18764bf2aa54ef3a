"""The compile profile beside a verdict: where inside XLA the row's compile spent its time.

A failing row (and every row under ``--compile-profile``) is compiled once more at the
session's end with XLA's pass timers on, and so is its pin's module where the module store
holds it (docs/profile.md); the record keeps the seconds per HLO pass of both
(``profile``: "new", "base"). `profile_note` says on the verdict which passes grew most
(``grew most of XLA's HLO passes: fusion 0.3 ms -> 9.0 ms, ...``), which shrank most on an
improvement, and the longest ones otherwise; with no pin's module to compare with, the
row's own longest passes and why there is nothing to compare them with.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.paired import PairedComparison
from pytest_jaxcompile.gate.status import Status, Verdict, compared_seconds
from pytest_jaxcompile.records import (
    PROFILE_ALL_PASSES,
    PROFILE_OTHER_PASSES,
    PROFILE_PHASE_CODEGEN,
    PROFILE_PHASE_HLO,
    PROFILE_PHASE_LLVM,
    PROFILE_PHASES,
)

MOST_MOVED = 3  # passes named on a row
# Where the pin's module comes from, in the note of a row profiled without it.
STORES_MODULES = "a pin update with --compile-paired or --compile-profile stores it"
_REST = "the rest is outside the HLO pass pipelines (mostly code generation, LLVM)"
_TOTALS = (PROFILE_OTHER_PASSES, PROFILE_ALL_PASSES, *PROFILE_PHASES)
# How each phase reads on a row (the LLVM modules compile on several threads at once).
_PHASE_WORDS = {
    PROFILE_PHASE_HLO: "HLO passes",
    PROFILE_PHASE_CODEGEN: "code generation and LLVM",
    PROFILE_PHASE_LLVM: "LLVM's module compiles (summed over threads)",
}


def profile_note(verdict: Verdict, thresholds: Thresholds) -> str | None:
    """The row's profile in words (see the module doc); None without a profile."""
    profile = verdict.record.profile or {}
    new, base = profile.get("new"), profile.get("base")
    if not new:
        return None
    seconds = _compile_seconds(verdict, thresholds)
    if not base:
        pin = verdict.pin or (verdict.nearest.pin if verdict.nearest is not None else None)
        why = (
            "no pin to compare them with"
            if pin is None
            else "its pin's module is not stored, so nothing to compare them with "
            f"({STORES_MODULES})"
        )
        longest = sorted((-time, name) for name, time in new.items() if name not in _TOTALS)
        named = [f"{name} {_short(-time)}" for time, name in longest[:MOST_MOVED]]
        text = f"longest of XLA's HLO passes: {', '.join(named)}"
        phases = _phases(None, new)
        if phases:
            text += f"; {_phases_of(seconds, None, new)}: {phases}"
        elif PROFILE_ALL_PASSES in new:
            compile_s = "" if seconds is None else f" of the compile's {seconds[1]:.3f} s"
            text += f"; all HLO passes {_short(new[PROFILE_ALL_PASSES])}{compile_s}: {_REST}"
        return f"{text}; {why}"
    moving = verdict.fails(thresholds) or verdict.status in (
        Status.DRIFT,
        Status.GREW,
        Status.IMPROVED,
    )
    grew = verdict.status is not Status.IMPROVED
    names = [name for name in set(base) | set(new) if name not in _TOTALS]
    if moving:
        changes = sorted(
            ((new.get(name, 0.0) - base.get(name, 0.0), name) for name in names), reverse=grew
        )
        chosen = [name for change, name in changes if (change > 0 if grew else change < 0)]
        heading = f"{'grew' if grew else 'shrank'} most of XLA's HLO passes"
    else:  # within its limits: the longest passes, beside its pin's module's
        chosen = sorted(names, key=lambda name: -new.get(name, 0.0))
        heading = "longest of XLA's HLO passes (its pin's module -> this row's)"
    named = [
        f"{name} {_short(base.get(name, 0.0))} -> {_short(new.get(name, 0.0))}"
        for name in chosen[:MOST_MOVED]
    ]
    if not named:
        return None
    text = f"{heading}: {', '.join(named)}"
    phases = _phases(base, new)
    if phases:
        text += f"; {_phases_of(seconds, base, new)}: {phases}"
    elif PROFILE_ALL_PASSES in base and PROFILE_ALL_PASSES in new:
        text += (
            f"; all HLO passes {_short(base[PROFILE_ALL_PASSES])} -> "
            f"{_short(new[PROFILE_ALL_PASSES])}"
        )
        if seconds is not None:
            text += f" of the compile's {seconds[0]:.3f} s -> {seconds[1]:.3f} s: {_REST}"
    return text


def _phases_of(
    seconds: tuple[float, float] | None, base: dict[str, float] | None, new: dict[str, float]
) -> str:
    """What the phases are of: the compile's seconds where no phase is larger than them;
    else (a cache hit's seconds, against the fresh compile the profile made) not those."""
    if seconds is None:
        return "phases"
    # LLVM's module compiles are summed over threads: that one may exceed any wall figure
    timed = (PROFILE_PHASE_HLO, PROFILE_PHASE_CODEGEN)
    larger = any(new.get(phase, 0.0) > seconds[1] for phase in timed) or (
        base is not None and any(base.get(phase, 0.0) > seconds[0] for phase in timed)
    )
    if larger:
        return "phases of the fresh compile made to profile it"
    if base is None:
        return f"phases of the compile's {seconds[1]:.3f} s"
    return f"phases of the compile's {seconds[0]:.3f} s -> {seconds[1]:.3f} s"


def _phases(base: dict[str, float] | None, new: dict[str, float]) -> str:
    """The compile's phases in words (the pin's module's -> this row's, where `base`), those
    both sides have; empty when the profile has none (made before phases were read)."""
    named = [phase for phase in PROFILE_PHASES if phase in new and (base is None or phase in base)]
    return ", ".join(
        f"{_PHASE_WORDS[phase]} "
        + (_short(new[phase]) if base is None else f"{_short(base[phase])} -> {_short(new[phase])}")
        for phase in named
    )


def judge_profile(verdict: Verdict, thresholds: Thresholds) -> Verdict:
    """The verdict with its row's profile noted, where the row has one."""
    note = profile_note(verdict, thresholds)
    return verdict if note is None else verdict.with_note(note)


def _compile_seconds(verdict: Verdict, thresholds: Thresholds) -> tuple[float, float] | None:
    """(pin's, row's) seconds of the compile the profile is beside: the pairs' medians
    where paired, else the figures the verdict compared; the pin's may be missing (0)."""
    comparison = PairedComparison.of(verdict.record, thresholds)
    if comparison is not None:
        return comparison.base_s, comparison.new_s
    pin = verdict.pin or (verdict.nearest.pin if verdict.nearest is not None else None)
    if pin is None:
        now = verdict.record.compile_s
        return None if now is None else (0.0, now)
    now, then = compared_seconds(verdict.record, pin, verdict.metric)
    if now is None or then is None:
        return None
    return then, now


def _short(seconds: float) -> str:
    """``0.3 ms`` below a tenth of a second, else ``1.234 s``."""
    return f"{seconds * 1000:.1f} ms" if seconds < 0.1 else f"{seconds:.3f} s"
