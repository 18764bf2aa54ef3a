"""Noise handling through real pytest and JAX: repeats, the load gate, the CPU metric."""

from __future__ import annotations

import pytest
from conftest import JaxProject

from pytest_jaxcompile.backends.jax.measure import is_cache_entry

MODEL_TESTS = """
    import jax
    from jaxmodels import mlp_example_args, mlp_loss

    def test_mlp(jax_compile):
        jax_compile(jax.value_and_grad(mlp_loss), *mlp_example_args(), transform="vag")
"""


def test_repeat_takes_the_fastest_and_records_the_spread(project: JaxProject) -> None:
    project.conftest()
    project.tests(MODEL_TESTS)
    project.run("-o", "compile_repeat=3").assert_outcomes(passed=1)
    row = project.rows()[("test_mlp", "vag")]
    samples = row["compile_samples_s"]
    assert len(samples) == 3
    assert row["compile_s"] == min(samples)
    assert row["compile_spread_s"] == pytest.approx(max(samples) - min(samples))
    # Repeats of a cold compile stay cold and write nothing: one entry for the module.
    assert row["cache_state"] == "cold"
    assert row["cache"]["entries_after"] == row["cache"]["entries_before"] + 1
    entries = sorted(path.name for path in project.cache_dir.iterdir() if is_cache_entry(path.name))
    assert len([name for name in entries if name.startswith("jit_mlp_loss")]) == 1
    project.run("-o", "compile_repeat=2")
    warm = project.rows()[("test_mlp", "vag")]
    assert warm["cache_state"] == "warm" and len(warm["compile_samples_s"]) == 2


def test_bad_repeat_is_a_usage_error(project: JaxProject) -> None:
    project.tests("def test_nothing():\n    pass\n")
    result = project.run("-o", "compile_repeat=0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini option compile_repeat = '0': expected a whole number >= 1*"])


def test_rows_measured_under_load_are_noisy_unless_strict(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.conftest(cache=False)
    project.tests(MODEL_TESTS)
    project.pin_update()
    project.set_pin_field("compile_s", 0.0001)
    project.set_pin_field("compile_cpu_s", None)  # no CPU seconds to judge it on
    monkeypatch.setenv("JAXCOMPILE_LOAD_PER_CORE", "3.5")
    result = project.run("--compile-floor", "0", "-v")  # -v: noisy rows are folded without
    assert result.ret == pytest.ExitCode.OK
    assert project.verdicts()[("test_mlp", "vag")] == "noisy"
    assert project.rows()[("test_mlp", "vag")]["host_state"]["load_per_core"] == 3.5
    result.stdout.fnmatch_lines(
        ["*measured at load 3.50 per core, above compile_max_load = 1: not judged*"]
    )
    assert project.run("--compile-floor", "0", "--compile-strict").ret == 1
    assert project.verdicts()[("test_mlp", "vag")] == "DRIFT"
    project.pytester.makeini("[pytest]\ncompile_max_load = 4\n")
    assert project.run("--compile-floor", "0").ret == 1


def test_rows_under_load_are_judged_on_cpu_seconds(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.conftest(cache=False)
    project.tests(MODEL_TESTS)
    project.pin_update()
    monkeypatch.setenv("JAXCOMPILE_LOAD_PER_CORE", "3.5")
    # The wall figure is far over its pin, the CPU figure within any tolerance: noisy.
    project.set_pin_field("compile_s", 0.0001)
    assert project.run("--compile-floor", "0", "--compile-tolerance", "1000").ret == 0
    assert project.verdicts()[("test_mlp", "vag")] == "noisy"
    # Now the CPU seconds are over their pin too: more work, not a busy host. DRIFT.
    project.set_pin_field("compile_cpu_s", 0.0001)
    result = project.run("--compile-floor", "0")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    (verdict,) = project.report()["verdicts"]
    assert (verdict["status"], verdict["metric"]) == ("DRIFT", "cpu")
    result.stdout.fnmatch_lines(
        [
            "*DRIFT*[[]vag[]] * s cpu, pin 0.000 s cpu*",
            "*measured at load 3.50 per core, above compile_max_load = 1: judged on CPU seconds*",
        ]
    )


def test_cpu_metric_judges_process_cpu_seconds(project: JaxProject) -> None:
    project.conftest(cache=False)
    project.tests(MODEL_TESTS)
    project.pin_update()
    row = project.rows()[("test_mlp", "vag")]
    assert row["compile_cpu_s"] > 0
    project.set_pin_field("compile_s", 1000.0)  # wall: far faster than pinned
    project.set_pin_field("compile_cpu_s", 0.0001)  # cpu: far slower than pinned
    for phase in ("trace_s", "lower_s"):  # judged in wall seconds: with no floor, noise
        project.set_pin_field(phase, None)
    project.run("--compile-floor", "0")
    assert project.verdicts()[("test_mlp", "vag")] == "improved"
    result = project.run("--compile-floor", "0", "-o", "compile_metric=cpu")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert project.verdicts()[("test_mlp", "vag")] == "DRIFT"
    assert project.report()["verdicts"][0]["metric"] == "cpu"
    result.stdout.fnmatch_lines(["*DRIFT*[[]vag[]] * s cpu, pin 0.000 s cpu*"])


CENSUS_TESTS = """
    import jax, pytest
    from jaxmodels import mlp_example_args, mlp_loss

    ARGS = mlp_example_args()

    @pytest.mark.compile_budget
    def test_step():
        loss, _ = jax.jit(jax.value_and_grad(mlp_loss))(*ARGS)
        assert float(loss) > 0
"""


def test_census_rows_record_the_load_and_are_noisy_above_it(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.conftest(cache=False)
    project.tests(CENSUS_TESTS)
    project.pin_update()
    project.set_pin_field("compile_s", 0.0001)
    monkeypatch.setenv("JAXCOMPILE_LOAD_PER_CORE", "3.5")
    # The wall figure far over its pin; the CPU figure, two sessions' measurements of a tiny
    # compile with no floor, within any tolerance: noisy, whatever the host did.
    result = project.run("--compile-floor", "0", "--compile-tolerance", "1000")
    assert result.ret == pytest.ExitCode.OK
    (row,) = project.report()["records"]
    assert row["source"] == "census"
    assert row["host_state"]["load_per_core"] == 3.5
    (verdict,) = project.report()["verdicts"]
    assert verdict["status"] == "noisy"
    assert project.run("--compile-floor", "0", "--compile-strict").ret == 1
    assert project.report()["verdicts"][0]["status"] == "DRIFT"


SEVERAL_JITS = """
    import jax, pytest
    import jax.numpy as jnp

    @pytest.mark.compile_budget
    def test_several():
        x = jnp.ones(8)
        for scale in (2.0, 3.0, 4.0):
            assert float(jax.jit(lambda v, s=scale: jnp.tanh(v * s).sum())(x)) > 0
"""


def test_noisy_rows_are_folded_and_a_pin_update_lists_no_row_against_its_new_pins(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.conftest(cache=False)
    project.tests(SEVERAL_JITS)
    monkeypatch.setenv("JAXCOMPILE_LOAD_PER_CORE", "3.5")  # every row above the max load
    result = project.run("--compile-pin-update")
    assert result.ret == pytest.ExitCode.OK
    rows = project.report()["records"]
    assert len(rows) == 3 and all(row["source"] == "census" for row in rows)
    # Census rows carry CPU seconds (the process's CPU clock around the backend compile).
    assert all(row["compile_cpu_s"] is not None and row["compile_cpu_s"] >= 0 for row in rows)
    summary = result.stdout.str()
    assert ", pin " not in summary  # no row compared with the pin this session wrote
    result.stdout.fnmatch_lines(["*pinned     3 row(s)*", "pins updated: *"])

    result = project.run()
    assert result.ret == pytest.ExitCode.OK
    assert set(project.verdicts().values()) == {"noisy"}
    lines = result.stdout.lines
    assert not [line for line in lines if line.startswith("  noisy      test_models.py::")]
    result.stdout.fnmatch_lines(
        [
            "  noisy      3 row(s) (-v lists them): test_models.py 3",
            "      median *x of their pin (cpu seconds); highest: test_models.py::test_several *",
            # Within tolerance or within the floor: which one is the rows' noise, not the code.
            "noisy: 3 row(s) were measured above 1 load per core and stayed * CPU seconds*; *",
        ]
    )
    verbose = project.run("-v")
    assert (
        len(
            [
                line
                for line in verbose.stdout.lines
                if line.startswith("  noisy      test_models.py::")
            ]
        )
        == 3
    )


def test_a_pin_update_above_the_max_load_warns_that_the_pins_hold_the_wait(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/verdicts.md: pinning on a busy machine says so (here 1.3 per core, max 1)."""
    project.conftest(cache=False)
    project.tests(MODEL_TESTS)
    monkeypatch.setenv("JAXCOMPILE_LOAD_PER_CORE", "1.3")
    result = project.run("--compile-pin-update")
    assert result.ret == pytest.ExitCode.OK  # a warning, never a failure
    result.stdout.fnmatch_lines(
        [
            "pins updated: *",
            "warning: 1 pin(s) hold seconds measured at a load above compile_max_load = 1 "
            "(up to 1.30 per core), time spent waiting for a core included; a re-pin on a "
            "quieter machine tightens them.",
        ]
    )
    busy = "measured at a load above"
    assert result.stdout.str().count(busy) == 1  # once per session
    # Pins kept as they were (every figure within a third of a wide floor): load changed
    # no pinned figure, so nothing to say.
    kept = project.run(
        "--compile-pin-update", "-o", "compile_floor=30", "-o", "compile_rss_floor_mib=1000"
    )
    assert "kept as they were" in kept.stdout.str() and busy not in kept.stdout.str()
    monkeypatch.setenv("JAXCOMPILE_LOAD_PER_CORE", "0.5")
    quiet = project.run("--compile-pin-update")
    assert busy not in quiet.stdout.str()
    monkeypatch.setenv("JAXCOMPILE_LOAD_PER_CORE", "1.3")
    assert busy not in project.run().stdout.str()  # judged, not pinned
    raised = project.run("--compile-pin-update", "-o", "compile_max_load=1.5")
    assert busy not in raised.stdout.str()
