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


# What the gate itself does after the tests (Outcome.gate_s), as every output names it.
COUNTING, PAIRING, PROFILING = "counting instructions", "pairing", "profiling"
GATE_WORKS = (COUNTING, PAIRING, PROFILING)  # the order every output names them in
PROFILE_OFF = "-o compile_profile_failing=never skips it"


def fresh_compiles(records: Iterable[CompileRecord]) -> tuple[int, float]:
    """The compiles the gate added inside the tests: each row's twin (gate/twins.py: a
    changed module compiled afresh, the persistent cache bypassed, or in a pin update from
    the cache), as (rows, seconds). Workers' rows and merged reports' add up alike."""
    twins = [record.twin_compile_s for record in records if record.twin_compile_s is not None]
    return len(twins), sum(twins)


@dataclass(frozen=True)
class Spend:
    """What the session spent compiling, and what the gate itself spent, as every output
    says it: the tests' compile seconds, the gate's fresh compiles of changed modules
    inside the tests, its works after the tests; each beside the session's wall seconds,
    or said summed over the workers where pytest-xdist's workers added them up."""

    compile_s: float  # the tests' compile seconds (`compile_seconds_per_test`)
    rows: int  # compile rows
    states: tuple[tuple[str, int], ...]  # rows per cache state, the most first
    fresh_rows: int  # rows whose module the gate compiled afresh (their twins)
    fresh_s: float  # those compiles' wall seconds
    gate_s: tuple[tuple[str, float], ...]  # after the tests, by work (`GATE_WORKS` order)
    profiled_rows: int
    session_s: float | None  # the session's wall seconds
    workers: int  # > 1: the seconds above are summed over the workers
    cache_saved_s: float | None  # JAX's figure

    @property
    def total_compile_s(self) -> float:
        """Every compile of the session: the tests' and the gate's fresh ones."""
        return self.compile_s + self.fresh_s

    @property
    def gate_total_s(self) -> float:
        """The gate's own seconds: its fresh compiles and its works after the tests."""
        return self.fresh_s + sum(seconds for _, seconds in self.gate_s)

    def _beside_session(self) -> str:
        """`` summed over 2 workers, session 16.0 s wall`` where workers added seconds up;
        else `` of the session's 20.6 s (79%)``: never a sum beside a smaller wall unsaid."""
        if self.workers > 1:
            text = f" summed over {self.workers} workers"
            return text + (f", session {self.session_s:.1f} s wall" if self.session_s else "")
        if not self.session_s:
            return ""
        share = self.total_compile_s / self.session_s
        return f" of the session's {self.session_s:.1f} s ({share:.0%})"

    def fresh_text(self) -> str:
        """``the gate's fresh compiles of 4 changed module(s) 13.0 s``."""
        return (
            f"the gate's fresh compiles of {self.fresh_rows} changed module(s) {self.fresh_s:.1f} s"
        )

    def compile_line(self) -> str:
        """``compile time: 16.2 s of the session's 20.6 s (79%), 4 compile row(s): 4 warm;
        of it, the gate's fresh compiles of 4 changed module(s) 13.0 s (the persistent cache
        bypassed)``."""
        text = f"compile time: {self.total_compile_s:.1f} s" + self._beside_session()
        text += f", {self.rows} compile row(s): " + ", ".join(
            f"{count} {state}" for state, count in self.states
        )
        if self.fresh_rows:
            text += f"; of it, {self.fresh_text()} (the persistent cache bypassed)"
        if self.cache_saved_s and self.cache_saved_s > 0:
            text += (
                f"; the persistent cache saved at least {self.cache_saved_s:.1f} s (JAX's figure)"
            )
        return text

    def gate_line(self) -> str | None:
        """``after the tests, the gate itself spent 67.7 s: pairing 48.7 s, profiling 1
        row(s) 19.0 s (-o compile_profile_failing=never skips it)``; with fresh compiles of
        changed modules, ``the gate itself spent 30.5 s: fresh compiles of 4 changed
        module(s) in their tests 13.0 s; after the tests, pairing 17.5 s``; under xdist
        ``... spent 21.4 s summed over 2 workers (session 16.0 s wall): ...``. Apart from the
        tests' compile time, part of the session's seconds; None when the gate added
        nothing."""
        if not self.gate_s and not self.fresh_rows:
            return None
        works = []
        for work, seconds in self.gate_s:
            if work == PROFILING:
                works.append(
                    f"profiling {self.profiled_rows} row(s) {seconds:.1f} s ({PROFILE_OFF})"
                )
            else:
                works.append(f"{work} {seconds:.1f} s")
        spent = f"{self.gate_total_s:.1f} s"
        if self.workers > 1:
            spent += f" summed over {self.workers} workers"
            spent += f" (session {self.session_s:.1f} s wall)" if self.session_s else ""
        if not self.fresh_rows:
            return f"after the tests, the gate itself spent {spent}: " + ", ".join(works)
        text = (
            f"the gate itself spent {spent}: fresh compiles of {self.fresh_rows} changed "
            f"module(s) in their tests {self.fresh_s:.1f} s"
        )
        return text + (f"; after the tests, {', '.join(works)}" if works else "")

    def lines(self) -> list[str]:
        own = self.gate_line()
        return [self.compile_line()] if own is None else [self.compile_line(), own]

    def to_dict(self) -> dict[str, object]:
        """The JSON report's ``spend``: these figures as every output says them."""
        return {
            "compile_s": round(self.compile_s, 6),
            "fresh_compiles": {"rows": self.fresh_rows, "seconds": round(self.fresh_s, 6)},
            "gate_total_s": round(self.gate_total_s, 6),
            "session_s": self.session_s,
            "summed_over_workers": self.workers if self.workers > 1 else None,
            "lines": self.lines(),
        }


def session_spend(outcome: Outcome) -> Spend | None:
    """What the session spent (None: a pin update, or no compile row)."""
    if not outcome.verdicts or outcome.pin_update:
        return None
    records = [verdict.record for verdict in outcome.verdicts]
    states = Counter(record.cache_state for record in records)
    fresh_rows, fresh_s = fresh_compiles(records)
    spent = outcome.gate_s
    return Spend(
        compile_s=sum(compile_seconds_per_test(outcome).values()),
        rows=len(records),
        states=tuple(sorted(states.items(), key=lambda item: -item[1])),
        fresh_rows=fresh_rows,
        fresh_s=fresh_s,
        gate_s=tuple(
            (work, spent[work])
            for work in sorted(spent, key=lambda work: (*GATE_WORKS, work).index(work))
        ),
        profiled_rows=outcome.profiled_rows,
        session_s=outcome.session_s,
        workers=outcome.workers,
        cache_saved_s=outcome.cache_saved_s,
    )


def spend_lines(outcome: Outcome) -> list[str]:
    """What the session spent compiling, its share of the session, the cache states, and
    what the gate itself spent (`Spend`)."""
    spend = session_spend(outcome)
    return [] if spend is None else spend.lines()


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
