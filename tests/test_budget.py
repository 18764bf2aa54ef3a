"""The compile_budget marker's argument parsing."""

from __future__ import annotations

import pytest

from pytest_jaxcompile.gate.budget import CompileBudget, merge_budgets, parse_budget


def test_positional_seconds_and_keywords() -> None:
    assert parse_budget((2,), {"tolerance": 0.3, "mixed_precision": True}) == CompileBudget(
        seconds=2.0, tolerance=0.3, mixed_precision=True
    )


@pytest.mark.parametrize(
    ("args", "kwargs", "fragment"),
    [
        ((), {"secs": 1}, "unexpected keyword argument 'secs'"),
        ((1, 2), {}, "too many positional arguments"),
        (("fast",), {}, "seconds must be a finite number >= 0"),
        ((-1,), {}, "seconds must be a finite number >= 0"),
        ((), {"tolerance": True}, "tolerance must be a finite number >= 0"),
        ((), {"mixed_precision": "yes"}, "mixed_precision must be True or False"),
        ((), {"count_eager": 1}, "count_eager must be True or False"),
    ],
)
def test_bad_arguments_say_what_is_wrong(
    args: tuple[object, ...], kwargs: dict[str, object], fragment: str
) -> None:
    with pytest.raises(ValueError, match="compile_budget") as error:
        parse_budget(args, kwargs)
    assert fragment in str(error.value)


def test_count_eager_is_parsed_and_a_closer_false_wins() -> None:
    assert parse_budget((), {"max_compiles": 1, "count_eager": True}).count_eager is True
    function = CompileBudget(count_eager=False)
    module = CompileBudget(count_eager=True, max_compiles=2)
    assert merge_budgets([function, module]) == CompileBudget(count_eager=False, max_compiles=2)


def test_closest_marker_wins_per_field() -> None:
    function = CompileBudget(seconds=1.0)
    module = CompileBudget(seconds=9.0, tolerance=0.2)
    assert merge_budgets([function, module]) == CompileBudget(seconds=1.0, tolerance=0.2)
