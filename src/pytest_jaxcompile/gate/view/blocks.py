"""The session's blocks: what it says besides its rows (pin errors, pins updated, clobbers,
warnings, upgrades, stale pins, one block per status), in the order every output shows them.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from pytest_jaxcompile._io import relative
from pytest_jaxcompile._numbers import instructions_text, percent
from pytest_jaxcompile.gate.always_cold import always_cold_text
from pytest_jaxcompile.gate.dropping import COUNT_OPTION
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.nearest import OTHER_HARDWARE
from pytest_jaxcompile.gate.outcome import Outcome
from pytest_jaxcompile.gate.paired import pairing_cost
from pytest_jaxcompile.gate.sources import source_growth, sources_text
from pytest_jaxcompile.gate.status import Status, Tone, Verdict
from pytest_jaxcompile.gate.upgrades import UpgradeReport
from pytest_jaxcompile.gate.view.meaning import advice, meaning
from pytest_jaxcompile.gate.view.repin import Repin
from pytest_jaxcompile.gate.view.rows import RowView


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
    `fails` (the terminal's "the session fails", a comment's "this run fails"); a block
    that would fail but is reported only says why in `reported_only`, which every output
    appends as it is.
    """

    kind: BlockKind
    tone: Tone
    text: str
    fails: bool = False
    # why a block that would fail does not: compile_time_advisory, or an accepted change
    reported_only: str | None = None
    details: tuple[str, ...] = ()
    advice: str | None = None
    command: str | None = None
    status: Status | None = None  # STATUS blocks
    rows: tuple[RowView, ...] = ()  # STATUS blocks: the rows of that status
    paths: tuple[str, ...] = ()  # PINS_UPDATED: the files written; STALE: per detail line

    def way_back(self) -> str | None:
        """The advice and its command on one line (``If the change is intended, re-pin
        and commit the pin files: pytest --compile-pin-update ...``), or the advice alone
        where it names no command (CI's way); None without advice."""
        if self.advice is None:
            return None
        return self.advice if self.command is None else f"{self.advice} {self.command}"


def _status_block(
    status: Status, rows: list[RowView], thresholds: Thresholds, repin: Repin
) -> Block:
    verdicts = [row.verdict for row in rows]
    means = meaning(status, verdicts, thresholds)
    fails = any(verdict.fails(thresholds) for verdict in verdicts)
    # an accepted change needs no way back
    what = (
        None
        if thresholds.accept
        else advice(
            status,
            (row.cell for row in rows),
            repin,
            (row.key.hardware for row in rows),
            fails=fails,
            outrun=any(verdict.pin_outrun for verdict in verdicts),
        )
    )
    return Block(
        BlockKind.STATUS,
        status.tone,
        f"{status.value}: {len(rows)} row(s) {means}",
        fails=fails,
        reported_only=_reported_only(
            any(verdict.would_fail(thresholds) for verdict in verdicts),
            thresholds,
            advisory=status in (Status.DRIFT, Status.IMPROVED) and thresholds.time_advisory,
        ),
        advice=None if what is None else what[0],
        command=None if what is None else what[1],
        status=status,
        rows=tuple(rows),
    )


ACCEPTED = (
    "accepted (compile_accept): reported only; the change becomes the pin when re-pinned, "
    "in CI when the merge makes it the baseline"
)
TIME_ADVISORY = "reported only (time advisory)"


def _reported_only(would_fail: bool, thresholds: Thresholds, *, advisory: bool) -> str | None:
    """Why a block whose rows would fail does not fail the session, if it does not."""
    if would_fail and thresholds.accept:
        return ACCEPTED
    if advisory and not thresholds.accept:
        return TIME_ADVISORY
    return None


def _upgrade_block(upgrade: UpgradeReport, thresholds: Thresholds, repin: Repin) -> Block:
    median = upgrade.median_ratio
    text = (
        f"{upgrade.framework} upgrade {upgrade.old} -> {upgrade.new} on {upgrade.hardware}: "
        f"{len(upgrade.verdicts)} row(s) compared with their {upgrade.old} pins"
    )
    if median is not None:
        text += f", median {median:.2f}x"
    limit = thresholds.max_upgrade_slowdown
    fails = upgrade.fails(thresholds)
    if upgrade.slower_than_allowed(thresholds) and limit is not None:
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
    for verdict in worst:  # where in the user's code each slowest row's module grew
        assert verdict.nearest is not None
        grown = sources_text(source_growth(verdict.record, verdict.nearest.pin))
        if grown is not None:
            details.append(f"{verdict.record.name} grew: {grown}")
    what, command = repin.way_back(
        f"When {upgrade.framework} {upgrade.new} is the baseline",
        f"Pin {upgrade.new} when it is the baseline:",
        (v.record.cell for v in upgrade.verdicts),
        [upgrade.hardware],
        fails=fails,
    )
    return Block(
        BlockKind.UPGRADE,
        Tone.BAD if fails else Tone.WARN,
        text,
        fails=fails,
        reported_only=_reported_only(
            upgrade.slower_than_allowed(thresholds), thresholds, advisory=False
        ),
        details=tuple(details),
        advice=what,
        command=command,
    )


def coverage_text(outcome: Outcome) -> str | None:
    """The mostly-unpinned warning, naming its causes as counted (`Outcome.coverage`);
    None unless most rows that have pins have them only under another key."""
    if not outcome.mostly_unpinned():
        return None
    counted = outcome.coverage
    if outcome.paired:  # the changed rows were judged by their pairs; the others unchanged
        unpinned = outcome.with_status(Status.UNPINNED)
        covered = sum(1 for verdict in unpinned if paired_covers(verdict))
        if 2 * (counted.unpinned_elsewhere - covered) <= counted.judged - counted.new_tests:
            return None
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


def paired_covers(verdict: Verdict) -> bool:
    """An unpinned row the paired gate stands for (--compile-paired): its module is its
    nearest pin's on the same kind of device, so a change would have been paired with it."""
    nearest = verdict.nearest
    return (
        nearest is not None
        and nearest.relation == OTHER_HARDWARE
        and verdict.record.fingerprint is not None
        and verdict.record.fingerprint == nearest.pin.fingerprint
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


def added_compile_block(outcome: Outcome) -> Block | None:
    """Rows a compile added to measure them raised on (a compile_repeat repeat, the twin:
    `CompileRecord.added_compile_error`), each named with its error: kept as their own
    compile measured them, their tests not failed for it; also in a pin update."""
    raised = [verdict.record for verdict in outcome.verdicts if verdict.record.added_compile_error]
    if not raised:
        return None
    return Block(
        BlockKind.WARNING,
        Tone.WARN,
        f"a compile added to measure {len(raised)} row(s) raised: each row keeps what its own "
        "compile measured, and no test failed for it",
        details=tuple(f"{record.name}: {record.added_compile_error}" for record in raised),
    )


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
        # counted: the re-pin counts them again, or it would pin no count
        what, command = Repin.of(outcome).way_back(
            "To pin the counts",
            "Pin them with:",
            (record.cell for record in unpinned),
            (record.hardware for record in unpinned),
            fails=False,
            extra=(COUNT_OPTION,),
        )
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
                advice=what,
                command=command,
            )
        )
    return blocks


def busy_pin_text(outcome: Outcome) -> str | None:
    """A pin update that pinned seconds measured above compile_max_load, said once: those
    pins hold time spent waiting for a core, and later quiet runs read faster. Only pins
    that now hold this session's seconds count (not those kept as they were, nor a refused
    update's)."""
    max_load = outcome.thresholds.max_load
    if not outcome.pin_update or max_load is None or outcome.pin_error is not None:
        return None
    loads = [
        load
        for verdict in outcome.verdicts
        if (load := verdict.record.host_state.load_per_core) is not None
        and load > max_load
        and verdict.pin is not None
        and verdict.record.timestamp is not None
        # written from this row (a pin kept as it was keeps its own time of pinning)
        and verdict.pin.pinned_at == verdict.record.timestamp
    ]
    if not loads:
        return None
    return (
        f"{len(loads)} pin(s) hold seconds measured at a load above compile_max_load = "
        f"{max_load:g} (up to {max(loads):.2f} per core), time spent waiting for a core "
        "included; a re-pin on a quieter machine tightens them"
    )


NOTHING_MEASURED = (
    "pins NOT updated: no compile was measured (measure with the jax_compile fixture, "
    "or every compile a test triggers with --compile-census)"
)


def session_blocks(outcome: Outcome, rows: Sequence[RowView]) -> list[Block]:
    """The session's blocks in `BlockKind` order; `rows` in the view's order."""
    root = outcome.rootdir
    blocks: list[Block] = []
    if outcome.pin_error is not None:
        # Refused for a figure it would drop: the same re-pin, with the options that keep it
        # (`Outcome.repin_keeps`, from the same refusal); a pin update is run where it pins,
        # so this is a command in CI too.
        cells = [cell for dropped in outcome.dropped for cell in dropped.cells]
        blocks.append(
            Block(
                BlockKind.PIN_ERROR,
                Tone.BAD,
                f"pins NOT updated: {outcome.pin_error}",
                fails=True,
                advice="Re-pin with:" if cells else None,
                command=Repin.of(outcome).command(cells) if cells else None,
            )
        )
    elif outcome.pinned_nothing:
        blocks.append(Block(BlockKind.PINS_UPDATED, Tone.WARN, NOTHING_MEASURED))
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
    cost = (
        pairing_cost(
            (verdict.record for verdict in outcome.verdicts), outcome.thresholds, outcome.workers
        )
        if judging
        else None
    )
    if cost is not None:
        fails = any(
            verdict.paired_not_decided and verdict.fails(outcome.thresholds)
            for verdict in outcome.verdicts
        )
        text = cost.describe() + (" (compile_paired_required: fails)" if fails else "")
        blocks.append(Block(BlockKind.PAIRED, Tone.BAD if fails else Tone.PLAIN, text, fails=fails))
    if judging:
        blocks += _warning_blocks(outcome)
    added = added_compile_block(outcome)
    if added is not None:
        blocks.append(added)
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
        blocks += [
            _upgrade_block(upgrade, outcome.thresholds, Repin.of(outcome))
            for upgrade in outcome.upgrades
        ]
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
        for status in Status:
            of_status = [row for row in rows if row.status is status]
            if of_status and status not in (Status.OK, Status.NOT_JUDGED):
                blocks.append(
                    _status_block(status, of_status, outcome.thresholds, Repin.of(outcome))
                )
    return blocks
