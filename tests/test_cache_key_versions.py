"""Versions that change compiles (jaxlib, the backend's platform version) are never blamed
on code: recorded, pinned, and named when they differ from a pin."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import JaxProject
from records_factory import make_record

from pytest_jaxcompile.backends.jax.measure import is_cache_entry
from pytest_jaxcompile.gate.judging import judge
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.notes import version_differences
from pytest_jaxcompile.gate.pins import PinFileError, PinStore
from pytest_jaxcompile.gate.status import Status
from pytest_jaxcompile.records import CompileRecord

EXPECT_WARM = Thresholds(tolerance=0.5, floor_s=0.25, expect_warm=True)


def _pinned(tmp_path: Path, *records: CompileRecord) -> PinStore:
    PinStore.load(tmp_path).update(records)
    return PinStore.load(tmp_path)


def _lose_the_cache(project: JaxProject) -> None:
    """Delete the project's persistent-cache entries, in any jax's layout ("<module>-<hash>"
    on jax 0.4.30, "<module>-<hash>-cache" beside "-atime" files later)."""
    for path in project.cache_dir.iterdir():
        if is_cache_entry(path.name):
            path.unlink()


def _set_in_pins(pins_dir: Path, field: str, value: str | None, state: str = "") -> None:
    """Hand-edit every pin (of the pin files whose name has `state`): set or drop `field`."""
    for path in pins_dir.glob(f"*{state}--*.toml"):
        text = re.sub(rf"(?m)^{field} = .*\n", "", path.read_text())
        if value is not None:
            text = re.sub(r"(?m)^(compile_s = .*\n)", rf'\g<1>{field} = "{value}"\n', text)
        path.write_text(text)


def test_version_differences_names_each_known_difference_old_to_new(tmp_path: Path) -> None:
    store = _pinned(tmp_path, make_record(platform_version="PJRT C API\ncuda 12020"))
    pin = store.get(make_record().key, make_record().cell, make_record().transform)
    assert pin is not None and pin.jaxlib_version == "0.10.2"

    changed = make_record(jaxlib_version="0.10.3", platform_version="PJRT C API\ncuda 12040")
    assert version_differences(changed, pin) == [
        "jaxlib 0.10.2 -> 0.10.3",
        "platform version PJRT C API cuda 12020 -> PJRT C API cuda 12040",
    ]
    assert version_differences(make_record(platform_version="PJRT C API\ncuda 12020"), pin) == []
    # Unknown on either side is not a difference.
    assert version_differences(make_record(jaxlib_version="", platform_version=None), pin) == []
    old_pin = _pinned(tmp_path / "old", make_record(jaxlib_version="")).get(
        changed.key, changed.cell, changed.transform
    )
    assert old_pin is not None and old_pin.jaxlib_version is None
    assert old_pin.platform_version is None
    assert version_differences(changed, old_pin) == []


def test_an_unchanged_module_cold_under_another_jaxlib_than_its_warm_pin_is_not_a_miss(
    tmp_path: Path,
) -> None:
    store = _pinned(
        tmp_path,
        make_record(cache_state="cold", compile_s=1.0, jaxlib_version="0.10.1"),
        make_record(
            cache_state="warm", compile_s=0.1, jaxlib_version="0.10.1", platform_version="cpu"
        ),
    )
    row = make_record(cache_state="cold", compile_s=1.0, platform_version="cpu")
    verdict = judge(row, store, EXPECT_WARM)
    assert verdict.status is Status.OK
    assert verdict.note == (
        "jaxlib 0.10.1 -> 0.10.2 since pinning: another compiler build (JAX's cache keys "
        "include these versions); expected recompile: jaxlib 0.10.1 -> 0.10.2 since its warm "
        "pin, and JAX's cache keys include these versions (the module is unchanged)"
    )
    # The same row under the versions it was pinned with is a cache miss.
    same = make_record(cache_state="cold", compile_s=1.0, jaxlib_version="0.10.1")
    assert judge(same, store, EXPECT_WARM).status is Status.MISS


def test_a_pin_without_versions_still_judges_a_miss(tmp_path: Path) -> None:
    store = _pinned(
        tmp_path,
        make_record(cache_state="cold", jaxlib_version=""),
        make_record(cache_state="warm", compile_s=0.1, jaxlib_version=""),
    )
    verdict = judge(make_record(cache_state="cold", platform_version="cpu"), store, EXPECT_WARM)
    assert verdict.status is Status.MISS


def test_a_time_verdict_names_changed_versions_beside_what_changed(tmp_path: Path) -> None:
    store = _pinned(tmp_path, make_record(compile_s=1.0, platform_version="cuda 12020"))
    verdict = judge(make_record(compile_s=3.0, platform_version="cuda 12040"), store, Thresholds())
    assert verdict.status is Status.DRIFT
    assert verdict.note == (
        "module unchanged since pinning: look at the environment (XLA flags, cache settings, "
        "host load); platform version cuda 12020 -> cuda 12040 since pinning: another "
        "compiler build (JAX's cache keys include these versions)"
    )


def test_pins_keep_the_versions_and_reject_a_non_string(tmp_path: Path) -> None:
    (path,) = PinStore.load(tmp_path).update([make_record(platform_version="cpu")])
    text = path.read_text()
    assert 'jaxlib_version = "0.10.2"\n' in text and 'platform_version = "cpu"\n' in text
    path.write_text(text.replace('platform_version = "cpu"', "platform_version = 3"))
    with pytest.raises(PinFileError, match="'platform_version' must be a string") as error:
        PinStore.load(tmp_path)
    line = error.value.line
    assert line is not None and path.read_text().splitlines()[line - 1].startswith(
        "platform_version"
    )


def test_a_cold_unchanged_module_under_another_jaxlib_is_named_not_missed(
    project: JaxProject,
) -> None:
    """Real sessions: pins cold then warm; the warm pin hand-edited to another jaxlib and
    platform version; the cache lost. The cold row names the versions, it is no MISS. The
    same pins without the version fields (as earlier releases wrote them) judge a MISS."""
    import jaxlib

    project.conftest()
    project.tests(
        """
        import jax
        from jaxmodels import mlp_example_args, mlp_loss

        def test_a(jax_compile):
            jax_compile(jax.jit(mlp_loss), *mlp_example_args(), transform="jit")
        """
    )
    project.run("--compile-pin-update")  # cold
    project.run("--compile-pin-update")  # warm
    row = project.rows()[("test_a", "jit")]
    assert row["cache_state"] == "warm"
    assert row["jaxlib_version"] == jaxlib.__version__
    assert row["platform_version"]  # CPU's backend has one ("cpu"; "<unknown>" on jax 0.4.30)
    (warm_pin,) = project.pins_dir.glob("*--warm--*.toml")
    assert f'platform_version = "{row["platform_version"]}"' in warm_pin.read_text()

    _set_in_pins(project.pins_dir, "jaxlib_version", "0.0.1", state="warm")
    _set_in_pins(project.pins_dir, "platform_version", "an older platform", state="warm")
    _lose_the_cache(project)  # the cache was not restored
    result = project.run("--compile-expect-warm", "-o", "compile_time_advisory=true", "-v")
    assert result.ret == pytest.ExitCode.OK
    assert project.verdicts()[("test_a", "jit")] != "MISS"
    (verdict,) = project.report()["verdicts"]
    assert (
        f"expected recompile: jaxlib 0.0.1 -> {jaxlib.__version__}, platform version an older "
        f"platform -> {row['platform_version']} since its warm pin"
    ) in verdict["note"]
    result.stdout.fnmatch_lines(["*expected recompile: jaxlib 0.0.1 -> *"])

    for field in ("jaxlib_version", "platform_version"):  # pins of an earlier release
        _set_in_pins(project.pins_dir, field, None)
    assert not re.search(r"(?m)^(jaxlib|platform)_version = ", warm_pin.read_text())
    _lose_the_cache(project)
    result = project.run("--compile-expect-warm")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert project.verdicts()[("test_a", "jit")] == "MISS"
