"""Judge measured rows against pins: strictly within one comparability key."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from pytest_jaxcompile.gate.pins import Pin, PinStore
from pytest_jaxcompile.records import (
    CENSUS_SOURCE,
    SCOPE_TEST,
    CallLedger,
    ComparabilityKey,
    CompileRecord,
)

# Defaults, chosen from benchmarks/gate_quality.py (docs/benchmarks.md#gate-quality).
# With a core kept busy on a 2-core host, unchanged modules measured up to 3.2x their
# pins in wall seconds at a load of 1.3-1.5 per core, and up to 1.63x in CPU seconds
# (above the floor); its regressions measured 2.5x and more. Above the max load a row is judged
# on its CPU seconds; the tolerance (1.75x) clears the CPU noise and still catches 2x;
# the floor keeps sub-second jitter of small modules from ever failing a run.
DEFAULT_TOLERANCE = 0.75
DEFAULT_FLOOR_S = 0.25
DEFAULT_MAX_LOAD = 1.0  # load per core above which wall seconds are not judged, CPU seconds are
DEFAULT_LOADED_ACCELERATOR_TOLERANCE = 2.0  # +200%: host load inflates an accelerator's compile
# MiB of RSS growth during a compile that a row must also exceed to be DRIFT on memory: a
# process's first compile alone grows it by tens of MiB (docs/benchmarks.md#compile-memory).
DEFAULT_RSS_FLOOR_MIB = 128.0
# Compile instructions counted under valgrind (docs/instructions.md): an unchanged module's
# count moved by up to 0.6 % between sessions, idle or with both cores busy, and some MLP
# modules' counts now and then dropped by about 19 M instructions (3-3.8 % of them); the
# tolerance stays above both (docs/benchmarks.md#instruction-gate).
DEFAULT_INSTRUCTIONS_TOLERANCE = 0.05
INSTRUCTIONS_PHASE = "compile_instructions"
METRIC_INSTRUCTIONS = "instructions"
PHASES = ("compile_s", "trace_s", "lower_s")  # the figures judged, each against its pin
METRIC_WALL = "wall"
METRIC_CPU = "cpu"
METRICS = (METRIC_WALL, METRIC_CPU)


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
    IMPROVED = "improved"
    UNPINNED = "unpinned"
    NOISY = "noisy"  # measured above compile_max_load and within tolerance on CPU seconds
    NOT_JUDGED = "not judged"  # unknown and memory rows are shown, never judged
    OK = "ok"

    @property
    def severity(self) -> int:
        """0 for the most severe; sorts rows failing-first."""
        return list(Status).index(self)

    @property
    def tone(self) -> Tone:
        return _TONES[self]


_TONES = {
    Status.MISS: Tone.BAD, Status.GREW: Tone.BAD, Status.DRIFT: Tone.BAD,
    Status.IMPROVED: Tone.GOOD, Status.UNPINNED: Tone.WARN, Status.NOISY: Tone.WARN,
    Status.NOT_JUDGED: Tone.PLAIN, Status.OK: Tone.PLAIN,
}


@dataclass(frozen=True)
class Thresholds:
    tolerance: float = DEFAULT_TOLERANCE
    floor_s: float = DEFAULT_FLOOR_S
    max_ops_growth: float | None = None  # default op-count gate; None: no gate
    time_advisory: bool = False  # DRIFT is reported but does not fail the session
    expect_warm: bool = False  # a cold row of a module unchanged since its warm pin fails
    metric: str = METRIC_WALL  # what verdicts compare: wall or process CPU seconds
    max_load: float | None = DEFAULT_MAX_LOAD  # load per core; None: never noisy
    strict: bool = False  # judge noisy rows too
    fail_on_improvement: bool = False  # an improved row fails the gate too
    require_pinned: bool = False  # an unpinned row fails the gate
    max_upgrade_slowdown: float | None = None  # a jax upgrade slower than this fails
    # Accelerator rows above max_load: judged on wall seconds with this tolerance, since
    # their CPU seconds do not hold the compiler's work on the device (GPU autotuning).
    loaded_accelerator_tolerance: float = DEFAULT_LOADED_ACCELERATOR_TOLERANCE
    max_memory_growth: float | None = None  # compiled temp bytes over the pin; None: no gate
    max_flops_growth: float | None = None  # flops over the pin; None: no gate
    rss_floor_mib: float = DEFAULT_RSS_FLOOR_MIB  # the RSS-growth drift's absolute floor
    # compile instructions over the pin of an equal instrument identity that is DRIFT
    instructions_tolerance: float = DEFAULT_INSTRUCTIONS_TOLERANCE


def row_fails(status: Status, thresholds: Thresholds) -> bool:
    """Whether a row with this status fails the gate: the one rule every output shows.

    MISS and GREW are deterministic and always fail; time verdicts fail unless
    time-advisory; an improvement fails only when asked. Noisy rows never fail: a loaded
    row that drifted on CPU seconds too is DRIFT, not noisy.
    """
    if status in (Status.MISS, Status.GREW):
        return True
    if status is Status.UNPINNED:
        return thresholds.require_pinned
    if thresholds.time_advisory:
        return False
    return status is Status.DRIFT or (
        status is Status.IMPROVED and thresholds.fail_on_improvement
    )


@dataclass(frozen=True)
class NearestPin:
    """For an unpinned row: the pin of the same cell and transform under the closest key.

    An advisory comparison: it never fails a row by itself (see `nearest_pin`).
    """

    key: ComparabilityKey
    pin: Pin
    relation: str  # UPGRADE (same hardware, an earlier version), OTHER_VERSION, OTHER_HARDWARE
    ratio: float | None  # the row's wall seconds over the pin's

    def describe(self) -> str:
        ratio = "" if self.ratio is None else f" ({self.ratio:.2f}x)"
        return f"nearest pin {self.key.describe()}: {self.pin.compile_s:.3f} s{ratio}"


UPGRADE = "upgrade"  # the same hardware under an earlier framework version
OTHER_VERSION = "other version"
OTHER_HARDWARE = "other hardware"


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

    def fails(self, thresholds: Thresholds) -> bool:
        return row_fails(self.status, thresholds)

    @property
    def ratio(self) -> float | None:
        if self.pin is None:
            return None
        measured, pinned = compared_seconds(self.record, self.pin, self.metric, self.phase)
        if measured is None or pinned is None:
            return None
        return measured / pinned if pinned > 0 else None


@dataclass(frozen=True)
class StalePin:
    """A pin of a test that ran in this session but measured nothing for it."""

    key: ComparabilityKey
    cell: str
    transform: str
    pin_file: Path


def judge(record: CompileRecord, store: PinStore, thresholds: Thresholds) -> Verdict:
    """One row against the pin under exactly its key, and nothing else."""
    if not record.state.judged:
        return Verdict(record, Status.NOT_JUDGED, note=record.cache.reason_detail)
    warmth_note = None
    cache_lost = False
    if record.cache_state in ("cold", "none"):
        miss, warmth_note = _expected_warm(record, store)
        if miss is not None and thresholds.expect_warm:
            return miss
        if miss is not None:  # never silent: a warning, and MISS under --compile-expect-warm
            cache_lost = True
            cause = key_change(record, miss.pin) if miss.pin is not None else None
            warmth_note = (
                "compiled cold although the module is unchanged since its warm pin: "
                + (f"its cache key changed: {cause}" if cause else "the persistent cache was "
                   "not restored, was evicted or stopped applying")
            )
        elif not thresholds.expect_warm:
            warmth_note = None  # a changed module recompiles: only worth saying when asked
    verdict = _judge_memory(_judge_time(record, store, thresholds), thresholds)
    verdict = judge_instructions(verdict, store, thresholds)
    versions_note = _versions_note(record, verdict.pin)
    if warmth_note is None and versions_note is None:
        return verdict
    notes = (verdict.note, versions_note, warmth_note)
    return dataclasses.replace(
        verdict, note="; ".join(note for note in notes if note), cache_lost=cache_lost
    )


def instructions_pin(record: CompileRecord, store: PinStore) -> tuple[Path, Pin] | None:
    """The pin a row's instruction count is compared with: of the same cell and transform,
    with a count made by an equal instrument identity, under the row's own key first, else
    under any key (a count does not depend on the hardware name, the cache state or load)."""
    identity = record.compile_instructions_identity
    if identity is None:
        return None
    own = store.get(record.key, record.cell, record.transform)
    candidates = [(store.path_for(record.key), own)] if own is not None else []
    candidates += list(store.pins_of(record.cell, record.transform))
    return next(
        (
            (path, pin) for path, pin in candidates
            if pin.compile_instructions is not None
            and pin.compile_instructions_identity == identity
        ),
        None,
    )


def judge_instructions(verdict: Verdict, store: PinStore, thresholds: Thresholds) -> Verdict:
    """The row's compile instructions against the pin of an equal instrument identity.

    Grown beyond the instructions tolerance: DRIFT, whatever the load (never noisy); shrunk
    beyond it: improved. Within it, a row the seconds gate called noisy is ok: the count
    says the compiler did the same work. A seconds DRIFT stays a DRIFT; MISS and GREW stay.
    A row not counted, or without such a pin, keeps its verdict with a note saying so.
    """
    record = verdict.record
    count = record.compile_instructions
    if count is None:
        note = record.compile_instructions_note
        return verdict if note is None else _noted(verdict, f"compile instructions {note}")
    found = instructions_pin(record, store)
    if found is None:
        return _noted(verdict, f"compile instructions {count:,} not pinned with this "
                               f"instrument ({record.compile_instructions_identity})")
    path, pin = found
    pinned = pin.compile_instructions
    assert pinned is not None
    tolerance = thresholds.instructions_tolerance
    change = count / pinned - 1 if pinned else 0.0
    text = (
        f"compile instructions {pinned:,} -> {count:,} ({change:+.2%}, tolerance "
        f"{tolerance:.2%}; {record.compile_instructions_identity})"
    )
    if verdict.status in (Status.MISS, Status.GREW) or (
        verdict.status is Status.DRIFT and verdict.phase != INSTRUCTIONS_PHASE
        and count <= pinned * (1 + tolerance)
    ):
        return _noted(verdict, text)
    if count > pinned * (1 + tolerance):
        status = Status.DRIFT
    elif count < pinned / (1 + tolerance):
        status = Status.IMPROVED
    elif verdict.status in (Status.NOISY, Status.UNPINNED, Status.IMPROVED):
        status = Status.OK
    else:
        return _noted(verdict, text)
    prefix = "DRIFT in " if status is Status.DRIFT else ""
    change_note = what_changed(record, pin) if status is Status.DRIFT else None
    note = "; ".join(part for part in (prefix + text, change_note, verdict.note) if part)
    return dataclasses.replace(
        verdict, status=status, pin=pin, pin_file=path, tolerance=tolerance, note=note,
        metric=METRIC_INSTRUCTIONS, phase=INSTRUCTIONS_PHASE, nearest=None,
    )


def _noted(verdict: Verdict, note: str) -> Verdict:
    return dataclasses.replace(
        verdict, note=note if verdict.note is None else f"{verdict.note}; {note}"
    )


# The deterministic figures judged as GREW besides the op count: (field, name in notes,
# the Thresholds field and CompileRecord field holding its limit).
GROWTH_FIGURES = (
    ("compiled_temp_bytes", "compiled temp bytes", "max_memory_growth"),
    ("flops", "flops", "max_flops_growth"),
)
RSS_PHASE = "compile_rss_growth_mib"
MEMORY_PHASES = (*(figure for figure, _, _ in GROWTH_FIGURES), RSS_PHASE)


def _judge_memory(verdict: Verdict, thresholds: Thresholds) -> Verdict:
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
        limit = getattr(record, limit_field)
        limit = getattr(thresholds, limit_field) if limit is None else limit
        measured, pinned = getattr(record, figure), getattr(pin, figure)
        if limit is None or measured is None or not pinned or measured <= pinned * (1 + limit):
            continue
        return _restated(
            verdict, pin, Status.GREW, figure,
            f"{name} grew: {_figure(pinned)} -> {_figure(measured)} "
            f"({measured / pinned - 1:+.0%}, limit +{limit:.0%})",
        )
    if verdict.status is Status.DRIFT or not _rss_drifted(record, pin, thresholds):
        return verdict
    return _restated(
        verdict, pin, Status.DRIFT, RSS_PHASE,
        f"RSS growth during the compile drifted: {record.compile_rss_growth_mib:.1f} MiB, pin "
        f"{pin.compile_rss_growth_mib:.1f} MiB (peak {record.compile_rss_peak_mib or 0:.1f} "
        f"MiB; floor {thresholds.rss_floor_mib:g} MiB)",
    )


def _restated(verdict: Verdict, pin: Pin, status: Status, phase: str, note: str) -> Verdict:
    """The verdict with a memory finding first in its note, and what changed in the module
    (unless the note already says it)."""
    change = what_changed(verdict.record, pin)
    if change is not None and change not in (verdict.note or ""):
        note = f"{note}; {change}"
    return dataclasses.replace(
        verdict, status=status, phase=phase,
        note=note if verdict.note is None else f"{note}; {verdict.note}",
    )


def _figure(value: float) -> str:
    return f"{value:,.0f}"


def _rss_drifted(record: CompileRecord, pin: Pin, thresholds: Thresholds) -> bool:
    """The compile's RSS growth over its pin beyond the tolerance and the RSS floor.

    A census row's figure covers its whole test (scope "test") and is not judged.
    """
    measured, pinned = record.compile_rss_growth_mib, pin.compile_rss_growth_mib
    if measured is None or pinned is None or record.compile_rss_scope == SCOPE_TEST:
        return False
    tolerance = next(
        value
        for value in (pin.tolerance, record.tolerance, thresholds.tolerance)
        if value is not None
    )
    return measured > pinned * (1 + tolerance) and measured - pinned > thresholds.rss_floor_mib


def same_module(fingerprint: str | None, pinned: str | None) -> bool | None:
    """Whether two fingerprints say the module is unchanged; None when one is missing or
    they are of different kinds (``sha256:`` of a fixture's module text, a census row's
    ``computation:`` key part, or the whole ``cachekey:`` pinned by earlier releases)."""
    if not fingerprint or not pinned:
        return None
    if fingerprint.partition(":")[0] != pinned.partition(":")[0]:
        return None
    return fingerprint == pinned


def _expected_warm(record: CompileRecord, store: PinStore) -> tuple[Verdict | None, str | None]:
    """Under --compile-expect-warm: a MISS verdict, or a note for an expected recompile."""
    warm_key = dataclasses.replace(record.key, cache_state="warm")
    warm_pin = store.get(warm_key, record.cell, record.transform)
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
        cause = key_change(record, warm_pin)
        return Verdict(
            record, Status.MISS, pin=warm_pin, pin_file=store.path_for(warm_key),
            note=(
                f"expected a persistent-cache hit: the module is unchanged since its warm pin, "
                f"yet it compiled {record.cache_state}. "
                + (f"Its cache key changed: {cause}" if cause else
                   "The cache was not restored, was evicted, or stopped applying (cache dir, "
                   "jax version, XLA flags)")
            ),
        ), None
    return None, "expected recompile: the module changed since its warm pin"


def key_change(record: CompileRecord, pin: Pin) -> str | None:
    """Which parts of JAX's persistent-cache key differ from the pin's, and for XLA flags
    which flags; None when nothing differs. A part not captured on either side (census
    rows, pins of earlier releases, a jax that logs no parts) is never guessed."""
    from pytest_jaxcompile.backends.jax.keyparts import differing_parts, flag_changes

    parts = differing_parts(record.cache_key_parts, pin.key_parts)
    if not parts:
        return None
    named = []
    for part in parts:
        if part == "XLA flags":
            flags = flag_changes(record.cache_key_flags, pin.key_flags)
            named.append(f"the XLA flags part ({', '.join(flags)})" if flags else
                         "the XLA flags part")
        else:
            named.append(f"the {part} part")
    return ", ".join(named)


# What a row's versions are named in notes: record/pin field, words.
_CACHE_KEY_VERSIONS = (("jaxlib_version", "jaxlib"), ("platform_version", "platform version"))


def version_differences(record: CompileRecord, pin: Pin) -> list[str]:
    """The versions JAX hashes into its cache keys that differ between a row and its pin,
    each as "name old -> new"; a version unknown on either side is not a difference."""
    differences = []
    for name, words in _CACHE_KEY_VERSIONS:
        new, old = getattr(record, name), getattr(pin, name)
        if new and old and new != old:
            differences.append(f"{words} {_one_line(old)} -> {_one_line(new)}")
    return differences


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _versions_note(record: CompileRecord, pin: Pin | None) -> str | None:
    """Beside a time verdict: the versions that changed since the pin (a recompile)."""
    changed = [] if pin is None else version_differences(record, pin)
    if not changed:
        return None
    return (
        f"{', '.join(changed)} since pinning: another compiler build (JAX's cache keys "
        "include these versions)"
    )


def _judge_time(record: CompileRecord, store: PinStore, thresholds: Thresholds) -> Verdict:
    key = record.key
    pin_file = store.path_for(key)
    pin = store.get(key, record.cell, record.transform)
    if pin is None:
        nearest = nearest_pin(record, store)
        note = nearest.describe() if nearest is not None else _unpinned_note(
            key, store.keys_pinning(record.cell, record.transform)
        )
        return Verdict(record, Status.UNPINNED, pin_file=pin_file, note=note, nearest=nearest)
    # The most specific tolerance wins: the pin's own, then the test's marker, then global.
    tolerance = next(
        value
        for value in (pin.tolerance, record.tolerance, thresholds.tolerance)
        if value is not None
    )
    growth = record.max_ops_growth
    growth = thresholds.max_ops_growth if growth is None else growth
    load = record.host_state.load_per_core
    if (
        growth is not None
        and pin.op_count
        and record.op_count is not None
        and record.op_count > pin.op_count * (1 + growth)
    ):
        # Deterministic, so judged whatever the host load was.
        status = Status.GREW
    elif (
        not thresholds.strict
        and thresholds.max_load is not None
        and load is not None
        and load > thresholds.max_load
    ):
        if is_accelerator(record):
            return _judge_loaded_accelerator(
                record, pin, pin_file, thresholds, growth, load
            )
        return _judge_noisy(record, pin, pin_file, tolerance, thresholds, growth, load)
    else:
        status, phase = _phases_status(record, pin, tolerance, thresholds.floor_s,
                                       thresholds.metric)
        note = _phase_note(record, pin, phase, growth, status)
        return Verdict(
            record, status, pin=pin, pin_file=pin_file, tolerance=tolerance, note=note,
            metric=thresholds.metric, phase=phase,
        )
    note = what_changed(record, pin, growth)
    return Verdict(
        record, status, pin=pin, pin_file=pin_file, tolerance=tolerance, note=note,
        metric=thresholds.metric,
    )


def _time_status(
    record: CompileRecord, pin: Pin, tolerance: float, floor_s: float, metric: str,
    phase: str = "compile_s",
) -> Status:
    measured, pinned = compared_seconds(record, pin, metric, phase)
    if measured is None or pinned is None:
        return Status.OK  # a phase the row or its pin does not have is not judged
    if measured > pinned * (1 + tolerance) and measured - pinned > floor_s:
        return Status.DRIFT
    if measured < pinned / (1 + tolerance) and pinned - measured > floor_s:
        return Status.IMPROVED
    return Status.OK


def _phases_status(
    record: CompileRecord, pin: Pin, tolerance: float, floor_s: float, metric: str
) -> tuple[Status, str]:
    """Compile, trace and lowering time, each against its pinned figure with the same
    tolerance and floor: a drift in any is DRIFT (the first one named); else an
    improvement of the compile; else ok."""
    statuses = {
        phase: _time_status(record, pin, tolerance, floor_s, metric, phase) for phase in PHASES
    }
    drifted = [phase for phase in PHASES if statuses[phase] is Status.DRIFT]
    if drifted:
        return Status.DRIFT, drifted[0]
    return statuses["compile_s"], "compile_s"


def _phase_note(
    record: CompileRecord, pin: Pin, phase: str, growth: float | None, status: Status
) -> str | None:
    if status is Status.OK:
        return None
    change = what_changed(record, pin, growth)
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
    record: CompileRecord, pin: Pin, pin_file: Path, thresholds: Thresholds,
    growth: float | None, load: float,
) -> Verdict:
    """An accelerator row measured above compile_max_load: its process CPU seconds do
    not hold what the compiler ran on the device (autotuning), so judging them could hide
    a regression. It is judged on wall seconds with the loaded-accelerator tolerance."""
    tolerance = thresholds.loaded_accelerator_tolerance
    status = _time_status(record, pin, tolerance, thresholds.floor_s, METRIC_WALL)
    where = (
        f"measured at load {load:.2f} per core on an accelerator: judged on wall seconds with "
        f"the loaded-accelerator tolerance {tolerance:.0%}"
    )
    change = what_changed(record, pin, growth) if status is not Status.OK else None
    return Verdict(
        record, status, pin=pin, pin_file=pin_file, tolerance=tolerance,
        note=where if change is None else f"{change}; {where}", metric=METRIC_WALL,
    )


def _judge_noisy(
    record: CompileRecord,
    pin: Pin,
    pin_file: Path,
    tolerance: float,
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
            record, Status.NOISY, pin=pin, pin_file=pin_file,
            note=f"{where}: not judged (--compile-strict judges it)",
        )
    status = _time_status(record, pin, tolerance, thresholds.floor_s, METRIC_CPU)
    if status is Status.OK:
        status = Status.NOISY
        note: str | None = (
            f"{where}: judged on CPU seconds, within tolerance; wall seconds not judged "
            "(--compile-strict judges them)"
        )
    else:
        note = f"{where}: judged on CPU seconds"
        change = what_changed(record, pin, growth)
        note = note if change is None else f"{change}; {note}"
    return Verdict(
        record, status, pin=pin, pin_file=pin_file, tolerance=tolerance, note=note,
        metric=METRIC_CPU,
    )


def _version_order(version: str) -> tuple[int, Any]:
    """Sort key of a version: PEP 440 where it parses, else the text after all of those."""
    from packaging.version import InvalidVersion, Version

    try:
        return (0, Version(version))
    except InvalidVersion:
        return (1, version)


def _platform_of(hardware: str) -> str | None:
    """``gpu:NVIDIA H200`` of a detected name ``gpu:NVIDIA H200 @ AMD EPYC x16``; None for a
    name set by hand (``JAXCOMPILE_HARDWARE``), which says nothing about its device."""
    head, separator, _ = hardware.partition(" @ ")
    return head if separator and ":" in head else None


def nearest_pin(record: CompileRecord, store: PinStore) -> NearestPin | None:
    """The pin of this cell and transform under the closest other key, for an advisory.

    Closest is: the same hardware under the latest earlier version (an upgrade); else the
    same hardware under another version; else the same version on other hardware whose
    device is the same (or unknown: a hand-set hardware name). Precision, cache state and
    framework always match: a warm row is never compared with a cold pin.
    """
    key = record.key
    own = _version_order(key.framework_version)
    same_kind = [
        other for other in store.keys_pinning(record.cell, record.transform)
        if (other.framework, other.mixed_precision, other.cache_state)
        == (key.framework, key.mixed_precision, key.cache_state) and other != key
    ]
    same_hardware = [other for other in same_kind if other.hardware == key.hardware]
    earlier = [o for o in same_hardware if _version_order(o.framework_version) < own]
    device = _platform_of(key.hardware)
    elsewhere = [
        other for other in same_kind
        if other.hardware != key.hardware
        and other.framework_version == key.framework_version
        and _platform_of(other.hardware) in (device, None)
    ]
    for candidates, relation in (
        (earlier, UPGRADE), (same_hardware, OTHER_VERSION), (elsewhere, OTHER_HARDWARE)
    ):
        if candidates:
            other = max(candidates, key=lambda k: (_version_order(k.framework_version), k))
            pin = store.get(other, record.cell, record.transform)
            assert pin is not None
            ratio = record.compile_s / pin.compile_s if pin.compile_s > 0 else None
            return NearestPin(other, pin, relation, ratio)
    return None


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


TOP_OP_CHANGES = 5  # operations named in a note: the largest changes in count


def op_changes(record: CompileRecord, pin: Pin) -> list[str]:
    """``stablehlo.tanh +36``: what changed in the module since its pin, largest first."""
    if not record.op_histogram or not pin.ops:
        return []
    names = set(record.op_histogram) | set(pin.ops)
    deltas = {name: record.op_histogram.get(name, 0) - pin.ops.get(name, 0) for name in names}
    changed = sorted((d for d in deltas.items() if d[1]), key=lambda item: (-abs(item[1]), item[0]))
    return [f"{name} {delta:+d}" for name, delta in changed]


def what_changed(record: CompileRecord, pin: Pin, growth: float | None = None) -> str | None:
    """The deterministic explanation beside a time verdict: did the module change?"""
    unchanged = same_module(record.fingerprint, pin.fingerprint)
    if record.op_count is not None and pin.op_count is not None:
        if record.op_count != pin.op_count:
            direction = "grew" if record.op_count > pin.op_count else "shrank"
            change = f"module {direction}: {pin.op_count} -> {record.op_count} ops"
            if pin.op_count:
                change += f" ({record.op_count / pin.op_count - 1:+.0%}"
                change += f", limit +{growth:.0%})" if growth is not None else ")"
            changes = op_changes(record, pin)
            if changes:
                change += ": " + ", ".join(changes[:TOP_OP_CHANGES])
            return change
        if unchanged is False:
            changes = op_changes(record, pin)
            return f"module changed with the same op count ({record.op_count} ops)" + (
                ": " + ", ".join(changes[:TOP_OP_CHANGES]) if changes else ""
            )
    if unchanged is None or record.fingerprint is None:
        return None
    if record.fingerprint.startswith("cachekey:"):  # the whole key: module, flags, options
        if unchanged:
            return "cache key unchanged: look at the environment (host load)"
        return "cache key changed since pinning (module, XLA flags or compile options)"
    if unchanged:
        cause = key_change(record, pin)
        if cause:
            return f"module unchanged since pinning, but its cache key changed: {cause}"
        return (
            "module unchanged since pinning: look at the environment "
            "(XLA flags, cache settings, host load)"
        )
    return "module changed since pinning (different fingerprint)"


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
            v.nearest.ratio for v in self.verdicts
            if v.nearest is not None and v.nearest.ratio is not None
        )

    @property
    def median_ratio(self) -> float | None:
        return statistics.median(self.ratios()) if self.ratios() else None

    def worst(self, count: int = 5) -> list[Verdict]:
        return sorted(self.verdicts, key=lambda v: -_nearest_ratio(v))[:count]

    def fails(self, thresholds: Thresholds) -> bool:
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
        if verdict.status is Status.UNPINNED and nearest is not None and (
            nearest.relation == UPGRADE
        ):
            key = verdict.record.key
            group = (key.framework, key.hardware, nearest.key.framework_version,
                     key.framework_version)
            groups.setdefault(group, []).append(verdict)
    return [
        UpgradeReport(*group, verdicts=tuple(sorted(rows, key=severity_order)))
        for group, rows in sorted(groups.items())
    ]


def judge_all(
    records: Iterable[CompileRecord], store: PinStore, thresholds: Thresholds
) -> list[Verdict]:
    return [judge(record, store, thresholds) for record in records]


def find_stale(
    store: PinStore,
    ran_cells: set[str],
    measured: set[tuple[str, str]],
    hardware: str,
    framework_version: str,
    censused: set[str] | None = None,
) -> list[StalePin]:
    """Pins, for this hardware and version, of tests that ran but measured nothing.

    A census pin is stale only to a session that took a census of its test (`censused`):
    a session without a census could not have measured it.
    """
    stale = []
    for group in store.groups():
        if (group.key.hardware, group.key.framework_version) != (hardware, framework_version):
            continue
        for cell, transform in sorted(group.pins):
            if group.pins[(cell, transform)].source == CENSUS_SOURCE and (
                cell not in (censused or set())
            ):
                continue
            if cell in ran_cells and (cell, transform) not in measured:
                stale.append(StalePin(group.key, cell, transform, group.path))
    return stale


def session_failed(verdicts: Iterable[Verdict], thresholds: Thresholds) -> bool:
    return any(verdict.fails(thresholds) for verdict in verdicts)


def by_key(verdicts: Iterable[Verdict]) -> list[tuple[ComparabilityKey, list[Verdict]]]:
    """Verdicts grouped by comparability key (keys sorted), each group most severe first.

    The one grouping every output uses: rows are never ranked across keys.
    """
    groups: dict[ComparabilityKey, list[Verdict]] = {}
    for verdict in verdicts:
        groups.setdefault(verdict.record.key, []).append(verdict)
    return [
        (key, sorted(groups[key], key=severity_order))
        for key in sorted(groups)
    ]


def severity_order(verdict: Verdict) -> tuple[int, str, str]:
    return (verdict.status.severity, verdict.record.cell, verdict.record.transform)


@dataclass(frozen=True)
class CompileCountChange:
    """A test compiled a different number of modules than pinned (a retrace, or fewer)."""

    cell: str
    compiles: int
    pinned: int
    # Why each compile of a function after its first happened (the ledger's `recompiles`).
    recompiles: tuple[str, ...] = ()

    def headline(self) -> str:
        return (
            f"compile count changed: {self.cell}: {self.compiles} backend compile(s), "
            f"pinned {self.pinned}"
        )


def compile_count_changes(
    ledgers: Iterable[CallLedger], records: Iterable[CompileRecord], store: PinStore
) -> list[CompileCountChange]:
    keys_of: dict[str, set[ComparabilityKey]] = {}
    for record in records:
        keys_of.setdefault(record.cell, set()).add(record.key)
    changes = []
    for ledger in ledgers:
        pinned = {
            count
            for key in keys_of.get(ledger.cell, ())
            if (count := store.compiles_pinned(key, ledger.cell)) is not None
        }
        if pinned and ledger.compiles not in pinned:
            changes.append(CompileCountChange(
                ledger.cell, ledger.compiles, max(pinned), tuple(ledger.recompiles or ())
            ))
    return sorted(changes, key=lambda change: change.cell)
