"""cache_state classification from JAX's evidence: pure logic, no JAX."""

from __future__ import annotations

import pytest

from pytest_jaxcompile.backends.jax.classify import (
    REASON_CACHE_DISABLED,
    REASON_ENTRY_TOO_SMALL,
    REASON_HOST_CALLBACKS,
    REASON_MIN_COMPILE_TIME,
    REASON_NOT_PROCESS_0,
    CompileEvidence,
    SkipReason,
    classify,
    skip_reason_from_log,
)
from pytest_jaxcompile.records import CacheState

HOST_CALLBACK = SkipReason(REASON_HOST_CALLBACKS, "uses host callbacks")


def evidence(**overrides: object) -> CompileEvidence:
    values: dict[str, object] = {
        "cache_configured": True,
        "fresh": True,
        "backend_compiles": 1,
        "cache_requests": 1,
    }
    values.update(overrides)
    return CompileEvidence(**values)  # type: ignore[arg-type]


def test_hit_is_warm() -> None:
    result = classify(evidence(cache_hits=1, entries_before=5, entries_after=5))
    assert result.cache_state is CacheState.WARM


def test_write_is_cold_and_persisted() -> None:
    result = classify(evidence(cache_writes=1, entries_before=5, entries_after=6))
    assert (result.cache_state, result.persisted, result.notes) == (CacheState.COLD, True, ())


def test_miss_without_write_into_populated_cache_is_cold_not_warm() -> None:
    # The file-count rule would call this warm: the cache is populated and nothing was written.
    result = classify(evidence(skip_reasons=(HOST_CALLBACK,), entries_before=7, entries_after=7))
    assert result.cache_state is CacheState.COLD
    assert result.persisted is False
    assert result.reason == REASON_HOST_CALLBACKS


def test_miss_without_write_or_reason_is_cold_unexplained() -> None:
    result = classify(evidence())
    assert (result.cache_state, result.persisted, result.reason) == (
        CacheState.COLD,
        False,
        "unexplained",
    )


def test_no_cache_configured_is_none_even_though_jax_requests_a_key() -> None:
    # compile_requests_use_cache fires with no cache dir too.
    result = classify(evidence(cache_configured=False, skip_reasons=(HOST_CALLBACK,)))
    assert result.cache_state is CacheState.NONE


def test_no_events_without_fresh_is_memory() -> None:
    result = classify(evidence(fresh=False, backend_compiles=0, cache_requests=0))
    assert result.cache_state is CacheState.MEMORY


def test_no_events_after_clearing_caches_is_unknown_not_memory() -> None:
    result = classify(evidence(backend_compiles=0, cache_requests=0))
    assert result.cache_state is CacheState.UNKNOWN


def test_cache_configured_but_not_consulted_is_unknown() -> None:
    result = classify(evidence(cache_requests=0))
    assert result.cache_state is CacheState.UNKNOWN
    assert result.reason == "cache_not_consulted"
    assert "before any JAX computation" in (result.detail or "")


def test_mixed_hit_and_miss_is_unknown() -> None:
    result = classify(evidence(backend_compiles=2, cache_requests=2, cache_hits=1, cache_writes=1))
    assert result.cache_state is CacheState.UNKNOWN


def test_neighbour_write_during_a_hit_stays_warm_with_a_note() -> None:
    # Another xdist worker wrote an entry while this compile was served from the cache.
    result = classify(evidence(cache_hits=1, entries_before=3, entries_after=4))
    assert result.cache_state is CacheState.WARM


def test_cold_with_growing_count_but_no_own_write_notes_the_neighbour() -> None:
    result = classify(evidence(entries_before=3, entries_after=4, skip_reasons=(HOST_CALLBACK,)))
    assert result.cache_state is CacheState.COLD
    assert any("another process" in note for note in result.notes)


@pytest.mark.parametrize(
    ("template", "args", "code", "fragment"),
    [
        (
            "Not writing persistent cache entry for '%s' because it uses host callbacks "
            "(e.g. from jax.debug.print or breakpoint)",
            ("jit_f",),
            REASON_HOST_CALLBACKS,
            "host callbacks",
        ),
        (
            "Not writing persistent cache entry for '%s' because it took < %.2f seconds to "
            "compile (%.2fs)",
            ("jit_f", 1.0, 0.0712),
            REASON_MIN_COMPILE_TIME,
            "0.071 s, under",
        ),
        (
            "Not writing persistent cache entry with key %r since its size (%d bytes) is "
            "less than threshold (%d bytes)",
            ("k", 10, 2048),
            REASON_ENTRY_TOO_SMALL,
            "10 bytes",
        ),
        (
            "Not writing persistent cache entry since process_id != 0",
            (),
            REASON_NOT_PROCESS_0,
            "process 0",
        ),
        (
            "Not writing persistent cache entry with key %r since cache is disabled/not "
            "initialized",
            ("k",),
            REASON_CACHE_DISABLED,
            "disabled",
        ),
    ],
)
def test_jax_log_records_map_to_reasons(
    template: str, args: tuple[object, ...], code: str, fragment: str
) -> None:
    reason = skip_reason_from_log(template, args)
    assert reason is not None
    assert reason.code == code
    assert fragment in reason.detail


def test_min_compile_time_reason_names_both_figures() -> None:
    reason = skip_reason_from_log(
        "Not writing persistent cache entry for '%s' because it took < %.2f seconds to "
        "compile (%.2fs)",
        ("jit_f", 1.0, 0.25),
    )
    assert reason is not None
    assert "0.250 s" in reason.detail and "= 1 s" in reason.detail


def test_other_log_records_are_not_reasons() -> None:
    assert skip_reason_from_log("PERSISTENT COMPILATION CACHE MISS for '%s'", ("f",)) is None
