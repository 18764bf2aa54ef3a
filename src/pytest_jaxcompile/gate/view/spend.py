"""Where the session's time went: its compile seconds and their share of the session, and
the trace profile (``compile_trace_profile``) rolled up by package group and file.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from pytest_jaxcompile.gate.outcome import Outcome
from pytest_jaxcompile.records import CompileRecord


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
    own = gate_cost_line(outcome)
    return [text] if own is None else [text, own]


# What the gate itself does after the tests (Outcome.gate_s), as every output names it.
COUNTING, PAIRING, PROFILING = "counting instructions", "pairing", "profiling"
GATE_WORKS = (COUNTING, PAIRING, PROFILING)  # the order every output names them in
PROFILE_OFF = "-o compile_profile_failing=never skips it"


def gate_cost_line(outcome: Outcome) -> str | None:
    """``after the tests, the gate itself spent 67.7 s: pairing 48.7 s, profiling 1 row(s)
    19.0 s (-o compile_profile_failing=never skips it)``: apart from the tests' compile
    time, part of the session's seconds (under xdist, the workers' summed); each work that
    ran, in a fixed order; None when the gate did nothing after the tests."""
    spent = outcome.gate_s
    if not spent:
        return None
    parts = []
    for work in sorted(spent, key=lambda work: (*GATE_WORKS, work).index(work)):
        if work == PROFILING:
            parts.append(
                f"profiling {outcome.profiled_rows} row(s) {spent[work]:.1f} s ({PROFILE_OFF})"
            )
        else:
            parts.append(f"{work} {spent[work]:.1f} s")
    total = sum(spent.values())
    return f"after the tests, the gate itself spent {total:.1f} s: " + ", ".join(parts)


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
