"""A failing gate is named on pytest's closing line, in the failure colour; a passing gate
leaves the line as pytest prints it."""

from __future__ import annotations

import re

import pytest
from conftest import JaxProject, set_pins

SUITE = """
    import jax
    from jaxmodels import mlp_example_args, mlp_loss

    def test_drift(jax_compile):
        jax_compile(jax.jit(mlp_loss), *mlp_example_args(), transform="jit")

    def test_plain():
        assert True
"""
RED = "\x1b[31m"
GREEN = "\x1b[32m"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def closing_line(result: pytest.RunResult) -> str:
    return [line for line in result.outlines if line.strip()][-1]


@pytest.fixture
def pinned(project: JaxProject) -> JaxProject:
    project.conftest(cache=False)
    project.tests(SUITE)
    project.run("--compile-pin-update").assert_outcomes(passed=2)
    return project


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["one process", "xdist"])
def test_a_failing_gate_is_named_on_the_closing_line_in_red(
    pinned: JaxProject, workers: tuple[str, ...]
) -> None:
    set_pins(pinned.pins_dir, {"test_drift": 0.000001}, 1000.0)
    plain = pinned.run("--compile-floor", "0", *workers)
    plain.assert_outcomes(passed=2)  # the tests' own counts are pytest's as ever
    assert plain.ret == pytest.ExitCode.TESTS_FAILED
    line = closing_line(plain)
    assert re.fullmatch(r"=+ 2 passed, 1 compile DRIFT in [\d.]+s( \([\d:]+\))? =+", line), line

    coloured = pinned.run("--compile-floor", "0", "--color=yes", *workers)
    line = closing_line(coloured)
    assert "1 compile DRIFT" in ANSI.sub("", line)
    assert line.startswith(RED), repr(line)  # the line (its separators) in red, not green
    assert GREEN + "\x1b[1m" not in line  # and "passed" is not the bold main colour


def test_a_passing_gate_leaves_the_closing_line_as_pytest_prints_it(pinned: JaxProject) -> None:
    set_pins(pinned.pins_dir, {}, 1000.0)
    plain = pinned.run("--compile-floor", "0")
    assert plain.ret == pytest.ExitCode.OK
    assert re.fullmatch(r"=+ 2 passed in [\d.]+s( \([\d:]+\))? =+", closing_line(plain))
    coloured = pinned.run("--compile-floor", "0", "--color=yes")
    assert closing_line(coloured).startswith(GREEN)
