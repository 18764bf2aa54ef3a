"""Rows that can never be served from the persistent cache are told apart (#24 item 4).

Real JAX, real persistent cache dirs: a module with a host callback (``jax.debug.print``),
which the installed jax may or may not persist, and a function closing over data made
afresh in every process, whose cache key's computation part changes in every process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import pytest
from conftest import JaxProject
from records_factory import make_record

from pytest_jaxcompile.gate.always_cold import always_cold
from pytest_jaxcompile.gate.pins import PinStore
from pytest_jaxcompile.records import CacheDetails, CompileRecord

# jax 0.11 and later write modules with host callbacks to the persistent cache.
PERSISTS_CALLBACKS = tuple(int(part) for part in jax.__version__.split(".")[:2]) >= (0, 11)

ALWAYS_COLD_TESTS = """
    import os

    import jax
    import jax.numpy as jnp
    import numpy as np
    import pytest

    CACHEABLE = os.environ.get("ASK_CACHEABLE") == "1"
    FRESH = np.random.default_rng().random(8).astype(np.float32)  # unseeded: every process

    @pytest.mark.compile_budget
    def test_plain():
        jax.jit(lambda x: jnp.sin(x) * 2)(np.ones(8, np.float32)).block_until_ready()

    @pytest.mark.compile_budget(cacheable=CACHEABLE)
    def test_print():
        def show(x):
            jax.debug.print("x = {x}", x=x)
            return x + 1
        jax.jit(show)(np.ones(8, np.float32)).block_until_ready()

    @pytest.mark.compile_budget(cacheable=CACHEABLE)
    def test_fresh():
        jax.jit(lambda x: x * FRESH)(np.ones(8, np.float32)).block_until_ready()
"""


def test_rows_that_are_always_cold_are_counted_with_their_reason_and_never_missed(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.conftest(cache=True, min_compile_time=0.0)
    project.tests(ALWAYS_COLD_TESTS)
    project.run("--compile-pin-update").assert_outcomes(passed=3)  # cold pins
    project.run("--compile-pin-update").assert_outcomes(passed=3)  # warm pins
    states = {name: row["cache_state"] for (name, _), row in project.rows().items()}
    assert states == {
        "test_plain": "warm",
        "test_print": "warm" if PERSISTS_CALLBACKS else "cold",
        "test_fresh": "cold",
    }

    result = project.run("--compile-expect-warm")
    assert result.ret == pytest.ExitCode.OK  # none of them is a MISS
    verdicts = project.verdicts()
    assert "MISS" not in verdicts.values()
    report = project.report()
    fresh = next(v for v in report["verdicts"] if v["cell"].endswith("test_fresh"))
    assert (
        "never warm: it gets a new cache key in every process (the computation part"
        in (fresh["note"])
    )
    found = {row["cell"].split("::")[-1]: row for row in report["always_cold"]}
    assert found["test_fresh"]["cause"] == "new cache key"
    assert found["test_fresh"]["parts"] == ["computation"]
    if PERSISTS_CALLBACKS:
        assert set(found) == {"test_fresh"}
        result.stdout.fnmatch_lines(
            [
                "1 row(s) can never be served from the persistent cache: 1 gets a new cache key "
                "in every process: the computation part.",
            ]
        )
    else:
        assert found["test_print"]["cause"] == "host callbacks"
        printed = next(v for v in report["verdicts"] if v["cell"].endswith("test_print"))
        assert printed["note"].startswith("never warm: it uses host callbacks")
        result.stdout.fnmatch_lines(
            [
                "2 row(s) can never be served from the persistent cache: 1 uses host callbacks "
                "(JAX before 0.11 never persists them); 1 gets a new cache key in every process: "
                "the computation part.",
                "  test_models.py::test_fresh [[]jit(<lambda>)[]]: new cache key in every "
                "process (the computation part)",
                "  test_models.py::test_print [[]jit(show)[]]: host callbacks",
            ]
        )

    # A test that asks its modules to be cacheable fails with the same reason.
    monkeypatch.setenv("ASK_CACHEABLE", "1")
    result = project.run()
    result.stdout.fnmatch_lines(
        [
            "*transform 'jit(<lambda>)' can never be served from the persistent cache: it gets a "
            "new cache key in every process (the computation part*",
        ]
    )
    failed = 1 if PERSISTS_CALLBACKS else 2
    result.assert_outcomes(passed=3 - failed, failed=failed)
    if not PERSISTS_CALLBACKS:
        result.stdout.fnmatch_lines(
            [
                "*transform 'jit(show)' can never be served from the persistent cache: "
                "the module uses host callbacks (*), which JAX before 0.11 never persists*",
            ]
        )


def _pinned_cold_and_warm(tmp_path: Path, parts: dict[str, str]) -> PinStore:
    """Pins as "pin cold, pin warm" leave them: test_fresh pinned cold with `parts`, and a
    warm pin of another test under the same key."""
    store = PinStore.load(tmp_path)
    store.update(
        [
            make_record(
                cell="test_models.py::test_fresh", transform="jit(<lambda>)", cache_key_parts=parts
            ),
            make_record(
                cell="test_models.py::test_plain", transform="jit(<lambda>)", cache_state="warm"
            ),
        ]
    )
    return PinStore.load(tmp_path)


def _fresh(parts: dict[str, str], **overrides: Any) -> CompileRecord:
    values: dict[str, Any] = dict(
        cell="test_models.py::test_fresh", transform="jit(<lambda>)", cache_key_parts=parts
    )
    return make_record(**{**values, **overrides})


KEY_THEN = {"computation": "aa", "compile_options": "cc"}
KEY_NOW = {"computation": "bb", "compile_options": "cc"}


def test_a_new_key_in_every_process_needs_a_written_row_without_a_warm_pin(
    tmp_path: Path,
) -> None:
    store = _pinned_cold_and_warm(tmp_path, KEY_THEN)
    found = always_cold(_fresh(KEY_NOW), store)
    assert found is not None and found.new_key and found.parts == ("computation",)
    assert always_cold(_fresh(KEY_THEN), store) is None  # the same key: it could be served
    unwritten = _fresh(KEY_NOW, cache=CacheDetails(persisted=False, reason="unexplained"))
    assert always_cold(unwritten, store) is None  # JAX wrote nothing: no evidence of a key
    assert always_cold(_fresh(KEY_NOW, cache_state="warm"), store) is None
    # No session pinned warm rows under its key: nothing says it stayed cold there.
    alone = PinStore.load(tmp_path / "alone")
    alone.update([_fresh(KEY_THEN)])
    assert always_cold(_fresh(KEY_NOW), PinStore.load(tmp_path / "alone")) is None


def test_host_callbacks_are_never_persisted_only_where_jax_said_so(tmp_path: Path) -> None:
    store = PinStore.load(tmp_path)
    said = CacheDetails(persisted=False, reason="host_callbacks")
    found = always_cold(make_record(cache=said), store)
    assert found is not None and found.cause == "host callbacks"
    written = CacheDetails(persisted=True)  # jax 0.11 and later write such modules
    assert always_cold(make_record(cache=written), store) is None
    small = CacheDetails(persisted=False, reason="below_min_compile_time")
    assert always_cold(make_record(cache=small), store) is None  # a setting, not the module
