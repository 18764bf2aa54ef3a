"""Migrate compile records written before ``cache_state`` existed.

A record is migrated when it is a compile record (``record_kind`` is ``compile_probe`` or
absent), has a numeric ``compile_s`` and no ``cache_state`` (absent or null). It gets:

1. ``none`` when its recorded cache dir is empty: the first of the cache-dir fields
   (default ``cache.dir``, then ``cache_dir``) that the record *has* is null or an empty
   string, i.e. no persistent cache was configured. A record that has none of these fields
   recorded nothing about the cache and is not ``none``; a configured directory that held
   no entries is not ``none`` either (the cold run is the one that fills it).
2. ``cold`` or ``warm`` when its free-text ``tag`` *ends* in the marker: ``-cold``,
   ``_cold``, ``-warm``, ``-warm2``, ``-warm-retry`` and the like, or is just the marker.
   A tag with the marker in the middle (``mb_homo_cold_laxmap_gpu``) does not count.
3. ``unknown`` otherwise. Nothing is guessed.

Rule 1 beats rule 2: without a cache no compile is warm, whatever the tag says. Each
migrated record also gets ``cache_state_source`` (``backfill:cache_dir_empty``,
``backfill:tag`` or ``backfill:no_evidence``).

Every other record (records of other kinds, records without a compile timing, records
that already have a ``cache_state``) keeps its exact bytes: a file is rewritten by
replacing only the text of the migrated records. JSON lines and JSON list files are
supported (and a file holding one JSON object).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_jaxcompile._io import atomic_write_text, read_text, relative
from pytest_jaxcompile.corpus.store import LINES_SUFFIXES, CorpusError, corpus_files
from pytest_jaxcompile.record_checks import field_value
from pytest_jaxcompile.records import RECORD_KIND, REPORT_KIND

TAG_MARKER = re.compile(r"(?:^|[-_])(?P<state>cold|warm)\d*(?:[-_]retry\d*)?$", re.IGNORECASE)
DEFAULT_TAG_FIELD = "tag"
DEFAULT_CACHE_DIR_FIELDS = ("cache.dir", "cache_dir")
SOURCE_FIELD = "cache_state_source"

# What happened to a record; the first four add a cache_state, the rest leave it as it is.
NONE, COLD, WARM, UNKNOWN = "none", "cold", "warm", "unknown"
HAS_CACHE_STATE = "already has cache_state"
NO_COMPILE_S = "no compile_s"
OTHER_KIND = "other kinds"
MIGRATED = (NONE, COLD, WARM, UNKNOWN)
UNTOUCHED = (HAS_CACHE_STATE, NO_COMPILE_S, OTHER_KIND)


@dataclass(frozen=True)
class Rules:
    tag_field: str = DEFAULT_TAG_FIELD
    cache_dir_fields: tuple[str, ...] = DEFAULT_CACHE_DIR_FIELDS


@dataclass(frozen=True)
class Decision:
    outcome: str  # one of MIGRATED or UNTOUCHED
    source: str | None = None  # backfill:... for migrated records
    tag: str | None = None

    @property
    def migrates(self) -> bool:
        return self.outcome in MIGRATED


def tag_state(tag: str) -> str | None:
    """``cold``/``warm`` when the tag ends in the marker, else None."""
    match = TAG_MARKER.search(tag.strip())
    return match.group("state").lower() if match else None


def decide(value: Any, rules: Rules = Rules()) -> Decision:
    """What the migration does with one record."""
    if not isinstance(value, dict):
        return Decision(OTHER_KIND)
    kind = value.get("record_kind")
    if kind is not None and kind != RECORD_KIND:
        return Decision(OTHER_KIND)
    if kind is None and value.get("report_kind") == REPORT_KIND:
        return Decision(OTHER_KIND)  # the plugin's report always has cache_state rows
    compile_s = value.get("compile_s")
    if isinstance(compile_s, bool) or not isinstance(compile_s, (int, float)):
        return Decision(NO_COMPILE_S)
    if value.get("cache_state") is not None:
        return Decision(HAS_CACHE_STATE)
    present, tag = field_value(value, rules.tag_field)
    tag = tag if present and isinstance(tag, str) else None
    for name in rules.cache_dir_fields:
        present, cache_dir = field_value(value, name)
        if not present:
            continue
        if cache_dir is None or (isinstance(cache_dir, str) and not cache_dir.strip()):
            return Decision(NONE, "backfill:cache_dir_empty", tag)
        break  # a directory was recorded: the first field present decides
    state = tag_state(tag) if tag is not None else None
    if state is not None:
        return Decision(state, "backfill:tag", tag)
    return Decision(UNKNOWN, "backfill:no_evidence", tag)


def migrated(value: dict[str, Any], decision: Decision) -> dict[str, Any]:
    """The record with ``cache_state`` (and its source) right after ``compile_s``."""
    result: dict[str, Any] = {}
    for name, item in value.items():
        if name in ("cache_state", SOURCE_FIELD):
            continue
        result[name] = item
        if name == "compile_s":
            result["cache_state"] = decision.outcome
            result[SOURCE_FIELD] = decision.source
    return result


# --------------------------------------------------------------------------- files


@dataclass
class Span:
    start: int
    end: int
    value: Any


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _skip_space(text: str, index: int) -> int:
    while index < len(text) and text[index] in " \t\r\n":
        index += 1
    return index


def record_spans(path: Path, text: str) -> list[Span]:
    """Where each record's JSON text is in the file, so the rest stays byte-identical."""
    decoder = json.JSONDecoder()
    start = _skip_space(text, 0)
    if start == len(text):
        return []
    if path.name.endswith(LINES_SUFFIXES):
        return _line_spans(path, text)
    if text[start] == "[":
        return _list_spans(path, text, decoder, start)
    if text[start] != "{":
        raise CorpusError(path, "not JSON: expected a list, an object or JSON lines", "1")
    try:
        value, end = decoder.raw_decode(text, start)
    except json.JSONDecodeError as error:
        raise CorpusError(path, f"not valid JSON: {error.msg}", str(error.lineno)) from None
    if _skip_space(text, end) == len(text):
        return [Span(start, end, value)]
    return _line_spans(path, text)  # JSON lines in a *.json file


def _line_spans(path: Path, text: str) -> list[Span]:
    decoder = json.JSONDecoder()
    spans = []
    offset = 0
    for number, line in enumerate(text.split("\n"), start=1):
        content = line.rstrip("\r")
        lead = len(content) - len(content.lstrip())
        if content.strip():
            try:
                value, end = decoder.raw_decode(content, lead)
            except json.JSONDecodeError as error:
                raise CorpusError(path, f"not valid JSON: {error.msg}", str(number)) from None
            if content[end:].strip():
                raise CorpusError(path, "not valid JSON: extra data after the value", str(number))
            spans.append(Span(offset + lead, offset + end, value))
        offset += len(line) + 1
    return spans


def _list_spans(path: Path, text: str, decoder: json.JSONDecoder, start: int) -> list[Span]:
    spans = []
    index = _skip_space(text, start + 1)
    if index < len(text) and text[index] == "]":
        index += 1
    else:
        while True:
            try:
                value, end = decoder.raw_decode(text, index)
            except json.JSONDecodeError as error:
                raise CorpusError(path, f"not valid JSON: {error.msg}", str(error.lineno)) from None
            spans.append(Span(index, end, value))
            index = _skip_space(text, end)
            if index < len(text) and text[index] == ",":
                index = _skip_space(text, index + 1)
                continue
            if index < len(text) and text[index] == "]":
                index += 1
                break
            raise CorpusError(
                path, "not valid JSON: expected ',' or ']' in the list", str(_line_of(text, index))
            )
    if _skip_space(text, index) != len(text):
        raise CorpusError(
            path, "not valid JSON: extra data after the list", str(_line_of(text, index))
        )
    return spans


def render_like(original: str, value: dict[str, Any], text: str, start: int) -> str:
    """JSON for `value` in the style of the text it replaces (one line, or indented)."""
    compact = '":' in original and '": ' not in original
    separators = (",", ":") if compact else (", ", ": ")
    if "\n" not in original:
        return json.dumps(value, ensure_ascii=False, separators=separators)
    line_start = text.rfind("\n", 0, start) + 1
    base = text[line_start:start]
    base = base[: len(base) - len(base.lstrip())]
    second = original.split("\n")[1]
    unit = max(len(second) - len(second.lstrip()) - len(base), 1)
    rendered = json.dumps(
        value,
        ensure_ascii=False,
        indent=unit,
        separators=(",", ": ") if not compact else (",", ":"),
    )
    return rendered.replace("\n", "\n" + base)


@dataclass
class FilePlan:
    path: Path
    counts: Counter[str] = field(default_factory=Counter)
    tags: dict[str, Counter[str]] = field(default_factory=dict)  # outcome -> tag counts
    new_text: str | None = None  # None: nothing to change


def plan_file(path: Path, rules: Rules = Rules()) -> FilePlan:
    """Decide every record of one file and build its migrated text (nothing is written)."""
    text = read_text(path, CorpusError)
    plan = FilePlan(path)
    pieces: list[str] = []
    position = 0
    for span in record_spans(path, text):
        decision = decide(span.value, rules)
        plan.counts[decision.outcome] += 1
        if not decision.migrates:
            continue
        plan.tags.setdefault(decision.outcome, Counter())[decision.tag or "(no tag)"] += 1
        original = text[span.start : span.end]
        pieces.append(text[position : span.start])
        pieces.append(render_like(original, migrated(span.value, decision), text, span.start))
        position = span.end
    if pieces:
        pieces.append(text[position:])
        plan.new_text = "".join(pieces)
    return plan


def plan_corpus(paths: Iterable[Path], rules: Rules = Rules()) -> list[FilePlan]:
    return [plan_file(path, rules) for path in corpus_files(paths)]


def apply(plans: Iterable[FilePlan]) -> list[Path]:
    """Write each changed file atomically (temp file + rename), one file at a time."""
    written = []
    for plan in plans:
        if plan.new_text is not None and atomic_write_text(plan.path, plan.new_text):
            written.append(plan.path)
    return written


def split_line(counts: Counter[str]) -> str:
    migrate = sum(counts[outcome] for outcome in MIGRATED)
    text = f"{migrate} to migrate"
    if migrate:
        text += " (" + ", ".join(f"{counts[o]} {o}" for o in MIGRATED if counts[o]) + ")"
    untouched = [f"{counts[o]} {o}" for o in UNTOUCHED if counts[o]]
    if untouched:
        text += "; untouched: " + ", ".join(untouched)
    return text


def summary_lines(plans: list[FilePlan], root: Path) -> list[str]:
    lines = []
    total: Counter[str] = Counter()
    tags: dict[str, Counter[str]] = {}
    for plan in plans:
        total.update(plan.counts)
        for outcome, counter in plan.tags.items():
            tags.setdefault(outcome, Counter()).update(counter)
        lines.append(f"{relative(plan.path, root)}: {split_line(plan.counts)}")
    records = sum(total.values())
    lines.append(f"total: {records} record(s) in {len(plans)} file(s): {split_line(total)}")
    for outcome, reading in (
        (NONE, "empty cache dir"),
        (COLD, "tag ends in cold"),
        (WARM, "tag ends in warm"),
        (UNKNOWN, "no evidence"),
    ):
        if outcome in tags:
            listed = ", ".join(f"{tag} ({count})" for tag, count in sorted(tags[outcome].items()))
            lines.append(f"{outcome} ({reading}), by tag: {listed}")
    return lines
