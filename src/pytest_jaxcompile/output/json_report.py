"""The JSON report (``--compile-report``, ``merge --write-report``): written and read here.

Writing renders an `Outcome` with its records and ledgers; reading validates a report for
``pytest-jaxcompile merge``, each record with `records.check_record_data` (the checks every
reader applies). Bad input is a `ReportError` naming the file (and, where it can, the line or
the record), never a traceback or a half-read report. The format is documented in
docs/report-schema.md.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_jaxcompile._io import InputError, atomic_write_text, read_text, relative
from pytest_jaxcompile._numbers import (
    NumberError,
    finite_number,
    optional_number,
    whole_number,
)
from pytest_jaxcompile._version import __version__
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.notes import op_changes
from pytest_jaxcompile.gate.outcome import Outcome
from pytest_jaxcompile.gate.paired import pairing_cost
from pytest_jaxcompile.gate.pins import MEMORY_PIN_FIELDS, Pin
from pytest_jaxcompile.gate.view import BlockKind, RowView, TraceRollup, TraceShare, session_view
from pytest_jaxcompile.options import THRESHOLD_OPTIONS, OptionError, parse_value
from pytest_jaxcompile.output import fail_session, outcome_of, summary_section
from pytest_jaxcompile.record_checks import RecordDataError, check_ledger_data, check_record_data
from pytest_jaxcompile.records import RECORD_KIND, REPORT_KIND, CallLedger, CompileRecord
from pytest_jaxcompile.records import SCHEMA_VERSION as RECORD_SCHEMA_VERSION

Records = tuple[list[CompileRecord], list[CallLedger]]  # a session's rows, in report order

# 2: each verdict has `fails` and the figures it compared (`measured`, `pinned`, `unit`,
# `metric` names the metric compared, `limit`); verdicts are in the view's order. Reports of
# version 1 are read alike (merge reads their records, not their verdicts).
REPORT_SCHEMA_VERSION = 2

# --------------------------------------------------------------------------- writing


def verdict_to_dict(row: RowView, rootdir: Path) -> dict[str, Any]:
    """One row of the view: its verdict, whether it fails, and the figures it compared."""
    verdict, record, nearest, figures = row.verdict, row.record, row.verdict.nearest, row.figures
    return {
        "cell": record.cell,
        "transform": record.transform,
        "variant": record.variant,
        "key": record.key.to_dict(),
        "judged_key": row.key.to_dict(),
        "status": verdict.status.value,
        "fails": row.fails,
        "metric": figures.metric.name,
        "unit": figures.unit,
        "measured": figures.measured,
        "pinned": figures.pinned,
        "ratio": figures.ratio,
        "limit": figures.limit,
        "compile_s": record.compile_s,
        "compile_cpu_s": record.compile_cpu_s,
        "pin_compile_s": None if verdict.pin is None else verdict.pin.compile_s,
        "pin_compile_cpu_s": None if verdict.pin is None else verdict.pin.compile_cpu_s,
        **_pinned_memory(verdict.pin),
        "tolerance": verdict.tolerance,
        "pin_file": None if verdict.pin_file is None else relative(verdict.pin_file, rootdir),
        "note": verdict.note,
        "phase": verdict.phase,
        "op_changes": [] if verdict.pin is None else op_changes(record, verdict.pin),
        "cache_lost": verdict.cache_lost,
        "reproducer": row.reproducer,
        "pin_outrun": verdict.pin_outrun,
        "nearest": None
        if nearest is None
        else {
            "key": nearest.key.to_dict(),
            "relation": nearest.relation,
            "pin_compile_s": nearest.pin.compile_s,
            "ratio": nearest.ratio,
        },
    }


def _pinned_memory(pin: Pin | None) -> dict[str, Any]:
    """``pin_compiled_temp_bytes``, ``pin_flops``, ``pin_compile_rss_growth_mib``: what the
    memory gates compared the record's own figures with (null: not pinned)."""
    return {
        f"pin_{name}": None if pin is None else getattr(pin, name) for name in MEMORY_PIN_FIELDS
    }


def build_report(
    outcome: Outcome,
    records: Iterable[CompileRecord],
    ledgers: Iterable[CallLedger],
    plugin_version: str,
) -> dict[str, Any]:
    """The JSON report; its schema is documented in docs/report-schema.md."""
    view = session_view(outcome)
    records = list(records)
    cost = (
        None if outcome.pin_update else pairing_cost(records, outcome.thresholds, outcome.workers)
    )
    return {
        "report_kind": REPORT_KIND,
        "schema_version": REPORT_SCHEMA_VERSION,
        "plugin_version": plugin_version,
        "gate": "fail" if outcome.failed else "pass",
        "thresholds": dataclasses.asdict(outcome.thresholds),
        "fail_on_improvement": outcome.thresholds.fail_on_improvement,
        "pin_update": outcome.pin_update,
        "pin_error": outcome.pin_error,
        "rootdir": str(outcome.rootdir),
        "session_s": outcome.session_s,
        "gate_s": dict(outcome.gate_s),
        "spend": None if view.spend is None else view.spend.to_dict(),
        "profiled_rows": outcome.profiled_rows,
        "workers": outcome.workers,
        "ran_cells": sorted(outcome.ran_cells),
        "environments": [
            {"hardware": hardware, "jax_version": version}
            for hardware, version in sorted(set(outcome.environments))
        ],
        "lost": list(outcome.lost),
        "repin_arguments": list(outcome.repin_arguments),
        "repin_environment": list(outcome.repin_environment),
        "repin_keeps": {cell: list(options) for cell, options in outcome.repin_keeps.items()},
        "github_actions": outcome.github_actions,
        "accept_label": outcome.accept_label,
        "way_back": [
            {
                "kind": block.kind.value,
                "status": None if block.status is None else block.status.value,
                "advice": block.advice,
                "command": block.command,
            }
            for block in view.blocks
            if block.advice is not None
        ],
        "records": [record.to_dict() for record in records],
        "ledgers": [ledger.to_dict() for ledger in sorted(ledgers, key=lambda x: x.cell)],
        "clobbers": [dataclasses.asdict(clobber) for clobber in outcome.clobbers],
        "settings_notes": list(outcome.settings_notes),
        "compile_count_changes": [
            {
                "cell": c.cell,
                "compiles": c.compiles,
                "pinned": c.pinned,
                "recompiles": list(c.recompiles),
            }
            for c in outcome.compile_count_changes
        ],
        "verdicts": [verdict_to_dict(row, outcome.rootdir) for row in view.rows],
        "upgrades": [
            {
                "framework": upgrade.framework,
                "hardware": upgrade.hardware,
                "old": upgrade.old,
                "new": upgrade.new,
                "rows": len(upgrade.verdicts),
                "median_ratio": upgrade.median_ratio,
                "fails": upgrade.fails(outcome.thresholds),
            }
            for upgrade in outcome.upgrades
        ],
        "warnings": [f"warning: {block.text}." for block in view.blocks_of(BlockKind.WARNING)],
        "reproducers": None
        if view.reproducers is None or outcome.reproducers_dir is None
        else {
            "dir": relative(outcome.reproducers_dir, outcome.rootdir),
            "rows": len(outcome.reproducers),
            "text": view.reproducers,
        },
        "paired": None if cost is None else {**dataclasses.asdict(cost), "text": cost.describe()},
        "always_cold": [dataclasses.asdict(row) for row in outcome.always_cold],
        "trace_profile": trace_profile_dict(view.trace),
        "stale": [
            {
                "cell": stale.cell,
                "transform": stale.transform,
                "variant": stale.variant,
                "key": stale.key.to_dict(),
                "pin_file": relative(stale.pin_file, outcome.rootdir),
            }
            for stale in outcome.stale
        ],
    }


def trace_profile_dict(rollup: TraceRollup | None) -> dict[str, Any] | None:
    """The session's trace profile (the view's rollup); None: no row was profiled."""
    if rollup is None:
        return None

    def share(item: TraceShare) -> dict[str, Any]:
        return {"name": item.name, "share": round(item.share, 4), "seconds": round(item.seconds, 6)}

    return {
        "rows": rollup.rows,
        "trace_s": round(rollup.trace_s, 6),
        "groups": [share(item) for item in rollup.groups],
        "files": [share(item) for item in rollup.files],
    }


def write_report(path: Path, report: dict[str, Any]) -> None:
    atomic_write_text(path, json.dumps(report, indent=2, sort_keys=True) + "\n")


# --------------------------------------------------------------------------- reading


class ReportError(InputError):
    """A report that cannot be used; the message names the file (and line or record)."""


@dataclass
class LoadedReport:
    """What one report contributes to a merge."""

    path: Path
    records: list[CompileRecord]
    ran_cells: list[str] = field(default_factory=list)
    environments: list[tuple[str, str]] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    thresholds: Thresholds | None = None
    ledgers: list[CallLedger] = field(default_factory=list)
    fail_on_improvement: bool | None = None
    rootdir: str | None = None
    plugin_version: str | None = None
    session_s: float | None = None
    workers: int = 1
    repin_arguments: list[str] = field(default_factory=list)  # the session's gates, as given
    repin_environment: list[str] = field(default_factory=list)  # NAME=value before the command
    repin_keeps: dict[str, list[str]] = field(default_factory=dict)  # per test: options kept
    github_actions: bool = False  # the session ran under GitHub Actions
    accept_label: str | None = None  # compile_accept_label: CI's accept label
    gate_s: dict[str, float] = field(default_factory=dict)  # the gate's own after the tests
    profiled_rows: int = 0
    # compile_reproducer: the bundles' directory, and each bundled row's folder by its
    # identity (`bundle_id`), both relative to the report's rootdir
    reproducers_dir: str | None = None
    reproducers: dict[str, str] = field(default_factory=dict)


def bundle_id(record: CompileRecord) -> str:
    """A row's identity across a report's verdicts and its records: key, cell, transform,
    variant."""
    return json.dumps([record.key.to_dict(), *record.row_id], sort_keys=True)


def report_paths(paths: Iterable[Path]) -> list[Path]:
    """Files as given; a directory stands for every ``*.json`` file below it, sorted."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(p for p in path.rglob("*.json") if p.is_file())
            if not inside:
                raise ReportError(path, "directory holds no *.json report")
            found.extend(inside)
        else:
            found.append(path)
    return found


def load_report(path: Path) -> LoadedReport:
    """Read and validate one report written by ``--compile-report`` (or by ``merge``)."""
    text = read_text(path, ReportError)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ReportError(
            path, f"not valid JSON: {error.msg} (column {error.colno})", error.lineno
        ) from None
    if not isinstance(data, dict) or data.get("report_kind") != REPORT_KIND:
        kind = data.get("report_kind") if isinstance(data, dict) else None
        found = f"report_kind is {kind!r}" if kind is not None else "it has no report_kind"
        raise ReportError(
            path,
            f"not a pytest-jaxcompile report ({found}; expected {REPORT_KIND!r}, "
            "as written by pytest --compile-report)",
        )
    problem = _version_problem(data.get("schema_version"), REPORT_SCHEMA_VERSION, "report")
    if problem is not None:
        raise ReportError(path, problem)
    raw_records = data.get("records")
    if not isinstance(raw_records, list):
        raise ReportError(path, "'records' must be a list of records")
    return LoadedReport(
        path=path,
        records=[_record(path, index, raw) for index, raw in enumerate(raw_records)],
        ran_cells=_strings(path, data, "ran_cells"),
        environments=_environments(path, data.get("environments", [])),
        lost=_strings(path, data, "lost"),
        thresholds=_thresholds(path, data.get("thresholds"), data.get("fail_on_improvement")),
        ledgers=_ledgers(path, data.get("ledgers", [])),
        fail_on_improvement=_optional(path, data, "fail_on_improvement", bool),
        rootdir=_optional(path, data, "rootdir", str),
        plugin_version=_optional(path, data, "plugin_version", str),
        session_s=_session_s(path, data.get("session_s")),
        workers=_workers(path, data.get("workers", 1)),
        repin_arguments=_strings(path, data, "repin_arguments"),
        repin_environment=_strings(path, data, "repin_environment"),
        repin_keeps=_keeps(path, data.get("repin_keeps", {})),
        github_actions=bool(_optional(path, data, "github_actions", bool)),
        accept_label=_optional(path, data, "accept_label", str),
        gate_s=_gate_s(path, data.get("gate_s", {})),
        profiled_rows=_count(path, data.get("profiled_rows", 0), "profiled_rows"),
        **_reproducers(path, data),
    )


def _reproducers(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """The report's reproducer bundles: its ``reproducers.dir`` and each verdict's
    ``reproducer``, by the row's identity (`bundle_id`)."""
    summary = data.get("reproducers")
    if summary is None:
        return {}
    if not isinstance(summary, dict) or not isinstance(summary.get("dir"), str):
        raise ReportError(path, "'reproducers' must be null or an object with a 'dir' string")
    found: dict[str, str] = {}
    for verdict in data.get("verdicts") or []:
        folder = verdict.get("reproducer") if isinstance(verdict, dict) else None
        if folder is None:
            continue
        if not isinstance(folder, str):
            raise ReportError(path, f"a verdict's 'reproducer' must be a string, got {folder!r}")
        identity = [verdict.get(name) for name in ("key", "cell", "transform", "variant")]
        found[json.dumps(identity, sort_keys=True)] = folder
    return {"reproducers_dir": summary["dir"], "reproducers": found}


def _version_problem(version: object, supported: int, what: str) -> str | None:
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        return f"{what} schema_version must be a positive integer, got {version!r}"
    if version > supported:
        return (
            f"{what} schema_version {version} was written by a newer pytest-jaxcompile "
            f"(this one reads up to {supported}); upgrade pytest-jaxcompile to read it"
        )
    return None


def _record(path: Path, index: int, raw: object) -> CompileRecord:
    where = f"records[{index}]"
    if not isinstance(raw, dict):
        raise ReportError(path, f"{where} must be an object, got {type(raw).__name__}")
    if isinstance(raw.get("cell"), str) and isinstance(raw.get("transform"), str):
        where += f" ({raw['cell']} [{raw['transform']}])"
    if raw.get("record_kind", RECORD_KIND) != RECORD_KIND:
        raise ReportError(
            path, f"{where}: record_kind {raw['record_kind']!r} is not {RECORD_KIND!r}"
        )
    if "schema_version" in raw:
        problem = _version_problem(raw["schema_version"], RECORD_SCHEMA_VERSION, "record")
        if problem is not None:
            raise ReportError(path, f"{where}: {problem}")
    try:
        check_record_data(raw)
        return CompileRecord.from_dict(raw)
    except (RecordDataError, TypeError, ValueError) as error:
        raise ReportError(path, f"{where}: {error}") from None


def _strings(path: Path, data: dict[str, Any], name: str) -> list[str]:
    value = data.get(name, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ReportError(path, f"{name!r} must be a list of strings")
    return list(value)


def _keeps(path: Path, value: object) -> dict[str, list[str]]:
    if not isinstance(value, dict) or not all(
        isinstance(options, list) and all(isinstance(option, str) for option in options)
        for options in value.values()
    ):
        raise ReportError(path, "'repin_keeps' must be an object of lists of options by test")
    return {str(cell): list(options) for cell, options in value.items()}


def _environments(path: Path, value: object) -> list[tuple[str, str]]:
    problem = ReportError(
        path, '\'environments\' must be a list of {"hardware": ..., "jax_version": ...} objects'
    )
    if not isinstance(value, list):
        raise problem
    environments = []
    for item in value:
        if not (
            isinstance(item, dict)
            and isinstance(item.get("hardware"), str)
            and isinstance(item.get("jax_version"), str)
        ):
            raise problem
        environments.append((item["hardware"], item["jax_version"]))
    return environments


def _thresholds(path: Path, value: object, fail_on_improvement: object) -> Thresholds | None:
    """The report's verdict settings: numbers by `_numbers`, the rest by the options' own
    validator.

    Reports of earlier releases kept ``fail_on_improvement`` beside the thresholds.
    """
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ReportError(path, "'thresholds' must be an object")
    if value.get("fail_on_improvement") is None and fail_on_improvement is not None:
        value = {**value, "fail_on_improvement": fail_on_improvement}
    given: dict[str, Any] = {}
    for option in THRESHOLD_OPTIONS:
        assert option.threshold is not None
        raw = value.get(option.threshold)
        if raw is None:
            continue
        if option.kind == "number":
            try:
                given[option.threshold] = finite_number(raw)
            except NumberError as error:
                raise ReportError(path, f"thresholds {option.threshold!r} {error}") from None
            continue
        if option.kind == "flag" and not isinstance(raw, bool):
            raise ReportError(
                path, f"thresholds {option.threshold!r} must be true or false, got {raw!r}"
            )
        try:
            given[option.threshold] = parse_value(option, raw, "thresholds")
        except OptionError as error:
            message = str(error).replace(option.flag, repr(option.threshold))
            raise ReportError(path, message) from None
    for required in ("tolerance", "floor_s"):
        if required not in given:
            raise ReportError(path, f"thresholds {required!r} is missing")
    return Thresholds(**given)


def _ledgers(path: Path, value: object) -> list[CallLedger]:
    if not isinstance(value, list):
        raise ReportError(path, "'ledgers' must be a list")
    ledgers = []
    for index, raw in enumerate(value):
        try:
            if not isinstance(raw, dict):
                raise TypeError(f"must be an object, got {type(raw).__name__}")
            check_ledger_data(raw)
            ledgers.append(CallLedger.from_dict(raw))
        except (TypeError, RecordDataError) as error:
            raise ReportError(path, f"ledgers[{index}]: {error}") from None
    return ledgers


def _gate_s(path: Path, value: object) -> dict[str, float]:
    if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
        raise ReportError(path, "'gate_s' must be an object of seconds by work")
    seconds = {}
    for work, figure in value.items():
        try:
            seconds[work] = finite_number(figure)
        except NumberError as error:
            raise ReportError(path, f"'gate_s' {work!r} {error}") from None
    return seconds


def _session_s(path: Path, value: object) -> float | None:
    try:
        return optional_number(value)
    except NumberError as error:
        raise ReportError(path, f"'session_s' {error}") from None


def _workers(path: Path, value: object) -> int:
    try:
        return whole_number(value, minimum=1)
    except NumberError as error:
        raise ReportError(path, f"'workers' {error}") from None


def _count(path: Path, value: object, name: str) -> int:
    try:
        return whole_number(value, minimum=0)
    except NumberError as error:
        raise ReportError(path, f"{name!r} {error}") from None


def _optional(path: Path, data: dict[str, Any], name: str, kind: type) -> Any:
    value = data.get(name)
    if value is not None and (
        (kind is not bool and isinstance(value, bool)) or not isinstance(value, kind)
    ):
        raise ReportError(path, f"{name!r} must be a {kind.__name__}, got {value!r}")
    return value


class ReportWriter:
    """``--compile-report PATH``: registered only when asked, on the controller."""

    def __init__(self, config: pytest.Config, path: Path, records: Callable[[], Records]) -> None:
        self.config = config
        self.path = path
        self.records = records
        self.problem: str | None = None

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        outcome = outcome_of(self.config)
        if outcome is None:
            return
        records, ledgers = self.records()
        try:
            write_report(self.path, build_report(outcome, records, ledgers, __version__))
        except OSError as error:  # CI would upload nothing: that must not pass quietly
            self.problem = f"compile report NOT written to {self.path}: {error}"
            fail_session(session, True)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.problem is not None:
            summary_section(terminalreporter)
            terminalreporter.write_line(self.problem, red=True, bold=True)
