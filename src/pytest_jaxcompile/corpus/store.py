"""The results corpus: compile records in JSON lines and JSON list files, and directory trees.

Writing (the plugin's ``--compile-record-dir``): each session writes one *new* file,
``<dir>/<UTC time>-<pid>-<random>.jsonl``, once, atomically, at the end of the session on
the controller. History is never rewritten and no lock is needed, also with several
machines writing into one shared tree.

Reading streams the records, one file at a time and one line at a time for JSON lines, and
keeps only what the caller keeps (the latest row per cell, transform, settings variant and
key), so memory grows with the number of cells, not of records. The session's call ledgers
(census'd tests) follow its records in its file: readers keep each test's latest execute
time. Records of other kinds sharing the tree are counted and passed over, never misread.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from pytest_jaxcompile._io import InputError, atomic_write_text
from pytest_jaxcompile._numbers import NumberError, finite_number
from pytest_jaxcompile.record_checks import (
    RecordDataError,
    check_key_data,
    check_record_data,
    field_value,
)
from pytest_jaxcompile.records import (
    LEDGER_KIND,
    RECORD_KIND,
    REPORT_KIND,
    CallLedger,
    ComparabilityKey,
    CompileRecord,
)

LINES_SUFFIXES = (".jsonl", ".ndjson")  # streamed line by line
RECORD_FILE_SUFFIXES = (*LINES_SUFFIXES, ".json")  # what a directory walk reads
NO_TIME = -math.inf  # rows without a timestamp sort before every timestamped row


class CorpusError(InputError):
    """Input that cannot be read as records; names the file and, where known, the line."""


# --------------------------------------------------------------------------- writing


def session_file_name(now: datetime | None = None) -> str:
    """``20261130T013129Z-4242-9f3a1c.jsonl``: sorts by time, unique across processes."""
    moment = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return f"{moment:%Y%m%dT%H%M%SZ}-{os.getpid()}-{secrets.token_hex(3)}.jsonl"


def write_session_records(
    directory: Path, records: Sequence[CompileRecord], ledgers: Sequence[CallLedger] = ()
) -> Path | None:
    """Write one session's records, then its census'd tests' ledgers (`record_kind`
    ``compile_ledger``: the dashboard's execute times), into a new file of `directory`;
    never touches old files.

    The file is complete or absent: written to a hidden temp file, then renamed (readers
    skip hidden names). Returns the new file, or None when there were no records.
    """
    if not records:
        return None
    items: list[CompileRecord | CallLedger] = [*records, *sorted(ledgers, key=_cell_of)]
    text = "".join(
        json.dumps(item.to_dict(), sort_keys=True, ensure_ascii=False) + "\n" for item in items
    )
    directory.mkdir(parents=True, exist_ok=True)
    while True:
        path = directory / session_file_name()
        if not path.exists():  # a clash needs the same second, pid and 24 random bits
            break
    atomic_write_text(path, text)
    return path


def _cell_of(ledger: CallLedger) -> str:
    return ledger.cell


class RecordDirWriter:
    """``--compile-record-dir DIR``: registered only when asked, on the controller."""

    def __init__(
        self,
        config: pytest.Config,
        directory: Path,
        records: Callable[[], list[CompileRecord]],
        ledgers: Callable[[], list[CallLedger]] = list,
    ) -> None:
        self.config = config
        self.directory = directory
        self.records = records
        self.ledgers = ledgers
        self.written: Path | None = None
        self.problem: str | None = None

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from pytest_jaxcompile.output import fail_session, outcome_of

        if outcome_of(self.config) is None:
            return
        try:
            self.written = write_session_records(self.directory, self.records(), self.ledgers())
        except OSError as error:
            where = error.filename or self.directory
            self.problem = f"{where}: {error.strerror or error}"
            fail_session(session, True)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        from pytest_jaxcompile._io import relative
        from pytest_jaxcompile.output import summary_section

        if self.problem is not None:
            summary_section(terminalreporter)
            terminalreporter.write_line(
                f"compile records NOT written: {self.problem}; the session fails.",
                red=True,
                bold=True,
            )
        elif self.written is not None:
            summary_section(terminalreporter)
            terminalreporter.write_line(
                f"compile records written: {relative(self.written, self.config.rootpath)}"
            )


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


def parse_cell_fields(text: str) -> tuple[str, ...]:
    """``--cell-fields model,dataset,backend`` -> the field names, in order."""
    names = tuple(name.strip() for name in text.split(","))
    if not names or any(not name for name in names):
        raise ValueError(f"{text!r} is not a comma-separated list of field names")
    return names


CELL_FIELD_SEPARATOR = "::"


class Row:
    """One compile record, its key checked; its data is kept for building the record later.

    A row kept for long (the latest of its cell) holds its JSON line, about a fifth of the
    memory of the parsed object, and parses it again when the record is built.
    """

    __slots__ = (
        "_data",
        "_line",
        "cell",
        "compile_s",
        "key",
        "path",
        "time",
        "transform",
        "variant",
        "where",
    )

    def __init__(
        self,
        data: dict[str, Any],
        path: Path,
        where: str,
        cell: str,
        key: ComparabilityKey,
        time: float,
    ) -> None:
        self._data: dict[str, Any] | None = data
        self._line: str | None = None
        self.path = path
        self.where = where
        self.cell = cell
        self.key = key
        self.transform: str = data["transform"]
        self.variant: str = data.get("variant") or ""  # earlier releases: the default
        compile_s = data["compile_s"]  # None: not reported (the record names what)
        self.compile_s = None if compile_s is None else float(compile_s)
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

    def record(self) -> CompileRecord:
        """The CompileRecord this row stands for (cell as mapped by --cell-fields).

        Every field of the record is kept; fields the record does not know are dropped.
        The whole record is validated here (`records.check_record_data`), for the rows
        actually used: checking every row read would double the time of a read. A bad one
        is a CorpusError naming the file and line.
        """
        values = dict(self.data)
        values["cell"] = self.cell
        try:
            check_record_data(values)
        except RecordDataError as error:
            raise CorpusError(self.path, str(error), self.where) from None
        return CompileRecord.from_dict(values)


def make_row(
    data: dict[str, Any], path: Path, where: str, cell_fields: tuple[str, ...] = ()
) -> Row:
    """Check one compile record's key; any problem is a CorpusError naming file and line."""
    cell = _cell(data, path, where, cell_fields)
    try:
        key = check_key_data(data)
    except RecordDataError as error:
        raise CorpusError(path, str(error), where) from None
    timestamp = data.get("timestamp")
    time = NO_TIME
    if timestamp not in (None, ""):
        try:
            time = parse_timestamp(str(timestamp))
        except ValueError:
            raise CorpusError(
                path, f"'timestamp' {timestamp!r} is not an ISO 8601 time", where
            ) from None
    return Row(data, path, where, cell, key, time)


def _cell(data: dict[str, Any], path: Path, where: str, cell_fields: tuple[str, ...]) -> str:
    """The record's cell: its --cell-fields values joined by ``::``, else its ``cell``."""
    if cell_fields:
        values = [field_value(data, name)[1] for name in cell_fields]
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
    value = data.get("cell")
    if not isinstance(value, str) or not value:
        problem = (
            "compile record has no 'cell'"
            if "cell" not in data
            else (f"'cell' must be a non-empty string, got {value!r}")
        )
        raise CorpusError(path, problem, where)
    return value


@dataclass
class CorpusStats:
    """What a read went through."""

    files: int = 0
    compile_records: int = 0
    ledgers: int = 0  # census'd tests' call ledgers (record dirs of this release on)
    other_records: int = 0
    before_since: int = 0  # compile records older than `since` (or without a timestamp)


@dataclass
class Corpus:
    """Files and directories of records, read as a stream of validated compile rows."""

    paths: Sequence[Path]
    cell_fields: tuple[str, ...] = ()
    since: float | None = None  # only rows measured at or after this time (epoch seconds)
    stats: CorpusStats = field(default_factory=CorpusStats)
    # Each test's execute time (its call's wall less its compiles, the ledger's
    # execute_and_python_s) from the latest ledger read, by cell: filled by `rows`.
    execute_s: dict[str, float] = field(default_factory=dict)

    def rows(self) -> Iterator[Row]:
        stats = self.stats = CorpusStats()
        for path in corpus_files(self.paths):
            stats.files += 1
            for where, value, line in iter_file(path):
                if not is_compile_record(value):
                    if self._take_ledger(value):
                        stats.ledgers += 1
                    else:
                        stats.other_records += 1
                    continue
                stats.compile_records += 1
                row = make_row(value, path, where, self.cell_fields)
                if self.since is not None and row.time < self.since:
                    stats.before_since += 1
                    continue
                yield row  # parsed while the caller looks at it (trends read its fields)
                row.keep_line_only(line)  # and held as its line if the caller kept it

    def _take_ledger(self, value: Any) -> bool:
        """Keep a ledger's execute time; False: not a ledger of ours."""
        if not isinstance(value, dict) or value.get("record_kind") != LEDGER_KIND:
            return False
        cell, execute = value.get("cell"), value.get("execute_and_python_s")
        if isinstance(cell, str) and execute is not None:
            # A figure that is no number is not shown (ledgers are not judged).
            with contextlib.suppress(NumberError):
                self.execute_s[cell] = finite_number(execute)
        return True

    def describe(self) -> str:
        stats = self.stats
        text = f"{stats.compile_records} compile record(s) in {stats.files} file(s)"
        if stats.before_since:
            text += f" ({stats.before_since} measured before --since left out)"
        if stats.other_records:
            text += f"; {stats.other_records} record(s) of other kinds passed over"
        return text


RowId = tuple[ComparabilityKey, str, str, str]  # (key, cell, transform, variant)


class LatestRows:
    """The most recent row per cell, transform, settings variant and key: memory per cell,
    not per record.

    Rows are ordered by their ``timestamp``; of two rows with the same time, the one read
    later wins (files in sorted order, lines in file order).
    """

    def __init__(self) -> None:
        self.rows: dict[RowId, Row] = {}

    def add(self, row: Row) -> None:
        row_id = (row.key, row.cell, row.transform, row.variant)
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
