"""What the session concluded, as terminal lines and as a JSON report."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_jaxcompile.backends.jax.guard import Clobber
from pytest_jaxcompile.gate.pins import atomic_write_text
from pytest_jaxcompile.gate.verdicts import (
    METRIC_CPU,
    CompileCountChange,
    StalePin,
    Status,
    Thresholds,
    Verdict,
    compared_seconds,
)
from pytest_jaxcompile.records import RESIDUAL_NAME, CallLedger, ComparabilityKey, CompileRecord

REPORT_KIND = "jaxcompile_report"
REPORT_SCHEMA_VERSION = 1
MAX_CELLS_IN_COMMAND = 3
LEDGER_LINES_BRIEF = 5  # without -v, the ledgers of the tests that compiled longest

Markup = dict[str, bool]
Line = tuple[str, Markup]


@dataclass
class SessionOutcome:
    """Everything the summary prints; decided in pytest_sessionfinish."""

    rootdir: Path
    pins_dir: Path
    thresholds: Thresholds
    pin_update: bool
    fail_on_improvement: bool
    verdicts: list[Verdict] = field(default_factory=list)
    stale: list[StalePin] = field(default_factory=list)
    ledgers: list[CallLedger] = field(default_factory=list)
    compile_count_changes: list[CompileCountChange] = field(default_factory=list)
    clobbers: list[Clobber] = field(default_factory=list)
    pins_written: list[Path] = field(default_factory=list)
    pin_error: str | None = None  # the pin update could not be written
    failed: bool = False
    ran_cells: list[str] = field(default_factory=list)  # tests whose call phase ran
    environments: list[tuple[str, str]] = field(default_factory=list)  # (hardware, jax)
    lost: list[str] = field(default_factory=list)  # workers or reports whose rows are missing

    def count(self, status: Status) -> int:
        return sum(1 for verdict in self.verdicts if verdict.status is status)

    def has_news(self) -> bool:
        """Whether there is anything to show: a session that measured nothing, found no
        stale pin and wrote no pin adds no summary anywhere."""
        return bool(
            self.verdicts or self.stale or self.pins_written or self.lost or self.pin_error
            or self.ledgers or self.clobbers
        )


def relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def repin_command(cells: Iterable[str]) -> str:
    unique = sorted(set(cells))
    if len(unique) > MAX_CELLS_IN_COMMAND:
        unique = sorted({cell.split("::", 1)[0] for cell in unique})
    quoted = " ".join(f"'{cell}'" if "[" in cell or " " in cell else cell for cell in unique)
    return f"pytest --compile-pin-update {quoted}".rstrip()


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} s"


def _row(verdict: Verdict) -> str:
    record = verdict.record
    text = f"{verdict.status.value:<10} {record.cell} [{record.transform}]"
    if verdict.pin is not None:
        measured, pinned = compared_seconds(record, verdict.pin, verdict.metric)
        on_cpu = verdict.metric == METRIC_CPU and None not in (
            record.compile_cpu_s, verdict.pin.compile_cpu_s
        )
        cpu = " cpu" if on_cpu else ""
        text += f" {_seconds(measured)}{cpu}, pin {_seconds(pinned)}{cpu}"
        if verdict.ratio is not None:
            text += f" ({verdict.ratio:.2f}x"
            if verdict.tolerance is not None:
                text += f", tolerance {verdict.tolerance:.0%}"
            text += ")"
    else:
        text += f" {_seconds(record.compile_s)}"
    if record.compile_spread_s is not None and record.compile_samples_s:
        repeats = len(record.compile_samples_s)
        text += f" [{repeats} repeats, spread {record.compile_spread_s:.3f} s]"
    if verdict.status is Status.NOT_JUDGED:
        text += f" [{record.cache_state}]"
    return text


_MARKUP: dict[Status, Markup] = {
    Status.MISS: {"red": True, "bold": True},
    Status.GREW: {"red": True, "bold": True},
    Status.DRIFT: {"red": True, "bold": True},
    Status.IMPROVED: {"green": True},
    Status.UNPINNED: {"yellow": True},
    Status.NOISY: {"yellow": True},
    Status.NOT_JUDGED: {},
    Status.OK: {},
}


def summary_lines(outcome: SessionOutcome, verbose: bool) -> list[Line]:
    """The terminal summary: rows grouped by comparability key, never ranked across keys."""
    lines: list[Line] = []
    by_key: dict[ComparabilityKey, list[Verdict]] = {}
    for verdict in outcome.verdicts:
        by_key.setdefault(verdict.record.key, []).append(verdict)
    order = list(Status)  # severity order: failing verdicts first
    for key in sorted(by_key):
        verdicts = sorted(
            by_key[key],
            key=lambda v: (order.index(v.status), v.record.cell, v.record.transform),
        )
        pin_file = next((v.pin_file for v in verdicts if v.pin_file is not None), None)
        header = key.describe()
        if pin_file is not None:
            header += f"  ({relative(pin_file, outcome.rootdir)})"
        lines.append((header, {"bold": True}))
        hidden = 0
        for verdict in verdicts:
            if verdict.status is Status.OK and not verbose:
                hidden += 1
                continue
            lines.append(("  " + _row(verdict), _MARKUP[verdict.status]))
            if verdict.note:
                lines.append(("      " + verdict.note, {}))
        if hidden:
            lines.append((f"  ok         {hidden} row(s) within tolerance (-v lists them)", {}))
    lines.extend(_trace_profile_lines(outcome))
    lines.extend(_ledger_lines(outcome, verbose))
    lines.extend(_stale_lines(outcome))
    lines.extend(_compile_count_lines(outcome))
    for clobber in outcome.clobbers:
        if clobber.fails:
            lines.append((f"settings clobbered (a required setting; the session fails): "
                          f"{clobber.describe()}", {"red": True, "bold": True}))
        else:
            lines.append((f"warning: settings clobbered: {clobber.describe()}", {"yellow": True}))
    lines.extend(_lost_lines(outcome))
    lines.extend(_closing_lines(outcome))
    return lines


_GROUP_LABELS = {
    "jax": "jax", "stdlib_numpy": "stdlib+numpy", "project": "project", "other": "other",
}


def _trace_profile_lines(outcome: SessionOutcome) -> list[Line]:
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
                      f"{_seconds(record.trace_s)}: {shares}", {}))
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
    labels = ("dynamo", "aot_autograd", "inductor") if ledger.framework == "torch" else (
        "trace", "lower", "backend"
    )
    figures = (ledger.trace_s, ledger.lower_s, ledger.backend_compile_s)
    phases = ", ".join(f"{label} {value:.3f}" for label, value in zip(labels, figures, strict=True))
    overlays = "".join(f", {name} {value:.3f}" for name, value in ledger.overlays.items())
    return (
        f"{head} [{phases}{overlays}]; {ledger.compiles} compile(s), "
        f"{ledger.persistent_cache_hits} from the persistent cache"
    )


def _ledger_lines(outcome: SessionOutcome, verbose: bool) -> list[Line]:
    if not outcome.ledgers:
        return []
    ledgers = sorted(outcome.ledgers, key=lambda ledger: (-ledger.compile_s, ledger.cell))
    shown = ledgers if verbose else ledgers[:LEDGER_LINES_BRIEF]
    lines: list[Line] = [("compile ledger per test:", {"bold": True})]
    lines.extend((f"  {ledger.cell}: {ledger_line(ledger)}", {}) for ledger in shown)
    if len(shown) < len(ledgers):
        lines.append((f"  ... {len(ledgers) - len(shown)} more test(s) (-v lists them)", {}))
    return lines


def _compile_count_lines(outcome: SessionOutcome) -> list[Line]:
    return [
        (f"compile count changed: {change.cell}: {change.compiles} backend compile(s), "
         f"pinned {change.pinned}", {"yellow": True})
        for change in outcome.compile_count_changes
    ]


def _lost_lines(outcome: SessionOutcome) -> list[Line]:
    return [
        (f"compile rows missing: {lost}", {"red": True, "bold": True}) for lost in outcome.lost
    ]


def _stale_lines(outcome: SessionOutcome) -> list[Line]:
    if not outcome.stale:
        return []
    lines: list[Line] = [
        (f"stale pins: {len(outcome.stale)} pinned transform(s) of tests that ran but "
         "measured nothing (delete them from the pin file if the transform is gone):",
         {"yellow": True}),
    ]
    lines.extend(
        (f"  {stale.cell} [{stale.transform}] in {relative(stale.pin_file, outcome.rootdir)}", {})
        for stale in outcome.stale
    )
    return lines


def _closing_lines(outcome: SessionOutcome) -> list[Line]:
    lines: list[Line] = []
    in_count_order = [Status.OK, *(status for status in Status if status is not Status.OK)]
    counts = ", ".join(
        f"{outcome.count(status)} {status.value}"
        for status in in_count_order
        if outcome.count(status)
    )
    if outcome.pin_error is not None:
        lines.append((f"pins NOT updated: {outcome.pin_error}", {"red": True, "bold": True}))
        return lines
    if outcome.pin_update:
        written = ", ".join(relative(path, outcome.rootdir) for path in outcome.pins_written)
        lines.append(
            (f"pins updated: {written}" if written else "pins updated: nothing changed",
             {"green": True})
        )
        return lines
    missed = [v for v in outcome.verdicts if v.status is Status.MISS]
    grew = [v for v in outcome.verdicts if v.status is Status.GREW]
    drift = [v for v in outcome.verdicts if v.status is Status.DRIFT]
    improved = [v for v in outcome.verdicts if v.status is Status.IMPROVED]
    unpinned = [v for v in outcome.verdicts if v.status is Status.UNPINNED]
    if counts:
        lines.append((f"compile rows: {counts}", {"bold": True}))
    thresholds = outcome.thresholds
    if missed:
        lines.append(
            (f"MISS: {len(missed)} row(s) compiled cold although their module is unchanged "
             "since its warm pin (--compile-expect-warm); the session fails.",
             {"red": True, "bold": True})
        )
    if grew:
        lines.append(
            (f"GREW: {len(grew)} row(s) compiled a module that grew beyond its op-count limit; "
             "the session fails.", {"red": True, "bold": True})
        )
        lines.append(
            ("If the growth is intended, re-pin and commit the pin files: "
             + repin_command(v.record.cell for v in grew), {"red": True})
        )
    if drift:
        consequence = (
            "reported only (--compile-time-advisory)" if thresholds.time_advisory
            else "the session fails"
        )
        lines.append(
            (f"DRIFT: {len(drift)} row(s) compiled slower than their pin by more than the "
             f"tolerance and by more than {thresholds.floor_s:g} s; {consequence}.",
             {"red": True, "bold": True})
        )
        lines.append(
            ("If the slowdown is intended, re-pin and commit the pin files: "
             + repin_command(v.record.cell for v in drift), {"red": True})
        )
    if improved:
        lines.append(
            (f"improved: {len(improved)} row(s) compiled faster than their pin; re-pin to lock "
             "it in: " + repin_command(v.record.cell for v in improved)
             + (" (failing: --compile-fail-on-improvement)" if outcome.fail_on_improvement
                else ""),
             {"green": True})
        )
    if unpinned:
        lines.append(
            (f"unpinned: {len(unpinned)} row(s) have no pin under their key; pin them with: "
             + repin_command(v.record.cell for v in unpinned), {"yellow": True})
        )
    return lines


def verdict_to_dict(verdict: Verdict, rootdir: Path) -> dict[str, Any]:
    record = verdict.record
    return {
        "cell": record.cell,
        "transform": record.transform,
        "key": record.key.to_dict(),
        "status": verdict.status.value,
        "metric": verdict.metric,
        "compile_s": record.compile_s,
        "compile_cpu_s": record.compile_cpu_s,
        "pin_compile_s": None if verdict.pin is None else verdict.pin.compile_s,
        "pin_compile_cpu_s": None if verdict.pin is None else verdict.pin.compile_cpu_s,
        "ratio": verdict.ratio,
        "tolerance": verdict.tolerance,
        "pin_file": None if verdict.pin_file is None else relative(verdict.pin_file, rootdir),
        "note": verdict.note,
    }


def build_report(
    outcome: SessionOutcome,
    records: Iterable[CompileRecord],
    ledgers: Iterable[CallLedger],
    plugin_version: str,
) -> dict[str, Any]:
    """The JSON report; its schema is documented in docs/report-schema.md."""
    return {
        "report_kind": REPORT_KIND,
        "schema_version": REPORT_SCHEMA_VERSION,
        "plugin_version": plugin_version,
        "gate": "fail" if outcome.failed else "pass",
        "thresholds": {
            "tolerance": outcome.thresholds.tolerance,
            "floor_s": outcome.thresholds.floor_s,
            "max_ops_growth": outcome.thresholds.max_ops_growth,
            "time_advisory": outcome.thresholds.time_advisory,
            "expect_warm": outcome.thresholds.expect_warm,
            "metric": outcome.thresholds.metric,
            "max_load": outcome.thresholds.max_load,
            "strict": outcome.thresholds.strict,
        },
        "fail_on_improvement": outcome.fail_on_improvement,
        "pin_update": outcome.pin_update,
        "pin_error": outcome.pin_error,
        "rootdir": str(outcome.rootdir),
        "ran_cells": sorted(outcome.ran_cells),
        "environments": [
            {"hardware": hardware, "jax_version": jax_version}
            for hardware, jax_version in sorted(set(outcome.environments))
        ],
        "lost": list(outcome.lost),
        "records": [record.to_dict() for record in records],
        "ledgers": [ledger.to_dict() for ledger in sorted(ledgers, key=lambda x: x.cell)],
        "clobbers": [dataclasses.asdict(clobber) for clobber in outcome.clobbers],
        "compile_count_changes": [
            {"cell": c.cell, "compiles": c.compiles, "pinned": c.pinned}
            for c in outcome.compile_count_changes
        ],
        "verdicts": [verdict_to_dict(v, outcome.rootdir) for v in outcome.verdicts],
        "stale": [
            {
                "cell": stale.cell,
                "transform": stale.transform,
                "key": stale.key.to_dict(),
                "pin_file": relative(stale.pin_file, outcome.rootdir),
            }
            for stale in outcome.stale
        ],
    }


def write_report(path: Path, report: dict[str, Any]) -> None:
    atomic_write_text(path, json.dumps(report, indent=2, sort_keys=True) + "\n")


def row_text(verdict: Verdict) -> str:
    """One verdict's line as the summary prints it (also `pytest-jaxcompile check`'s)."""
    return _row(verdict)
JUNIT_PROPERTY_PREFIX = "jaxcompile"


def junit_properties(record: CompileRecord) -> list[tuple[str, str]]:
    """A measured row as test properties (JUnit XML ``<property>`` elements).

    Names are ``jaxcompile.<transform>.<field>``; seconds are written in full precision.
    """
    prefix = f"{JUNIT_PROPERTY_PREFIX}.{record.transform}"
    values: list[tuple[str, object]] = [
        ("compile_s", record.compile_s),
        ("trace_s", record.trace_s),
        ("lower_s", record.lower_s),
        ("cache_state", record.cache_state),
        ("hardware", record.hardware),
        *(
            [("jax_version", record.jax_version)] if record.framework == "jax"
            else [("framework", record.framework), (f"{record.framework}_version",
                                                    record.key.jax_version)]
        ),
        ("mixed_precision", "true" if record.mixed_precision else "false"),
    ]
    return [(f"{prefix}.{name}", str(value)) for name, value in values if value is not None]
