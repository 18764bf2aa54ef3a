"""Budgets, compile counts and census rows do not depend on test order or scheduling.

Real pytest sessions of one small project, run alone, in file order, reversed, under
pytest-xdist and under pytest-randomly: every run must give the budgeted and census'd
tests the same verdicts, compile counts and census rows.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import JaxProject

ORDER_SUITE = """
    import jax, jax.numpy as jnp, pytest

    def test_creates_the_array_first():
        assert float(jnp.ones(5).sum()) == 5.0  # the eager compiles test_budget also needs

    @pytest.mark.compile_budget(max_compiles=1)
    def test_budget():
        double = jax.jit(lambda v: v * 2)
        assert float(double(jnp.ones(5))[0]) == 2.0

    @pytest.mark.compile_budget(max_compiles=1)
    def test_new_shape_recompiles():
        double = jax.jit(lambda v: v * 2)
        double(jnp.ones(5))
        double(jnp.ones(6))  # a real recompile: a new shape

    def triple(v):
        return v * 3

    def test_census_only():
        assert float(jax.jit(triple)(jnp.ones(5) + 1.0)[0]) == 6.0

    def test_same_function_again():
        assert float(jax.jit(triple)(jnp.ones(5))[0]) == 3.0
"""

# Runs the tests in reverse when REVERSE_TESTS is set: pytest has no option for it.
REVERSE_HOOK = """

def pytest_collection_modifyitems(config, items):
    import os
    if os.environ.get("REVERSE_TESTS"):
        items.reverse()
"""

BUDGETED = ("test_budget", "test_new_shape_recompiles")


def _project(project: JaxProject) -> JaxProject:
    project.conftest(cache=False)
    conftest = project.path / "conftest.py"
    conftest.write_text(conftest.read_text() + REVERSE_HOOK)
    project.tests(ORDER_SUITE)
    return project


def _signature(project: JaxProject, result: pytest.RunResult) -> dict[str, Any]:
    """What must not depend on order: per test, its outcome, counts and census rows."""
    report = project.report()
    outcomes = {}
    for line in result.stdout.lines:  # -rA: one "PASSED file::test" line per test
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED") and "::" in rest:
            outcomes[rest.split("::")[1].split(" ")[0]] = word
    ledgers = {
        ledger["cell"].split("::")[-1]: (
            ledger["compiles"], ledger["eager_compiles"], ledger["modules"],
            ledger["eager_modules"],
        )
        for ledger in report["ledgers"]
    }
    rows = sorted(
        (record["cell"].split("::")[-1], record["transform"]) for record in report["records"]
    )
    return {"outcomes": outcomes, "ledgers": ledgers, "rows": rows}


def _run(project: JaxProject, *args: str) -> dict[str, Any]:
    result = project.run("--compile-census", "-rA", *args)
    return _signature(project, result)


def test_budget_verdicts_counts_and_rows_are_the_same_in_any_order(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(project)
    in_order = _run(project, "-p", "no:randomly")
    # The budget counts the test's own compile; a real recompile still fails.
    assert in_order["outcomes"] == {
        "test_creates_the_array_first": "PASSED", "test_budget": "PASSED",
        "test_new_shape_recompiles": "FAILED", "test_census_only": "PASSED",
        "test_same_function_again": "PASSED",
    }
    budget_ledger = in_order["ledgers"]["test_budget"]
    assert budget_ledger[0] == 1 and budget_ledger[2] == {"jit(<lambda>)": 1}
    assert budget_ledger[1] >= 2  # jnp.ones(5): its eager compiles, apart
    assert "jit(broadcast_in_dim)" in budget_ledger[3]
    # Each census'd test compiles what it uses, even what an earlier test compiled.
    assert in_order["ledgers"]["test_same_function_again"][:1] == (1,)
    # No census row of an eager operation: only the tests' own functions.
    assert {transform for _, transform in in_order["rows"]} == {
        "jit(<lambda>)", "jit(<lambda>)#2", "jit(triple)",
    }

    for name in ("test_budget", "test_same_function_again"):
        alone = _run(project, "-p", "no:randomly", f"test_models.py::{name}")
        assert alone["outcomes"] == {name: in_order["outcomes"][name]}
        assert alone["ledgers"] == {name: in_order["ledgers"][name]}
        assert alone["rows"] == [row for row in in_order["rows"] if row[0] == name]

    monkeypatch.setenv("REVERSE_TESTS", "1")
    assert _run(project, "-p", "no:randomly") == in_order
    monkeypatch.delenv("REVERSE_TESTS")
    assert _run(project, "-p", "no:randomly", "-n", "2") == in_order


def test_the_same_under_pytest_randomly(project: JaxProject) -> None:
    pytest.importorskip("pytest_randomly")
    _project(project)
    in_order = _run(project, "-p", "no:randomly")
    for seed in ("1", "2"):
        assert _run(project, "-p", "randomly", f"--randomly-seed={seed}") == in_order, seed
    assert _run(project, "-p", "randomly", "--randomly-seed=3", "-n", "2") == in_order


def test_compile_counts_are_pinned_without_eager_dispatch(project: JaxProject) -> None:
    _project(project)
    project.run("--compile-census", "-p", "no:randomly", "--compile-pin-update")
    (path,) = project.pins_dir.glob("*.toml")
    pinned = path.read_text()
    assert '[tests."test_models.py::test_budget"]\ncompiles = 1' in pinned
    assert "broadcast_in_dim" not in pinned and "convert_element_type" not in pinned
    # Run alone and reversed, the counts match their pins: no compile count changed.
    result = project.run("--compile-census", "-p", "no:randomly", "test_models.py::test_budget")
    assert "compile count changed" not in result.stdout.str()
    result = project.run("--compile-census", "-p", "no:randomly", "-n", "2")
    assert "compile count changed" not in result.stdout.str()


def test_eager_dispatch_is_listed_apart_in_the_summary(project: JaxProject) -> None:
    _project(project)
    result = project.run("-p", "no:randomly", "-v")
    result.stdout.fnmatch_lines([
        "*test_models.py::test_budget: wall * 1 compile(s), 0 from the persistent cache; "
        "eager dispatch * (* s)",
        "eager dispatch (operations outside jit): * compile(s) in 2 test(s), * s; inside the "
        "ledgers' compile time, not census rows, not pinned, not counted by max_compiles "
        "unless count_eager",
    ])
    result.stdout.fnmatch_lines([
        "*over its compile_budget(max_compiles=1)*",
        "  jit(<lambda>): 2x (2 compiled by XLA, 0 from the persistent cache)",
        "  eager dispatch (operations outside jit): *x (not counted, "
        "compile_budget(count_eager=True) counts them): *jit(broadcast_in_dim)*",
    ])


def test_count_eager_counts_eager_dispatch_against_max_compiles(project: JaxProject) -> None:
    _project(project)
    result = project.run("-p", "no:randomly", "--compile-count-eager",
                         "test_models.py::test_budget")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*backend compiles, eager dispatch included, in this test, over its "
        "compile_budget(max_compiles=1)*",
        "  eager dispatch (operations outside jit): *x (counted): *",
    ])
    # The marker's count_eager=False wins over the session's option.
    project.tests(ORDER_SUITE.replace(
        "@pytest.mark.compile_budget(max_compiles=1)\n    def test_budget",
        "@pytest.mark.compile_budget(max_compiles=1, count_eager=False)\n    def test_budget",
    ))
    project.pytester.makeini("[pytest]\ncompile_count_eager = true\n")
    project.run("-p", "no:randomly", "test_models.py::test_budget").assert_outcomes(passed=1)


def test_keep_caches_lets_earlier_tests_change_the_count(project: JaxProject) -> None:
    """What the cache clearing buys: without it, an earlier test's compiles are reused."""
    _project(project)
    names = "test_models.py::test_census_only", "test_models.py::test_same_function_again"
    cleared = _run(project, "-p", "no:randomly", *names)
    kept = _run(project, "-p", "no:randomly", "--compile-keep-caches", *names)
    assert cleared["ledgers"]["test_same_function_again"][0] == 1
    assert kept["ledgers"]["test_same_function_again"][0] == 0  # jit(triple) reused
