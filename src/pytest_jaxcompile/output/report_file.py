"""Read the JSON reports the plugin writes (``--compile-report``), validated.

Used by ``pytest-jaxcompile merge``. Bad input is a `ReportError` naming the file (and,
where it can, the line or the record), never a traceback or a half-read report.
The format is documented in docs/report-schema.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_jaxcompile.gate.verdicts import Thresholds
from pytest_jaxcompile.output.terminal import REPORT_KIND, REPORT_SCHEMA_VERSION
from pytest_jaxcompile.records import RECORD_KIND, CacheState, CallLedger, CompileRecord
from pytest_jaxcompile.records import SCHEMA_VERSION as RECORD_SCHEMA_VERSION


class ReportError(Exception):
    """A report that cannot be used; the message names the file (and line or record)."""

    def __init__(self, path: Path, message: str, line: int | None = None) -> None:
        self.path = path
        self.line = line
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")


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
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReportError(path, "no such file") from None
    except UnicodeDecodeError as error:
        raise ReportError(path, f"not UTF-8 text: {error}") from None
    except OSError as error:
        raise ReportError(path, f"cannot read it: {error.strerror or error}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ReportError(path, f"not valid JSON: {error.msg} (column {error.colno})",
                          error.lineno) from None
    if not isinstance(data, dict) or data.get("report_kind") != REPORT_KIND:
        kind = data.get("report_kind") if isinstance(data, dict) else None
        found = f"report_kind is {kind!r}" if kind is not None else "it has no report_kind"
        raise ReportError(
            path, f"not a pytest-jaxcompile report ({found}; expected {REPORT_KIND!r}, "
            "as written by pytest --compile-report)"
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
        thresholds=_thresholds(path, data.get("thresholds")),
        ledgers=_ledgers(path, data.get("ledgers", [])),
        fail_on_improvement=_optional(path, data, "fail_on_improvement", bool),
        rootdir=_optional(path, data, "rootdir", str),
        plugin_version=_optional(path, data, "plugin_version", str),
    )


def _version_problem(version: object, supported: int, what: str) -> str | None:
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        return f"{what} schema_version must be a positive integer, got {version!r}"
    if version > supported:
        return (
            f"{what} schema_version {version} was written by a newer pytest-jaxcompile "
            f"(this one reads up to {supported}); upgrade pytest-jaxcompile to read it"
        )
    return None


_REQUIRED: tuple[tuple[str, type], ...] = (
    ("cell", str), ("transform", str), ("hardware", str), ("jax_version", str),
    ("jaxlib_version", str), ("mixed_precision", bool), ("cache_state", str),
)


def _record(path: Path, index: int, raw: object) -> CompileRecord:
    where = f"records[{index}]"
    if not isinstance(raw, dict):
        raise ReportError(path, f"{where} must be an object, got {type(raw).__name__}")
    if isinstance(raw.get("cell"), str) and isinstance(raw.get("transform"), str):
        where += f" ({raw['cell']} [{raw['transform']}])"
    if raw.get("record_kind", RECORD_KIND) != RECORD_KIND:
        raise ReportError(path, f"{where}: record_kind {raw['record_kind']!r} is not "
                          f"{RECORD_KIND!r}")
    if "schema_version" in raw:
        problem = _version_problem(raw["schema_version"], RECORD_SCHEMA_VERSION, "record")
        if problem is not None:
            raise ReportError(path, f"{where}: {problem}")
    for name, kind in _REQUIRED:
        value = raw.get(name)
        if name not in raw:
            raise ReportError(path, f"{where}: missing {name!r}")
        if (kind is not bool and isinstance(value, bool)) or not isinstance(value, kind):
            raise ReportError(path, f"{where}: {name!r} must be a {kind.__name__}, "
                              f"got {value!r}")
    if raw["cache_state"] not in {state.value for state in CacheState}:
        raise ReportError(path, f"{where}: unknown cache_state {raw['cache_state']!r}")
    compile_s = raw.get("compile_s")
    if isinstance(compile_s, bool) or not isinstance(compile_s, (int, float)) or compile_s < 0:
        raise ReportError(path, f"{where}: 'compile_s' must be a non-negative number, "
                          f"got {compile_s!r}")
    location = raw.get("location")
    if location is not None and not (
        isinstance(location, list) and len(location) == 2
        and isinstance(location[0], str) and isinstance(location[1], int)
    ):
        raise ReportError(path, f"{where}: 'location' must be [file, line], got {location!r}")
    for name in ("cache", "host_state", "hardware_detail"):
        if raw.get(name) is not None and not isinstance(raw[name], dict):
            raise ReportError(path, f"{where}: {name!r} must be an object")
    try:
        return CompileRecord.from_dict(raw)
    except (TypeError, ValueError) as error:
        raise ReportError(path, f"{where}: {error}") from None


def _strings(path: Path, data: dict[str, Any], name: str) -> list[str]:
    value = data.get(name, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ReportError(path, f"{name!r} must be a list of strings")
    return list(value)


def _environments(path: Path, value: object) -> list[tuple[str, str]]:
    problem = ReportError(path, "'environments' must be a list of "
                          '{"hardware": ..., "jax_version": ...} objects')
    if not isinstance(value, list):
        raise problem
    environments = []
    for item in value:
        if not (isinstance(item, dict) and isinstance(item.get("hardware"), str)
                and isinstance(item.get("jax_version"), str)):
            raise problem
        environments.append((item["hardware"], item["jax_version"]))
    return environments


def _thresholds(path: Path, value: object) -> Thresholds | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ReportError(path, "'thresholds' must be an object")
    numbers: dict[str, Any] = {}
    for name in ("tolerance", "floor_s"):
        number = value.get(name)
        if isinstance(number, bool) or not isinstance(number, (int, float)) or number < 0:
            raise ReportError(path, f"thresholds {name!r} must be a non-negative number, "
                              f"got {number!r}")
        numbers[name] = float(number)
    # The rest of the session's verdict settings, where the report has them.
    optional: tuple[tuple[str, tuple[type, ...]], ...] = (
        ("max_ops_growth", (int, float)), ("max_load", (int, float)),
        ("time_advisory", (bool,)), ("expect_warm", (bool,)), ("strict", (bool,)),
        ("metric", (str,)),
    )
    for name, kinds in optional:
        item: Any
        if value.get(name) is None:
            continue
        item = value[name]
        if (bool not in kinds and isinstance(item, bool)) or not isinstance(item, kinds):
            raise ReportError(path, f"thresholds {name!r} has the wrong type: {item!r}")
        numbers[name] = float(item) if isinstance(item, (int, float)) and kinds != (bool,) else item
    return Thresholds(**numbers)


def _ledgers(path: Path, value: object) -> list[CallLedger]:
    if not isinstance(value, list):
        raise ReportError(path, "'ledgers' must be a list")
    ledgers = []
    for index, raw in enumerate(value):
        try:
            ledgers.append(CallLedger.from_dict(raw))
        except (TypeError, AttributeError) as error:
            raise ReportError(path, f"ledgers[{index}]: {error}") from None
    return ledgers


def _optional(path: Path, data: dict[str, Any], name: str, kind: type) -> Any:
    value = data.get(name)
    if value is not None and (
        (kind is not bool and isinstance(value, bool)) or not isinstance(value, kind)
    ):
        raise ReportError(path, f"{name!r} must be a {kind.__name__}, got {value!r}")
    return value
