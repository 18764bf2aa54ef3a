"""The verdict, as lines of text: the terminal summary, and `merge` and `check` too.

Every line is rendered from an `Outcome`; nothing here decides a verdict. `verdict_lines`
(rows grouped by key, most severe first) and `closing_lines` (what each status means and
what to do) are the one rendering of the verdict; `summary_lines` adds the session's extras.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Sequence

import pytest

from pytest_jaxcompile._io import relative
from pytest_jaxcompile.gate.outcome import Outcome
from pytest_jaxcompile.gate.verdicts import (
    INSTRUCTIONS_PHASE,
    MEMORY_PHASES,
    METRIC_CPU,
    RSS_PHASE,
    Status,
    Thresholds,
    Tone,
    UpgradeReport,
    Verdict,
    by_key,
    compared_seconds,
    row_fails,
)
from pytest_jaxcompile.records import RESIDUAL_NAME, CallLedger
from pytest_jaxcompile.session import outcome_of, summary_section

MAX_CELLS_IN_COMMAND = 3

Markup = dict[str, bool]
Line = tuple[str, Markup]

MARKUP: dict[Tone, Markup] = {
    Tone.BAD: {"red": True, "bold": True},
    Tone.GOOD: {"green": True},
    Tone.WARN: {"yellow": True},
    Tone.PLAIN: {},
}


def markup(status: Status) -> Markup:
    return MARKUP[status.tone]


def repin_command(cells: Iterable[str]) -> str:
    unique = sorted(set(cells))
    if len(unique) > MAX_CELLS_IN_COMMAND:
        unique = sorted({cell.split("::", 1)[0] for cell in unique})
    quoted = " ".join(f"'{cell}'" if "[" in cell or " " in cell else cell for cell in unique)
    return f"pytest --compile-pin-update {quoted}".rstrip()


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} s"


def comparison(verdict: Verdict) -> str:
    """``0.512 s, pin 0.201 s (2.55x, tolerance 75%)``: the figures the verdict compared."""
    record = verdict.record
    if verdict.pin is None:
        return seconds(record.compile_s)
    measured, pinned = compared_seconds(record, verdict.pin, verdict.metric)
    on_cpu = verdict.metric == METRIC_CPU and None not in (
        record.compile_cpu_s, verdict.pin.compile_cpu_s
    )
    cpu = " cpu" if on_cpu else ""
    text = f"{seconds(measured)}{cpu}, pin {seconds(pinned)}{cpu}"
    if verdict.ratio is not None:
        figure = f"{verdict.phase} " if verdict.phase in (
            *MEMORY_PHASES, INSTRUCTIONS_PHASE
        ) else ""
        text += f" ({figure}{verdict.ratio:.2f}x"
        if verdict.tolerance is not None:
            text += f", tolerance {verdict.tolerance:.0%}"
        text += ")"
    return text


def row_text(verdict: Verdict) -> str:
    """One verdict's line: status, test, transform and the figures compared."""
    record = verdict.record
    text = f"{verdict.status.value:<10} {record.cell} [{record.transform}] {comparison(verdict)}"
    if record.compile_spread_s is not None and record.compile_samples_s:
        repeats = len(record.compile_samples_s)
        text += f" [{repeats} repeats, spread {record.compile_spread_s:.3f} s]"
    if verdict.status is Status.NOT_JUDGED:
        text += f" [{record.cache_state}]"
    return text


def verdict_lines(outcome: Outcome, verbose: bool) -> list[Line]:
    """Rows grouped by comparability key, most severe first; never ranked across keys."""
    lines: list[Line] = []
    for key, verdicts in by_key(outcome.verdicts):
        pin_file = next((v.pin_file for v in verdicts if v.pin_file is not None), None)
        header = key.describe()
        if pin_file is not None:  # where its pins live, or will once pinned
            where = relative(pin_file, outcome.rootdir)
            header += f"  ({where})" if pin_file.exists() else f"  (no pin file yet: {where})"
        lines.append((header, {"bold": True}))
        hidden = 0
        fold: list[Verdict] = []
        for verdict in verdicts:
            if verdict.status is Status.OK and not verbose:
                hidden += 1
                continue
            if folded(verdict, outcome, verbose):
                fold.append(verdict)
                continue
            lines.append(("  " + row_text(verdict), markup(verdict.status)))
            if verdict.note:
                lines.append(("      " + verdict.note, {}))
        if fold:
            lines.extend((text, markup(Status.UNPINNED)) for text in unpinned_fold(fold))
        if hidden:
            lines.append((f"  ok         {hidden} row(s) within tolerance (-v lists them)", {}))
    return lines


FOLD_WORST = 5  # unpinned rows named in a fold: those furthest from their nearest pin


def folded(verdict: Verdict, outcome: Outcome, verbose: bool) -> bool:
    """Unpinned rows are folded at default verbosity, unless they fail the gate."""
    return (
        verdict.status is Status.UNPINNED and not verbose
        and not verdict.fails(outcome.thresholds)
    )


def unpinned_fold(verdicts: list[Verdict]) -> list[str]:
    """Unpinned rows as a count per file and their comparison with their nearest pins."""
    files = Counter(verdict.record.cell.split("::", 1)[0] for verdict in verdicts)
    per_file = ", ".join(f"{name} {count}" for name, count in sorted(files.items()))
    lines = [f"  unpinned   {len(verdicts)} row(s) (-v lists them): {per_file}"]
    ratios = {
        id(v): v.nearest.ratio for v in verdicts if v.nearest and v.nearest.ratio is not None
    }
    if ratios:
        worst = sorted((v for v in verdicts if id(v) in ratios), key=lambda v: -ratios[id(v)])
        lines.append(
            f"      {len(ratios)} compared with their nearest pin under another key: median "
            f"{statistics.median(ratios.values()):.2f}x; furthest: " + ", ".join(
                f"{v.record.cell} [{v.record.transform}] {ratios[id(v)]:.2f}x"
                for v in worst[:FOLD_WORST]
            )
        )
    return lines


def summary_lines(outcome: Outcome, verbose: bool, durations: int = 5) -> list[Line]:
    """The terminal summary of a session (and of `merge`): what the session spent on
    compiling first, then the verdicts, then the details; `durations` expensive compiles
    and tests are listed (0: all)."""
    lines = [(text, {"bold": True}) for text in spend_lines(outcome)]
    lines.extend(verdict_lines(outcome, verbose))
    lines.extend(_trace_profile_lines(outcome))
    lines.extend((text, {}) for text in duration_lines(outcome, durations))
    lines.extend(_eager_lines(outcome))
    lines.extend(_stale_lines(outcome, verbose))
    lines.extend(_compile_count_lines(outcome))
    for clobber in outcome.clobbers:
        if clobber.fails:
            lines.append((f"settings clobbered (a required setting; the session fails): "
                          f"{clobber.describe()}", MARKUP[Tone.BAD]))
        else:
            lines.append((f"warning: settings clobbered: {clobber.describe()}",
                          MARKUP[Tone.WARN]))
    lines.extend(_lost_lines(outcome))
    lines.extend(closing_lines(outcome))
    return lines


_GROUP_LABELS = {
    "jax": "jax", "stdlib_numpy": "stdlib+numpy", "project": "project", "other": "other",
}


def _trace_profile_lines(outcome: Outcome) -> list[Line]:
    profiled = [v.record for v in outcome.verdicts if v.record.trace_profile]
    if not profiled:
        return []
    lines: list[Line] = [("trace profile (share of trace time by package):", {"bold": True})]
    for record in sorted(profiled, key=lambda r: (r.cell, r.transform)):
        shares = ", ".join(
            f"{_GROUP_LABELS.get(group, group)} {share:.0%}"
            for group, share in (record.trace_profile or {}).items()
        )
        lines.append((f"  {record.cell} [{record.transform}] trace "
                      f"{seconds(record.trace_s)}: {shares}", {}))
    return lines


def ledger_line(ledger: CallLedger) -> str:
    """``wall = compile + residual``, with the phases and overlays beside, never summed."""
    if ledger.wall_s is None or ledger.execute_and_python_s is None:
        head = f"compile {ledger.compile_s:.3f} s (wall not measured)"
    else:
        fraction = f" ({ledger.compile_fraction:.0%})" if ledger.compile_fraction else ""
        head = (
            f"wall {ledger.wall_s:.3f} s = compile {ledger.compile_s:.3f} s{fraction}"
            f" + {RESIDUAL_NAME} {ledger.execute_and_python_s:.3f} s"
        )
    figures = (
        ("trace", ledger.trace_s), ("lower", ledger.lower_s),
        ("backend", ledger.backend_compile_s), ("other", ledger.compile_other_s),
    )
    phases = ", ".join(f"{label} {value:.3f}" for label, value in figures if value is not None)
    overlays = "".join(f", {name} {value:.3f}" for name, value in ledger.overlays.items())
    eager = (
        f"; eager dispatch {ledger.eager_compiles} ({ledger.eager_compile_s:.3f} s)"
        if ledger.eager_compiles else ""
    )
    return (
        f"{head} [{phases}{overlays}]; {ledger.compiles} compile(s), "
        f"{ledger.persistent_cache_hits} from the persistent cache{eager}"
    )


def compile_seconds_per_test(outcome: Outcome) -> dict[str, float]:
    """Compile seconds per test: its ledger's (census'd tests), else its measured rows'
    trace, lowering and compile seconds."""
    per_test = {ledger.cell: ledger.compile_s for ledger in outcome.ledgers}
    with_ledger = set(per_test)  # a ledger holds every compile of its test, fixture's too
    for verdict in outcome.verdicts:
        record = verdict.record
        if record.cell not in with_ledger:
            per_test[record.cell] = per_test.get(record.cell, 0.0) + record.compile_s + (
                record.trace_s or 0.0) + (record.lower_s or 0.0)
    return per_test


def spend_lines(outcome: Outcome) -> list[str]:
    """What the session spent compiling, its share of the session, and the cache states."""
    if not outcome.verdicts or outcome.pin_update:
        return []
    spent = sum(compile_seconds_per_test(outcome).values())
    text = f"compile time: {spent:.1f} s"
    if outcome.session_s:
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


def duration_lines(outcome: Outcome, count: int) -> list[str]:
    """The `count` most expensive compiles and tests (all with 0), like pytest --durations."""
    if not outcome.verdicts:
        return []
    limit = None if count == 0 else count
    rows = sorted(outcome.verdicts, key=lambda v: (-v.record.compile_s, v.record.cell))
    lines = [f"slowest {len(rows[:limit])} compile(s):"]
    lines += [
        f"  {v.record.compile_s:8.3f} s  {v.record.cell} [{v.record.transform}] "
        f"({v.record.cache_state})" for v in rows[:limit]
    ]
    per_test = compile_seconds_per_test(outcome)
    ledgers = {ledger.cell: ledger for ledger in outcome.ledgers}
    tests = sorted(per_test.items(), key=lambda item: (-item[1], item[0]))[:limit]
    lines.append(f"{len(tests)} test(s) with the most compile time:")
    for cell, seconds in tests:
        ledger = ledgers.get(cell)
        lines.append(f"  {seconds:8.3f} s  {cell}" + (f": {ledger_line(ledger)}" if ledger else ""))
    if limit is not None and len(per_test) > limit:
        lines.append(f"  ... {len(per_test) - limit} more (--compile-durations=0 lists all)")
    return lines


# Eager dispatch of tests that cleared the caches over this share of the session: say why.
EAGER_SHARE_WORTH_A_HINT = 0.1


def _eager_lines(outcome: Outcome) -> list[Line]:
    """JAX's eager dispatch, summed apart: no census rows, no pins, not in max_compiles."""
    eager = [ledger for ledger in outcome.ledgers if ledger.eager_compiles]
    if not eager:
        return []
    compiles = sum(ledger.eager_compiles for ledger in eager)
    spent = sum(ledger.eager_compile_s for ledger in eager)
    lines: list[Line] = [(
        f"eager dispatch (operations outside jit): {compiles} compile(s) in {len(eager)} "
        f"test(s), {spent:.3f} s; inside the ledgers' compile time, not census rows, not "
        "pinned, not counted by max_compiles unless count_eager", {},
    )]
    session = outcome.session_s
    cleared = [ledger for ledger in outcome.ledgers if ledger.caches_cleared_because]
    cleared_s = sum(ledger.eager_compile_s for ledger in cleared)
    if session and cleared_s > EAGER_SHARE_WORTH_A_HINT * session:
        # Clearing keeps counts order-independent, and drops eager executables too: name
        # what made the plugin clear, so the user can see whether it is theirs to change.
        reasons = Counter(ledger.caches_cleared_because for ledger in cleared)
        reason, times = reasons.most_common(1)[0]
        lines.append((
            f"  {cleared_s / session:.0%} of the session in {len(cleared)} census'd test(s) "
            "that started with JAX's in-process caches cleared and compiled their eager "
            f"operations again, {times} of them because {reason} "
            "(docs/census.md#each-test-compiles-what-it-uses)", MARKUP[Tone.WARN],
        ))
    return lines


def _compile_count_lines(outcome: Outcome) -> list[Line]:
    lines: list[Line] = []
    for change in outcome.compile_count_changes:
        lines.append((change.headline(), MARKUP[Tone.WARN]))
        lines.extend((f"    {why}", {}) for why in change.recompiles)
    return lines


def _lost_lines(outcome: Outcome) -> list[Line]:
    return [
        (f"compile rows missing: {lost}", MARKUP[Tone.BAD]) for lost in outcome.lost
    ]


STALE_BRIEF = 5  # stale pins listed at default verbosity


def _stale_lines(outcome: Outcome, verbose: bool) -> list[Line]:
    if not outcome.stale:
        return []
    files = Counter(relative(stale.pin_file, outcome.rootdir) for stale in outcome.stale)
    lines: list[Line] = [
        (f"stale pins: {len(outcome.stale)} pinned transform(s) of tests that ran but "
         "measured nothing (delete them from the pin file if the transform is gone): "
         + ", ".join(f"{name} {count}" for name, count in sorted(files.items())),
         MARKUP[Tone.WARN]),
    ]
    shown = outcome.stale if verbose else outcome.stale[:STALE_BRIEF]
    lines.extend(
        (f"  {stale.cell} [{stale.transform}] in {relative(stale.pin_file, outcome.rootdir)}", {})
        for stale in shown
    )
    if len(shown) < len(outcome.stale):
        lines.append((f"  ... {len(outcome.stale) - len(shown)} more (-v lists them)", {}))
    return lines


# What each status means, for the closing lines and the GitHub step summary.
_MEANING: dict[Status, str] = {
    Status.MISS: "compiled cold although their module is unchanged since its warm pin "
    "(expect warm): the cache was not restored, was evicted or stopped applying",
    Status.GREW: "compiled a module that grew beyond its limit (op count, compiled temp "
    "bytes or flops)",
    Status.DRIFT: "compiled slower than their pin by more than the tolerance and by more "
    "than {floor:g} s",
    Status.IMPROVED: "compiled faster than their pin",
    Status.UNPINNED: "have no pin under their key",
    Status.NOISY: "were measured above {max_load:g} load per core and stayed within "
    "tolerance on CPU seconds; their wall seconds are not judged (strict judges them)",
    Status.NOT_JUDGED: "are not judged (in-memory cache hits, or a cache state the evidence "
    "did not decide)",
    Status.OK: "are within tolerance",
}
_ADVICE: dict[Status, str] = {
    Status.GREW: "If the growth is intended, re-pin and commit the pin files:",
    Status.DRIFT: "If the slowdown is intended, re-pin and commit the pin files:",
    Status.IMPROVED: "Re-pin to lock the improvement in:",
    Status.UNPINNED: "Pin them with:",
}


# A DRIFT on the process's memory during the compile (the verdict's phase is RSS_PHASE).
_RSS_DRIFT = "grew the process's memory during the compile by more than the tolerance and " \
    "{rss_floor:g} MiB"
# A DRIFT on the compile's instructions (the verdict's phase is INSTRUCTIONS_PHASE).
_INSTRUCTIONS_DRIFT = "compiled with more instructions than their pin by more than " \
    "{instructions:.2%}, whatever the load"


def status_sentence(status: Status, verdicts: Sequence[Verdict], thresholds: Thresholds) -> str:
    """``DRIFT: 2 row(s) compiled slower ...; the session fails.``

    A DRIFT sentence names the kinds of drift its rows have: time, memory, or both."""
    meanings = [_MEANING[status]]
    if status is Status.DRIFT:
        phases = {verdict.phase for verdict in verdicts}
        other = {
            RSS_PHASE: _RSS_DRIFT, INSTRUCTIONS_PHASE: _INSTRUCTIONS_DRIFT
        }
        meanings = [_MEANING[status]] if phases - set(other) else []
        meanings += [other[phase] for phase in other if phase in phases]
    meaning = ", or ".join(meanings).format(
        floor=thresholds.floor_s, max_load=thresholds.max_load or 0,
        rss_floor=thresholds.rss_floor_mib, instructions=thresholds.instructions_tolerance,
    )
    text = f"{status.value}: {len(verdicts)} row(s) {meaning}"
    if row_fails(status, thresholds):
        return text + "; the session fails."
    if status in (Status.DRIFT, Status.IMPROVED) and thresholds.time_advisory:
        return text + "; reported only (time advisory)."
    return text + "."


def advice(status: Status, verdicts: Iterable[Verdict]) -> tuple[str, str] | None:
    """What to do about rows of this status: (the sentence, the command), or None."""
    sentence = _ADVICE.get(status)
    if sentence is None:
        return None
    return sentence, repin_command(verdict.record.cell for verdict in verdicts)


def closing_lines(outcome: Outcome) -> list[Line]:
    """The counts, then a sentence (and what to do) per status that needs one."""
    if outcome.pin_error is not None:
        return [(f"pins NOT updated: {outcome.pin_error}", MARKUP[Tone.BAD])]
    if outcome.pin_update:
        written = ", ".join(relative(path, outcome.rootdir) for path in outcome.pins_written)
        return [
            (f"pins updated: {written}" if written else "pins updated: nothing changed",
             MARKUP[Tone.GOOD])
        ]
    lines: list[Line] = []
    for upgrade in outcome.upgrades:
        tone = Tone.BAD if upgrade.fails(outcome.thresholds) else Tone.WARN
        lines.extend((text, MARKUP[tone]) for text in upgrade_lines(upgrade, outcome.thresholds))
    for text in warning_lines(outcome):
        lines.append((text, MARKUP[Tone.WARN]))
    counts = [(Status.OK, outcome.count(Status.OK))] + [
        (status, n) for status, n in outcome.counts() if status is not Status.OK
    ]
    listed = ", ".join(f"{n} {status.value}" for status, n in counts if n)
    if listed:
        lines.append((f"compile rows: {listed}", {"bold": True}))
    for status, _ in outcome.counts():
        if status in (Status.OK, Status.NOT_JUDGED):
            continue
        rows = outcome.with_status(status)
        lines.append((status_sentence(status, rows, outcome.thresholds), markup(status)))
        what = advice(status, rows)
        if what is not None:
            lines.append((" ".join(what), markup(status)))
    return lines


def upgrade_lines(upgrade: UpgradeReport, thresholds: Thresholds) -> list[str]:
    """The upgrade block: old and new version, rows compared, median ratio, worst rows."""
    median = upgrade.median_ratio
    text = (
        f"{upgrade.framework} upgrade {upgrade.old} -> {upgrade.new} on {upgrade.hardware}: "
        f"{len(upgrade.verdicts)} row(s) compared with their {upgrade.old} pins"
    )
    if median is not None:
        text += f", median {median:.2f}x"
    limit = thresholds.max_upgrade_slowdown
    if upgrade.fails(thresholds):
        assert limit is not None
        text += f"; slower than the allowed +{limit:.0%}: the session fails"
    elif limit is not None:
        text += f"; within the allowed +{limit:.0%}"
    else:
        text += " (report only; --compile-max-upgrade-slowdown makes it a gate)"
    lines = [text + "."]
    worst = [v for v in upgrade.worst() if v.nearest is not None and v.nearest.ratio]
    if worst:
        lines.append("  slowest: " + ", ".join(
            f"{v.record.cell} [{v.record.transform}] {v.nearest.ratio:.2f}x"
            for v in worst if v.nearest is not None and v.nearest.ratio
        ))
    lines.append(
        f"  Pin {upgrade.new} when it is the baseline: "
        + repin_command(v.record.cell for v in upgrade.verdicts)
    )
    return lines


def warning_lines(outcome: Outcome) -> list[str]:
    """What makes the gate close to silent, said loudly: a lost cache, missing pins."""
    lines = []
    lost = outcome.cache_lost()
    if lost:
        lines.append(
            f"warning: {len(lost)} row(s) compiled cold although their module is unchanged "
            "since its warm pin: the persistent cache was not restored, was evicted or stopped "
            "applying (--compile-expect-warm makes this a MISS that fails)."
        )
    if outcome.mostly_unpinned():
        unpinned = outcome.with_status(Status.UNPINNED)
        compared = sum(1 for v in unpinned if v.nearest is not None)
        lines.append(
            f"warning: {len(unpinned)} of {len(outcome.verdicts)} row(s) have no pin under "
            "their key, while the pins directory holds pins under other keys: this runner's "
            "hardware or jax version is not pinned, so the gate judges almost nothing"
            + (f" ({compared} compared with their nearest pin)" if compared else "")
            + ". Pin this runner class, or set compile_require_pinned to fail such sessions."
        )
    return lines


class TerminalSummary:
    """The gate's section of pytest's terminal summary (controller only)."""

    def __init__(self, config: pytest.Config, durations: int) -> None:
        self.config = config
        self.durations = durations

    @pytest.hookimpl(tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        outcome = outcome_of(self.config)
        if outcome is None or not outcome.has_news():
            return
        summary_section(terminalreporter)
        verbose = self.config.get_verbosity() > 0
        for text, marks in summary_lines(outcome, verbose, self.durations):
            terminalreporter.write_line(text, **marks)
