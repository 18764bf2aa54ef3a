"""A summary that scales: the compile spend first, --compile-durations, folded stale pins."""

from __future__ import annotations

import pytest
from conftest import JaxProject, compile_summary

CENSUS_SUITE = """
    import jax
    import jax.numpy as jnp
    import pytest

    @pytest.mark.parametrize("width", [3, 4, 5])
    def test_scaled(width):
        jax.jit(lambda x: jnp.tanh(x) * width)(jnp.ones(width))
"""


def test_the_summary_leads_with_the_compile_spend_and_lists_durations(
    project: JaxProject,
) -> None:
    project.conftest(cache=False)
    project.tests(CENSUS_SUITE)
    result = project.run("--compile-census", "--compile-durations=2")
    result.assert_outcomes(passed=3)
    lines = compile_summary(result)
    assert lines[0].startswith("compile time: ")
    assert "of the session's" in lines[0] and "compile row(s):" in lines[0]
    assert " none" in lines[0]  # cache states counted
    start = lines.index("slowest 2 compile(s):")
    assert all(line.startswith("  ") and " s  " in line for line in lines[start + 1 : start + 3])
    assert "2 test(s) with the most compile time:" in lines
    assert "  ... 1 more (--compile-durations=0 lists all)" in lines

    everything = compile_summary(project.run("--compile-census", "--compile-durations=0"))
    assert "3 test(s) with the most compile time:" in everything


def test_census_pins_are_stale_only_to_a_census(project: JaxProject) -> None:
    project.conftest(cache=False)
    project.tests(CENSUS_SUITE)
    project.run("--compile-census", "--compile-pin-update").assert_outcomes(passed=3)
    pin_text = next(project.pins_dir.glob("*.toml")).read_text()
    assert 'source = "census"' in pin_text

    # Without a census nothing of these tests is measured: their pins are not stale.
    without = project.run()
    without.assert_outcomes(passed=3)
    assert "stale pins" not in without.stdout.str()

    # A census that no longer sees a module: that pin is stale, listed briefly.
    project.tests(
        CENSUS_SUITE.replace(
            "jax.jit(lambda x: jnp.tanh(x) * width)(jnp.ones(width))", "jnp.ones(width) * width"
        )
    )
    census = project.run("--compile-census")
    census.assert_outcomes(passed=3)
    census.stdout.fnmatch_lines(["stale pins: * pinned transform(s) of tests that ran but *"])


@pytest.mark.parametrize("value", ["-1", "many"])
def test_bad_durations_are_usage_errors(pytester: pytest.Pytester, value: str) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest_inprocess(f"--compile-durations={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--compile-durations*expected a whole number >= 0*"])


def test_a_warm_session_of_fast_compiles_claims_no_cache_saving(project: JaxProject) -> None:
    """JAX keeps a module's compile time in whole seconds: for one compiled in under a
    second it reports minus the retrieval time as "saved". No such figure is shown."""
    project.conftest()
    project.tests(CENSUS_SUITE)
    project.run("--compile-census").assert_outcomes(passed=3)
    warm = project.run("--compile-census")
    warm.assert_outcomes(passed=3)
    assert " 3 warm" in compile_summary(warm)[0]
    assert "saved" not in compile_summary(warm)[0]
    overlays = [ledger["overlays"] for ledger in project.report()["ledgers"]]
    assert all(o["cache_retrieval_s"] > 0 and "cache_saved_s" not in o for o in overlays)
