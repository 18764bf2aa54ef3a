"""The verdict, as lines of text: the terminal summary, and `merge` and `check` too.

Every line formats the gate's view (`gate.view`); nothing here decides a verdict or says what
a status means. `verdict_lines` (rows grouped by key, most severe first) and `closing_lines`
(the session's blocks) are the terminal's wording; `summary_lines` adds the session's extras
(compile spend, durations, eager dispatch, trace profiles).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import textwrap
from collections import Counter

import pytest

from pytest_jaxcompile._io import relative
from pytest_jaxcompile.gate.budget import suggested_budgets
from pytest_jaxcompile.gate.judging import failed_phase
from pytest_jaxcompile.gate.outcome import Outcome
from pytest_jaxcompile.gate.status import Status, Tone
from pytest_jaxcompile.gate.view import (
    BUDGET_NOT_PINNED,
    TRACE_GROUPS,
    Block,
    BlockKind,
    Fold,
    RowView,
    SessionView,
    compile_seconds_per_test,
    session_view,
    split_folds,
)
from pytest_jaxcompile.output import outcome_of, summary_section
from pytest_jaxcompile.records import CallLedger

Markup = dict[str, bool]
Line = tuple[str, Markup]

MARKUP: dict[Tone, Markup] = {
    Tone.BAD: {"red": True, "bold": True},
    Tone.GOOD: {"green": True},
    Tone.WARN: {"yellow": True},
    Tone.PLAIN: {},
}
FAILS = "the session fails"  # the terminal's words for a block or status that fails


def markup(status: Status) -> Markup:
    return MARKUP[status.tone]


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} s"


def row_text(row: RowView) -> str:
    """One verdict's line: status, test, transform and the figures compared."""
    record = row.record
    text = f"{row.status.value:<10} {row.name} {row.figures.text()}"
    if record.compile_spread_s is not None and record.compile_samples_s:
        repeats = len(record.compile_samples_s)
        text += f" [{repeats} repeats, spread {record.compile_spread_s:.3f} s]"
    if row.status is Status.NOT_JUDGED:
        text += f" [{record.cache_state}]"
    elif row.status is Status.FAILED:
        text += f" [the {failed_phase(record)[0]} raised {record.error}]"
    return text


def verdict_lines(view: SessionView, verbose: bool) -> list[Line]:
    """Rows grouped by comparability key, most severe first; never ranked across keys."""
    lines: list[Line] = []
    for group in view.groups:
        header = group.key.describe()
        if group.pin_file is not None:  # where its pins live, or will once pinned
            where = relative(group.pin_file, view.outcome.rootdir)
            header += f"  ({where})" if group.pin_file.exists() else f"  (no pin file yet: {where})"
        lines.append((header, {"bold": True}))
        if view.outcome.pin_update:  # compared with the pins just written: nothing to say
            if view.outcome.pin_error is not None:
                lines.append((f"  not pinned {len(group.rows)} row(s)", {}))
                continue
            if group.pinned_rows or not (group.budget_rows or group.not_pinned):
                lines.append((f"  pinned     {group.pinned_rows} row(s)", {}))
            if group.not_pinned:
                lines.append(
                    (
                        f"  not pinned {group.not_pinned_rows} row(s) ({group.not_pinned_text()})",
                        {},
                    )
                )
            if group.budget_rows:
                lines.append((f"  budget     {group.budget_rows} {BUDGET_NOT_PINNED}", {}))
            continue
        hidden = sum(1 for row in group.rows if row.status is Status.OK and not verbose)
        listed = [row for row in group.rows if verbose or row.status is not Status.OK]
        shown, folds = split_folds(listed) if not verbose else (listed, [])
        for row in shown:
            lines.append(("  " + row_text(row), markup(row.status)))
            if verbose:  # every part of the note, one per line
                lines.extend(("      " + detail, {}) for detail in row.details)
            elif row.cause is not None:
                lines.append(("      " + row.cause, {}))
        for fold in folds:
            lines.extend((text, markup(fold.status)) for text in fold_lines(fold))
        if hidden:
            lines.append((f"  ok         {hidden} row(s) within tolerance (-v lists them)", {}))
    return lines


def fold_lines(fold: Fold) -> list[str]:
    """Folded rows (unpinned, noisy, budget) as a count per file, the median of their ratios and
    the furthest."""
    lines = [
        f"  {fold.status.value:<10} {len(fold.rows)} row(s) (-v lists them): {fold.per_file_text()}"
    ]
    ratios = fold.ratios_text()
    if ratios is not None:
        lines.append(f"      {ratios}")
    return lines


def summary_lines(outcome: Outcome, verbose: bool, durations: int = 5) -> list[Line]:
    """The terminal summary of a session (and of `merge` and `check`): what the session
    spent on compiling first, then the verdicts, then the details, then the session's
    blocks; `durations` expensive compiles and tests are listed (0: all)."""
    view = session_view(outcome)
    spend = [] if view.spend is None else view.spend.lines()
    lines = [(text, {"bold": True}) for text in spend]
    lines.extend(verdict_lines(view, verbose))
    lines.extend(trace_profile_lines(view))
    lines.extend((text, {}) for text in duration_lines(outcome, durations, verbose))
    lines.extend(_eager_lines(outcome))
    wrapped = [short for line in lines for short in wrap(line)]
    return wrapped + closing_lines(view, verbose)


LINE_CHARS = 200  # the longest line the summary prints, but a command to copy
WRAP_CHARS = 160  # where a longer one is wrapped


def wrap(line: Line) -> list[Line]:
    """A line longer than `LINE_CHARS` as several of `WRAP_CHARS` at most, at words, each
    further one indented two more than the first; never a command to copy (printed whole,
    by `block_lines`)."""
    text, marks = line
    if len(text) <= LINE_CHARS:
        return [line]
    indent = " " * (len(text) - len(text.lstrip(" ")))
    parts = textwrap.wrap(
        text.lstrip(" "),
        WRAP_CHARS,
        initial_indent=indent,
        subsequent_indent=indent + "  ",
        break_long_words=False,
        break_on_hyphens=False,
    )
    return [(part, marks) for part in parts]


def trace_profile_lines(view: SessionView) -> list[Line]:
    """The session's trace profile (the view's rollup), then each profiled row's shares."""
    rollup = view.trace
    if rollup is None:
        return []
    lines: list[Line] = [
        ("trace profile (share of trace time by package):", {"bold": True}),
        (
            f"  session: {rollup.rows} row(s), trace {rollup.trace_s:.3f} s: "
            f"{rollup.groups_text()}",
            {},
        ),
    ]
    if rollup.files:
        lines.append((f"  top files: {rollup.files_text()}", {}))
    profiled = [row.record for row in view.rows if row.record.trace_profile]
    for record in sorted(profiled, key=lambda r: (r.cell, r.transform)):
        shares = ", ".join(
            f"{TRACE_GROUPS.get(group, group)} {share:.0%}"
            for group, share in (record.trace_profile or {}).items()
        )
        lines.append((f"  {record.name} trace {seconds(record.trace_s)}: {shares}", {}))
    return lines


def ledger_line(ledger: CallLedger) -> str:
    """A census'd test's wall seconds as compile and the rest, the compile's phases, and
    figures measured inside them (beside, never added); in plain words."""
    if ledger.wall_s is None or ledger.execute_and_python_s is None:
        head = f"compile {ledger.compile_s:.3f} s (wall not measured)"
    else:
        fraction = f" ({ledger.compile_fraction:.0%})" if ledger.compile_fraction else ""
        head = (
            f"wall {ledger.wall_s:.3f} s = compile {ledger.compile_s:.3f} s{fraction} + "
            f"running and Python {ledger.execute_and_python_s:.3f} s"
        )
    figures = (
        ("trace", ledger.trace_s),
        ("lower", ledger.lower_s),
        ("backend", ledger.backend_compile_s),
        ("other", ledger.compile_other_s),
    )
    phases = ", ".join(f"{label} {value:.3f} s" for label, value in figures if value is not None)
    inside = ", ".join(f"{_plain(name)} {value:.3f} s" for name, value in ledger.overlays.items())
    eager = (
        f"; eager dispatch {ledger.eager_compiles} ({ledger.eager_compile_s:.3f} s)"
        if ledger.eager_compiles
        else ""
    )
    return (
        f"{head}; phases {phases}"
        + (f" (beside them, not added: {inside})" if inside else "")
        + f"; {ledger.compiles} compile(s), {ledger.persistent_cache_hits} from the persistent "
        f"cache{eager}"
    )


def _plain(name: str) -> str:
    """A figure's field name in words: ``cache_retrieval_s`` -> ``cache retrieval``."""
    return name.removesuffix("_s").replace("_", " ")


def duration_lines(outcome: Outcome, count: int, verbose: bool = False) -> list[str]:
    """The `count` most expensive compiles and tests (all with 0), like pytest --durations;
    `verbose`: each census'd test's ledger beside it."""
    if not outcome.verdicts:
        return []
    limit = None if count == 0 else count
    timed = [(v.record.compile_s, v.record) for v in outcome.verdicts]
    rows = sorted(
        ((s, record) for s, record in timed if s is not None), key=lambda r: (-r[0], r[1].cell)
    )  # a row without a compile time is not among the slowest: its verdict says why
    lines = [f"slowest {len(rows[:limit])} compile(s):"]
    lines += [f"  {s:8.3f} s  {record.name} ({record.cache_state})" for s, record in rows[:limit]]
    per_test = compile_seconds_per_test(outcome)
    ledgers = {ledger.cell: ledger for ledger in outcome.ledgers}
    tests = sorted(per_test.items(), key=lambda item: (-item[1], item[0]))[:limit]
    lines.append(f"{len(tests)} test(s) with the most compile time:")
    for cell, seconds in tests:
        ledger = ledgers.get(cell)
        lines.append(f"  {seconds:8.3f} s  {cell}")
        if ledger is not None and verbose:
            lines.append(f"      {ledger_line(ledger)}")
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
    lines: list[Line] = [
        (
            f"eager dispatch (operations outside jit): {compiles} compile(s) in {len(eager)} "
            f"test(s), {spent:.3f} s; inside the ledgers' compile time, not census rows, not "
            "pinned, not counted by max_compiles unless count_eager",
            {},
        )
    ]
    session = outcome.session_s
    cleared = [ledger for ledger in outcome.ledgers if ledger.caches_cleared_because]
    cleared_s = sum(ledger.eager_compile_s for ledger in cleared)
    session = None if session is None else session * outcome.workers  # the workers' seconds
    if session and cleared_s > EAGER_SHARE_WORTH_A_HINT * session:
        # Clearing keeps counts order-independent, and drops eager executables too: name
        # what made the plugin clear, so the user can see whether it is theirs to change.
        reasons = Counter(ledger.caches_cleared_because for ledger in cleared)
        reason, times = reasons.most_common(1)[0]
        lines.append(
            (
                f"  {cleared_s / session:.0%} of the session in {len(cleared)} census'd test(s) "
                "that started with JAX's in-process caches cleared and compiled their eager "
                f"operations again, {times} of them because {reason} "
                "(docs/census.md#each-test-compiles-what-it-uses)",
                MARKUP[Tone.WARN],
            )
        )
    return lines


STALE_BRIEF = 5  # stale pins listed at default verbosity


def sentence(block: Block) -> str:
    """A block's text with the terminal's words for what it does to the session."""
    if block.fails and block.kind is not BlockKind.PIN_ERROR:
        return f"{block.text}; {FAILS}."
    if block.reported_only:
        return f"{block.text}; {block.reported_only}."
    if block.kind is BlockKind.WARNING:
        return f"warning: {block.text}."
    if block.kind is BlockKind.CLOBBER:
        return f"warning: {block.text}"
    if block.kind in (BlockKind.UPGRADE, BlockKind.STATUS, BlockKind.ALWAYS_COLD):
        return f"{block.text}."
    return block.text


def block_lines(block: Block, view: SessionView, verbose: bool) -> list[Line]:
    lines = [short for line in _block_text(block, verbose) for short in wrap(line)]
    if block.advice is not None:  # the command, or in CI the CI's way (one sentence)
        indent = "  " if block.kind is BlockKind.UPGRADE else ""
        lines.append((f"{indent}{block.way_back()}", MARKUP[block.tone]))
    return lines


def _block_text(block: Block, verbose: bool) -> list[Line]:
    """A block's sentence and details (not its command)."""
    marks = MARKUP[block.tone]
    lines: list[Line] = [(sentence(block), marks)]
    if block.kind in (BlockKind.STALE, BlockKind.ALWAYS_COLD):
        shown = block.details if verbose else block.details[:STALE_BRIEF]
        lines += (
            [
                (f"  {detail} in {path}", {})
                for detail, path in zip(shown, block.paths, strict=False)
            ]
            if block.paths
            else [(f"  {detail}", {}) for detail in shown]
        )
        if len(shown) < len(block.details):
            lines.append((f"  ... {len(block.details) - len(shown)} more (-v lists them)", {}))
    elif block.kind is BlockKind.COMPILE_COUNT:
        lines += [(f"    {detail}", {}) for detail in block.details]
    else:
        lines += [(f"  {detail}", marks) for detail in block.details]
    return lines


def closing_lines(view: SessionView, verbose: bool = False) -> list[Line]:
    """The session's blocks in the view's order; the counts before the status sentences."""
    lines: list[Line] = []
    counted = False
    for block in view.blocks:
        if block.kind is BlockKind.STATUS and not counted:
            lines.extend(_counts_line(view))
            counted = True
        lines.extend(block_lines(block, view, verbose))
    if not counted and not view.outcome.pin_update:
        lines.extend(_counts_line(view))
    return lines


def _counts_line(view: SessionView) -> list[Line]:
    """The rows per status, then where the reproducer bundles are (the re-pin command
    stays the summary's last line)."""
    listed = view.counts_text()
    counts: list[Line] = [(f"compile rows: {listed}", {"bold": True})] if listed else []
    return counts + ([(view.reproducers, {})] if view.reproducers is not None else [])


class TerminalSummary:
    """The gate's section of pytest's terminal summary (controller only)."""

    def __init__(self, config: pytest.Config, durations: int) -> None:
        self.config = config
        self.durations = durations

    @pytest.hookimpl(tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        outcome = outcome_of(self.config)
        if outcome is None:
            return
        name_on_closing_line(terminalreporter, outcome)
        if not outcome.has_news():
            return
        summary_section(terminalreporter)
        verbose = self.config.get_verbosity() > 0
        for text, marks in summary_lines(outcome, verbose, self.durations):
            terminalreporter.write_line(text, **marks)


GATE_FAILED = "compile gate failed"  # the session failed on something other than a row


def closing_line_entries(outcome: Outcome) -> dict[str, list[object]]:
    """What a failing gate adds to pytest's closing line, by the word it is counted under:
    its failing rows by status (``3 compile DRIFT``), or, failing on something else (a
    required setting, a pin file not written), ``1 compile gate failed``. A passing gate adds
    nothing."""
    if not outcome.failed:
        return {}
    entries: dict[str, list[object]] = {}
    for verdict in sorted(outcome.failing(), key=lambda verdict: verdict.status.severity):
        entries.setdefault(f"compile {verdict.status.value}", []).append(verdict)
    return entries or {GATE_FAILED: [outcome]}


def name_on_closing_line(terminalreporter: pytest.TerminalReporter, outcome: Outcome) -> None:
    """A failing gate is counted on pytest's closing line (``2 passed, 3 compile DRIFT in
    4.2s``), which pytest then shows in its failure colour: it colours the line red while its
    stats hold a ``failed`` entry, here an empty one (no test is counted as failed)."""
    entries = closing_line_entries(outcome)
    if not entries:
        return
    for word, items in entries.items():
        terminalreporter.stats.setdefault(word, []).extend(items)
    terminalreporter.stats.setdefault("failed", [])


SUGGESTED_BUDGETS = "compile budgets observed in this session (paste each line above its test):"


class BudgetSuggestions:
    """``--compile-suggest-budgets``: each census'd test's compile count as the marker line
    to paste, after the gate's summary (controller only)."""

    def __init__(self, config: pytest.Config, count_eager: bool) -> None:
        self.config = config
        self.count_eager = count_eager

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        outcome = outcome_of(self.config)
        lines = [] if outcome is None else suggested_budgets(outcome.ledgers, self.count_eager)
        summary_section(terminalreporter)
        if not lines:
            terminalreporter.write_line(
                "compile budgets: no census'd test compiled (--compile-census records every "
                "test's compiles)"
            )
            return
        terminalreporter.write_line(SUGGESTED_BUDGETS)
        for line in lines:
            terminalreporter.write_line(line)
