"""Judge measured rows against pins: strictly within one comparability key.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path

from pytest_jaxcompile._constants import (
    METRIC_CPU,
    METRIC_WALL,
    PAIRED_PHASE,
)
from pytest_jaxcompile._numbers import percent
from pytest_jaxcompile.gate.always_cold import always_cold
from pytest_jaxcompile.gate.band import Band, band_note, undecided
from pytest_jaxcompile.gate.instructions import judge_instructions
from pytest_jaxcompile.gate.limits import Limits, Thresholds, limits_for
from pytest_jaxcompile.gate.nearest import nearest_of
from pytest_jaxcompile.gate.notes import (
    key_change,
    same_module,
    version_differences,
    versions_note,
    what_changed,
)
from pytest_jaxcompile.gate.paired import judge_paired
from pytest_jaxcompile.gate.pins import OTHER_SETTINGS, OWN_KEY, Pin, PinStore
from pytest_jaxcompile.gate.profile import judge_profile
from pytest_jaxcompile.gate.status import Status, Verdict, compared_seconds, floor_decided
from pytest_jaxcompile.gate.twins import CACHE_HITS, no_twin_note, twin_note
from pytest_jaxcompile.records import SCOPE_TEST, ComparabilityKey, CompileRecord

PHASES = ("compile_s", "trace_s", "lower_s")  # the figures judged, each against its pin
# The limits judged against a pin's deterministic figures: (limit, the figure it judges).
GROWTH_LIMITS = (
    ("max_ops_growth", "op_count"),
    ("max_memory_growth", "compiled_temp_bytes"),
    ("max_flops_growth", "flops"),
)
BUDGET_NOTE = "judged by its compile_budget only: no seconds asked for, not pinned"


def growth_limits(record: CompileRecord, thresholds: Thresholds) -> list[str]:
    """The growth limits a row can be judged with against a pin: set (by its marker, else
    the session) and of a figure the row has. A JAX census row has no op count, compiled
    temp bytes nor flops (only the ``jax_compile`` fixture measures them); a torch census
    row has its graph's op count."""
    limits = limits_for(record, None, thresholds)
    return [
        name
        for name, figure in GROWTH_LIMITS
        if getattr(limits, name) is not None and getattr(record, figure) is not None
    ]


def judged_by_budget(record: CompileRecord, thresholds: Thresholds) -> bool:
    """A budget-only row (`CompileRecord.budget_only`) that no growth limit judges: its
    compile_budget judges it, in its test, and nothing else; it is never compared with a
    pin nor pinned. A budget-only row a growth limit judges needs a pin for that limit: it
    is pinned, and judged against the pin on the grown figures only, never on its seconds."""
    return record.budget_only and not growth_limits(record, thresholds)


def judge(record: CompileRecord, store: PinStore, thresholds: Thresholds) -> Verdict:
    """One row against the pin under exactly its key, and nothing else."""
    if record.error is not None:
        return Verdict(record, Status.FAILED, note=_failed_note(record))
    if record.unmeasured is not None:
        return Verdict(record, Status.NOT_JUDGED, note=f"not judged: {record.unmeasured}")
    twin = record.twin()
    if twin is not None and record.cache_state in CACHE_HITS:
        return judge_on_twin(record, twin, store, thresholds)
    if not record.state.judged:
        return Verdict(record, Status.NOT_JUDGED, note=record.cache.reason_detail)
    if judged_by_budget(record, thresholds):
        return Verdict(record, Status.BUDGET, note=BUDGET_NOTE)
    warmth_note = None
    cache_lost = False
    if record.cache_state in ("cold", "none"):
        warm_pin, warmth_note = _expected_warm(record, store)
        if warm_pin is not None and thresholds.expect_warm:
            # A MISS is the cache's story: no profile of where XLA spent the compile.
            return _miss(record, store, warm_pin)
        if warm_pin is not None:  # never silent: a warning, and MISS under expect-warm
            cache_lost = True
            warmth_note = (
                "compiled cold although the module is unchanged since its warm pin: "
                + _why_not_warm(record, warm_pin)
            )
        elif not thresholds.expect_warm:
            warmth_note = None  # a changed module recompiles: only worth saying when asked
    verdict = _judge_figures(record, store, thresholds)
    no_twin = no_twin_note(record, store)
    if no_twin is not None:
        verdict = verdict.with_note(no_twin)
    versions = versions_note(record, verdict.pin)
    if warmth_note is None and versions is None:
        return verdict
    notes = (verdict.note, versions, warmth_note)
    return dataclasses.replace(
        verdict, note="; ".join(note for note in notes if note), cache_lost=cache_lost
    )


def _judge_figures(record: CompileRecord, store: PinStore, thresholds: Thresholds) -> Verdict:
    """Time, memory, instructions, the pairs and the profile, in that order."""
    verdict = _judge_time(record, store, thresholds)
    verdict = _judge_memory(verdict, limits_for(record, verdict.pin, thresholds))
    verdict = judge_instructions(verdict, store, thresholds)
    verdict = judge_paired(verdict, thresholds)
    return outrun_pin(judge_profile(verdict, thresholds), thresholds)


def outrun_pin(verdict: Verdict, thresholds: Thresholds) -> Verdict:
    """An improved row faster than its pin by more than compile_max_speedup: a pin that far
    above the row no longer judges it (a regression back to many times its seconds would
    pass, as under a hand-edited figure), said first on the row with the seconds that would
    pass (`Verdict.pin_outrun`: the view asks for the re-pin, compile_strict fails it)."""
    record, pin = verdict.record, verdict.pin
    if verdict.status is not Status.IMPROVED or pin is None or verdict.phase != "compile_s":
        return verdict
    measured, pinned = compared_seconds(record, pin, verdict.metric)
    if measured is None or pinned is None or measured * thresholds.max_speedup >= pinned:
        return verdict
    limits = limits_for(record, pin, thresholds)
    tolerance = limits.tolerance if verdict.tolerance is None else verdict.tolerance
    passing = max(pinned * (1 + tolerance), pinned + limits.floor_s)
    unit = " CPU" if verdict.metric == METRIC_CPU else ""
    note = (
        f"its pin no longer judges it: {measured:.3f} s{unit} against the pin's {pinned:.3f} s, "
        f"faster by more than compile_max_speedup ({thresholds.max_speedup:g}x), so a "
        f"regression up to {passing:.3f} s would pass"
    )
    return dataclasses.replace(
        verdict,
        pin_outrun=True,
        note=note if verdict.note is None else f"{note}; {verdict.note}",
    )


def judge_on_twin(
    record: CompileRecord, twin: CompileRecord, store: PinStore, thresholds: Thresholds
) -> Verdict:
    """A cache hit whose module changed since its pin, judged on its twin (gate/twins.py):
    the module compiled with the persistent cache bypassed, against the pins of that cache
    state (its own key's, else the nearest), as a cold row is; the note says so first."""
    verdict = _judge_figures(twin, store, thresholds)
    notes = [twin_note(record), verdict.note, versions_note(twin, verdict.pin)]
    if verdict.phase == PAIRED_PHASE:  # the pairs judged it: said first
        notes[:2] = notes[1::-1]
    return dataclasses.replace(
        verdict, record=record, twin=True, note="; ".join(note for note in notes if note)
    )


def failed_phase(record: CompileRecord) -> tuple[str, float | None]:
    """What raised on a failed row, and after how many seconds: the compile, else (no
    compile time: it never ran) the lowering, else the tracing."""
    if record.compile_s is not None:
        return "compile", record.compile_s
    if record.lower_s is not None:
        return "lowering", record.lower_s
    return "tracing", record.trace_s


def _failed_note(record: CompileRecord) -> str:
    phase, seconds = failed_phase(record)
    after = "" if seconds is None else f" after {seconds:.3f} s"
    return f"{phase} failed{after}: {record.error}"


# The deterministic figures judged as GREW besides the op count: (field, name in notes,
# the Thresholds field and CompileRecord field holding its limit).
GROWTH_FIGURES = (
    ("compiled_temp_bytes", "compiled temp bytes", "max_memory_growth"),
    ("flops", "flops", "max_flops_growth"),
)
RSS_PHASE = "compile_rss_growth_mib"
MEMORY_PHASES = (*(figure for figure, _, _ in GROWTH_FIGURES), RSS_PHASE)


def _judge_memory(verdict: Verdict, limits: Limits) -> Verdict:
    """Compiled temp bytes and flops against the pin, deterministic like the op count: a
    growth beyond its limit is GREW, whatever the load. Then the process's RSS growth
    during the compile, judged like time (tolerance, and a floor of its own): DRIFT.

    A row already MISS or GREW keeps its verdict, as does a row without a pin; a time
    DRIFT stays a time DRIFT. A figure the row or its pin lacks is not judged.
    """
    record, pin = verdict.record, verdict.pin
    if pin is None or verdict.status in (Status.MISS, Status.GREW):
        return verdict
    for figure, name, limit_field in GROWTH_FIGURES:
        limit = getattr(limits, limit_field)
        measured, pinned = getattr(record, figure), getattr(pin, figure)
        if limit is None or measured is None or not pinned or measured <= pinned * (1 + limit):
            continue
        return _restated(
            verdict,
            pin,
            Status.GREW,
            figure,
            f"{name} grew: {_figure(pinned)} -> {_figure(measured)} "
            f"({measured / pinned - 1:+.0%}, limit +{percent(limit)})",
        )
    if verdict.status is Status.DRIFT or not _rss_drifted(record, pin, limits):
        return verdict
    return _restated(
        verdict,
        pin,
        Status.DRIFT,
        RSS_PHASE,
        f"RSS growth during the compile drifted: {record.compile_rss_growth_mib:.1f} MiB, pin "
        f"{pin.compile_rss_growth_mib:.1f} MiB (peak {record.compile_rss_peak_mib or 0:.1f} "
        f"MiB; floor {limits.rss_floor_mib:g} MiB)",
    )


def _restated(verdict: Verdict, pin: Pin, status: Status, phase: str, note: str) -> Verdict:
    """The verdict with a memory finding first in its note, and what changed in the module
    (unless the note already says it)."""
    change = what_changed(verdict.record, pin)
    if change is not None and change not in (verdict.note or ""):
        note = f"{note}; {change}"
    return dataclasses.replace(
        verdict,
        status=status,
        phase=phase,
        note=note if verdict.note is None else f"{note}; {verdict.note}",
    )


def _figure(value: float) -> str:
    return f"{value:,.0f}"


def _rss_drifted(record: CompileRecord, pin: Pin, limits: Limits) -> bool:
    """The compile's RSS growth over its pin beyond the tolerance and the RSS floor.

    A census row's figure covers its whole test (scope "test") and is not judged.
    """
    measured, pinned = record.compile_rss_growth_mib, pin.compile_rss_growth_mib
    if measured is None or pinned is None or record.compile_rss_scope == SCOPE_TEST:
        return False
    return measured > pinned * (1 + limits.tolerance) and measured - pinned > limits.rss_floor_mib


def _expected_warm(record: CompileRecord, store: PinStore) -> tuple[Pin | None, str | None]:
    """The warm pin of a cold row whose module it shows unchanged (a MISS under
    --compile-expect-warm), or a note for an expected recompile (a row that can never be
    served from the persistent cache is never a MISS)."""
    cold = always_cold(record, store)
    if cold is not None:
        return None, f"never warm: {cold.describe()}"
    # Its own warm pin; a variant with no warm pin of its own, the default settings': it
    # tells whether the cache stopped applying because the settings changed (the key part
    # is named). Only a pin of the row's own platform and device (`PinStore.judging`).
    warm = store.judging(record, cache_state="warm").candidates
    warm_pin = next((each.pin for each in warm if each.relation in (OWN_KEY, OTHER_SETTINGS)), None)
    unchanged = same_module(record.fingerprint, warm_pin.fingerprint if warm_pin else None)
    if warm_pin is None or unchanged is None:
        return None, "expected warm, but there is no warm pin to tell a changed module from a miss"
    if unchanged:
        changed = version_differences(record, warm_pin)
        if changed:
            return None, (
                f"expected recompile: {', '.join(changed)} since its warm pin, and JAX's "
                "cache keys include these versions (the module is unchanged)"
            )
        return warm_pin, None
    return None, "expected recompile: the module changed since its warm pin"


def _miss(record: CompileRecord, store: PinStore, warm_pin: Pin) -> Verdict:
    """An expected-warm row that compiled cold (or uncached) though its module is unchanged
    since its warm pin: compared with the pin of its own cache state, in its file, and
    told with what was recorded of why: the cache key part that changed, else the reason
    JAX gave for not storing it, else the usual suspects."""
    own = store.judging(record).own
    pin_file = store.path_for(record.key)
    compared = (
        f"; shown against its {record.cache_state} pin"
        if own is not None
        else f"; no {record.cache_state} pin to show it against"
    )
    why = _why_not_warm(record, warm_pin)
    return Verdict(
        record,
        Status.MISS,
        pin=own.pin if own is not None else None,
        pin_file=pin_file,
        note=(
            "expected a persistent-cache hit: the module is unchanged since its warm pin "
            f"({warm_pin.compile_s:.3f} s), yet it compiled {record.cache_state}{compared}. "
            f"{why[0].upper()}{why[1:]}"
        ),
        cache_lost=True,
    )


def _why_not_warm(record: CompileRecord, warm_pin: Pin) -> str:
    """What was recorded of why an unchanged module compiled afresh: the part of JAX's
    cache key that changed, else the reason JAX gave for not storing it, else the usual
    suspects."""
    cause = key_change(record, warm_pin)
    if cause:
        return f"its cache key changed: {cause}"
    reason = record.cache.reason
    if reason:
        detail = f" ({record.cache.reason_detail})" if record.cache.reason_detail else ""
        return f"JAX did not store it: {reason}{detail}"
    return (
        "the persistent cache was not restored, was evicted or stopped applying (cache dir, "
        "jax version, XLA flags)"
    )


def _judge_time(record: CompileRecord, store: PinStore, thresholds: Thresholds) -> Verdict:
    key = record.key
    pin_file = store.path_for(key)
    pins = store.judging(record)
    pin = pins.own.pin if pins.own is not None else None
    if pin is None:
        nearest = nearest_of(record, pins)
        note = (
            nearest.describe()
            if nearest is not None
            else None
            if pins.refused is not None
            else _unpinned_note(
                key, store.keys_pinning(record.cell, record.transform, record.variant)
            )
        )
        notes = (
            _growth_only_note(record, thresholds) if record.budget_only else None,
            pins.refusal(),
            note,
        )
        note = "; ".join(part for part in notes if part) or None
        return Verdict(record, Status.UNPINNED, pin_file=pin_file, note=note, nearest=nearest)
    limits = limits_for(record, pin, thresholds)
    tolerance, growth = limits.tolerance, limits.max_ops_growth
    load = record.host_state.load_per_core
    if (
        growth is not None
        and pin.op_count
        and record.op_count is not None
        and record.op_count > pin.op_count * (1 + growth)
    ):
        # Deterministic, so judged whatever the host load was.
        status, phase, note = Status.GREW, "compile_s", what_changed(record, pin, growth)
    elif record.budget_only:  # no seconds asked for: only its growth limits are judged
        status, phase, note = Status.OK, "compile_s", None
    elif (
        not thresholds.strict
        and thresholds.max_load is not None
        and load is not None
        and load > thresholds.max_load
    ):
        if is_accelerator(record):
            return _judge_loaded_accelerator(record, pin, pin_file, limits, thresholds, load)
        return _judge_noisy(record, pin, pin_file, limits, thresholds, growth, load)
    else:
        band = Band(tolerance, thresholds.undecided_band)
        status, phase = _phases_status(record, pin, band, limits.floor_s, thresholds.metric)
        note = _phase_note(record, pin, phase, growth, status, band, thresholds.metric)
    return Verdict(
        record,
        status,
        pin=pin,
        pin_file=pin_file,
        tolerance=tolerance,
        note=note,
        metric=thresholds.metric,
        phase=phase,
        band=undecided(status, thresholds),
    )


def _time_status(
    record: CompileRecord,
    pin: Pin,
    tolerance: float,
    floor_s: float,
    metric: str,
    phase: str = "compile_s",
    band: float = 0.0,
) -> Status:
    """DRIFT, improved or ok; noisy where the seconds land in the undecided band around
    the tolerance (gate/band.py): one compile against one pinned compile decides nothing
    there."""
    measured, pinned = compared_seconds(record, pin, metric, phase)
    if measured is None or pinned is None:
        return Status.OK  # a phase the row or its pin does not have is not judged
    if Band(tolerance, band).holds(measured, pinned, floor_s):
        return Status.NOISY
    if measured > pinned * (1 + tolerance) and measured - pinned > floor_s:
        return Status.DRIFT
    if measured < pinned / (1 + tolerance) and pinned - measured > floor_s:
        return Status.IMPROVED
    return Status.OK


def _phases_status(
    record: CompileRecord, pin: Pin, band: Band, floor_s: float, metric: str
) -> tuple[Status, str]:
    """Compile, trace and lowering time, each against its pinned figure with the same
    tolerance, band and floor: a drift in any is DRIFT (the first one named); else a phase
    in the undecided band makes the row noisy, not decided (the first one named); else an
    improvement of the compile; else ok."""
    statuses = {
        phase: _time_status(record, pin, band.tolerance, floor_s, metric, phase, band.width)
        for phase in PHASES
    }
    for status in (Status.DRIFT, Status.NOISY):
        found = [phase for phase in PHASES if statuses[phase] is status]
        if found:
            return status, found[0]
    return statuses["compile_s"], "compile_s"


def _phase_note(
    record: CompileRecord,
    pin: Pin,
    phase: str,
    growth: float | None,
    status: Status,
    band: Band,
    metric: str,
) -> str | None:
    if status is Status.OK:
        return None
    change = what_changed(record, pin, growth)
    if status is Status.NOISY:  # in the band: its ratio and the band, then what changed
        text = band_note(record, pin, metric, band, phase)
        return text if change is None else f"{text}; {change}"
    if phase == "compile_s":
        return change
    measured, pinned = compared_seconds(record, pin, METRIC_WALL, phase)
    text = (
        f"{phase.removesuffix('_s')} time drifted: {measured:.3f} s, pin {pinned:.3f} s "
        f"(compile {record.compile_s:.3f} s, pin {pin.compile_s:.3f} s)"
    )
    return text if change is None else f"{text}; {change}"


def is_accelerator(record: CompileRecord) -> bool:
    """A row compiled for a GPU or TPU (from the platform the backend reported)."""
    platform = str(record.hardware_detail.get("platform") or "")
    if not platform and ":" in record.hardware:
        platform = record.hardware.split(":", 1)[0]
    return platform.lower() not in ("", "cpu")


def _judge_loaded_accelerator(
    record: CompileRecord,
    pin: Pin,
    pin_file: Path,
    limits: Limits,
    thresholds: Thresholds,
    load: float,
) -> Verdict:
    """An accelerator row measured above compile_max_load: its process CPU seconds do
    not hold what the compiler ran on the device (autotuning), so judging them could hide
    a regression. It is judged on wall seconds with the loaded-accelerator tolerance (never
    below the row's own: see `limits_for`), and its undecided band."""
    tolerance = limits.loaded_accelerator_tolerance
    band = Band(tolerance, thresholds.undecided_band)
    status = _time_status(record, pin, tolerance, limits.floor_s, METRIC_WALL, band=band.width)
    which = (
        f"the loaded-accelerator tolerance {percent(tolerance)}"
        if tolerance > limits.tolerance
        else f"its own tolerance {percent(tolerance)} (at least the loaded-accelerator tolerance)"
    )
    where = (
        f"measured at load {load:.2f} per core on an accelerator: judged on wall seconds with "
        + which
    )
    change = what_changed(record, pin, limits.max_ops_growth) if status is not Status.OK else None
    if status is Status.NOISY:
        where = f"{band_note(record, pin, METRIC_WALL, band)}; {where}"
    return Verdict(
        record,
        status,
        pin=pin,
        pin_file=pin_file,
        tolerance=tolerance,
        note=where if change is None else f"{change}; {where}",
        metric=METRIC_WALL,
        band=undecided(status, thresholds),
    )


def _judge_noisy(
    record: CompileRecord,
    pin: Pin,
    pin_file: Path,
    limits: Limits,
    thresholds: Thresholds,
    growth: float | None,
    load: float,
) -> Verdict:
    """A row measured above compile_max_load: its wall seconds include waiting for a core.

    It is judged on its process CPU seconds instead, which waiting does not inflate,
    when the row and its pin both have them; a row within tolerance there, or without
    CPU figures, is `noisy`: shown, not failing.
    """
    where = f"measured at load {load:.2f} per core, above compile_max_load = " + (
        f"{thresholds.max_load:g}"
    )
    if record.compile_cpu_s is None or pin.compile_cpu_s is None:
        return Verdict(
            record,
            Status.NOISY,
            pin=pin,
            pin_file=pin_file,
            note=f"{where}: not judged (--compile-strict judges it)",
        )
    tolerance = limits.tolerance
    band = Band(tolerance, thresholds.undecided_band)
    status = _time_status(record, pin, tolerance, limits.floor_s, METRIC_CPU, band=band.width)
    in_band = undecided(status, thresholds)  # before a row within tolerance is made noisy
    if status is Status.NOISY:  # in the band, on CPU seconds
        note = f"{where}: judged on CPU seconds, {band_note(record, pin, METRIC_CPU, band)}"
        change = what_changed(record, pin, growth)
        note = note if change is None else f"{change}; {note}"
    elif status is Status.OK:
        status = Status.NOISY
        floored = floor_decided(record, pin, tolerance, METRIC_CPU)
        within = f"within the {limits.floor_s:g} s floor" if floored else "within tolerance"
        note = (
            f"{where}: judged on CPU seconds, {within}; wall seconds not judged "
            "(--compile-strict judges them)"
        )
    else:
        note = f"{where}: judged on CPU seconds"
        change = what_changed(record, pin, growth)
        note = note if change is None else f"{change}; {note}"
    return Verdict(
        record,
        status,
        pin=pin,
        pin_file=pin_file,
        tolerance=tolerance,
        note=note,
        metric=METRIC_CPU,
        band=in_band,
    )


def _growth_only_note(record: CompileRecord, thresholds: Thresholds) -> str:
    """Why a budget-only row is asked for a pin: the growth limits judged against it."""
    names = ", ".join(growth_limits(record, thresholds))
    return f"pinned for its growth limits only ({names}): its seconds are not judged"


def _unpinned_note(key: ComparabilityKey, pinned: list[ComparabilityKey]) -> str | None:
    """Explain a missing pin when the same row is pinned under another cache state only."""
    states = sorted(
        {
            other.cache_state
            for other in pinned
            if (other.hardware, other.framework_version, other.mixed_precision, other.framework)
            == (key.hardware, key.framework_version, key.mixed_precision, key.framework)
        }
    )
    if states:
        return (
            f"pinned only as {'/'.join(states)}: a {key.cache_state} row is compared only "
            f"with {key.cache_state} pins; pin this cache state too"
        )
    return None


def judge_all(
    records: Iterable[CompileRecord], store: PinStore, thresholds: Thresholds
) -> list[Verdict]:
    return [judge(record, store, thresholds) for record in records]
