"""One pin: the figures a row is judged against, made from a record, and its table in a
pin file, written (`Pin.to_toml`) and read back (`pin_from_table`), each field checked.
How pins are kept, the files, lives in `gate.pinfile`; the store of a directory's files
in `gate.pins`.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol

from pytest_jaxcompile._numbers import NumberError, finite_number, whole_number
from pytest_jaxcompile.records import CENSUS_SOURCE, SCOPE_TEST, CompileRecord

SECONDS_DIGITS = 4

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
    sources: dict[str, int] | None = None  # the ops by source location: where it grew
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
            sources=dict(record.source_ops) if record.source_ops else None,
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
        if self.sources:
            table["sources"] = dict(sorted(self.sources.items()))
        if self.key_parts:
            table["key_parts"] = dict(sorted(self.key_parts.items()))  # deterministic bytes
            if self.key_flags:  # absent beside key_parts: no XLA flags (read back as [])
                table["key_flags"] = list(self.key_flags)
        for name in (*VERSION_PIN_FIELDS, *INSTRUCTIONS_PIN_FIELDS, *DEVICE_PIN_FIELDS):
            if getattr(self, name) is not None:
                table[name] = getattr(self, name)
        return table


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


def _op_histogram(raw: dict[str, Any], name: str = "ops") -> dict[str, int] | None:
    """``ops`` (operations by name) or ``sources`` (by source location), counted."""
    ops = raw.get(name)
    what = "operation names" if name == "ops" else "source locations"
    if ops is None:
        return None
    if not isinstance(ops, dict):
        raise PinFieldError(name, f"{name!r} must be a table of {what} and counts")
    try:
        return {str(key): whole_number(count) for key, count in ops.items()}
    except NumberError as error:
        raise PinFieldError(
            name, f"{name!r} must be a table of {what} and counts: a count {error}"
        ) from None


def pin_from_table(raw: dict[str, Any]) -> Pin:
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
        "sources",
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
        sources=_op_histogram(raw, "sources"),
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
