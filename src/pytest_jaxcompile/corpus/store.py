"""The results corpus: compile records in JSON lines and JSON list files, and directory trees.

Writing (the plugin's ``--compile-record-dir``): each session writes one *new* file,
``<dir>/<UTC time>-<pid>-<random>.jsonl``, once, atomically, at the end of the session on
the controller. History is never rewritten and no lock is needed, also with several
machines writing into one shared tree.

Reading streams the records, one file at a time and one line at a time for JSON lines, and
keeps only what the caller keeps (the latest row per cell, transform and key), so memory
grows with the number of cells, not of records. Records of other kinds sharing the tree are
counted and passed over, never misread.
"""

from __future__ import annotations

import json
import math
import os
import secrets
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_jaxcompile.gate.pins import atomic_write_text
from pytest_jaxcompile.records import (
    RECORD_KIND,
    CacheState,
    ComparabilityKey,
    CompileRecord,
)

LINES_SUFFIXES = (".jsonl", ".ndjson")  # streamed line by line
RECORD_FILE_SUFFIXES = (*LINES_SUFFIXES, ".json")  # what a directory walk reads
REPORT_KIND = "jaxcompile_report"  # the plugin's --compile-report: its "records" are read
STATES = frozenset(state.value for state in CacheState)
NO_TIME = -math.inf  # rows without a timestamp sort before every timestamped row


class CorpusError(Exception):
    """Input that cannot be read as records; names the file and, where known, the line."""

    def __init__(self, path: Path, message: str, position: str | None = None) -> None:
        self.path = path
        self.position = position
        where = f"{path}:{position}" if position else str(path)
        super().__init__(f"{where}: {message}")


# --------------------------------------------------------------------------- writing


def session_file_name(now: datetime | None = None) -> str:
    """``20261130T013129Z-4242-9f3a1c.jsonl``: sorts by time, unique across processes."""
    moment = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return f"{moment:%Y%m%dT%H%M%SZ}-{os.getpid()}-{secrets.token_hex(3)}.jsonl"


def write_session_records(directory: Path, records: Sequence[CompileRecord]) -> Path | None:
    """Write one session's records into a new file of `directory`; never touches old files.

    The file is complete or absent: written to a hidden temp file, then renamed (readers
    skip hidden names). Returns the new file, or None when there were no records.
    """
    if not records:
        return None
    text = "".join(
        json.dumps(record.to_dict(), sort_keys=True, ensure_ascii=False) + "\n"
        for record in records
    )
    directory.mkdir(parents=True, exist_ok=True)
    while True:
        path = directory / session_file_name()
        if not path.exists():  # a clash needs the same second, pid and 24 random bits
            break
    atomic_write_text(path, text)
    return path


# --------------------------------------------------------------------------- finding files


def corpus_files(paths: Iterable[Path]) -> list[Path]:
    """The files to read: files as given, directories walked for ``*.jsonl``/``*.json``.

    Hidden files and directories (names starting with ``.``, e.g. the temp files of an
    atomic write in progress) are skipped; each directory's files come in sorted order.
    """
    files: list[Path] = []
    for path in paths:
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            found: list[Path] = []
            for root, dirs, names in os.walk(path):
                dirs[:] = [name for name in dirs if not name.startswith(".")]
                found.extend(
                    Path(root, name)
                    for name in names
                    if not name.startswith(".") and name.endswith(RECORD_FILE_SUFFIXES)
                )
            files.extend(sorted(found, key=lambda found_path: found_path.relative_to(path)))
        else:
            raise CorpusError(path, "no such file or directory")
    return files


# --------------------------------------------------------------------------- reading files


def iter_file(path: Path) -> Iterator[tuple[str, Any, str | None]]:
    """Every JSON value of one file: (position, value, its JSON line or None).

    The position is ``12`` (a line) or ``item 3`` (of a list).

    JSON lines (one value per line, blank lines allowed) are streamed. A file that starts
    with ``[`` is a JSON list and read whole. Another ``.json`` file holding one object is
    that object, or, for the plugin's JSON report, the report's ``records``.
    """
    try:
        if path.name.endswith(LINES_SUFFIXES):
            yield from _iter_lines(path)
            return
        with path.open(encoding="utf-8") as handle:
            head = handle.read(4096).lstrip()
        if not head:
            return
        if not head.startswith(("[", "{")):
            raise CorpusError(path, "not JSON: expected a list, an object or JSON lines", "1")
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise CorpusError(path, f"not UTF-8 text: {error}") from None
    except OSError as error:
        raise CorpusError(path, f"cannot read: {error.strerror or error}") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        if error.msg == "Extra data" and head.startswith("{"):  # JSON lines named *.json
            yield from _iter_lines(path)
            return
        raise CorpusError(path, f"not valid JSON: {error.msg}", str(error.lineno)) from None
    if isinstance(document, list):
        for number, value in enumerate(document, start=1):
            yield f"item {number}", value, None
    elif isinstance(document, dict) and document.get("report_kind") == REPORT_KIND:
        for number, value in enumerate(document.get("records") or [], start=1):
            yield f"records item {number}", value, None
    else:
        yield "1", document, None


def _iter_lines(path: Path) -> Iterator[tuple[str, Any, str | None]]:
    try:
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except json.JSONDecodeError as error:
                    raise CorpusError(
                        path, f"not valid JSON: {error.msg} (column {error.colno})", str(number)
                    ) from None
                yield str(number), value, line
    except UnicodeDecodeError as error:
        raise CorpusError(path, f"not UTF-8 text: {error}") from None
    except OSError as error:
        raise CorpusError(path, f"cannot read: {error.strerror or error}") from None


# --------------------------------------------------------------------------- records


def is_compile_record(value: Any) -> bool:
    """Ours: ``record_kind == "compile_probe"``, or no kind at all but a ``compile_s``.

    Records that predate ``record_kind`` count as compile records when they carry a compile
    timing; any other kind belongs to another instrument and is passed over.
    """
    if not isinstance(value, dict):
        return False
    kind = value.get("record_kind")
    if kind is None:
        return "compile_s" in value
    return bool(kind == RECORD_KIND)


def parse_timestamp(text: str) -> float:
    """Seconds since the epoch of an ISO 8601 time; a time without offset is UTC."""
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def get_field(data: dict[str, Any], dotted: str) -> tuple[bool, Any]:
    """(present, value) of a field; ``a.b`` reaches into nested objects."""
    value: Any = data
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return False, None
        value = value[part]
    return True, value


def parse_cell_fields(text: str) -> tuple[str, ...]:
    """``--cell-fields model,dataset,backend`` -> the field names, in order."""
    names = tuple(name.strip() for name in text.split(","))
    if not names or any(not name for name in names):
        raise ValueError(f"{text!r} is not a comma-separated list of field names")
    return names


CELL_FIELD_SEPARATOR = "::"


class Row:
    """One compile record, validated; its data is kept for building the record later.

    A row kept for long (the latest of its cell) holds its JSON line, about a fifth of the
    memory of the parsed object, and parses it again when the record is built.
    """

    __slots__ = (
        "_data", "_line", "cell", "compile_s", "key", "path", "time", "transform", "where"
    )

    def __init__(
        self,
        data: dict[str, Any],
        path: Path,
        where: str,
        cell: str,
        key: tuple[str, str, bool, str],
        transform: str,
        compile_s: float,
        time: float,
    ) -> None:
        self._data: dict[str, Any] | None = data
        self._line: str | None = None
        self.path = path
        self.where = where
        self.cell = cell
        self.key = key
        self.transform = transform
        self.compile_s = compile_s
        self.time = time

    @property
    def data(self) -> dict[str, Any]:
        if self._data is None:
            assert self._line is not None
            data: dict[str, Any] = json.loads(self._line)
            return data
        return self._data

    def keep_line_only(self, line: str | None) -> None:
        """Hold the record as its JSON line (when it has one) instead of the parsed object."""
        if line is not None:
            self._line = line
            self._data = None

    @property
    def comparability_key(self) -> ComparabilityKey:
        return ComparabilityKey(*self.key)

    @property
    def cache_state(self) -> str:
        return self.key[3]

    @property
    def jax_version(self) -> str:
        return self.key[1]

    def record(self) -> CompileRecord:
        """The CompileRecord this row stands for (cell as mapped by --cell-fields).

        Every field of the record is kept; fields the record does not know are dropped.
        The optional fields that verdicts and pins compute with are type-checked here, for
        the rows actually used (checking every row read would double the time of a read);
        a bad one is a CorpusError naming the file and line.
        """
        values = dict(self.data)
        _check_optional(values, self.path, self.where)
        values.update(
            cell=self.cell,
            transform=self.transform,
            hardware=self.key[0],
            jax_version=self.key[1],
            mixed_precision=self.key[2],
            cache_state=self.key[3],
            compile_s=self.compile_s,
        )
        for name in ("jaxlib_version", "timestamp"):
            if not isinstance(values.get(name), str):
                values[name] = ""
        for name in ("cache", "host_state"):
            if not isinstance(values.get(name), dict):
                values[name] = {}
        location = values.get("location")
        if not (
            isinstance(location, list) and len(location) == 2 and isinstance(location[1], int)
        ):
            values["location"] = None
        return CompileRecord.from_dict(values)


# Optional fields that verdicts, pins or the summary compute with: (name, kind). A present
# value of another type is an error naming the record, not a crash later. Dotted names
# reach into objects.
_OPTIONAL_FIELDS: tuple[tuple[str, str], ...] = (
    ("tolerance", "number"), ("max_ops_growth", "number"), ("compile_cpu_s", "number"),
    ("compile_spread_s", "number"), ("trace_s", "number"), ("lower_s", "number"),
    ("backend_compile_s", "number"), ("cache_retrieval_s", "number"),
    ("op_count", "count"), ("fingerprint", "text"), ("module_name", "text"),
    ("outcome", "text"), ("compile_samples_s", "list"), ("commit", "object"),
    ("host_state.load_avg_1m", "number"), ("host_state.load_per_core", "number"),
    ("host_state.process_cpu_s", "number"), ("host_state.cpu_count", "count"),
)


def _check_optional(data: dict[str, Any], path: Path, where: str) -> None:
    for name, kind in _OPTIONAL_FIELDS:
        present, value = get_field(data, name)
        if not present or value is None:
            continue
        if kind == "text":
            ok, expected = isinstance(value, str), "a string"
        elif kind == "list":
            ok = isinstance(value, list) and all(_is_number(item) for item in value)
            expected = "a list of numbers"
        elif kind == "object":
            ok, expected = isinstance(value, dict), "an object"
        elif kind == "count":
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
            expected = "a non-negative integer"
        else:
            ok, expected = _is_number(value) and value >= 0, "a non-negative number"
        if not ok:
            raise CorpusError(path, f"{name!r} must be {expected} or null, got {value!r}", where)


def _is_number(value: Any) -> bool:
    return (
        isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    )


def _string(data: dict[str, Any], name: str, path: Path, where: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value:
        if name not in data:
            raise CorpusError(path, f"compile record has no {name!r}", where)
        raise CorpusError(path, f"{name!r} must be a non-empty string, got {value!r}", where)
    return value


def make_row(
    data: dict[str, Any], path: Path, where: str, cell_fields: tuple[str, ...] = ()
) -> Row:
    """Validate one compile record; any problem is a CorpusError naming file and line."""
    cell = _cell(data, path, where, cell_fields)
    transform = _string(data, "transform", path, where)
    hardware = _string(data, "hardware", path, where)
    jax_version = _string(data, "jax_version", path, where)
    if data.get("framework") == "torch":  # torch rows carry their version beside it
        jax_version = _string(data, "torch_version", path, where)
    state = data.get("cache_state")
    if state is None:
        raise CorpusError(
            path,
            "compile record has no cache_state (written before cache_state existed?); "
            "migrate the corpus first: pytest-jaxcompile backfill --check PATH",
            where,
        )
    if state not in STATES:
        raise CorpusError(
            path, f"cache_state {state!r} is not one of {', '.join(sorted(STATES))}", where
        )
    compile_s = data.get("compile_s")
    if (
        isinstance(compile_s, bool)
        or not isinstance(compile_s, (int, float))
        or not compile_s >= 0
        or math.isinf(compile_s)
    ):
        raise CorpusError(
            path, f"'compile_s' must be a non-negative number, got {compile_s!r}", where
        )
    mixed = data.get("mixed_precision", False)
    if not isinstance(mixed, bool):
        raise CorpusError(path, f"'mixed_precision' must be true or false, got {mixed!r}", where)
    timestamp = data.get("timestamp")
    time = NO_TIME
    if timestamp not in (None, ""):
        try:
            time = parse_timestamp(str(timestamp))
        except ValueError:
            raise CorpusError(
                path, f"'timestamp' {timestamp!r} is not an ISO 8601 time", where
            ) from None
    return Row(
        data, path, where, cell, (hardware, jax_version, mixed, state), transform,
        float(compile_s), time,
    )


def _cell(data: dict[str, Any], path: Path, where: str, cell_fields: tuple[str, ...]) -> str:
    """The record's cell: its --cell-fields values joined by ``::``, else its ``cell``."""
    if cell_fields:
        values = [get_field(data, name)[1] for name in cell_fields]
        missing = [
            name for name, value in zip(cell_fields, values, strict=True) if value in (None, "")
        ]
        if not missing:
            return CELL_FIELD_SEPARATOR.join(str(value) for value in values)
        if "cell" not in data:
            raise CorpusError(
                path,
                f"compile record has no {missing[0]!r} (from --cell-fields) and no 'cell'",
                where,
            )
    return _string(data, "cell", path, where)


@dataclass
class CorpusStats:
    """What a read went through."""

    files: int = 0
    compile_records: int = 0
    other_records: int = 0
    before_since: int = 0  # compile records older than `since` (or without a timestamp)


@dataclass
class Corpus:
    """Files and directories of records, read as a stream of validated compile rows."""

    paths: Sequence[Path]
    cell_fields: tuple[str, ...] = ()
    since: float | None = None  # only rows measured at or after this time (epoch seconds)
    stats: CorpusStats = field(default_factory=CorpusStats)

    def rows(self) -> Iterator[Row]:
        stats = self.stats = CorpusStats()
        for path in corpus_files(self.paths):
            stats.files += 1
            for where, value, line in iter_file(path):
                if not is_compile_record(value):
                    stats.other_records += 1
                    continue
                stats.compile_records += 1
                row = make_row(value, path, where, self.cell_fields)
                if self.since is not None and row.time < self.since:
                    stats.before_since += 1
                    continue
                yield row  # parsed while the caller looks at it (trends read its fields)
                row.keep_line_only(line)  # and held as its line if the caller kept it

    def describe(self) -> str:
        stats = self.stats
        text = (
            f"{stats.compile_records} compile record(s) in {stats.files} file(s)"
        )
        if stats.before_since:
            text += f" ({stats.before_since} measured before --since left out)"
        if stats.other_records:
            text += f"; {stats.other_records} record(s) of other kinds passed over"
        return text


RowId = tuple[tuple[str, str, bool, str], str, str]  # (key, cell, transform)


class LatestRows:
    """The most recent row per cell, transform and key: memory per cell, not per record.

    Rows are ordered by their ``timestamp``; of two rows with the same time, the one read
    later wins (files in sorted order, lines in file order).
    """

    def __init__(self) -> None:
        self.rows: dict[RowId, Row] = {}

    def add(self, row: Row) -> None:
        row_id = (row.key, row.cell, row.transform)
        current = self.rows.get(row_id)
        if current is None or row.time >= current.time:
            self.rows[row_id] = row

    def sorted_rows(self) -> list[Row]:
        return [self.rows[row_id] for row_id in sorted(self.rows)]

    def records(self) -> list[CompileRecord]:
        return [row.record() for row in self.sorted_rows()]


def latest_rows(corpus: Corpus) -> LatestRows:
    latest = LatestRows()
    for row in corpus.rows():
        latest.add(row)
    return latest
