"""Limits: the session's thresholds (their defaults are in `defaults`), and the one resolution
of every limit a row is judged with (`limits_for`: the pin, then the test's marker, then the
session's options).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from pytest_jaxcompile._constants import (
    DEFAULT_FLOOR_S,
    DEFAULT_INSTRUCTIONS_TOLERANCE,
    DEFAULT_LOADED_ACCELERATOR_TOLERANCE,
    DEFAULT_MAX_LOAD,
    DEFAULT_MAX_PAIRS,
    DEFAULT_MAX_SPEEDUP,
    DEFAULT_PAIRED_FLOOR_S,
    DEFAULT_PAIRED_TOLERANCE,
    DEFAULT_RSS_FLOOR_MIB,
    DEFAULT_TOLERANCE,
    DEFAULT_UNDECIDED_BAND,
    METRIC_WALL,
)
from pytest_jaxcompile._numbers import NumberError, finite_number

if TYPE_CHECKING:  # the option table reads the defaults at plugin load: no pins, no records
    from pytest_jaxcompile.gate.pins import Pin
    from pytest_jaxcompile.records import CompileRecord

T = TypeVar("T")


@dataclass(frozen=True)
class Thresholds:
    tolerance: float = DEFAULT_TOLERANCE
    floor_s: float = DEFAULT_FLOOR_S
    # the factor either side of 1 + tolerance within which one compile against one pinned
    # compile decides nothing (gate/band.py); 0: every row decided on its single sample
    undecided_band: float = DEFAULT_UNDECIDED_BAND
    max_ops_growth: float | None = None  # default op-count gate; None: no gate
    time_advisory: bool = False  # DRIFT is reported but does not fail the session
    expect_warm: bool = False  # a cold row of a module unchanged since its warm pin fails
    metric: str = METRIC_WALL  # what verdicts compare: wall or process CPU seconds
    max_load: float | None = DEFAULT_MAX_LOAD  # load per core; None: never noisy
    strict: bool = False  # judge noisy rows too; fail rows their pin no longer judges
    fail_on_improvement: bool = False  # an improved row fails the gate too
    # An improved row faster than its pin by more than this factor: its pin no longer judges
    # it (said on the row; it fails under `strict`)
    max_speedup: float = DEFAULT_MAX_SPEEDUP
    require_pinned: bool = False  # an unpinned row fails the gate
    max_upgrade_slowdown: float | None = None  # a jax upgrade slower than this fails
    # Accelerator rows above max_load: judged on wall seconds with this tolerance, since
    # their CPU seconds do not hold the compiler's work on the device (GPU autotuning).
    loaded_accelerator_tolerance: float = DEFAULT_LOADED_ACCELERATOR_TOLERANCE
    max_memory_growth: float | None = None  # compiled temp bytes over the pin; None: no gate
    max_flops_growth: float | None = None  # flops over the pin; None: no gate
    rss_floor_mib: float = DEFAULT_RSS_FLOOR_MIB  # the RSS-growth drift's absolute floor
    # compile instructions over the pin of an equal instrument identity that is DRIFT
    instructions_tolerance: float = DEFAULT_INSTRUCTIONS_TOLERANCE
    # the paired ratio over 1 that is DRIFT when its interval clears it (--compile-paired)
    paired_tolerance: float = DEFAULT_PAIRED_TOLERANCE
    # the paired gate's own floor: medians of the pairs within it are ok (the pairs measure
    # the difference directly, so it is far below the seconds gate's floor_s)
    paired_floor_s: float = DEFAULT_PAIRED_FLOOR_S
    # the pairs a paired row may get: its last look (the rule stops earlier where the
    # looks left cannot decide it; the gate judges with the child's last look)
    paired_max_pairs: int = DEFAULT_MAX_PAIRS
    paired_required: bool = False  # a paired row the pairs did not decide fails the gate
    accept: bool = False  # failing rows are reported as accepted; the session passes

    def __post_init__(self) -> None:
        """Every number a finite number >= 0 (None: not set), whoever built these: a nan
        or inf limit would switch its comparison off."""
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if "float" in str(field.type) and value is not None:
                try:
                    finite_number(value)
                except NumberError as error:
                    raise ValueError(f"Thresholds {field.name} {error}") from None


# The limits judged on the compiled executable's memory_analysis() and cost_analysis():
# where one is set (by the session or a test's marker), measured rows read those analyses.
COMPILED_LIMITS = ("max_memory_growth", "max_flops_growth")


def judges_compiled(limits: object) -> bool:
    """Whether these limits (`Thresholds`, a marker's `CompileBudget`) judge a figure of the
    compiled executable's analyses (`COMPILED_LIMITS`)."""
    return any(getattr(limits, name, None) is not None for name in COMPILED_LIMITS)


def most_specific(*values: T | None, default: T) -> T:
    """The first of `values` that is set (not None), else `default`: a setting from the
    most specific place that sets it (a pin, then a test's marker), else the session's."""
    return next((value for value in values if value is not None), default)


@dataclass(frozen=True)
class Limits:
    """The limits one row is judged with (`limits_for`)."""

    tolerance: float  # time DRIFT/improved, and the RSS-growth drift
    floor_s: float
    max_ops_growth: float | None  # None: no gate
    max_memory_growth: float | None
    max_flops_growth: float | None
    rss_floor_mib: float
    loaded_accelerator_tolerance: float  # accelerator rows measured above the max load
    instructions_tolerance: float  # compile instructions over their pin, whatever the load


def limits_for(record: CompileRecord, pin: Pin | None, thresholds: Thresholds) -> Limits:
    """The one resolution of every limit a judge applies to a row: each is taken from the
    most specific place that sets it, the pin (its hand-set ``tolerance``), then the test's
    ``compile_budget`` marker (carried on the record: ``tolerance``, ``max_ops_growth``,
    ``max_memory_growth``, ``max_flops_growth``), then the session's options (`Thresholds`,
    which set them all).

    A loaded accelerator row is never judged more strictly than the same row unloaded: its
    tolerance is the larger of ``compile_loaded_accelerator_tolerance`` and the row's own
    tolerance (pin, marker or option).
    """
    values = {
        field.name: most_specific(
            getattr(pin, field.name, None),
            getattr(record, field.name, None),
            default=getattr(thresholds, field.name),
        )
        for field in dataclasses.fields(Limits)
    }
    values["loaded_accelerator_tolerance"] = max(
        values["loaded_accelerator_tolerance"], values["tolerance"]
    )
    return Limits(**values)
