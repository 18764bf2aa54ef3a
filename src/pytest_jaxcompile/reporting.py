"""What the session concluded, as terminal lines and as a JSON report."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_jaxcompile.pins import atomic_write_text
from pytest_jaxcompile.records import ComparabilityKey, CompileRecord
from pytest_jaxcompile.verdicts import StalePin, Status, Thresholds, Verdict

REPORT_KIND = "jaxcompile_report"
REPORT_SCHEMA_VERSION = 1
MAX_CELLS_IN_COMMAND = 3

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
    text += f" {_seconds(record.compile_s)}"
    if verdict.pin is not None:
        text += f", pin {_seconds(verdict.pin.compile_s)}"
        if verdict.ratio is not None:
            text += f" ({verdict.ratio:.2f}x"
            if verdict.tolerance is not None:
                text += f", tolerance {verdict.tolerance:.0%}"
            text += ")"
    if verdict.status is Status.NOT_JUDGED:
        text += f" [{record.cache_state}]"
    return text


_MARKUP: dict[Status, Markup] = {
    Status.DRIFT: {"red": True, "bold": True},
    Status.IMPROVED: {"green": True},
    Status.UNPINNED: {"yellow": True},
    Status.NOT_JUDGED: {},
    Status.OK: {},
}


def summary_lines(outcome: SessionOutcome, verbose: bool) -> list[Line]:
    """The terminal summary: rows grouped by comparability key, never ranked across keys."""
    lines: list[Line] = []
    by_key: dict[ComparabilityKey, list[Verdict]] = {}
    for verdict in outcome.verdicts:
        by_key.setdefault(verdict.record.key, []).append(verdict)
    order = [Status.DRIFT, Status.IMPROVED, Status.UNPINNED, Status.NOT_JUDGED, Status.OK]
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
    lines.extend(_stale_lines(outcome))
    lines.extend(_lost_lines(outcome))
    lines.extend(_closing_lines(outcome))
    return lines


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
    counts = ", ".join(
        f"{outcome.count(status)} {status.value}" for status in Status if outcome.count(status)
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
    drift = [v for v in outcome.verdicts if v.status is Status.DRIFT]
    improved = [v for v in outcome.verdicts if v.status is Status.IMPROVED]
    unpinned = [v for v in outcome.verdicts if v.status is Status.UNPINNED]
    if counts:
        lines.append((f"compile rows: {counts}", {"bold": True}))
    thresholds = outcome.thresholds
    if drift:
        lines.append(
            (f"DRIFT: {len(drift)} row(s) compiled slower than their pin by more than the "
             f"tolerance and by more than {thresholds.floor_s:g} s; the session fails.",
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
        "compile_s": record.compile_s,
        "pin_compile_s": None if verdict.pin is None else verdict.pin.compile_s,
        "ratio": verdict.ratio,
        "tolerance": verdict.tolerance,
        "pin_file": None if verdict.pin_file is None else relative(verdict.pin_file, rootdir),
        "note": verdict.note,
    }


def build_report(
    outcome: SessionOutcome, records: Iterable[CompileRecord], plugin_version: str
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
        ("jax_version", record.jax_version),
        ("mixed_precision", "true" if record.mixed_precision else "false"),
    ]
    return [(f"{prefix}.{name}", str(value)) for name, value in values if value is not None]
