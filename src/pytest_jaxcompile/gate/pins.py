"""The pin store: expected compile figures in TOML, one file per comparability key.

Layout of ``pins/<slug>.toml`` (the slug is only a readable file name; the key is
stored verbatim in the ``[key]`` table and is what the store goes by)::

    [key]
    hardware = "cpu:cpu @ AMD EPYC 7B13 x2"
    jax_version = "0.10.2"
    mixed_precision = false
    cache_state = "cold"

    # Every pin below has these, unless it sets its own:
    [common]            # what most pins share (COMMON_FIELDS), written once
    pinned_at = "2026-11-30T01:00:00+00:00"
    jaxlib_version = "0.10.2"       # optional: versions JAX's cache key hashes
    platform_version = "cpu"
    key_parts = { "XLA flags" = "...", ... }  # the parts most pins share, part by part

    [pins."tests/test_models.py::test_mlp".vag]
    compile_s = 0.3121
    compile_cpu_s = 0.3301
    fingerprint = "sha256:..."
    op_count = 70
    load_avg_1m = 0.41
    ops = { "stablehlo.add" = 4, ... }        # one line each: inline tables and arrays
    key_parts = { computation = "...", ... }  # its own parts, beside [common]'s
    key_flags = ["--xla_cpu_..."]   # only when XLA flags were set
    # tolerance = 0.8   (optional, hand-set; kept across re-pins)

    [tests]             # backend compiles of each whole test (census), a line each
    "tests/test_models.py::test_mlp" = { compiles = 3 }

    # A settings variant's pins (rows whose XLA flags or compile options in the cache key
    # differ from the defaults: `CompileRecord.variant`), shaped like [pins], by variant:
    [variants."xla_backend_optimization_level=0"."tests/test_models.py::test_mlp".vag]
    compile_s = 0.2012

Files are rendered deterministically (sorted, rounded, no wall-clock "now"), so
re-pinning unchanged figures rewrites identical bytes. Writes happen under a
`filelock` lock, re-read the file inside the lock (two sessions re-pinning at once
lose nothing), and replace it atomically.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import functools
import hashlib
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import tomli_w

from pytest_jaxcompile._io import InputError, atomic_write_text, read_text
from pytest_jaxcompile._numbers import NumberError, finite_number, whole, whole_number
from pytest_jaxcompile.records import (
    CENSUS_SOURCE,
    FRAMEWORKS,
    SCOPE_TEST,
    VERSION_FIELDS,
    CacheState,
    ComparabilityKey,
    CompileRecord,
    row_name,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

PIN_FILE_HEADER = (
    "# Compile-time pins written by pytest-jaxcompile; one file per comparability key.\n"
    "# Re-pin with: pytest --compile-pin-update. A hand-set `tolerance` is kept.\n\n"
)
SECONDS_DIGITS = 4
LOCK_TIMEOUT_S = 120.0

PinId = tuple[str, str]  # (cell, transform)
RowId = tuple[str, str, str]  # (cell, transform, variant): a pin's identity inside its key
VERSION_PIN_FIELDS = ("jaxlib_version", "platform_version")  # optional, in every pin


class Margins(Protocol):
    """What a re-pin needs of the limits the gate judges a row with (`gate.limits.Limits`):
    the tolerance and the floors of its drift margin."""

    @property
    def tolerance(self) -> float: ...
    @property
    def floor_s(self) -> float: ...
    @property
    def rss_floor_mib(self) -> float: ...


class PinLockTimeout(Exception):
    """Another session held the pins dir's lock for longer than LOCK_TIMEOUT_S."""


class PinFileError(InputError):
    """A pin file that cannot be read; names the file and, where known, the line."""


@dataclass(frozen=True)
class Pin:
    compile_s: float
    compile_cpu_s: float | None = None
    fingerprint: str | None = None
    op_count: int | None = None
    pinned_at: str | None = None
    load_avg_1m: float | None = None
    tolerance: float | None = None
    trace_s: float | None = None  # pins of earlier releases have none: not judged
    lower_s: float | None = None
    source: str | None = None  # "census": pinned from a census, stale only to a census
    ops: dict[str, int] | None = None  # StableHLO ops by name: what grew, named
    key_parts: dict[str, str] | None = None  # JAX's cache-key parts: what changed, named
    key_flags: list[str] | None = None  # the XLA flags in that key
    # Versions JAX's cache key hashes beside the module; None: unknown (older pins)
    jaxlib_version: str | None = None
    platform_version: str | None = None
    # Compiled memory and cost, and the compile's RSS growth (docs/memory.md); pins of
    # earlier releases have none, and a figure a pin lacks is not judged.
    compiled_temp_bytes: int | None = None
    flops: float | None = None
    compile_rss_growth_mib: float | None = None  # fixture rows only (not a test's peak)
    # --compile-instructions: the compile's instruction count and the instrument's identity
    # (compared only with a row of an equal identity, under any hardware key)
    compile_instructions: int | None = None
    compile_instructions_identity: str | None = None
    # What compiled it, as the backend reported it (whatever the hardware name): a row is
    # compared with another key's pin only on the same platform and device kind.
    platform: str | None = None
    device_kind: str | None = None

    @property
    def device(self) -> str | None:
        """``cpu:cpu``, ``gpu:NVIDIA H200``; None for pins of earlier releases."""
        if self.platform and self.device_kind:
            return f"{self.platform}:{self.device_kind}"
        return None

    # The digest of the compile options it was counted with: with the fingerprint and the
    # identity, what lets a later session carry the count instead of counting again.
    compile_options_digest: str | None = None

    @classmethod
    def from_record(
        cls, record: CompileRecord, previous: Pin | None, limits: Margins | None = None
    ) -> Pin:
        """The pin of this record. With the `limits` the gate judges the row with, a
        re-pin of an unchanged module keeps each measured figure of `previous` that the new
        one is within a third of its margin of (`kept_figures`)."""
        if record.compile_s is None:
            raise ValueError(f"{record.name}: {record.unmeasured}")
        pin = cls(
            jaxlib_version=record.jaxlib_version or None,
            platform_version=record.platform_version or None,
            compile_s=round(record.compile_s, SECONDS_DIGITS),
            compile_cpu_s=(
                None
                if record.compile_cpu_s is None
                else round(record.compile_cpu_s, SECONDS_DIGITS)
            ),
            fingerprint=record.fingerprint,
            op_count=record.op_count,
            pinned_at=record.timestamp or None,
            load_avg_1m=record.host_state.load_avg_1m,
            tolerance=previous.tolerance if previous else None,
            # Only the fixture traces afresh: a census row's trace time depends on what
            # the process traced before, so it is not pinned.
            trace_s=_rounded(record.trace_s) if record.source != CENSUS_SOURCE else None,
            lower_s=_rounded(record.lower_s) if record.source != CENSUS_SOURCE else None,
            source=record.source if record.source == CENSUS_SOURCE else None,
            ops=dict(record.op_histogram) if record.op_histogram else None,
            key_parts=dict(record.cache_key_parts) if record.cache_key_parts else None,
            key_flags=list(record.cache_key_flags or []) if record.cache_key_parts else None,
            **_memory_pin(record),
            **_instructions_pin(record, previous),
            platform=_detail(record, "platform"),
            device_kind=_detail(record, "device_kind"),
        )
        return pin if limits is None else kept_figures(pin, previous, limits)

    def to_toml(self) -> dict[str, Any]:
        table: dict[str, Any] = {"compile_s": self.compile_s}
        if self.compile_cpu_s is not None:
            table["compile_cpu_s"] = self.compile_cpu_s
        if self.tolerance is not None:
            table["tolerance"] = self.tolerance
        if self.fingerprint is not None:
            table["fingerprint"] = self.fingerprint
        if self.op_count is not None:
            table["op_count"] = self.op_count
        if self.pinned_at is not None:
            table["pinned_at"] = self.pinned_at
        if self.load_avg_1m is not None:
            table["load_avg_1m"] = self.load_avg_1m
        for phase in ("trace_s", "lower_s", *MEMORY_PIN_FIELDS):
            if getattr(self, phase) is not None:
                table[phase] = getattr(self, phase)
        if self.source is not None:
            table["source"] = self.source
        if self.ops:
            table["ops"] = dict(sorted(self.ops.items()))
        if self.key_parts:
            table["key_parts"] = dict(sorted(self.key_parts.items()))  # deterministic bytes
            if self.key_flags:  # absent beside key_parts: no XLA flags (read back as [])
                table["key_flags"] = list(self.key_flags)
        for name in (*VERSION_PIN_FIELDS, *INSTRUCTIONS_PIN_FIELDS, *DEVICE_PIN_FIELDS):
            if getattr(self, name) is not None:
                table[name] = getattr(self, name)
        return table


# A pin's fields written on one line each, whatever their length (inline tables, arrays).
INLINE_FIELDS = ("ops", "key_parts", "key_flags")


def _inline(value: Any) -> str:
    """A table or array as one TOML line, its keys and strings quoted as tomli_w quotes them."""

    def item(name: str, element: Any) -> str:
        return tomli_w.dumps({name: element}).strip()

    if isinstance(value, dict):
        inside = ", ".join(item(str(name), element) for name, element in value.items())
        return f"{{ {inside} }}" if inside else "{}"
    return "[" + ", ".join(item("x", element)[len("x = ") :] for element in value) + "]"


def _toml_key(name: str) -> str:
    """`name` as a TOML key, quoted as tomli_w quotes it."""
    return tomli_w.dumps({name: 0}).rstrip("\n").removesuffix(" = 0")


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, SECONDS_DIGITS)


MEMORY_PIN_FIELDS = ("compiled_temp_bytes", "flops", "compile_rss_growth_mib")
DEVICE_PIN_FIELDS = ("platform", "device_kind")


def _detail(record: CompileRecord, name: str) -> str | None:
    value = record.hardware_detail.get(name)
    return str(value) if value else None


# A re-pin's measured figures: each kept as pinned while the new one is within
# REPIN_SHARE of its margin (the gate's tolerance of the old figure, at least its floor).
# Seconds have the seconds floor, the RSS growth the RSS floor. Deterministic figures
# (fingerprint, ops, bytes, flops, key parts) are always rewritten.
REPIN_SHARE = 1 / 3
SECONDS_FIGURES = ("compile_s", "compile_cpu_s", "trace_s", "lower_s")
MEASURED_FIGURES = (*SECONDS_FIGURES, "compile_rss_growth_mib")
PROVENANCE_FIELDS = ("pinned_at", "load_avg_1m")  # kept when every measured figure is


def within_repin_margin(old: float, new: float, tolerance: float, floor: float) -> bool:
    """Whether `new` is within a third of the margin the gate allows `old`: its
    tolerance of it, or the floor where that is larger."""
    return abs(new - old) <= max(old * tolerance, floor) * REPIN_SHARE


def kept_figures(new: Pin, previous: Pin | None, limits: Margins) -> Pin:
    """`new`, with each measured figure of `previous` kept where the new one is within a
    third of its margin, when both pins are of the same module (fingerprint); the pin's
    provenance (when and at what load it was pinned) too when every figure was kept, so
    an unchanged project's re-pin rewrites no byte."""
    if previous is None or new.fingerprint is None or new.fingerprint != previous.fingerprint:
        return new
    kept: dict[str, Any] = {}
    for name in MEASURED_FIGURES:
        old, now = getattr(previous, name), getattr(new, name)
        floor = limits.floor_s if name in SECONDS_FIGURES else limits.rss_floor_mib
        if (
            old is not None
            and now is not None
            and within_repin_margin(old, now, limits.tolerance, floor)
        ):
            kept[name] = old
    if all(getattr(new, name) is None or name in kept for name in MEASURED_FIGURES):
        kept.update({name: getattr(previous, name) for name in PROVENANCE_FIELDS})
    return replace(new, **kept)


INSTRUCTIONS_PIN_FIELDS = (
    "compile_instructions",
    "compile_instructions_identity",
    "compile_options_digest",
)


def _instructions_pin(record: CompileRecord, previous: Pin | None) -> dict[str, Any]:
    """The row's instruction count; a session that did not count keeps the previous pin's
    count while the module is unchanged."""
    if (
        record.compile_instructions is None
        and previous is not None
        and (previous.fingerprint == record.fingerprint)
    ):
        return {name: getattr(previous, name) for name in INSTRUCTIONS_PIN_FIELDS}
    return {name: getattr(record, name) for name in INSTRUCTIONS_PIN_FIELDS}


def _memory_pin(record: CompileRecord) -> dict[str, Any]:
    """The memory figures a pin keeps: those the gate judges. A census row's RSS covers
    its whole test (`compile_rss_scope` "test"), not its compile, and is not pinned."""
    growth = record.compile_rss_growth_mib if record.compile_rss_scope != SCOPE_TEST else None
    return {
        "compiled_temp_bytes": record.compiled_temp_bytes,
        "flops": record.flops,
        "compile_rss_growth_mib": growth,
    }


@dataclass
class PinGroup:
    """The pins of one comparability key, as stored in one file."""

    key: ComparabilityKey
    path: Path
    pins: dict[PinId, Pin] = field(default_factory=dict)  # the default settings' pins
    compiles: dict[str, int] = field(default_factory=dict)  # per test (cell)
    # Settings variants' pins, by variant (never ""): files of earlier releases have none.
    variants: dict[str, dict[PinId, Pin]] = field(default_factory=dict)

    def pins_of(self, variant: str) -> dict[PinId, Pin]:
        """The pins of one variant ("" the default settings'), to read or fill."""
        return self.pins if not variant else self.variants.setdefault(variant, {})

    def get(self, cell: str, transform: str, variant: str = "") -> Pin | None:
        pins = self.pins if not variant else self.variants.get(variant, {})
        return pins.get((cell, transform))

    def all_pins(self) -> Iterator[tuple[RowId, Pin]]:
        """Every pin with its (cell, transform, variant), the default settings' first."""
        for variant, pins in [("", self.pins), *sorted(self.variants.items())]:
            for cell, transform in sorted(pins):
                yield (cell, transform, variant), pins[(cell, transform)]

    def render(self) -> str:
        """The file's text: each pin a table of the reviewed figures, one line each, and
        its op histogram, key parts and key flags one inline line each (a pin is a few
        lines, not one line per op); what most pins share (their provenance, the key parts
        no module changes) once under [common]; the default settings' pins under [pins],
        each settings variant's under [variants."<variant>"]. Files of earlier releases,
        with none in common and sub-tables and multi-line arrays, read the same (TOML does
        not tell those apart)."""
        parts = [PIN_FILE_HEADER, tomli_w.dumps({"key": key_table(self.key)})]
        tables = {row: pin.to_toml() for row, pin in self.all_pins()}
        common = common_fields(list(tables.values()))
        if common:
            parts.append(f"\n{COMMON_COMMENT}\n{_table_text(('common',), common)}")
        for (cell, transform, variant), table in tables.items():
            where = ("pins",) if not variant else ("variants", variant)
            parts.append("\n" + _table_text((*where, cell, transform), _own(table, common)))
        if self.compiles:  # one line per test: `"<cell>" = { compiles = 3 }`
            parts.append("\n[tests]\n")
            parts += [
                f"{_toml_key(cell)} = {_inline({'compiles': self.compiles[cell]})}\n"
                for cell in sorted(self.compiles)
            ]
        return "".join(parts)


def _table_text(path: tuple[str, ...], table: dict[str, Any]) -> str:
    """A pin's table (or [common]) at `path` (``pins, cell, transform``): its figures one
    line each, then its inline fields."""
    lines: dict[str, Any] = {
        name: value for name, value in table.items() if name not in INLINE_FIELDS
    }
    inline = [f"{name} = {_inline(table[name])}\n" for name in INLINE_FIELDS if name in table]
    if not lines:  # inline fields alone (a [common] of key parts): tomli_w writes no header
        return f"{_header(path)}\n" + "".join(inline)
    nested = lines
    for part in reversed(path):
        nested = {part: nested}
    return tomli_w.dumps(nested) + "".join(inline)


def _header(path: tuple[str, ...]) -> str:
    """The header line of the table at `path`, as tomli_w renders it."""
    nested: dict[str, Any] = {"x": 0}
    for part in reversed(path):
        nested = {part: nested}
    return next(line for line in tomli_w.dumps(nested).splitlines() if line.startswith("["))


# Fields a pin file writes once under [common] when most pins share a value: where and how
# the pins were made. The figures a reviewer reads (compile_s, fingerprint, ...) and a
# hand-set tolerance stay on each pin. `key_parts` is shared part by part.
COMMON_FIELDS = (
    "pinned_at",
    "load_avg_1m",
    "source",
    *VERSION_PIN_FIELDS,
    "compile_instructions_identity",
    *DEVICE_PIN_FIELDS,
)
COMMON_COMMENT = "# Every pin below has these, unless it sets its own:"


def common_fields(tables: list[dict[str, Any]]) -> dict[str, Any]:
    """The [common] table of pins rendered as `tables`: each field of COMMON_FIELDS that
    every pin has, with the value most of them (at least two) share, and the key parts
    every pin has, each with the value most of them share. Ties go to the first pin's."""
    common: dict[str, Any] = {}
    for name in COMMON_FIELDS:
        values = [table.get(name) for table in tables]
        if None not in values and values:
            value, count = Counter(values).most_common(1)[0]
            if count > 1:
                common[name] = value
    all_parts = [table.get("key_parts") or {} for table in tables]
    if all_parts and all(all_parts):
        shared = set(all_parts[0]).intersection(*all_parts[1:])
        parts = {}
        for part in sorted(shared):
            value, count = Counter(each[part] for each in all_parts).most_common(1)[0]
            if count > 1:
                parts[part] = value
        if parts:
            common["key_parts"] = parts
    return common


def _own(table: dict[str, Any], common: dict[str, Any]) -> dict[str, Any]:
    """A pin's table less what [common] says for it."""
    own = {}
    for name, value in table.items():
        if name == "key_parts" and "key_parts" in common:
            shared = common["key_parts"]
            value = {part: text for part, text in value.items() if shared.get(part) != text}
            if value:
                own[name] = value
        elif name not in common or common[name] != value:
            own[name] = value
    return own


def _with_common(raw: dict[str, Any], common: dict[str, Any]) -> dict[str, Any]:
    """A pin's table as written, with what [common] says for it (its own values first;
    its own key parts beside the common ones)."""
    merged = {**common, **raw}
    shared_parts, own_parts = common.get("key_parts"), raw.get("key_parts")
    if isinstance(shared_parts, dict) and isinstance(own_parts, dict):
        merged["key_parts"] = {**shared_parts, **own_parts}
    return merged


def key_table(key: ComparabilityKey) -> dict[str, Any]:
    """The [key] table: the key's own dict (JAX keys as they always were)."""
    return key.to_dict()


@functools.lru_cache(maxsize=256)  # a pure function, asked once per row judged
def pin_file_name(key: ComparabilityKey) -> str:
    """A readable, filesystem-safe name; lossy, so a short hash keeps it unique."""
    precision = "mixed" if key.mixed_precision else "full"
    parts = (
        key.hardware[:80],
        f"{key.framework}-{key.framework_version}",
        precision,
        key.cache_state,
    )
    slug = "--".join(re.sub(r"[^A-Za-z0-9.]+", "-", part).strip("-").lower() for part in parts)
    # The text hashed is the key as earlier releases spelled it, so names stay stable.
    spelled = (
        f"ComparabilityKey(hardware={key.hardware!r}, jax_version={key.framework_version!r}, "
        f"mixed_precision={key.mixed_precision!r}, cache_state={key.cache_state!r}, "
        f"framework={key.framework!r})"
    )
    digest = hashlib.sha256(spelled.encode()).hexdigest()[:8]
    return f"{slug}--{digest}.toml"


def _line_of(text: str, needle: str) -> int | None:
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number
    return None


_TOML_POSITION = re.compile(r"\(at line (\d+), column \d+\)")


def parse_pin_file(path: Path, text: str) -> PinGroup:
    """Parse and validate one pin file; any problem is a PinFileError with the line."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        match = _TOML_POSITION.search(str(error))
        line = int(match.group(1)) if match else getattr(error, "lineno", None)
        raise PinFileError(path, f"not valid TOML: {error}", line) from None

    raw_key = document.get("key")
    if not isinstance(raw_key, dict):
        raise PinFileError(path, "missing the [key] table that names the comparability key")
    key_line = _line_of(text, "[key]")
    fields: dict[str, Any] = {}
    framework = raw_key.get("framework", "jax")
    if framework not in FRAMEWORKS:
        raise PinFileError(
            path,
            f"[key] framework {framework!r} is not one of {', '.join(FRAMEWORKS)}",
            _field_line(text, key_line, "framework") or key_line,
        )
    version_field = VERSION_FIELDS[framework]
    for name, kind in (
        ("hardware", str),
        (version_field, str),
        ("mixed_precision", bool),
        ("cache_state", str),
    ):
        try:
            fields[name] = _expect(raw_key, name, kind)
        except ValueError as error:
            line = _field_line(text, key_line, name) or key_line
            raise PinFileError(path, f"[key] {error}", line) from None
    key = ComparabilityKey(
        hardware=fields["hardware"],
        framework_version=fields[version_field],
        mixed_precision=fields["mixed_precision"],
        cache_state=fields["cache_state"],
        framework=framework,
    )
    if key.cache_state not in {state.value for state in CacheState if state.judged}:
        raise PinFileError(
            path,
            f"[key] cache_state {key.cache_state!r} cannot be pinned (expected cold, warm or none)",
            _field_line(text, key_line, "cache_state"),
        )

    group = PinGroup(key=key, path=path)
    common = _common_table(path, text, document.get("common", {}))
    raw_pins = document.get("pins", {})
    if not isinstance(raw_pins, dict):
        raise PinFileError(path, "[pins] must be a table of cells", _line_of(text, "pins"))
    _parse_pins(path, text, raw_pins, group.pins, "", common)
    raw_variants = document.get("variants", {})
    if not isinstance(raw_variants, dict):
        raise PinFileError(
            path, "[variants] must be a table of settings variants", _line_of(text, "[variants")
        )
    for variant, variant_pins in raw_variants.items():
        if not variant or not isinstance(variant_pins, dict):
            raise PinFileError(
                path,
                f"[variants] {variant!r} must be a settings variant's table of cells",
                _line_of(text, f"[variants.{variant}") or _line_of(text, "[variants"),
            )
        _parse_pins(path, text, variant_pins, group.pins_of(variant), variant, common)
    raw_tests = document.get("tests", {})
    if not isinstance(raw_tests, dict):
        raise PinFileError(path, "[tests] must be a table of cells", _line_of(text, "[tests"))
    for cell, raw in raw_tests.items():
        header = _line_of(text, cell) if cell not in raw_pins else None
        alone = isinstance(raw, dict) and set(raw) == {"compiles"}
        try:
            group.compiles[cell] = whole_number(raw["compiles"] if alone else None)
        except NumberError:
            raise PinFileError(
                path,
                f"[tests] {cell!r} must hold exactly `compiles = <{whole()}>`",
                header or _line_of(text, "[tests"),
            ) from None
    unknown = set(document) - {"key", "common", "pins", "tests", "variants"}
    if unknown:
        raise PinFileError(
            path,
            f"unknown table(s) {', '.join(sorted(unknown))}",
            _line_of(text, f"[{sorted(unknown)[0]}"),
        )
    return group


def _common_table(path: Path, text: str, raw: object) -> dict[str, Any]:
    """The [common] table, checked as a pin's fields are (it holds only COMMON_FIELDS and
    key_parts)."""
    # The header's own line: a test id may contain "[common]" too
    line = next(
        (at for at, each in enumerate(text.splitlines(), start=1) if each.strip() == "[common]"),
        None,
    )
    if not isinstance(raw, dict):
        raise PinFileError(path, "[common] must be a table of pin fields", line)
    unknown = set(raw) - {*COMMON_FIELDS, "key_parts"}
    if unknown:
        first = sorted(unknown)[0]
        raise PinFileError(
            path,
            f"[common] holds only {', '.join((*COMMON_FIELDS, 'key_parts'))}; "
            f"not {', '.join(sorted(unknown))} (set it on each pin)",
            _field_line(text, line, first) or line,
        )
    try:
        _pin_from_table({"compile_s": 0.0, **raw})
    except PinFieldError as error:
        raise PinFileError(
            path, f"[common] {error}", _field_line(text, line, error.field) or line
        ) from None
    return raw


def _parse_pins(
    path: Path,
    text: str,
    raw_pins: dict[str, Any],
    into: dict[PinId, Pin],
    variant: str,
    common: dict[str, Any],
) -> None:
    """One table of cells and their transforms' pins ([pins], or a variant's), each with
    what [common] says for it."""
    for cell, transforms in raw_pins.items():
        if not isinstance(transforms, dict):
            raise PinFileError(path, f"pins for {cell!r} must be a table", _line_of(text, cell))
        for transform, raw in transforms.items():
            # The line is looked up only for an error: a lookup scans the whole text, and
            # doing it for every pin made loading quadratic in the number of pins.
            name = row_name(cell, transform, variant)
            if not isinstance(raw, dict):
                header = _pin_line(text, cell, transform, variant)
                raise PinFileError(path, f"pin {name} must be a table", header)
            try:
                into[(cell, transform)] = _pin_from_table(_with_common(raw, common))
            except PinFieldError as error:
                header = _pin_line(text, cell, transform, variant)
                line = _field_line(text, header, error.field) or header
                raise PinFileError(path, f"pin {name}: {error}", line) from None


def _field_line(text: str, table_line: int | None, name: str) -> int | None:
    """The line of `name = ...` inside the table starting at `table_line`."""
    if table_line is None:
        return None
    lines = text.splitlines()
    for number in range(table_line, len(lines)):
        stripped = lines[number].strip()
        if stripped.startswith("["):
            return None
        if re.match(rf"{re.escape(name)}\s*=", stripped):
            return number + 1
    return None


def _pin_line(text: str, cell: str, transform: str, variant: str = "") -> int | None:
    """The line of a pin's table header (as tomli-w renders it), for error messages."""
    where = ("variants", variant) if variant else ("pins",)
    return _line_of(text, _header((*where, cell, transform))) or _line_of(text, cell)


def pin_line(path: Path, cell: str, transform: str, variant: str = "") -> int | None:
    """The 1-based line of a pin's table in its file, or None (unreadable, not found)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return _pin_line(text, cell, transform, variant)


def _expect(table: dict[str, Any], name: str, kind: type) -> Any:
    if name not in table:
        raise ValueError(f"missing {name!r}")
    value = table[name]
    if (kind is not bool and isinstance(value, bool)) or not isinstance(value, kind):
        raise ValueError(f"{name!r} must be a {kind.__name__}, got {value!r}")
    return value


class PinFieldError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _number(raw: dict[str, Any], name: str, *, required: bool = False) -> float | None:
    if name not in raw:
        if required:
            raise PinFieldError(name, f"missing {name!r}")
        return None
    try:
        return finite_number(raw[name])
    except NumberError as error:
        raise PinFieldError(name, f"{name!r} {error}") from None


def _text_table(raw: dict[str, Any], name: str) -> dict[str, str] | None:
    value = raw.get(name)
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise PinFieldError(name, f"{name!r} must be a table of strings")
    return {str(key): text for key, text in value.items()}


def _text_list(raw: dict[str, Any], name: str) -> list[str] | None:
    value = raw.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise PinFieldError(name, f"{name!r} must be a list of strings")
    return list(value)


def _op_histogram(raw: dict[str, Any]) -> dict[str, int] | None:
    ops = raw.get("ops")
    if ops is None:
        return None
    if not isinstance(ops, dict):
        raise PinFieldError("ops", "'ops' must be a table of operation names and counts")
    try:
        return {str(name): whole_number(count) for name, count in ops.items()}
    except NumberError as error:
        raise PinFieldError(
            "ops", f"'ops' must be a table of operation names and counts: a count {error}"
        ) from None


def _pin_from_table(raw: dict[str, Any]) -> Pin:
    unknown = set(raw) - {
        "compile_s",
        "compile_cpu_s",
        "tolerance",
        "fingerprint",
        "op_count",
        "pinned_at",
        "load_avg_1m",
        "trace_s",
        "lower_s",
        "source",
        "ops",
        "key_parts",
        "key_flags",
        *VERSION_PIN_FIELDS,
        *MEMORY_PIN_FIELDS,
        *INSTRUCTIONS_PIN_FIELDS,
        *DEVICE_PIN_FIELDS,
    }
    if unknown:
        first = sorted(unknown)[0]
        raise PinFieldError(first, f"unknown field(s) {', '.join(sorted(unknown))}")
    compile_s = _number(raw, "compile_s", required=True)
    assert compile_s is not None
    for text_field in (
        "fingerprint",
        "pinned_at",
        "source",
        *VERSION_PIN_FIELDS,
        "compile_instructions_identity",
        *DEVICE_PIN_FIELDS,
        "compile_options_digest",
    ):
        if text_field in raw and not isinstance(raw[text_field], str):
            raise PinFieldError(text_field, f"{text_field!r} must be a string")
    return Pin(
        compile_s=compile_s,
        compile_cpu_s=_number(raw, "compile_cpu_s"),
        fingerprint=raw.get("fingerprint"),
        op_count=_count(raw, "op_count"),
        pinned_at=raw.get("pinned_at"),
        load_avg_1m=_number(raw, "load_avg_1m"),
        tolerance=_number(raw, "tolerance"),
        trace_s=_number(raw, "trace_s"),
        lower_s=_number(raw, "lower_s"),
        source=raw.get("source"),
        ops=_op_histogram(raw),
        key_parts=_text_table(raw, "key_parts"),
        # Written only when a flag is set: key parts without them mean none was.
        key_flags=_text_list(raw, "key_flags") or ([] if "key_parts" in raw else None),
        jaxlib_version=raw.get("jaxlib_version"),
        platform_version=raw.get("platform_version"),
        compiled_temp_bytes=_count(raw, "compiled_temp_bytes"),
        flops=_number(raw, "flops"),
        compile_rss_growth_mib=_number(raw, "compile_rss_growth_mib"),
        compile_instructions=_count(raw, "compile_instructions"),
        compile_instructions_identity=raw.get("compile_instructions_identity"),
        platform=raw.get("platform"),
        device_kind=raw.get("device_kind"),
        compile_options_digest=raw.get("compile_options_digest"),
    )


def _count(raw: dict[str, Any], name: str) -> int | None:
    value = raw.get(name)
    if value is None:
        return None
    try:
        return whole_number(value)
    except NumberError as error:
        raise PinFieldError(name, f"{name!r} {error}") from None


def read_pin_file(path: Path) -> PinGroup:
    return parse_pin_file(path, read_text(path, PinFileError))


# The limits the gate judges a row with, given its pin (`gate.limits.limits_for`).
LimitsOf = Callable[[CompileRecord, "Pin | None"], Margins]


@dataclass
class PinUpdate:
    """What a pin update did: the files it wrote, and how many re-pinned pins it kept as
    they were (every figure within a third of its margin)."""

    written: list[Path] = field(default_factory=list)
    kept: int = 0


class PinStore:
    """All pin files of one directory, indexed by comparability key."""

    def __init__(self, directory: Path, groups: Iterable[PinGroup] = ()) -> None:
        self.directory = directory
        self._groups: dict[ComparabilityKey, PinGroup] = {}
        for group in groups:
            self._add(group)

    def _add(self, group: PinGroup) -> None:
        existing = self._groups.get(group.key)
        if existing is not None and existing.path != group.path:
            raise PinFileError(
                group.path,
                f"holds the same [key] as {existing.path}; merge the two files into one",
                1,
            )
        self._groups[group.key] = group

    @classmethod
    def load(cls, directory: Path) -> PinStore:
        """Read every ``*.toml`` file; a missing directory is an empty store."""
        if not directory.is_dir():
            return cls(directory)
        return cls(directory, (read_pin_file(path) for path in sorted(directory.glob("*.toml"))))

    def is_empty(self) -> bool:
        """Whether no pin file was read."""
        return not self._groups

    def groups(self) -> Iterator[PinGroup]:
        yield from sorted(self._groups.values(), key=lambda group: group.key)

    def get(
        self, key: ComparabilityKey, cell: str, transform: str, variant: str = ""
    ) -> Pin | None:
        group = self._groups.get(key)
        return None if group is None else group.get(cell, transform, variant)

    def has_pins(self, key: ComparabilityKey) -> bool:
        """Whether any row is pinned under this key."""
        group = self._groups.get(key)
        return group is not None and bool(group.pins)

    def path_for(self, key: ComparabilityKey) -> Path:
        group = self._groups.get(key)
        return group.path if group is not None else self.directory / pin_file_name(key)

    def pins_of(self, cell: str, transform: str, variant: str = "") -> Iterator[tuple[Path, Pin]]:
        """Every pin of this cell, transform and variant, under any key (in key order)."""
        for group in self.groups():
            pin = group.get(cell, transform, variant)
            if pin is not None:
                yield group.path, pin

    def keys_pinning(self, cell: str, transform: str, variant: str = "") -> list[ComparabilityKey]:
        """Every key under which this cell, transform and variant has a pin."""
        return sorted(
            key
            for key, group in self._groups.items()
            if group.get(cell, transform, variant) is not None
        )

    def compiles_pinned(self, key: ComparabilityKey, cell: str) -> int | None:
        group = self._groups.get(key)
        return None if group is None else group.compiles.get(cell)

    def cells_with_compile_counts(self) -> set[str]:
        """The tests whose compile count is pinned under some key."""
        return {cell for group in self._groups.values() for cell in group.compiles}

    def update(
        self, records: Iterable[CompileRecord], compiles: Mapping[str, int] | None = None
    ) -> list[Path]:
        """Pin these records, every figure as measured (`repin`). Returns the files
        written."""
        return self.repin(records, compiles).written

    def repin(
        self,
        records: Iterable[CompileRecord],
        compiles: Mapping[str, int] | None = None,
        limits_of: LimitsOf | None = None,
    ) -> PinUpdate:
        """Pin these records (one per cell/transform/variant/key; the last wins).

        `unknown` and `memory` rows are never pinned; other pins are left untouched.
        `compiles` (per cell) is pinned in every file that receives a row of that cell.
        With `limits_of` (the limits the gate judges a row and its pin with), a re-pinned
        unchanged module keeps each measured figure that moved by less than a third of its
        margin (`kept_figures`), and a pin kept whole is counted in `PinUpdate.kept`.
        """
        compiles = compiles or {}
        by_key: dict[ComparabilityKey, dict[RowId, CompileRecord]] = {}
        for record in records:
            if record.state.judged and record.unmeasured is None:
                by_key.setdefault(record.key, {})[record.row_id] = record
        if not by_key:
            return PinUpdate()
        self.directory.mkdir(parents=True, exist_ok=True)
        update = PinUpdate()
        from filelock import FileLock, Timeout  # only when pinning: start-up stays light

        lock = FileLock(str(lock_path(self.directory)))
        try:
            lock.acquire(timeout=LOCK_TIMEOUT_S)
        except Timeout:
            raise PinLockTimeout(
                f"{self.directory}: another pytest session has held the pins lock "
                f"({lock.lock_file}) for {LOCK_TIMEOUT_S:g} s; let it finish, or delete the "
                "lock file if no session is running"
            ) from None
        try:
            # Read every file first (inside the lock: another session may have re-pinned
            # meanwhile), so a broken file stops the update before anything is written.
            groups = {key: self._read_for_update(key) for key in sorted(by_key)}
            for key, group in groups.items():
                for (cell, transform, variant), record in by_key[key].items():
                    pins = group.pins_of(variant)
                    previous = pins.get((cell, transform))
                    limits = None if limits_of is None else limits_of(record, previous)
                    pin = Pin.from_record(record, previous, limits)
                    if limits is not None and pin == previous:
                        update.kept += 1
                    pins[(cell, transform)] = pin
                    if record.cell in compiles:
                        group.compiles[record.cell] = compiles[record.cell]
                if atomic_write_text(group.path, group.render()):
                    update.written.append(group.path)
                self._groups[key] = group
        finally:
            lock.release()
        return update

    def _read_for_update(self, key: ComparabilityKey) -> PinGroup:
        path = self.path_for(key)
        if not path.exists():
            return PinGroup(key=key, path=path)
        group = read_pin_file(path)
        if group.key != key:
            raise PinFileError(path, f"[key] changed on disk to {group.key.describe()}", 1)
        return group


def lock_path(directory: Path) -> Path:
    """One lock per pins dir, outside it, so the pins dir holds only pin files."""
    digest = hashlib.sha256(str(directory.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"pytest-jaxcompile-{digest}.lock"
