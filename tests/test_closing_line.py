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
    project.pin_update().assert_outcomes(passed=2)
    return project


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["one process", "xdist"])
def test_a_failing_gate_is_named_on_the_closing_line_in_red(
    pinned: JaxProject, workers: tuple[str, ...]
) -> None:
    set_pins(pinned.pins_dir, {"test_drift": 0.000001}, 1000.0)
    # One session in colour: the line's words are read without its colour codes.
    coloured = pinned.run("--compile-floor", "0", "--color=yes", *workers)
    assert coloured.ret == pytest.ExitCode.TESTS_FAILED
    line = closing_line(coloured)
    # the tests' own counts are pytest's as ever, the gate's verdict beside them
    words = ANSI.sub("", line)
    assert re.fullmatch(r"=+ 2 passed, 1 compile DRIFT in [\d.]+s( \([\d:]+\))? =+", words), line
    assert line.startswith(RED), repr(line)  # the line (its separators) in red, not green
    assert GREEN + "\x1b[1m" not in line  # and "passed" is not the bold main colour


def test_a_passing_gate_leaves_the_closing_line_as_pytest_prints_it(pinned: JaxProject) -> None:
    set_pins(pinned.pins_dir, {}, 1000.0)
    coloured = pinned.run("--compile-floor", "0", "--color=yes")
    assert coloured.ret == pytest.ExitCode.OK
    line = closing_line(coloured)
    assert re.fullmatch(r"=+ 2 passed in [\d.]+s( \([\d:]+\))? =+", ANSI.sub("", line)), line
    assert line.startswith(GREEN), repr(line)
