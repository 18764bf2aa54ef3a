"""Record data read from files, checked: the one validation every reader applies (JSON
reports, records files, a records corpus, ``pytest-jaxcompile merge``). `check_key_data`
checks what every reader needs (a row's comparability key), `check_record_data` every field
a verdict, a pin or the summary computes with, `check_ledger_data` a call ledger's figures;
numbers through `_numbers`, so ``nan``, ``inf`` and negatives never reach a verdict.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from typing import Any

from pytest_jaxcompile._numbers import NUMBER, NumberError, finite_number, whole_number
from pytest_jaxcompile.records import FRAMEWORKS, STATES, VERSION_FIELDS, ComparabilityKey


class RecordDataError(ValueError):
    """A record read from a file is not a valid compile record; the message says why."""


def _required_string(data: dict[str, Any], name: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value:
        if name not in data:
            raise RecordDataError(f"compile record has no {name!r}")
        raise RecordDataError(f"{name!r} must be a non-empty string, got {value!r}")
    return value


def check_key_data(data: dict[str, Any]) -> ComparabilityKey:
    """The fields every reader needs of a record, checked; returns the record's key.

    Cheap enough for every row of a large corpus; `check_record_data` adds the rest.
    """
    framework = data.get("framework") or "jax"
    if framework not in FRAMEWORKS:
        raise RecordDataError(f"'framework' {framework!r} is not one of {', '.join(FRAMEWORKS)}")
    _required_string(data, "transform")
    hardware = _required_string(data, "hardware")
    version = _required_string(data, VERSION_FIELDS[framework])
    state = data.get("cache_state")
    if state is None:
        raise RecordDataError(
            "compile record has no cache_state (written before cache_state existed?); "
            "migrate the corpus first: pytest-jaxcompile backfill --check PATH"
        )
    if state not in STATES:
        raise RecordDataError(f"cache_state {state!r} is not one of {', '.join(sorted(STATES))}")
    compile_s = data.get("compile_s")
    if compile_s is None and not data.get("missing_metrics"):
        raise RecordDataError(
            "'compile_s' is null but the record names no missing metric ('missing_metrics')"
        )
    if compile_s is not None:
        try:
            finite_number(compile_s)
        except NumberError as error:
            raise RecordDataError(f"'compile_s' {error}") from None
    variant = data.get("variant")
    if variant is not None and not isinstance(variant, str):
        raise RecordDataError(f"'variant' must be a string or null, got {variant!r}")
    mixed = data.get("mixed_precision", False)
    if not isinstance(mixed, bool):
        raise RecordDataError(f"'mixed_precision' must be true or false, got {mixed!r}")
    return ComparabilityKey(hardware, version, mixed, state, framework)


# Optional fields that verdicts, pins or the summary compute with: (name, kind). A present
# value of another type is an error naming the record, not a crash later. Dotted names
# reach into objects.
_OPTIONAL_FIELDS: tuple[tuple[str, str], ...] = (
    ("tolerance", "number"),
    ("budget_only", "flag"),
    ("max_ops_growth", "number"),
    ("compile_cpu_s", "number"),
    ("compile_spread_s", "number"),
    ("trace_s", "number"),
    ("lower_s", "number"),
    ("backend_compile_s", "number"),
    ("cache_retrieval_s", "number"),
    ("op_count", "count"),
    ("fingerprint", "text"),
    ("module_name", "text"),
    ("outcome", "text"),
    ("error", "text"),
    ("compile_samples_s", "list"),
    ("jaxlib_version", "text"),
    ("commit", "object"),
    ("op_histogram", "object"),
    ("source_ops", "object"),
    ("cache_key_parts", "object"),
    ("platform_version", "text"),
    ("variant", "text"),
    ("trace_profile", "shares"),
    ("trace_files", "shares"),
    ("timestamp", "text"),
    ("location", "location"),
    ("cache", "object"),
    ("host_state", "object"),
    ("hardware_detail", "object"),
    ("host_state.load_avg_1m", "number"),
    ("host_state.load_per_core", "number"),
    ("host_state.process_cpu_s", "number"),
    ("host_state.cpu_count", "count"),
    ("compiled_temp_bytes", "count"),
    ("compiled_argument_bytes", "count"),
    ("compiled_output_bytes", "count"),
    ("compiled_code_bytes", "count"),
    ("flops", "number"),
    ("bytes_accessed", "number"),
    ("compile_rss_peak_mib", "number"),
    ("compile_rss_growth_mib", "number"),
    ("compile_rss_scope", "text"),
    ("max_memory_growth", "number"),
    ("max_flops_growth", "number"),
    ("missing_metrics", "names"),
    ("compile_instructions", "count"),
    ("compile_instructions_identity", "text"),
    ("compile_instructions_note", "text"),
    ("compile_instructions_floor", "count"),
    ("paired_base_cpu_s", "list"),
    ("paired_new_cpu_s", "list"),
    ("paired_base_wall_s", "list"),
    ("paired_new_wall_s", "list"),
    ("paired_against", "text"),
    ("paired_cost_s", "number"),
    ("paired_note", "text"),
    ("twin_cache_state", "text"),
    ("twin_compile_s", "number"),
    ("twin_compile_cpu_s", "number"),
    ("added_compile_error", "text"),
    ("profile", "object"),
    ("compile_options_digest", "text"),
)


def field_value(data: dict[str, Any], dotted: str) -> tuple[bool, Any]:
    """(present, value) of a possibly dotted field name."""
    value: Any = data
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return False, None
        value = value[part]
    return True, value


def check_record_data(data: dict[str, Any]) -> None:
    """Every field a compile record read from a file must have right, or RecordDataError.

    The key fields as `check_key_data`; optional fields may be absent or null, and are
    otherwise of their kind (numbers checked by `_numbers`: finite and >= 0, counts whole;
    ``nan`` and ``inf`` never reach a verdict).
    """
    check_key_data(data)
    _required_string(data, "cell")
    _check_fields(data, _OPTIONAL_FIELDS)
    twin = data.get("twin_cache_state")
    if twin is not None and twin not in TWIN_STATES:
        raise RecordDataError(
            f"'twin_cache_state' {twin!r} is not one of {', '.join(TWIN_STATES)} or null"
        )


TWIN_STATES = ("cold", "none", "warm")  # a twin compile's cache state (records.py)


# A call ledger's figures (report readers check them): (name, kind), as for records.
_LEDGER_FIELDS: tuple[tuple[str, str], ...] = (
    ("wall_s", "number"),
    ("compile_s", "number"),
    ("trace_s", "number"),
    ("lower_s", "number"),
    ("backend_compile_s", "number"),
    ("execute_and_python_s", "number"),
    ("compile_fraction", "number"),
    ("compile_other_s", "number"),
    ("eager_compile_s", "number"),
    ("compiles", "count"),
    ("persistent_cache_hits", "count"),
    ("eager_compiles", "count"),
)


def check_ledger_data(data: dict[str, Any]) -> None:
    """A call ledger read from a file: its figures, where present, of their kind."""
    _check_fields(data, _LEDGER_FIELDS)


def _check_fields(data: dict[str, Any], fields: tuple[tuple[str, str], ...]) -> None:
    for name, kind in fields:
        present, value = field_value(data, name)
        if not present or value is None:
            continue
        expected = _kind_problem(kind, value)
        if expected is not None:
            raise RecordDataError(f"{name!r} must be {expected} or null, got {value!r}")


def _kind_problem(kind: str, value: Any) -> str | None:
    """What a field of this kind must be, when `value` is not it; None when it is."""
    if kind == "text":
        return None if isinstance(value, str) else "a string"
    if kind == "flag":
        return None if isinstance(value, bool) else "true or false"
    if kind == "object":
        return None if isinstance(value, dict) else "an object"
    if kind == "location":
        ok = (
            isinstance(value, list)
            and len(value) == 2
            and isinstance(value[0], str)
            and isinstance(value[1], int)
            and not isinstance(value[1], bool)
        )
        return None if ok else "[file, line]"
    if kind == "list":
        ok = isinstance(value, list) and all(
            _kind_problem("number", item) is None for item in value
        )
        return None if ok else f"a list of numbers, each {NUMBER},"
    if kind == "shares":
        ok = isinstance(value, dict) and all(
            isinstance(name, str) and _kind_problem("number", share) is None
            for name, share in value.items()
        )
        return None if ok else f"an object of shares, each {NUMBER},"
    if kind == "names":
        ok = isinstance(value, list) and all(isinstance(i, str) and i for i in value)
        return None if ok else "a list of names"
    try:
        whole_number(value) if kind == "count" else finite_number(value)
    except NumberError as error:
        return error.expected
    return None
