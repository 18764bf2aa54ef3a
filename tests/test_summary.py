"""A summary that scales: the compile spend first, --compile-durations, folded stale pins."""

from __future__ import annotations

import re

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


TEAM_SUITE = """
    import os

    import jax
    import jax.numpy as jnp
    import pytest

    DEPTH = int(os.environ.get("MODEL_DEPTH", "2"))

    def loss(ws, x):
        for i, w in enumerate(ws):
            x = jnp.tanh(x @ w) + jnp.sin(x) * (i + 1)
        return jnp.sum(x)

    def test_model(jax_compile):
        ws = [jnp.ones((16, 16)) * 0.01 for _ in range(DEPTH)]
        jax_compile(jax.jit(jax.grad(loss)), ws, jnp.ones((4, 16)), transform="grad")
        jax_compile(jax.jit(loss), ws, jnp.ones((4, 16)))

    @pytest.mark.compile_budget(max_compiles=20)
    def test_step():
        jax.jit(lambda x: jnp.cumsum(jnp.tanh(x)) * DEPTH)(jnp.ones(DEPTH + 3))
"""
LONGEST_LINE = 200  # of a failing session's default summary, but a command to copy


def test_a_failing_sessions_default_summary_is_short_lines_in_plain_words(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.conftest(cache=False)
    project.tests(TEAM_SUITE)
    assert project.run("--compile-pin-update", "--compile-census").ret == 0
    # Far faster pins than any compile: both rows DRIFT, their modules grown.
    for field in ("compile_s", "compile_cpu_s"):
        project.set_pin_field(field, 0.000001)
    monkeypatch.setenv("MODEL_DEPTH", "12")
    failing = project.run("--compile-census", "--compile-floor=0")
    assert failing.ret == pytest.ExitCode.TESTS_FAILED
    lines = compile_summary(failing)
    too_long = [
        line
        for line in lines
        if len(line) > LONGEST_LINE and "pytest --compile-pin-update" not in line
    ]
    assert not too_long, too_long
    text = "\n".join(lines)
    assert "DRIFT      test_models.py::test_model [grad]" in text
    # The cause in one short line: the module grew, and by which operations (a few).
    grown = next(line for line in lines if line.lstrip().startswith("module grew: "))
    assert re.search(r"ops \([^)]*\): stablehlo\.\w+ \+\d+", grown), grown
    assert "execute_and_python_s" not in text and "cache_retrieval_s" not in text
    assert "wall " not in text  # the census ledgers: -v
    assert text.count(".toml") == 1  # the pin file once, on its group's line
    assert lines[-1].startswith("If the change is intended, re-pin and commit the pin files: ")

    verbose = compile_summary(project.run("--compile-census", "--compile-floor=0", "-v"))
    shown = "\n".join(verbose)
    assert "stablehlo." in shown  # the op histogram, under -v as well
    assert "running and Python" in shown and "; phases trace " in shown
    assert "execute_and_python_s" not in shown


def test_a_notes_short_line_keeps_what_a_reader_acts_on() -> None:
    from pytest_jaxcompile.gate.view.causes import BRIEF_CHARS, brief, note_parts

    paired = (
        "DRIFT paired with pins/laptop--jax-0.10.2--full--none--f9d7dd9a.toml (laptop | jax "
        "0.10.2 | full precision | none): 10 pairs, cpu 0.231 s -> 0.692 s, pairs' ratio "
        "3.01x (95.1% interval 2.99x-3.03x, paired tolerance 3%), cost 10.4 s"
    )
    grew = "module grew: 62 -> 97 ops (+56%): stablehlo.reshape +12, stablehlo.slice +10"
    passes = "grew most of XLA's HLO passes: fusion 0.3 ms -> 9.0 ms"
    note = f"{paired}; {grew}; {passes}"
    assert note_parts(note) == (paired, grew, passes)
    assert brief(note) == (
        "10 pairs beside the pinned module of laptop, jax 0.10.2 (pin without a persistent "
        "cache): 95.1% interval 2.99x-3.03x; "
        "module grew: 62 -> 97 ops (+56%): stablehlo.reshape +12"  # kept past the budget
    )
    # Alone, the module's part names the operations that grew most, within the budget.
    ops = ", ".join(f"stablehlo.op_{index} +{20 - index}" for index in range(5))
    assert brief(f"module grew: 62 -> 97 ops (+56%, limit +10%): {ops}") == (
        "module grew: 62 -> 97 ops (+56%, limit +10%): " + ops
    )
    long_ops = ", ".join(f"stablehlo.broadcast_in_dim_{index} +{20 - index}" for index in range(5))
    short = brief(f"module grew: 62 -> 97 ops (+56%): {long_ops}") or ""
    assert short.startswith("module grew: 62 -> 97 ops (+56%): stablehlo.broadcast_in_dim_0 +20, ")
    assert len(short) <= BRIEF_CHARS and not short.endswith(long_ops)
    assert len(brief(f"{grew}; {passes}") or "") <= BRIEF_CHARS
    assert brief(passes) is None and brief(None) is None


def test_a_misss_short_line_names_the_cache_keys_part_that_changed() -> None:
    from pytest_jaxcompile.gate.view.causes import brief

    note = (
        "expected a persistent-cache hit: the module is unchanged since its warm pin (0.004 s), "
        "yet it compiled cold; shown against its cold pin. Its cache key changed: the XLA flags "
        "part (+--xla_cpu_multi_thread_eigen=false)"
    )
    assert brief(note) == (
        "compiled cold, its module unchanged since its warm pin (0.004 s); cache key changed: "
        "the XLA flags part (+--xla_cpu_multi_thread_eigen=false)"
    )
