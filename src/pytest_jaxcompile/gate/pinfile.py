"""Pin files: one comparability key's pins in TOML, rendered and parsed.

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
    sources = { "model.py:41 (loss)" = 9, ... }  # the ops by source location
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
re-pinning unchanged figures rewrites identical bytes. The store (`gate.pins`) writes
them; one pin's fields and their checks are `gate.pin`'s.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import functools
import hashlib
import re
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from pytest_jaxcompile._io import InputError, read_text
from pytest_jaxcompile._numbers import NumberError, whole, whole_number
from pytest_jaxcompile.gate.pin import (
    DEVICE_PIN_FIELDS,
    VERSION_PIN_FIELDS,
    Pin,
    PinFieldError,
    PinId,
    RowId,
    pin_from_table,
)
from pytest_jaxcompile.records import (
    FRAMEWORKS,
    VERSION_FIELDS,
    CacheState,
    ComparabilityKey,
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


class PinFileError(InputError):
    """A pin file that cannot be read; names the file and, where known, the line."""


# A pin's fields written on one line each, whatever their length (inline tables, arrays).
INLINE_FIELDS = ("ops", "sources", "key_parts", "key_flags")


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
        pin_from_table({"compile_s": 0.0, **raw})
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
                into[(cell, transform)] = pin_from_table(_with_common(raw, common))
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


def read_pin_file(path: Path) -> PinGroup:
    return parse_pin_file(path, read_text(path, PinFileError))
