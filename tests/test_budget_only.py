"""Budget-only tests: judged by their compile_budget, never asked for seconds pins.

A test whose marker sets a limit (max_compiles, a growth limit) and no ``seconds`` or
``tolerance``, that requests no measuring fixture, in a session without the census, asked
for no seconds: its census rows are ``budget`` rows, never unpinned, never pinned. A growth
limit is judged against a pin: such a row is asked for one, for that limit only.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from conftest import JaxProject
from records_factory import make_record

from pytest_jaxcompile.gate.budget import CompileBudget
from pytest_jaxcompile.gate.conclude import GateSettings, conclude
from pytest_jaxcompile.gate.judging import judge
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.pins import PinStore
from pytest_jaxcompile.gate.status import Status, row_fails
from pytest_jaxcompile.gate.view import session_view
from pytest_jaxcompile.output.github import step_summary
from pytest_jaxcompile.output.terminal import summary_lines
from pytest_jaxcompile.record_checks import RecordDataError, check_record_data
from pytest_jaxcompile.records import CompileRecord

# --------------------------------------------------------------------------- logic


@pytest.mark.parametrize(
    ("budget", "limits_only"),
    [
        (CompileBudget(max_compiles=1), True),
        (CompileBudget(max_ops_growth=0.1), True),
        (CompileBudget(max_memory_growth=0.1, cacheable=True), True),
        (CompileBudget(max_flops_growth=0.0), True),
        (CompileBudget(max_compiles=1, seconds=2.0), False),
        (CompileBudget(max_compiles=1, tolerance=0.5), False),
        (CompileBudget(), False),  # a bare marker: a census of the test, pinned
        (CompileBudget(cacheable=True, mixed_precision=True, count_eager=True), False),
    ],
)
def test_a_budget_is_limits_only_when_it_sets_a_limit_and_no_seconds(
    budget: CompileBudget, limits_only: bool
) -> None:
    assert budget.limits_only is limits_only


def budget_row(**overrides: object) -> CompileRecord:
    values: dict[str, object] = {"source": "census", "budget_only": True, "op_count": 10}
    values.update(overrides)
    return make_record(**values)


def test_a_budget_row_is_judged_by_its_budget_with_or_without_a_pin(tmp_path: Path) -> None:
    store = PinStore(tmp_path)
    verdict = judge(budget_row(), store, Thresholds())
    assert verdict.status is Status.BUDGET and verdict.pin is None
    assert not row_fails(Status.BUDGET, Thresholds(require_pinned=True))
    # A pin written before (by an earlier release) is not compared with: no DRIFT.
    store.update([dataclasses.replace(budget_row(), compile_s=0.001)])
    assert judge(budget_row(compile_s=9.0), store, Thresholds()).status is Status.BUDGET
    # The same row of a test that asked for seconds is compared.
    asked = judge(budget_row(compile_s=9.0, budget_only=False), store, Thresholds(floor_s=0))
    assert asked.status is Status.DRIFT


def test_a_growth_limit_asks_a_budget_row_for_a_pin_for_that_limit_only(tmp_path: Path) -> None:
    store = PinStore(tmp_path)
    for thresholds, row in (
        (Thresholds(), budget_row(max_ops_growth=0.1)),  # the marker's limit
        (Thresholds(max_flops_growth=0.5), budget_row(flops=8.0)),  # the session's
    ):
        verdict = judge(row, store, thresholds)
        assert verdict.status is Status.UNPINNED
        assert verdict.note is not None and verdict.note.startswith(
            "pinned for its growth limits only ("
        )
        assert "its seconds are not judged" in verdict.note
    # A limit of a figure the row lacks (a JAX census row has no flops) judges nothing.
    assert judge(budget_row(), store, Thresholds(max_flops_growth=0.5)).status is Status.BUDGET
    row = budget_row(max_ops_growth=0.1)
    store.update([row])
    slower = dataclasses.replace(row, compile_s=50.0, compile_cpu_s=50.0)
    assert judge(slower, store, Thresholds(floor_s=0)).status is Status.OK  # seconds: not judged
    grown = dataclasses.replace(row, op_count=20)
    assert judge(grown, store, Thresholds()).status is Status.GREW


def test_a_pin_update_pins_no_budget_row_and_says_so(tmp_path: Path) -> None:
    store = PinStore(tmp_path / "pins")
    rows = [
        budget_row(cell="t.py::test_budget"),
        budget_row(cell="t.py::test_ops", max_ops_growth=0.1),
        make_record(cell="t.py::test_seconds"),
    ]
    outcome = conclude(
        rows,
        [row.cell for row in rows],
        [],
        store,
        GateSettings(Thresholds(), pin_update=True),
        rootdir=tmp_path,
        ledgers=(),
    )
    pinned = PinStore.load(tmp_path / "pins")
    assert [cell for cell in ("t.py::test_budget", "t.py::test_ops", "t.py::test_seconds")
            if pinned.get(rows[0].key, cell, "vag") is not None] == [
        "t.py::test_ops",
        "t.py::test_seconds",
    ]  # fmt: skip
    (group,) = session_view(outcome).groups
    assert (group.pinned_rows, group.budget_rows) == (2, 1)
    terminal = [text for text, _ in summary_lines(outcome, verbose=False)]
    assert "  pinned     2 row(s)" in terminal
    assert "  budget     1 row(s) judged by their compile_budget only: not pinned" in terminal
    summary = step_summary(outcome)
    assert "2 row(s) pinned." in summary
    assert "1 row(s) judged by their compile_budget only: not pinned." in summary


def test_the_unpinned_sentence_says_which_rows_are_pinned_for_growth_only(tmp_path: Path) -> None:
    store = PinStore(tmp_path)
    rows = [budget_row(cell="t.py::test_ops", max_ops_growth=0.1), make_record(cell="t.py::b")]
    outcome = conclude(
        rows, [], [], store, GateSettings(Thresholds(), pin_update=False), rootdir=tmp_path
    )
    (block,) = [b for b in session_view(outcome).blocks if b.status is Status.UNPINNED]
    assert block.text == (
        "unpinned: 2 row(s) have no pin under their key (1 for their compile_budget's growth "
        "limits only: their seconds are not judged)"
    )
    assert block.command == "pytest --compile-pin-update t.py::b t.py::test_ops"


def test_a_record_says_whether_it_is_budget_only_and_readers_check_it() -> None:
    row = budget_row()
    assert CompileRecord.from_dict(row.to_dict()).budget_only is True
    check_record_data(row.to_dict())
    with pytest.raises(RecordDataError, match="'budget_only' must be true or false"):
        check_record_data({**row.to_dict(), "budget_only": "yes"})
    older = make_record().to_dict()  # records of earlier releases: not budget-only
    del older["budget_only"]
    assert CompileRecord.from_dict(older).budget_only is False


# --------------------------------------------------------------------------- sessions

BUDGET_TESTS = """
    import jax, jax.numpy as jnp, pytest

    def double(x):
        return x * 2

    def triple(x):
        return x * 3

    def halve(x):
        return x / 2

    @pytest.mark.compile_budget(max_compiles=1)
    def test_budget():
        jax.jit(double)(jnp.ones(4)).block_until_ready()

    @pytest.mark.compile_budget(seconds=600, max_compiles=1)
    def test_seconds():
        jax.jit(triple)(jnp.ones(4)).block_until_ready()

    @pytest.mark.compile_budget(max_compiles=1)
    def test_over():
        for size in (2, 3):  # two shapes: two compiles, over the budget
            jax.jit(halve)(jnp.ones(size)).block_until_ready()
"""


def test_a_budget_only_test_is_judged_by_its_budget_and_never_asked_to_pin(
    project: JaxProject,
) -> None:
    project.conftest(cache=False)
    project.tests(BUDGET_TESTS)
    result = project.run()
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*2 backend compiles in this test, over its compile_budget*"])
    statuses = {(name, status) for (name, _), status in project.verdicts().items()}
    # test_over's two rows (a shape each): budget rows, though its test failed on the budget
    assert statuses == {
        ("test_budget", "budget"),
        ("test_over", "budget"),
        ("test_seconds", "unpinned"),
    }
    budget_only = {name: row["budget_only"] for (name, _), row in project.rows().items()}
    assert budget_only == {"test_budget": True, "test_over": True, "test_seconds": False}
    output = result.stdout.str()
    assert "budget     3 row(s) (-v lists them): test_models.py 3" in output
    result.stdout.fnmatch_lines(
        [
            "unpinned: 1 row(s) have no pin under their key.",
            "Pin them with: pytest --compile-pin-update test_models.py::test_seconds",
            "budget: 3 row(s) are judged by their compile_budget only (their tests asked for no "
            "seconds): never compared with a pin, never pinned.",
        ]
    )
    assert "test_budget" not in "".join(
        line for line in output.splitlines() if "unpinned" in line or "--compile-pin-update" in line
    )

    result = project.run("--compile-pin-update")
    (path,) = project.pins_dir.glob("*.toml")
    pins = path.read_text()
    assert "test_models.py::test_seconds" in pins
    assert "test_budget" not in pins and "test_over" not in pins  # no seconds pinned for them
    result.stdout.fnmatch_lines(
        [
            "  pinned     1 row(s)",
            "  budget     3 row(s) judged by their compile_budget only: not pinned",
        ]
    )

    project.run("-k", "not over").assert_outcomes(passed=2)
    verdicts = project.verdicts()
    assert verdicts[("test_budget", "jit(double)")] == "budget"
    assert verdicts[("test_seconds", "jit(triple)")] == "ok"


FIXTURE_TESTS = """
    import jax, jax.numpy as jnp, pytest

    def double(x):
        return x * 2

    def triple(x):
        return x * 3

    def halve(x):
        return x / 2

    @pytest.mark.compile_budget(max_compiles=1)
    def test_budget():
        jax.jit(double)(jnp.ones(4)).block_until_ready()

    @pytest.mark.compile_budget(max_compiles=5)
    def test_fixture(jax_compile):
        jax_compile(jax.jit(triple), jnp.ones(4), transform="triple")
        jax.jit(halve)(jnp.ones(4)).block_until_ready()
"""


def test_the_census_or_a_measuring_fixture_asks_a_budgeted_test_for_seconds(
    project: JaxProject,
) -> None:
    project.conftest(cache=False)
    project.tests(FIXTURE_TESTS)
    project.run().assert_outcomes(passed=2)
    verdicts = project.verdicts()
    assert verdicts[("test_budget", "jit(double)")] == "budget"
    assert verdicts[("test_fixture", "triple")] == "unpinned"
    assert verdicts[("test_fixture", "jit(halve)")] == "unpinned"  # the test asked for seconds
    project.run("--compile-census").assert_outcomes(passed=2)
    assert project.verdicts()[("test_budget", "jit(double)")] == "unpinned"


GROWTH_TEST = """
    import jax, jax.numpy as jnp, pytest

    def step(x):
        return jnp.sin(x) * 2

    @pytest.mark.compile_budget(max_ops_growth=0.1)
    def test_ops():
        jax.jit(step)(jnp.ones(4)).block_until_ready()
"""


def test_a_growth_limit_with_no_figure_to_judge_asks_a_census_row_for_no_pin(
    project: JaxProject,
) -> None:
    """A JAX census row has no op count (the jax_compile fixture measures it): its
    max_ops_growth has nothing to compare with a pin, so the row is not asked for one."""
    project.conftest(cache=False)
    project.tests(GROWTH_TEST)
    result = project.run()
    result.assert_outcomes(passed=1)
    (row,) = project.report()["records"]
    assert (row["budget_only"], row["op_count"]) == (True, None)
    assert project.verdicts()[("test_ops", "jit(step)")] == "budget"
    assert "--compile-pin-update" not in result.stdout.str()
    project.pin_update().assert_outcomes(passed=1)
    assert list(project.pins_dir.glob("*.toml")) == []
