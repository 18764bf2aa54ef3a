"""Budgets, compile counts and census rows do not depend on test order or scheduling.

Real pytest sessions of one small project, run alone, in file order, reversed, under
pytest-xdist and under pytest-randomly: every run must give the budgeted and census'd
tests the same verdicts, compile counts and census rows.
"""

from __future__ import annotations

import importlib.util
import re
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

    train_step = jax.jit(lambda v: v * 0.5)  # module level: lives all session

    def test_module_level_step():
        assert float(train_step(jnp.ones(4))[0]) == 0.5

    def test_module_level_step_again():
        assert float(train_step(train_step(jnp.ones(4)))[0]) == 0.25

    def test_grad_of_a_module_level_jit():
        assert float(jax.grad(lambda v: train_step(v).sum())(jnp.ones(4))[0]) == 0.5

    def test_ahead_of_time():
        compiled = jax.jit(triple).lower(jnp.ones(3)).compile()
        assert float(compiled(jnp.ones(3))[0]) == 3.0

    def test_partial_of_a_module_function():
        import functools
        scaled = jax.jit(functools.partial(lambda a, v: a * v, 2.0))
        assert float(scaled(jnp.ones(4))[0]) == 2.0

    @pytest.mark.compile_budget(max_compiles=20, count_eager=True)
    def test_counts_its_eager_dispatch():
        assert float((jnp.ones(5) + 1.0).sum()) == 10.0
"""

# Tests whose eager dispatch counts: their eager compiles must not depend on order either.
EAGER_COUNTED = ("test_counts_its_eager_dispatch",)

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
    ledgers = {}
    for ledger in report["ledgers"]:
        name = ledger["cell"].split("::")[-1]
        # JAX's eager dispatch stays cached between tests that leave nothing behind, so
        # its count depends on order, except where it counts (count_eager).
        eager = (ledger["eager_compiles"], ledger["eager_modules"]) if name in EAGER_COUNTED else ()
        ledgers[name] = (ledger["compiles"], ledger["modules"], *eager)
    rows = sorted(
        (record["cell"].split("::")[-1], record["transform"]) for record in report["records"]
    )
    return {"outcomes": outcomes, "ledgers": ledgers, "rows": rows}


def _run(project: JaxProject, *args: str) -> dict[str, Any]:
    result = project.run("--compile-census", "-rA", *args)
    return _signature(project, result)


def test_budget_verdicts_counts_and_rows_are_the_same_in_any_order_shuffled_or_not(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(project)
    in_order = _run(project, "-p", "no:randomly")
    # The budget counts the test's own compile; a real recompile still fails.
    assert in_order["outcomes"] == {
        "test_creates_the_array_first": "PASSED",
        "test_budget": "PASSED",
        "test_new_shape_recompiles": "FAILED",
        "test_census_only": "PASSED",
        "test_same_function_again": "PASSED",
        "test_module_level_step": "PASSED",
        "test_module_level_step_again": "PASSED",
        "test_grad_of_a_module_level_jit": "PASSED",
        "test_ahead_of_time": "PASSED",
        "test_partial_of_a_module_function": "PASSED",
        "test_counts_its_eager_dispatch": "PASSED",
    }
    assert in_order["ledgers"]["test_budget"] == (1, {"jit(<lambda>)": 1})
    # Each census'd test compiles what it uses, even what an earlier test compiled.
    assert in_order["ledgers"]["test_same_function_again"][0] == 1
    assert in_order["ledgers"]["test_module_level_step_again"][0] == 1
    assert in_order["ledgers"]["test_ahead_of_time"][0] == 1
    eager_counted = in_order["ledgers"]["test_counts_its_eager_dispatch"]
    assert eager_counted[2] >= 2 and "jit(broadcast_in_dim)" in eager_counted[3]
    # No census row of an eager operation: only the tests' own functions.
    assert {transform for _, transform in in_order["rows"]} >= {
        "jit(<lambda>)",
        "jit(<lambda>)#2",
        "jit(triple)",
    }
    assert not any("broadcast_in_dim" in transform for _, transform in in_order["rows"])

    for name in (
        "test_budget",
        "test_same_function_again",
        "test_module_level_step_again",
        "test_grad_of_a_module_level_jit",
        "test_ahead_of_time",
        "test_partial_of_a_module_function",
        "test_counts_its_eager_dispatch",
    ):
        alone = _run(project, "-p", "no:randomly", f"test_models.py::{name}")
        assert alone["outcomes"] == {name: in_order["outcomes"][name]}
        assert alone["ledgers"] == {name: in_order["ledgers"][name]}
        assert alone["rows"] == [row for row in in_order["rows"] if row[0] == name]

    monkeypatch.setenv("REVERSE_TESTS", "1")
    assert _run(project, "-p", "no:randomly") == in_order
    monkeypatch.delenv("REVERSE_TESTS")

    # The same under pytest-randomly (a test extra; the CI installs it), shuffled by two
    # seeds and, by a third, over two pytest-xdist workers.
    # Looked up, not imported: pytest-randomly imports numpy, and pytester would unload it
    # after this test, which numpy's extension does not survive in this process.
    if importlib.util.find_spec("pytest_randomly") is None:
        assert _run(project, "-p", "no:randomly", "-n", "2") == in_order
        pytest.skip("pytest-randomly is not installed: the shuffled orders were not run")
    for seed in ("1", "2"):
        assert _run(project, "-p", "randomly", f"--randomly-seed={seed}") == in_order, seed
    assert _run(project, "-p", "randomly", "--randomly-seed=3", "-n", "2") == in_order


def test_compile_counts_are_pinned_without_eager_dispatch(project: JaxProject) -> None:
    _project(project)
    project.run("--compile-census", "-p", "no:randomly", "--compile-pin-update")
    (path,) = project.pins_dir.glob("*.toml")
    pinned = path.read_text()
    assert '"test_models.py::test_budget" = { compiles = 1 }' in pinned
    assert "broadcast_in_dim" not in pinned and "convert_element_type" not in pinned
    # Run alone and reversed, the counts match their pins: no compile count changed.
    result = project.run("--compile-census", "-p", "no:randomly", "test_models.py::test_budget")
    assert "compile count changed" not in result.stdout.str()
    result = project.run("--compile-census", "-p", "no:randomly", "-n", "2")
    assert "compile count changed" not in result.stdout.str()


def test_eager_dispatch_is_listed_apart_in_the_summary(project: JaxProject) -> None:
    _project(project)
    result = project.run("-p", "no:randomly", "-v")
    # Under -v each test's ledger follows its name in the list of tests with the most compile
    # time (a ledger longer than the summary's lines is wrapped: read it rejoined).
    summary = " ".join(line.strip() for line in result.stdout.lines)
    assert re.search(
        r" test_models\.py::test_budget wall [^;]*; phases [^;]*; 1 compile\(s\), 0 from the "
        r"persistent cache; eager dispatch \d+ \([0-9.]+ s\)",
        summary,
    ), result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "eager dispatch (operations outside jit): * compile(s) in * test(s), * s; inside the "
            "ledgers' compile time, not census rows, not pinned, not counted by max_compiles "
            "unless count_eager",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*over its compile_budget(max_compiles=1)*",
            "  jit(<lambda>): 2x (2 compiled by XLA, 0 from the persistent cache)",
            "  eager dispatch (operations outside jit): *x (not counted, "
            "compile_budget(count_eager=True) counts them): *jit(broadcast_in_dim)*",
        ]
    )


def test_count_eager_counts_eager_dispatch_against_max_compiles(project: JaxProject) -> None:
    _project(project)
    result = project.run(
        "-p", "no:randomly", "-o", "compile_count_eager=true", "test_models.py::test_budget"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*backend compiles, eager dispatch included, in this test, over its "
            "compile_budget(max_compiles=1)*",
            "  eager dispatch (operations outside jit): *x (counted): *",
        ]
    )
    # The marker's count_eager=False wins over the session's option.
    project.tests(
        ORDER_SUITE.replace(
            "@pytest.mark.compile_budget(max_compiles=1)\n    def test_budget",
            "@pytest.mark.compile_budget(max_compiles=1, count_eager=False)\n    def test_budget",
        )
    )
    project.pytester.makeini("[pytest]\ncompile_count_eager = true\n")
    project.run("-p", "no:randomly", "test_models.py::test_budget").assert_outcomes(passed=1)


def _cleared_because(project: JaxProject) -> dict[str, str | None]:
    return {
        ledger["cell"].split("::")[-1]: ledger["caches_cleared_because"]
        for ledger in project.report()["ledgers"]
    }


def test_caches_are_cleared_only_when_an_earlier_function_is_still_in_memory(
    project: JaxProject,
) -> None:
    _project(project)
    _run(project, "-p", "no:randomly")
    why = _cleared_because(project)
    assert "first census'd test" in str(why["test_creates_the_array_first"])
    # Eager dispatch and functions that died with their test leave nothing to clear.
    assert why["test_budget"] is None
    assert why["test_new_shape_recompiles"] is None
    assert why["test_census_only"] is None
    # A module-level function an earlier test compiled is still there: cleared, named.
    assert why["test_same_function_again"] == "triple (test_models) is still in memory"
    assert why["test_module_level_step_again"] == "<lambda> (test_models) is still in memory"
    # A test whose eager dispatch counts starts from cleared caches, whatever ran before.
    assert "count_eager" in str(why["test_counts_its_eager_dispatch"])


def test_clear_caches_never_lets_earlier_tests_change_the_count(project: JaxProject) -> None:
    """What the cache clearing buys: without it, an earlier test's compiles are reused."""
    _project(project)
    names = "test_models.py::test_census_only", "test_models.py::test_same_function_again"
    cleared = _run(project, "-p", "no:randomly", *names)
    kept = _run(project, "-p", "no:randomly", "-o", "compile_clear_caches=never", *names)
    assert _cleared_because(project) == {
        "test_census_only": None,
        "test_same_function_again": None,
    }
    assert cleared["ledgers"]["test_same_function_again"][0] == 1
    assert kept["ledgers"]["test_same_function_again"][0] == 0  # jit(triple) reused
    always = _run(project, "-p", "no:randomly", "-o", "compile_clear_caches=always", *names)
    assert always == cleared
    assert set(_cleared_because(project).values()) == {"compile_clear_caches = always"}


SKIPPED_IN_A_SUBTEST = """
    import gc, unittest
    import jax, jax.numpy as jnp

    # In a large suite the cycle sits in the oldest generation, which Python collects
    # rarely; here no automatic collection may run between the two tests either.
    gc.disable()

    class OptimizerTest(unittest.TestCase):
        def test_a_skips_after_compiling(self):
            @jax.jit
            def step(v):
                return v * 2.0

            with self.subTest("optimize"):
                step(jnp.ones(3))
                raise unittest.SkipTest("not numerically stable with these settings")

        def test_b_next(self):
            assert float(jax.jit(lambda v: v + 1.0)(jnp.ones(3))[0]) == 2.0
"""


def test_a_step_kept_only_by_a_skipped_subtests_traceback_clears_nothing(
    project: JaxProject,
) -> None:
    """optax's pattern: a `SkipTest` inside `subTest` leaves the test's frames, and its
    jitted `step`, in a reference cycle; collecting it beats clearing JAX's caches."""
    project.conftest(cache=False)
    project.tests(SKIPPED_IN_A_SUBTEST)
    result = project.run("--compile-census", "-p", "no:randomly")
    # pytest 9 reports the skip as the subtest's, earlier releases as the test's.
    assert result.ret == 0
    assert "2 passed" in result.stdout.str() or "1 passed, 1 skipped" in result.stdout.str()
    why = _cleared_because(project)
    assert "first census'd test" in str(why["test_a_skips_after_compiling"])
    assert why["test_b_next"] is None
