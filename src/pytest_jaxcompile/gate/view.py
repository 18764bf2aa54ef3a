"""The verdict as every output shows it: a ready view of each row and of the session.

`session_view(outcome)` is built once from the gate's `Outcome`; the terminal, the GitHub
step summary, annotations and pull-request comment, the JSON report, JUnit, ``check``,
``merge`` and the dashboard only format it. Here live what a status means, what to do about
it, which figures a verdict compared (the metric, its unit, the ratio from those same
figures, the limit), whether a row fails, the re-pin command, and the session's blocks in
one order. Wording that belongs to one output (a terminal's ``-v``, "the session fails"
against a comment's "this run fails") lives with that output.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import posixpath
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from pytest_jaxcompile._constants import (
    INSTRUCTIONS_PHASE,
    METRIC_CPU,
    METRIC_INSTRUCTIONS,
    METRIC_WALL,
    PAIRED_PHASE,
)
from pytest_jaxcompile._io import relative
from pytest_jaxcompile._numbers import instructions_text, percent
from pytest_jaxcompile.gate.always_cold import always_cold_text
from pytest_jaxcompile.gate.grouping import by_key
from pytest_jaxcompile.gate.judging import RSS_PHASE
from pytest_jaxcompile.gate.limits import Thresholds, limits_for
from pytest_jaxcompile.gate.nearest import UPGRADE
from pytest_jaxcompile.gate.outcome import Outcome
from pytest_jaxcompile.gate.paired import PairedComparison, pairing_cost
from pytest_jaxcompile.gate.pins import pin_file_name
from pytest_jaxcompile.gate.profile import profile_note
from pytest_jaxcompile.gate.status import Status, Tone, Verdict, row_fails
from pytest_jaxcompile.gate.upgrades import UpgradeReport
from pytest_jaxcompile.records import ComparabilityKey, CompileRecord

MAX_CELLS_IN_COMMAND = 3

# --------------------------------------------------------------------------- metrics


@dataclass(frozen=True)
class Metric:
    """A figure a verdict can compare: the record's and the pin's field of that name."""

    name: str  # as reports name it: wall, cpu, trace, lower, ops, memory, flops, rss
    unit: str  # s, ops, B, flops, MiB
    field: str  # the CompileRecord and Pin field
    # The Thresholds (and CompileRecord, from the marker) field of its growth limit; None:
    # judged with the tolerance.
    growth_limit: str | None = None

    def format(self, value: float | None) -> str:
        """``0.598 s``, ``1,024 B``, ``12.5 MiB``; ``-`` for a figure not measured."""
        if value is None:
            return "-"
        if self.unit == "s":
            return f"{value:.3f} s"
        if self.unit == "MiB":
            return f"{value:.1f} MiB"
        return f"{value:,.0f} {self.unit}"

    @property
    def limit_name(self) -> str:
        return "tolerance" if self.growth_limit is None else "limit"


# Every metric a verdict compares. A new one (a record and pin field the gate judges) is one
# more entry here: every output shows its figures, unit and ratio from this table.
METRICS: tuple[Metric, ...] = (
    Metric(METRIC_WALL, "s", "compile_s"),
    Metric(METRIC_CPU, "s", "compile_cpu_s"),
    Metric("trace", "s", "trace_s"),
    Metric("lower", "s", "lower_s"),
    Metric("ops", "ops", "op_count", "max_ops_growth"),
    Metric("memory", "B", "compiled_temp_bytes", "max_memory_growth"),
    Metric("flops", "flops", "flops", "max_flops_growth"),
    Metric("rss", "MiB", RSS_PHASE),
    Metric(METRIC_INSTRUCTIONS, "instructions", INSTRUCTIONS_PHASE),
    # --compile-paired: the row's module and its pin's, compiled side by side at the
    # session's end (medians of the pairs; gate/paired.py)
    Metric(f"paired {METRIC_CPU}", "s", "paired_new_cpu_s"),
    Metric(f"paired {METRIC_WALL}", "s", "paired_new_wall_s"),
)
_BY_NAME = {metric.name: metric for metric in METRICS}
_BY_FIELD = {metric.field: metric for metric in METRICS}


def compared_metric(verdict: Verdict) -> Metric:
    """The metric this verdict's status is about.

    A GREW on the compile is the op count; another phase (trace, lowering, a memory figure)
    is its own metric; else the metric the verdict was judged on, CPU seconds only where the
    row and its pin both have them.
    """
    if verdict.phase != "compile_s":
        return _BY_FIELD.get(verdict.phase, _BY_NAME[METRIC_WALL])
    if verdict.status is Status.GREW:
        return _BY_NAME["ops"]
    metric = _BY_NAME.get(verdict.metric, _BY_NAME[METRIC_WALL])
    if (
        verdict.pin is not None
        and metric.name != METRIC_WALL
        and (_value(verdict.record, metric) is None or _value(verdict.pin, metric) is None)
    ):
        return _BY_NAME[METRIC_WALL]
    return metric


def _value(source: object, metric: Metric) -> float | None:
    value = getattr(source, metric.field, None)
    return None if value is None else float(value)


@dataclass(frozen=True)
class Figures:
    """What a verdict compared: the row's figure and the pin's, in one metric."""

    metric: Metric
    measured: float | None
    pinned: float | None  # None: no pin (or the pin lacks the figure)
    limit: float | None  # the tolerance or growth limit, a fraction (0.75: +75%)
    # A paired verdict's ratio: the median of the pairs' ratios, which the verdict judged
    # (not the ratio of the two medians)
    judged_ratio: float | None = None

    @property
    def ratio(self) -> float | None:
        if self.judged_ratio is not None:
            return self.judged_ratio
        if self.measured is None or not self.pinned:
            return None
        return self.measured / self.pinned

    @property
    def unit(self) -> str:
        return self.metric.unit

    def value(self, figure: float | None) -> str:
        """A figure with its unit, and the metric named where the unit does not say it."""
        text = self.metric.format(figure)
        named = self.metric.name not in (METRIC_WALL, self.metric.unit)
        return f"{text} {self.metric.name}" if named and figure is not None else text

    def ratio_text(self) -> str:
        return "" if self.ratio is None else f"{self.ratio:.2f}x"

    def limit_text(self) -> str:
        if self.limit is None:
            return ""
        sign = "" if self.metric.growth_limit is None else "+"
        return f"{self.metric.limit_name} {sign}{percent(self.limit)}"

    def text(self) -> str:
        """``0.598 s cpu, pin 0.218 s cpu (2.74x, tolerance 75%)``."""
        if self.pinned is None:
            return self.value(self.measured)
        text = f"{self.value(self.measured)}, pin {self.value(self.pinned)}"
        inside = ", ".join(part for part in (self.ratio_text(), self.limit_text()) if part)
        return f"{text} ({inside})" if inside else text


def figures(verdict: Verdict, thresholds: Thresholds) -> Figures:
    if verdict.phase == PAIRED_PHASE:
        comparison = PairedComparison.of(verdict.record, thresholds)
        if comparison is not None:  # both sides compiled now: the pin's module is "pin"
            return Figures(
                _BY_NAME[f"paired {comparison.metric}"],
                comparison.new_s,
                comparison.base_s,
                verdict.tolerance,
                judged_ratio=comparison.ratio,
            )
    metric = compared_metric(verdict)
    limit = verdict.tolerance
    if metric.growth_limit is not None:  # resolved as the judge resolved it
        limits = limits_for(verdict.record, verdict.pin, thresholds)
        limit = getattr(limits, metric.growth_limit)
    return Figures(
        metric,
        _value(verdict.record, metric),
        None if verdict.pin is None else _value(verdict.pin, metric),
        limit,
    )


# --------------------------------------------------------------------------- rows


@dataclass(frozen=True)
class RowView:
    """One verdict as shown: its label, tone, figures, causes and whether it fails."""

    verdict: Verdict
    fails: bool
    figures: Figures
    causes: tuple[str, ...]  # what explains the verdict (the gate's note), one per line
    meaning: str  # what the status says about this row: "compiled slower than its pin ..."
    # Where inside XLA the compile spent its time (the compile profile; also in `causes`,
    # as part of the note): for outputs that show no notes, the dashboard's tables.
    profile: str | None = None

    @property
    def status(self) -> Status:
        return self.verdict.status

    @property
    def tone(self) -> Tone:
        return self.verdict.status.tone

    @property
    def record(self) -> CompileRecord:
        return self.verdict.record

    @property
    def cell(self) -> str:
        return self.verdict.record.cell

    @property
    def transform(self) -> str:
        return self.verdict.record.transform

    @property
    def variant(self) -> str:
        return self.verdict.record.variant

    @property
    def name(self) -> str:
        """``cell [transform]`` (``[transform | variant]`` for a settings variant)."""
        return self.verdict.record.name

    @property
    def key(self) -> ComparabilityKey:
        return self.verdict.record.key

    @property
    def expected_recompile(self) -> bool:
        """An unpinned row whose nearest pin is the same hardware under an earlier version."""
        nearest = self.verdict.nearest
        return (
            self.status is Status.UNPINNED and nearest is not None and nearest.relation == UPGRADE
        )

    @property
    def label(self) -> str:
        """The status as tables show it; an unpinned row after an upgrade says so."""
        nearest = self.verdict.nearest
        if self.expected_recompile and nearest is not None:
            return (
                f"unpinned (upgrade from {nearest.key.framework} {nearest.key.framework_version})"
            )
        return self.status.value

    def advice(self) -> tuple[str, str] | None:
        return advice(self.status, [self.cell])


def row_view(verdict: Verdict, thresholds: Thresholds, pin_update: bool = False) -> RowView:
    return RowView(
        verdict,
        fails=not pin_update and row_fails(verdict.status, thresholds),
        figures=figures(verdict, thresholds),
        causes=(verdict.note,) if verdict.note else (),
        meaning=_meaning(verdict.status, [verdict], thresholds, plural=False),
        profile=profile_note(verdict, thresholds),
    )


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
    "than {paired} with confidence"
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


def _meaning(
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
    return ", or ".join(meanings).format(
        floor=thresholds.floor_s,
        max_load=thresholds.max_load or 0,
        rss_floor=thresholds.rss_floor_mib,
        cpu=_noisy_cpu(verdicts, plural),
        instructions=thresholds.instructions_tolerance,
        paired=percent(thresholds.paired_tolerance),
    )


def _noisy_cpu(verdicts: Sequence[Verdict], plural: bool) -> str:
    """What a noisy row's CPU seconds said: claimed only for rows judged on them."""
    on_cpu = sum(1 for verdict in verdicts if verdict.metric == METRIC_CPU)
    if on_cpu == len(verdicts):
        return " and stayed within tolerance on CPU seconds"
    if not on_cpu:
        return (
            " without CPU seconds to judge"
            if plural
            else " without CPU seconds to judge (its row or its pin has none)"
        )
    return (
        f" ({on_cpu} stayed within tolerance on CPU seconds, "
        f"{len(verdicts) - on_cpu} have no CPU seconds to judge)"
    )


def repin_command(cells: Iterable[str]) -> str:
    """``pytest --compile-pin-update ...``: the tests; their files when there are many; the
    files' directories when there are many files; their common directory at most."""
    unique = sorted(set(cells))
    if len(unique) > MAX_CELLS_IN_COMMAND:
        unique = sorted({cell.split("::", 1)[0] for cell in unique})
    if len(unique) > MAX_CELLS_IN_COMMAND:
        unique = sorted({posixpath.dirname(path) or "." for path in unique})
    if len(unique) > MAX_CELLS_IN_COMMAND:
        unique = [posixpath.commonpath(unique) or "."]
    quoted = " ".join(_shell_word(cell) for cell in unique)
    return f"pytest --compile-pin-update {quoted}".rstrip()


def _shell_word(word: str) -> str:
    if word and all(char.isalnum() or char in "/._-:=+@%,^" for char in word):
        return word
    return "'" + word.replace("'", "'\\''") + "'"


def advice(status: Status, cells: Iterable[str]) -> tuple[str, str] | None:
    """What to do about rows of this status: (the sentence, the command), or None."""
    sentence = _ADVICE.get(status)
    if sentence is None:
        return None
    return sentence, repin_command(cells)


# --------------------------------------------------------------------------- blocks


class BlockKind(str, Enum):
    """The session's blocks, in the order every output shows them."""

    PIN_ERROR = "pin error"
    PINS_UPDATED = "pins updated"
    LOST = "lost rows"
    CLOBBER = "clobber"
    SETTINGS = "settings"  # settings the session set that are in force: no clobber
    PAIRED = "paired"  # --compile-paired: what the pairing cost
    WARNING = "warning"
    ALWAYS_COLD = "always cold"
    UPGRADE = "upgrade"
    COMPILE_COUNT = "compile count"
    STALE = "stale pins"
    STATUS = "status"


@dataclass(frozen=True)
class Block:
    """One thing the session says besides its rows: a sentence, its details, what to do.

    `text` has no consequence and no final stop: each output adds its own wording for
    `fails` (the terminal's "the session fails", a comment's "this run fails") and for
    `advisory` (reported only).
    """

    kind: BlockKind
    tone: Tone
    text: str
    fails: bool = False
    advisory: bool = False  # a time verdict reported only (compile_time_advisory)
    details: tuple[str, ...] = ()
    advice: str | None = None
    command: str | None = None
    status: Status | None = None  # STATUS blocks
    rows: tuple[RowView, ...] = ()  # STATUS blocks: the rows of that status
    paths: tuple[str, ...] = ()  # PINS_UPDATED: the files written; STALE: per detail line


def _status_block(status: Status, rows: list[RowView], thresholds: Thresholds) -> Block:
    verdicts = [row.verdict for row in rows]
    meaning = _meaning(status, verdicts, thresholds)
    what = advice(status, (row.cell for row in rows))
    return Block(
        BlockKind.STATUS,
        status.tone,
        f"{status.value}: {len(rows)} row(s) {meaning}",
        fails=row_fails(status, thresholds),
        advisory=status in (Status.DRIFT, Status.IMPROVED)
        and thresholds.time_advisory
        and not row_fails(status, thresholds),
        advice=None if what is None else what[0],
        command=None if what is None else what[1],
        status=status,
        rows=tuple(rows),
    )


def _upgrade_block(upgrade: UpgradeReport, thresholds: Thresholds) -> Block:
    median = upgrade.median_ratio
    text = (
        f"{upgrade.framework} upgrade {upgrade.old} -> {upgrade.new} on {upgrade.hardware}: "
        f"{len(upgrade.verdicts)} row(s) compared with their {upgrade.old} pins"
    )
    if median is not None:
        text += f", median {median:.2f}x"
    limit = thresholds.max_upgrade_slowdown
    fails = upgrade.fails(thresholds)
    if fails and limit is not None:
        text += f"; slower than the allowed +{percent(limit)}"
    elif limit is not None:
        text += f"; within the allowed +{percent(limit)}"
    else:
        text += " (report only; compile_max_upgrade_slowdown makes it a gate)"
    details = []
    worst = [v for v in upgrade.worst() if v.nearest is not None and v.nearest.ratio]
    if worst:
        details.append(
            "slowest: "
            + ", ".join(
                f"{v.record.name} {v.nearest.ratio:.2f}x"
                for v in worst
                if v.nearest is not None and v.nearest.ratio
            )
        )
    return Block(
        BlockKind.UPGRADE,
        Tone.BAD if fails else Tone.WARN,
        text,
        fails=fails,
        details=tuple(details),
        advice=f"Pin {upgrade.new} when it is the baseline:",
        command=repin_command(v.record.cell for v in upgrade.verdicts),
    )


def coverage_text(outcome: Outcome) -> str | None:
    """The mostly-unpinned warning, naming its causes as counted (`Outcome.coverage`);
    None unless most rows that have pins have them only under another key."""
    if not outcome.mostly_unpinned():
        return None
    counted = outcome.coverage
    causes = []
    if counted.new_runner:
        causes.append(f"{counted.new_runner} pinned only under other hardware (new runner)")
    if counted.upgrade:
        causes.append(f"{counted.upgrade} pinned only under another jax version (upgrade)")
    if counted.new_tests:
        causes.append(f"{counted.new_tests} not pinned under any key (new tests)")
    if counted.other:
        causes.append(f"{counted.other} pinned only under another precision or cache state")
    unpinned = outcome.with_status(Status.UNPINNED)
    compared = sum(1 for v in unpinned if v.nearest is not None)
    return (
        f"{len(unpinned)} of {counted.judged} row(s) have no pin under their key: "
        + "; ".join(causes)
        + ". The gate judges almost nothing"
        + (f" ({compared} compared with their nearest pin)" if compared else "")
        + ". Pin this runner class and jax version (on CI: the re-pin workflow, "
        "docs/github-actions.md), or set compile_require_pinned to fail such sessions"
    )


def _warning_blocks(outcome: Outcome) -> list[Block]:
    """What makes the gate close to silent, said loudly: a lost cache, missing pins."""
    blocks = []
    lost = outcome.cache_lost()
    if lost:
        blocks.append(
            Block(
                BlockKind.WARNING,
                Tone.WARN,
                f"{len(lost)} row(s) compiled cold although their module is unchanged since its "
                "warm pin: the persistent cache was not restored, was evicted or stopped applying "
                "(compile_expect_warm makes this a MISS that fails)",
            )
        )
    coverage = coverage_text(outcome)
    if coverage is not None:
        blocks.append(Block(BlockKind.WARNING, Tone.WARN, coverage))
    unpaired = [verdict for verdict in outcome.verdicts if verdict.record.paired_note]
    if unpaired:  # asked for, and not done: never only in a collapsed row's note
        blocks.append(
            Block(
                BlockKind.WARNING,
                Tone.WARN,
                f"{len(unpaired)} changed row(s) not paired (--compile-paired); "
                "their seconds were judged alone",
                details=tuple(
                    f"{verdict.record.name}: {verdict.record.paired_note}" for verdict in unpaired
                ),
            )
        )
    return blocks


def _modules_stored(outcome: Outcome) -> str:
    """``; pinned modules (--compile-paired, --compile-profile): 2 stored, 1 removed in
    pins/modules`` after a pin update that stored modules; empty otherwise."""
    if outcome.modules_dir is None:
        return ""
    where = relative(outcome.modules_dir, outcome.rootdir)
    stored, removed = len(outcome.modules_written), len(outcome.modules_removed)
    changes = [f"{stored} stored"] if stored else []
    changes += [f"{removed} removed"] if removed else []
    return (
        "; pinned modules (--compile-paired, --compile-profile): "
        f"{', '.join(changes) or 'unchanged'} in {where}"
    )


def instructions_blocks(outcome: Outcome) -> list[Block]:
    """--compile-instructions: every row not counted, with its reason (failing the session
    under --compile-instructions-required); the counts no pin of their instrument holds,
    with the command that pins them."""
    blocks = []
    uncounted = outcome.instructions_uncounted()
    if uncounted:
        fails = outcome.uncounted_fails
        blocks.append(
            Block(
                BlockKind.WARNING,
                Tone.BAD if fails else Tone.WARN,
                f"{len(uncounted)} row(s) not counted under valgrind"
                + (
                    " (--compile-instructions-required)"
                    if fails
                    else " (their seconds are still judged)"
                ),
                details=tuple(f"{record.name}: {why}" for record, why in uncounted),
                fails=fails,
            )
        )
    unpinned = outcome.instructions_unpinned
    if unpinned and not outcome.pin_update:
        blocks.append(
            Block(
                BlockKind.WARNING,
                Tone.WARN,
                f"{len(unpinned)} row(s) counted with no pinned count of this instrument",
                details=tuple(
                    f"{record.name}: "
                    + instructions_text(
                        record.compile_instructions, record.compile_instructions_floor
                    )
                    for record in unpinned
                    if record.compile_instructions is not None
                ),
                advice="Pin them with:",
                command=repin_command(record.cell for record in unpinned),
            )
        )
    return blocks


def busy_pin_text(outcome: Outcome) -> str | None:
    """A pin update whose rows were measured above compile_max_load, said: their pinned
    wall seconds hold the time spent waiting for a core, and later quiet runs read faster."""
    max_load = outcome.thresholds.max_load
    if not outcome.pin_update or max_load is None:
        return None
    loads = [
        load
        for verdict in outcome.verdicts
        if (load := verdict.record.host_state.load_per_core) is not None and load > max_load
    ]
    if not loads:
        return None
    return (
        f"{len(loads)} row(s) pinned at a load above compile_max_load = {max_load:g} (up to "
        f"{max(loads):.2f} per core): their pinned wall seconds include time spent waiting "
        "for a core; pin on a quiet machine where you can"
    )


def _blocks(outcome: Outcome, groups: list[GroupView]) -> list[Block]:
    root = outcome.rootdir
    blocks: list[Block] = []
    if outcome.pin_error is not None:
        blocks.append(
            Block(
                BlockKind.PIN_ERROR, Tone.BAD, f"pins NOT updated: {outcome.pin_error}", fails=True
            )
        )
    elif outcome.pin_update:
        written = tuple(relative(path, root) for path in outcome.pins_written)
        kept = (
            f" ({outcome.pins_kept} pin(s) kept as they were: every figure within a third of "
            "its tolerance)"
            if outcome.pins_kept
            else ""
        )
        blocks.append(
            Block(
                BlockKind.PINS_UPDATED,
                Tone.GOOD,
                (
                    f"pins updated: {', '.join(written)}"
                    if written
                    else "pins updated: nothing changed"
                )
                + kept
                + _modules_stored(outcome),
                paths=written,
            )
        )
    blocks += [
        Block(BlockKind.LOST, Tone.BAD, f"compile rows missing: {lost}") for lost in outcome.lost
    ]
    blocks += [
        Block(
            BlockKind.CLOBBER,
            Tone.BAD if clobber.fails else Tone.WARN,
            f"settings clobbered{' (a required setting)' if clobber.fails else ''}: "
            f"{clobber.describe()}",
            fails=clobber.fails,
        )
        for clobber in outcome.clobbers
    ]
    blocks += [Block(BlockKind.SETTINGS, Tone.PLAIN, note) for note in outcome.settings_notes]
    judging = not outcome.pin_update
    cost = pairing_cost(verdict.record for verdict in outcome.verdicts) if judging else None
    if cost is not None:
        blocks.append(Block(BlockKind.PAIRED, Tone.PLAIN, cost.describe()))
    if judging:
        blocks += _warning_blocks(outcome)
    blocks += instructions_blocks(outcome)
    busy = busy_pin_text(outcome)
    if busy is not None:
        blocks.append(Block(BlockKind.WARNING, Tone.WARN, busy))
    always_cold = always_cold_text(outcome.always_cold)
    if always_cold is not None:  # also in a pin update: why some rows stay cold pins
        blocks.append(
            Block(
                BlockKind.ALWAYS_COLD,
                Tone.WARN,
                always_cold,
                details=tuple(row.brief() for row in outcome.always_cold),
            )
        )
    if judging:
        blocks += [_upgrade_block(upgrade, outcome.thresholds) for upgrade in outcome.upgrades]
        blocks += [
            Block(BlockKind.COMPILE_COUNT, Tone.WARN, change.headline(), details=change.recompiles)
            for change in outcome.compile_count_changes
        ]
    if outcome.stale:
        files = Counter(relative(stale.pin_file, root) for stale in outcome.stale)
        blocks.append(
            Block(
                BlockKind.STALE,
                Tone.WARN,
                f"stale pins: {len(outcome.stale)} pinned transform(s) of tests that ran but "
                f"measured nothing, in {len(files)} pin file(s) (delete them from the pin file "
                "if the transform is gone):",
                details=tuple(stale.name for stale in outcome.stale),
                paths=tuple(relative(stale.pin_file, root) for stale in outcome.stale),
            )
        )
    if judging:
        rows = [row for group in groups for row in group.rows]
        for status in Status:
            of_status = [row for row in rows if row.status is status]
            if of_status and status not in (Status.OK, Status.NOT_JUDGED):
                blocks.append(_status_block(status, of_status, outcome.thresholds))
    return blocks


# --------------------------------------------------------------------------- spend


def compile_seconds_per_test(outcome: Outcome) -> dict[str, float]:
    """Compile seconds per test: its ledger's (census'd tests), else its measured rows'
    trace, lowering and compile seconds."""
    per_test = {ledger.cell: ledger.compile_s for ledger in outcome.ledgers}
    with_ledger = set(per_test)  # a ledger holds every compile of its test, fixture's too
    for verdict in outcome.verdicts:
        record = verdict.record
        if record.cell not in with_ledger and record.compile_s is not None:
            per_test[record.cell] = (
                per_test.get(record.cell, 0.0)
                + record.compile_s
                + (record.trace_s or 0.0)
                + (record.lower_s or 0.0)
            )
    return per_test


def spend_lines(outcome: Outcome) -> list[str]:
    """What the session spent compiling, its share of the session, and the cache states."""
    if not outcome.verdicts or outcome.pin_update:
        return []
    spent = sum(compile_seconds_per_test(outcome).values())
    text = f"compile time: {spent:.1f} s"
    if outcome.workers > 1:  # worker seconds add up past the wall: no share of it
        text += f" summed over {outcome.workers} workers"
        if outcome.session_s:
            text += f", session {outcome.session_s:.1f} s wall"
    elif outcome.session_s:
        text += f" of the session's {outcome.session_s:.1f} s ({spent / outcome.session_s:.0%})"
    states = Counter(verdict.record.cache_state for verdict in outcome.verdicts)
    text += f", {len(outcome.verdicts)} compile row(s): " + ", ".join(
        f"{count} {state}" for state, count in sorted(states.items(), key=lambda i: -i[1])
    )
    if outcome.cache_saved_s and outcome.cache_saved_s > 0:
        text += (
            f"; the persistent cache saved at least {outcome.cache_saved_s:.1f} s (JAX's figure)"
        )
    return [text]


# --------------------------------------------------------------------------- trace profile

# The trace profile's package groups, as every output names them.
TRACE_GROUPS: dict[str, str] = {
    "jax": "jax",
    "stdlib_numpy": "stdlib+numpy",
    "project": "project",
    "other": "other",
}
TRACE_TOP_FILES = 10  # the files a rollup names


@dataclass(frozen=True)
class TraceShare:
    """One package group's or file's part of the session's profiled trace time."""

    name: str  # a group's label (`TRACE_GROUPS`) or a file
    share: float  # of the profiled rows' trace seconds (0..1)
    seconds: float  # that share of those seconds


@dataclass(frozen=True)
class TraceRollup:
    """Where the session's tracing time went (``compile_trace_profile``): each profiled
    row's shares weighted by its trace seconds, by package group and by file."""

    rows: int  # the rows profiled
    trace_s: float  # their trace seconds together
    groups: tuple[TraceShare, ...]  # in the `TRACE_GROUPS` order
    files: tuple[TraceShare, ...]  # the largest first, at most `TRACE_TOP_FILES`

    def groups_text(self) -> str:
        """``jax 61%, stdlib+numpy 20%, project 17%, other 2%``."""
        return ", ".join(f"{share.name} {share.share:.0%}" for share in self.groups)

    def files_text(self) -> str:
        return ", ".join(f"{share.name} {share.share:.0%}" for share in self.files)


def trace_rollup(records: Iterable[CompileRecord]) -> TraceRollup | None:
    """The session's trace profile from its rows' (None: no row was profiled). A row weighs
    its trace seconds; where no profiled row has any, each row weighs the same."""
    profiled = [record for record in records if record.trace_profile]
    if not profiled:
        return None
    seconds = [record.trace_s or 0.0 for record in profiled]
    weights = seconds if sum(seconds) > 0 else [1.0] * len(profiled)
    whole = sum(weights)
    groups: dict[str, float] = dict.fromkeys(TRACE_GROUPS, 0.0)
    files: dict[str, float] = {}
    for record, weight in zip(profiled, weights, strict=True):
        for group, share in (record.trace_profile or {}).items():
            groups[group] = groups.get(group, 0.0) + share * weight
        for name, share in (record.trace_files or {}).items():
            files[name] = files.get(name, 0.0) + share * weight
    traced = sum(seconds)

    def part(name: str, weighted: float) -> TraceShare:
        return TraceShare(name, weighted / whole, traced * weighted / whole)

    top = sorted(files.items(), key=lambda item: (-item[1], item[0]))[:TRACE_TOP_FILES]
    return TraceRollup(
        rows=len(profiled),
        trace_s=traced,
        groups=tuple(part(TRACE_GROUPS.get(name, name), value) for name, value in groups.items()),
        files=tuple(part(name, value) for name, value in top),
    )


# --------------------------------------------------------------------------- session


@dataclass(frozen=True)
class GroupView:
    """The rows of one comparability key, most severe first, and where its pins live."""

    key: ComparabilityKey
    pin_file: Path | None
    rows: tuple[RowView, ...]

    @property
    def budget_rows(self) -> int:
        """Rows judged by their compile_budget only: a pin update does not pin them."""
        return sum(1 for row in self.rows if row.status is Status.BUDGET)

    @property
    def pinned_rows(self) -> int:
        """In a pin update: the rows pinned (all but the budget rows)."""
        return len(self.rows) - self.budget_rows


# Statuses whose rows are folded at default verbosity (unless they fail): a count per file,
# the median of their ratios and the five furthest, instead of two lines a row.
FOLDED = (Status.UNPINNED, Status.NOISY, Status.BUDGET)
FOLD_FURTHEST = 5  # rows named in a fold: those with the highest ratios


def folded(row: RowView) -> bool:
    """Whether this row is shown in its status's fold rather than on its own lines."""
    return row.status in FOLDED and not row.fails


@dataclass(frozen=True)
class Fold:
    """Rows of one folded status as a count per file, and their ratios: unpinned rows
    against their nearest pin under another key, noisy rows against their own pin."""

    status: Status
    rows: tuple[RowView, ...]
    per_file: tuple[tuple[str, int], ...]
    median: float | None  # of the ratios
    furthest: tuple[tuple[RowView, float], ...]  # the rows with the highest ratios

    def per_file_text(self) -> str:
        return ", ".join(f"{name} {count}" for name, count in self.per_file)

    def ratios_text(self) -> str | None:
        """``3 compared with their nearest pin under another key: median 1.02x; furthest:
        ...`` (unpinned) or ``median 1.04x of their pin (wall seconds); highest: ...``."""
        if self.median is None:
            return None
        named = ", ".join(f"{row.name} {ratio:.2f}x" for row, ratio in self.furthest)
        if self.status is Status.UNPINNED:
            compared = sum(1 for row in self.rows if _fold_ratio(row) is not None)
            return (
                f"{compared} compared with their nearest pin under another key: median "
                f"{self.median:.2f}x; furthest: {named}"
            )
        metrics = sorted(
            {row.figures.metric.name for row in self.rows if row.figures.ratio is not None}
        )
        return (
            f"median {self.median:.2f}x of their pin ({', '.join(metrics)} seconds); "
            f"highest: {named}"
        )


def _fold_ratio(row: RowView) -> float | None:
    if row.status is Status.UNPINNED:
        nearest = row.verdict.nearest
        return None if nearest is None else nearest.ratio
    return row.figures.ratio


def fold(rows: Sequence[RowView]) -> Fold:
    """The fold of rows of one status (the status of the first)."""
    files = Counter(row.cell.split("::", 1)[0] for row in rows)
    ratios = [(row, ratio) for row in rows if (ratio := _fold_ratio(row)) is not None]
    furthest = sorted(ratios, key=lambda item: -item[1])[:FOLD_FURTHEST]
    return Fold(
        rows[0].status if rows else Status.UNPINNED,
        tuple(rows),
        tuple(sorted(files.items())),
        statistics.median(ratio for _, ratio in ratios) if ratios else None,
        tuple(furthest),
    )


def split_folds(rows: Iterable[RowView]) -> tuple[list[RowView], list[Fold]]:
    """The rows shown on their own lines, and the folds of the others (in FOLDED order)."""
    shown: list[RowView] = []
    by_status: dict[Status, list[RowView]] = {}
    for row in rows:
        if folded(row):
            by_status.setdefault(row.status, []).append(row)
        else:
            shown.append(row)
    return shown, [fold(by_status[status]) for status in FOLDED if status in by_status]


@dataclass(frozen=True)
class SessionView:
    """The session as every output shows it."""

    outcome: Outcome
    groups: tuple[GroupView, ...]  # keys holding the most severe rows first
    blocks: tuple[Block, ...]  # in BlockKind order; STATUS blocks in the Status order
    failed: bool
    trace: TraceRollup | None = None  # where tracing time went (compile_trace_profile)

    @property
    def rows(self) -> list[RowView]:
        """Every row, in the view's order: by group, most severe first within it."""
        return [row for group in self.groups for row in group.rows]

    def failing(self) -> list[RowView]:
        return [row for row in self.rows if row.fails]

    def counts(self) -> list[tuple[Status, int]]:
        """(status, rows) for every status present, in the Status order."""
        found = Counter(row.status for row in self.rows)
        return [(status, found[status]) for status in Status if found[status]]

    def counts_text(self) -> str:
        """``1 DRIFT, 2 ok``: the rows per status, in the Status order."""
        return ", ".join(f"{n} {status.value}" for status, n in self.counts())

    @property
    def headline(self) -> str:
        """``FAIL (1 DRIFT)``, ``pass``, ``pins updated`` or ``pins NOT updated``."""
        outcome = self.outcome
        if outcome.pin_error is not None:
            return "pins NOT updated"
        if outcome.pin_update:
            return "pins updated"
        if self.failed:
            failing = Counter(row.status for row in self.failing())
            parts = [f"{failing[status]} {status.value}" for status in Status if failing[status]]
            return "FAIL (" + ", ".join(parts) + ")" if parts else "FAIL"
        return "pass"

    def blocks_of(self, *kinds: BlockKind) -> list[Block]:
        return [block for block in self.blocks if block.kind in kinds]

    def failure_blocks(self) -> list[Block]:
        """The blocks that make the session fail (a failing status, upgrade, clobber, ...)."""
        return [block for block in self.blocks if block.fails]


def group_pin_file(
    outcome: Outcome, key: ComparabilityKey, verdicts: Sequence[Verdict]
) -> Path | None:
    """The pin file of the group's own key, where any of its rows was judged against pins.

    Never a verdict's own pin file: a MISS row (cold) is compared with its warm pin, and an
    instruction count with a pin of any key, yet the group is the cold key's.
    """
    if all(verdict.pin_file is None for verdict in verdicts):
        return None
    found = outcome.pin_files.get(key)
    return found if found is not None else outcome.pins_dir / pin_file_name(key)


def session_view(outcome: Outcome) -> SessionView:
    """The view of a concluded session (or of merged reports, or of a records corpus)."""
    groups = []
    for key, verdicts in by_key(outcome.verdicts):
        pin_file = group_pin_file(outcome, key, verdicts)
        rows = tuple(row_view(v, outcome.thresholds, outcome.pin_update) for v in verdicts)
        groups.append(GroupView(key, pin_file, rows))
    groups.sort(key=lambda group: (group.rows[0].status.severity, group.key))
    return SessionView(
        outcome,
        tuple(groups),
        tuple(_blocks(outcome, groups)),
        outcome.failed,
        trace_rollup(verdict.record for verdict in outcome.verdicts),
    )
