"""Settings guard logic: flag parsing, requirements, clobbers, platform, expect-warm."""

from __future__ import annotations

from pathlib import Path

import pytest
from records_factory import make_record

from pytest_jaxcompile.backends.jax.guard import (
    clobber_affects_requirements,
    find_clobbers,
    missing_flags,
    settings_problems,
)
from pytest_jaxcompile.backends.settings import (
    Requirements,
    parse_xla_flags,
    platform_problem,
    uncacheable_reason,
)
from pytest_jaxcompile.gate.judging import judge
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.pins import PinStore
from pytest_jaxcompile.gate.status import Status
from pytest_jaxcompile.records import CacheDetails, CompileRecord

AUTOTUNE = "--xla_gpu_autotune_level=0"


def test_parse_xla_flags_keeps_values_and_bare_flags() -> None:
    assert parse_xla_flags("--a=1 --b  --c='x y' --a=2") == {"--a": "2", "--b": None, "--c": "x y"}
    assert parse_xla_flags(None) == {}


def test_missing_flags_names_absent_and_different_values() -> None:
    required = parse_xla_flags(f"{AUTOTUNE} --xla_dump_to")
    assert missing_flags(required, parse_xla_flags(f"{AUTOTUNE} --xla_dump_to=/tmp")) == []
    assert missing_flags(required, parse_xla_flags("--xla_gpu_autotune_level=4")) == [
        "--xla_gpu_autotune_level=0 (in force: --xla_gpu_autotune_level=4)",
        "--xla_dump_to",
    ]


def test_settings_problems_name_the_missing_flag_and_cache() -> None:
    requirements = Requirements(xla_flags=parse_xla_flags(AUTOTUNE), cache=True)
    ok = make_record(xla_flags=AUTOTUNE)
    assert settings_problems(ok, requirements) == []
    bad = make_record(
        xla_flags=None,
        cache_state="none",
        cache=CacheDetails(reason="no_cache_configured", reason_detail="no cache configured"),
    )
    problems = settings_problems(bad, requirements)
    assert "without the required XLA flag(s) --xla_gpu_autotune_level=0" in problems[0]
    assert "without a persistent compilation cache" in problems[1]


def test_uncacheable_reason_only_for_known_reasons() -> None:
    callback = make_record(
        cache=CacheDetails(
            persisted=False, reason="host_callbacks", reason_detail="uses host callbacks"
        )
    )
    assert uncacheable_reason(callback) == "uses host callbacks"
    assert uncacheable_reason(make_record()) is None  # persisted
    unexplained = make_record(cache=CacheDetails(persisted=False, reason="unexplained"))
    assert uncacheable_reason(unexplained) is None


@pytest.mark.parametrize(
    ("expected", "actual", "fails"),
    [
        ("gpu", "cpu", True),
        ("gpu", "cuda", False),
        ("cpu", "cpu", False),
        (None, "cpu", False),
    ],
)
def test_platform_problem(expected: str | None, actual: str, fails: bool) -> None:
    problem = platform_problem(expected, actual, "JAX's default backend")
    assert (problem is not None) == fails
    if problem:
        assert "silently fell back" in problem


def test_bad_expected_platform_is_rejected() -> None:
    from pytest_jaxcompile.options import BY_NAME, OptionError, parse_value

    with pytest.raises(OptionError, match="compile_expected_platform = 'gpus'"):
        parse_value(BY_NAME["compile_expected_platform"], "gpus", "ini option")


def test_clobber_reports_first_test_and_discarded_flags() -> None:
    start = {"xla_flags": parse_xla_flags(f"{AUTOTUNE} --xla_cpu_x=1")}
    records = [
        make_record(cell="t.py::test_a", settings={"xla_flags": start["xla_flags"]}),
        make_record(cell="t.py::test_b", settings={"xla_flags": {"--other": "1"}}),
        make_record(cell="t.py::test_c", settings={"xla_flags": {"--other": "1"}}),
    ]
    (clobber,) = find_clobbers(start, records)
    assert clobber.first_cell == "t.py::test_b"
    assert clobber.discarded == ("--xla_gpu_autotune_level", "--xla_cpu_x")
    assert "DISCARDED" in clobber.describe()
    required = Requirements(xla_flags=parse_xla_flags(AUTOTUNE))
    assert clobber_affects_requirements(clobber, required)
    assert not clobber_affects_requirements(clobber, Requirements())


def _started_with(flags: str | None, captured_at: str = "backend_start") -> dict[str, object]:
    """A record's settings: the environment has AUTOTUNE; XLA started with `flags`."""
    return {
        "xla_flags": parse_xla_flags(AUTOTUNE),
        "xla_flags_at_backend_start": {
            "flags": parse_xla_flags(flags),
            "captured_at": captured_at,
        },
    }


def test_required_flags_are_judged_on_the_flags_xla_started_with() -> None:
    requirements = Requirements(xla_flags=parse_xla_flags(AUTOTUNE))
    late = make_record(xla_flags=AUTOTUNE, settings=_started_with(None))
    (problem,) = settings_problems(late, requirements)
    assert problem == (
        "transform 'vag' compiled without the required XLA flag(s) --xla_gpu_autotune_level=0 "
        "(JAX's backend started without it: XLA_FLAGS then was 'unset'; XLA reads XLA_FLAGS "
        "only when its backend starts, so the later value '--xla_gpu_autotune_level=0' is "
        "not in force; required by ini compile_required_xla_flags)"
    )
    early = make_record(xla_flags=None, settings=_started_with(AUTOTUNE))  # removed later
    assert settings_problems(early, requirements) == []
    fallback = make_record(xla_flags=AUTOTUNE, settings=_started_with("", "session_start"))
    assert (
        "XLA_FLAGS at session start (JAX's backend had already started"
        in (settings_problems(fallback, requirements)[0])
    )
    unknown = make_record(xla_flags=AUTOTUNE, settings={"xla_flags": {}})  # older records
    assert settings_problems(unknown, requirements) == []


def test_a_clobber_after_the_backend_started_leaves_xla_flags_alone() -> None:
    start = {"xla_flags": parse_xla_flags(AUTOTUNE)}
    settings = {**_started_with(AUTOTUNE), "xla_flags": {"--other": "1"}}
    (clobber,) = find_clobbers(start, [make_record(cell="t.py::test_b", settings=settings)])
    assert clobber.at_backend_start == AUTOTUNE and clobber.ignored_by_xla
    assert "does not apply this change" in clobber.describe()
    assert "DISCARDED" not in clobber.describe()
    required = Requirements(xla_flags=parse_xla_flags(AUTOTUNE))
    assert not clobber_affects_requirements(clobber, required)

    before = {**_started_with("--other=1"), "xla_flags": {"--other": "1"}}
    (clobber,) = find_clobbers(start, [make_record(cell="t.py::test_b", settings=before)])
    assert not clobber.ignored_by_xla and "DISCARDED" in clobber.describe()
    assert clobber_affects_requirements(clobber, required)


def test_a_late_change_from_no_flags_says_so_in_words() -> None:
    """XLA_FLAGS unset when XLA's backend started, set by a test later: the line says XLA
    started with no flags, never with ''."""
    start = {"xla_flags": parse_xla_flags(None)}
    settings = {**_started_with(None), "xla_flags": parse_xla_flags(AUTOTUNE)}
    (clobber,) = find_clobbers(start, [make_record(cell="t.py::test_b", settings=settings)])
    assert clobber.late
    text = clobber.describe()
    assert "''" not in text
    assert text.startswith(
        "XLA_FLAGS changed after JAX's backend started: XLA started with no flags "
        "(XLA_FLAGS unset); '--xla_gpu_autotune_level=0' from t.py::test_b on is not in force"
    )


def test_expect_warm_fails_an_unchanged_module_and_passes_a_changed_one(tmp_path: Path) -> None:
    store = PinStore.load(tmp_path)
    store.update([make_record(cache_state="warm", compile_s=0.01), make_record(compile_s=1.0)])
    expect = Thresholds(expect_warm=True)
    miss = judge(make_record(compile_s=1.0), store, expect)
    assert miss.status is Status.MISS
    assert miss.note is not None and "unchanged since its warm pin" in miss.note
    changed = judge(make_record(compile_s=1.0, fingerprint="sha256:new"), store, expect)
    assert changed.status is Status.OK
    assert changed.note is not None and "expected recompile" in changed.note
    assert judge(make_record(compile_s=1.0), store, Thresholds()).status is Status.OK


def test_cache_settings_unknown_at_start_are_compared_with_the_first_compile() -> None:
    """JAX not imported by session start: the first compile's cache settings are the
    baseline; the first test compiling under other ones is named."""

    def cached(cell: str, directory: str | None) -> CompileRecord:
        settings = {"xla_flags": {}, "cache": {"jax_compilation_cache_dir": directory}}
        return make_record(cell=cell, settings=settings)

    records = [
        cached("t.py::test_a", "/c"),
        cached("t.py::test_b", "/c"),
        cached("t.py::test_c", None),
        cached("t.py::test_d", "/d"),
    ]
    (clobber,) = find_clobbers({"xla_flags": {}}, records)
    assert (clobber.setting, clobber.at_start, clobber.at_compile, clobber.first_cell) == (
        "jax_compilation_cache_dir",
        "/c",
        None,
        "t.py::test_c",
    )
    assert clobber.describe().startswith(
        "jax_compilation_cache_dir changed during the session: '/c' at the session's first "
        "compile (t.py::test_a), None from t.py::test_c on"
    )
    assert clobber_affects_requirements(clobber, Requirements(cache=True))
    assert find_clobbers({"xla_flags": {}}, records[:2]) == []
