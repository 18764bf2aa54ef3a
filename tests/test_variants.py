"""Settings variants: rows of one cell and transform that differ only in a setting in the
cache key (an XLA flag, a compile option) are kept, pinned and judged apart (#25)."""

from __future__ import annotations

import hashlib
import inspect
import sys
from pathlib import Path

import pytest
import tomli_w
from conftest import JaxProject
from corpus_helpers import cli
from records_factory import make_record

from pytest_jaxcompile.backends.jax.keyparts import KeyParts, flags_in_key, variant_of
from pytest_jaxcompile.gate.pins import PinFileError, PinStore, read_pin_file
from pytest_jaxcompile.gate.stale import find_stale
from pytest_jaxcompile.records import CompileRecord

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 only
    import tomli as tomllib

OPTION = "xla_backend_optimization_level=0"

AB_TEST = """
import jax, jax.numpy as jnp

def f(x):
    return jnp.tanh(jnp.sin(x) @ x.T + 1.0).sum()

def test_ab(jax_compile):
    x = jnp.ones((64, 64))
    jax_compile(f, x, transform="f")
    # The same function with a compile option: another program, the same cell and transform.
    slow = jax.jit(f, compiler_options={"xla_backend_optimization_level": 0})
    jax_compile(slow, x, transform="f")
    assert float(f(x)) > 0
"""


def _ab_rows(project: JaxProject) -> dict[str, dict[str, object]]:
    """The last report's rows of test_ab by variant."""
    return {
        str(record["variant"]): record
        for record in project.report()["records"]
        if record["cell"].endswith("::test_ab") and record["source"] == "fixture"
    }


def _verdicts_by_variant(project: JaxProject) -> dict[str, str]:
    return {
        str(verdict["variant"]): str(verdict["status"])
        for verdict in project.report()["verdicts"]
        if verdict["cell"].endswith("::test_ab") and verdict["transform"] == "f"
    }


def test_a_compile_option_is_a_variant_measured_pinned_and_judged_apart(
    project: JaxProject,
) -> None:
    import jax

    if "compiler_options" not in inspect.signature(jax.jit).parameters:
        pytest.skip(f"jax {jax.__version__}'s jit takes no compiler_options")
    project.conftest(cache=False)
    project.tests(AB_TEST)
    pinned = project.run(
        "--compile-pin-update", "--compile-census", "--compile-record-dir", "records"
    )
    pinned.assert_outcomes(passed=1)
    rows = _ab_rows(project)
    assert set(rows) == {"", OPTION}  # two rows, one key
    assert rows[""]["cache_state"] == rows[OPTION]["cache_state"] == "none"

    (path,) = project.pins_dir.glob("*.toml")
    document = tomllib.loads(path.read_text())
    test_ab = next(cell for cell in document["pins"] if cell.endswith("::test_ab"))
    assert "f" in document["pins"][test_ab]
    assert "f" in document["variants"][OPTION][test_ab]  # two pins, one per variant

    # Each is judged against its own pin: the option's pin made ten times slower than
    # anything measured makes its row `improved`; the default's row stays ok.
    document["variants"][OPTION][test_ab]["f"]["compile_s"] = 100.0
    document["variants"][OPTION][test_ab]["f"]["compile_cpu_s"] = 100.0
    path.write_text(tomli_w.dumps(document))
    judged = project.run("--compile-census", "--compile-record-dir", "records")
    judged.assert_outcomes(passed=1)
    assert _verdicts_by_variant(project) == {"": "ok", OPTION: "improved"}
    judged.stdout.fnmatch_lines([f"*improved*test_ab [[]f | {OPTION}[]]*"])

    # `check` over the records corpus keeps the latest row of each variant apart.
    checked = cli(project.path, "check", "records", "-v")
    assert checked.returncode == 0, checked.stderr
    assert f"test_ab [f | {OPTION}]" in checked.stdout
    assert "test_ab [f] " in checked.stdout

    # The dashboard shows the variants side by side, with compile and execute seconds.
    shown = cli(project.path, "report", "records", "--html", "compile.html")
    assert shown.returncode == 0, shown.stderr
    page = (project.path / "compile.html").read_text()
    start = page.index('<h2 id="variants">Settings variants</h2>')
    section = page[start : page.index("</table>", start)]
    assert "<code>default settings</code>" in section and f"<code>{OPTION}</code>" in section
    (line,) = [text for text in section.splitlines() if "test_ab" in text]
    assert line.count(" s</td>") == 4  # compile and execute of each variant
    assert ">improved<" in line and ">ok<" in line


def test_variant_names_the_key_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    spelled = (
        "xla_backend_optimization_level=0,xla_cpu_enable_fast_math=true,"
        "xla_cpu_fast_math_honor_nans=false"
    )
    assert variant_of([]) == ""
    assert variant_of(["--xla_gpu_autotune_level=0"]) == "xla_gpu_autotune_level=0"
    assert variant_of(
        ["--xla_cpu_enable_fast_math=true"],
        {"xla_backend_optimization_level": 0, "xla_cpu_fast_math_honor_nans": False},
    ) == ("3-settings-" + hashlib.sha256(spelled.encode()).hexdigest()[:8])
    # a short stable name: the same settings in any order, another name for others
    assert variant_of(["--xla_cpu_enable_fast_math=true", "--xla_a=1"]) == variant_of(
        ["--xla_a=1", "--xla_cpu_enable_fast_math=true", "--xla_a=1"]
    )
    assert variant_of(["--xla_a=1", "--xla_b=1"]) != variant_of(["--xla_a=1", "--xla_b=2"])
    # each flag in the key once, however often JAX logged it
    parts = KeyParts()
    for _ in range(2):
        parts.take("get_cache_key hash of serialized %s: %s", ("computation", "aa"))
        parts.take("Including XLA flag in cache key: %s", ("--xla_a=1",))
    assert parts.record_fields()["cache_key_flags"] == ["--xla_a=1"]
    # Flags JAX leaves out of the key (dumps, host device count) make no variant.
    environ = {
        "XLA_FLAGS": "--xla_force_host_platform_device_count=4 --xla_dump_to=/tmp/d "
        "--xla_gpu_autotune_level=0"
    }
    assert flags_in_key(environ) == ["--xla_gpu_autotune_level=0"]
    assert flags_in_key({}) == []


def test_pins_of_variants_round_trip_and_old_files_read_as_the_default(tmp_path: Path) -> None:
    default = make_record()
    variant = make_record(variant=OPTION, compile_s=0.2)
    store = PinStore(tmp_path)
    (path,) = store.update([default, variant])
    group = read_pin_file(path)
    assert group.get(default.cell, "vag").compile_s == default.compile_s  # type: ignore[union-attr]
    assert group.get(default.cell, "vag", OPTION).compile_s == 0.2  # type: ignore[union-attr]
    assert PinStore.load(tmp_path).keys_pinning(default.cell, "vag", OPTION) == [default.key]
    assert PinStore.load(tmp_path).keys_pinning(default.cell, "vag", "other=1") == []
    # A file of an earlier release (no [variants]) is the default settings' pins.
    text = path.read_text()
    old = text[: text.index("[variants")]
    path.write_text(old)
    loaded = read_pin_file(path)
    assert loaded.variants == {} and loaded.get(default.cell, "vag") is not None
    # A record of an earlier release (no variant) is the default settings'.
    data = default.to_dict()
    del data["variant"]
    assert CompileRecord.from_dict(data).variant == ""
    path.write_text(old + '[variants."x=1"]\nbad = 3\n')
    with pytest.raises(PinFileError, match="pins for 'bad' must be a table"):
        read_pin_file(path)


def test_a_variant_pin_is_stale_only_to_a_session_that_measured_that_variant(
    tmp_path: Path,
) -> None:
    record = make_record()
    store = PinStore(tmp_path)
    store.update([record, make_record(variant=OPTION)])
    ran = {record.cell}
    # A session run with other settings measured another variant: nothing is stale.
    other = {(record.cell, "vag", "xla_gpu_autotune_level=0")}
    assert find_stale(store, ran, other, record.hardware, "0.10.2") == []
    # A session that measured the default only: the option's pin is not stale to it either.
    assert find_stale(store, ran, {record.row_id}, record.hardware, "0.10.2") == []
    # A session that measured the option's variant of another transform: it is.
    measured = {record.row_id, (record.cell, "other", OPTION)}
    (stale,) = find_stale(store, ran, measured, record.hardware, "0.10.2")
    assert (stale.transform, stale.variant) == ("vag", OPTION)
    assert stale.name == f"{record.cell} [vag | {OPTION}]"


def test_an_unpinned_variant_is_compared_with_the_default_settings_pin(tmp_path: Path) -> None:
    from pytest_jaxcompile.gate.judging import judge
    from pytest_jaxcompile.gate.limits import Thresholds
    from pytest_jaxcompile.gate.status import Status

    store = PinStore(tmp_path)
    store.update([make_record(compile_s=0.5)])
    verdict = judge(make_record(variant=OPTION, compile_s=0.25), store, Thresholds())
    assert verdict.status is Status.UNPINNED
    assert verdict.nearest is not None and verdict.nearest.relation == "other settings"
    assert verdict.note == "nearest pin: the default settings' under this key: 0.500 s (0.50x)"
    # The default settings' row is judged against its own pin, never the variant's.
    store.update([make_record(variant=OPTION, compile_s=5.0)])
    assert judge(make_record(compile_s=0.5), store, Thresholds()).status is Status.OK
    assert (
        judge(make_record(variant=OPTION, compile_s=0.5), store, Thresholds()).status
        is Status.IMPROVED
    )


@pytest.mark.skipif(
    not __import__("jax_behaviour").jax_has_backend_initialization_hooks(),
    reason="this jax has no backend-initialization hooks: XLA_FLAGS at backend start unknown",
)
def test_a_flag_set_after_the_backend_started_names_no_variant(pytester: pytest.Pytester) -> None:
    """The row is named from the flags XLA read at backend start; the late flag is reported
    as not in force, never as the row's variant."""
    project = JaxProject(pytester)
    pytester.makeconftest("import jax.numpy as jnp\n\njnp.zeros(1)  # XLA reads XLA_FLAGS now\n")
    project.tests(
        """
        import os
        import jax, jax.numpy as jnp

        def test_late(jax_compile):
            os.environ["XLA_FLAGS"] = "--xla_backend_optimization_level=0"
            jax_compile(jax.jit(lambda x: jnp.sin(x) * 2), jnp.ones(3), transform="f")
        """
    )
    result = project.run()
    result.assert_outcomes(passed=1)
    (record,) = [r for r in project.report()["records"] if r["source"] == "fixture"]
    assert record["variant"] == ""
    assert record["xla_flags"] == "--xla_backend_optimization_level=0"
    (clobber,) = project.report()["clobbers"]
    assert clobber["late"] is True and clobber["changed_by"] == "test_models.py::test_late (call)"
    assert "is not in force" in result.stdout.str()
    assert "[f | " not in result.stdout.str()
