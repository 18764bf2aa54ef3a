"""A session's resolved options: `Settings`, built once per session from the option table.

Imported when a session uses the plugin (`activation`), never at plugin load: the load reads
only the table (`options`).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_jaxcompile._constants import (
    CLEAR_AUTO,
    DEFAULT_INSTRUCTIONS_TIMEOUT_S,
    DEFAULT_PAIRED_TIMEOUT_S,
    PLATFORM_ALIASES,
    REPRODUCER_FAILING,
)
from pytest_jaxcompile.backends.settings import Requirements, parse_xla_flags
from pytest_jaxcompile.gate.limits import Thresholds, judges_compiled
from pytest_jaxcompile.options import OPTIONS, THRESHOLD_OPTIONS, OptionError, implausible, resolve


@dataclass(frozen=True)
class Settings:
    """A session's resolved options."""

    pin_update: bool
    pins_dir: Path
    thresholds: Thresholds
    hardware_override: str | None
    report_path: Path | None
    mixed_precision_default: bool
    census: bool
    trace_profile: bool
    requirements: Requirements
    repeat: int
    durations: int = 5
    record_dir: Path | None = None
    artifacts_dir: Path | None = None
    github: str = "auto"  # "auto": GitHub output when its variables are set; "off": never
    count_eager: bool = False  # eager dispatch counts against max_compiles
    suggest_budgets: bool = False  # print each census'd test's compile_budget marker line
    clear_caches: str = CLEAR_AUTO  # when census'd tests start with JAX's caches cleared
    implausible: tuple[str, ...] = ()  # warnings: values accepted but most likely mistakes
    instructions: bool = False  # count compile instructions under valgrind
    instructions_timeout_s: float = DEFAULT_INSTRUCTIONS_TIMEOUT_S
    paired: bool = False  # pair changed rows with their pins' modules; store them on pin update
    paired_budget_s: float | None = None  # seconds the whole pairing may take; None: no budget
    paired_timeout_s: float = DEFAULT_PAIRED_TIMEOUT_S
    modules_dir: Path | None = None  # None: <pins_dir>/modules
    profile: bool = False  # profile every row, not only failing ones; store modules on pin update
    profile_failing: bool = True  # compile_profile_failing: profile the failing rows
    accept_label: str | None = None  # compile_accept_label: CI's accept label, for advice
    reproducer: str = REPRODUCER_FAILING  # compile_reproducer: which rows get a bundle
    reproducer_dir: Path | None = None  # compile_reproducer_dir: where the bundles go

    @property
    def module_store_dir(self) -> Path:
        """Where pinned modules are stored: compile_modules_dir, else the pins dir's
        ``modules``."""
        return self.modules_dir if self.modules_dir is not None else self.pins_dir / "modules"

    junit_xml: bool = False  # pytest writes JUnit XML (--junitxml): rows' figures go there
    instructions_recount: bool = False  # count unchanged modules too (no carry)
    instructions_required: bool = False  # a row not counted fails the session

    @property
    def compiled_figures(self) -> bool:
        """Whether measured rows read their executable's memory and cost analyses (tens of
        ms on a large module): where a session limit judges them, a pin update keeps them,
        or a report, the record dir or JUnit XML shows them. A test's compile_budget limit
        asks for them too (session/census.measure_context)."""
        return (
            self.pin_update
            or judges_compiled(self.thresholds)
            or self.report_path is not None
            or self.record_dir is not None
            or self.junit_xml
        )

    @classmethod
    def from_config(cls, config: pytest.Config) -> Settings:
        try:
            values = {option.name: resolve(config, option) for option in OPTIONS}
        except OptionError as error:
            raise pytest.UsageError(str(error)) from None
        junit_xml = bool(getattr(config.option, "xmlpath", None))
        return dataclasses.replace(cls.from_values(values), junit_xml=junit_xml)

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> Settings:
        required: dict[str, str | None] = {}
        for line in values["compile_required_xla_flags"] or ():
            required.update(parse_xla_flags(line))
        thresholds = Thresholds(
            **{
                option.threshold: values[option.name]
                for option in THRESHOLD_OPTIONS
                if option.threshold is not None and values[option.name] is not None
            }
        )
        return cls(
            pin_update=bool(values["compile_pin_update"]),
            pins_dir=values["compile_pins_dir"],
            thresholds=thresholds,
            hardware_override=values["compile_hardware"] or None,
            report_path=values["compile_report"],
            mixed_precision_default=bool(values["compile_mixed_precision"]),
            census=bool(values["compile_census"]),
            trace_profile=bool(values["compile_trace_profile"]),
            requirements=Requirements(
                xla_flags=required,
                cache=bool(values["compile_require_cache"]),
                cacheable=bool(values["compile_require_cacheable"]),
                platform=PLATFORM_ALIASES.get(values["compile_expected_platform"] or ""),
            ),
            repeat=int(values["compile_repeat"]),
            durations=int(values["compile_durations"]),
            record_dir=values["compile_record_dir"],
            artifacts_dir=values["compile_artifacts_dir"],
            github=str(values["compile_github"]),
            count_eager=bool(values["compile_count_eager"]),
            suggest_budgets=bool(values["compile_suggest_budgets"]),
            clear_caches=str(values["compile_clear_caches"]),
            implausible=tuple(implausible(values)),
            instructions=bool(values["compile_instructions"]),
            instructions_timeout_s=float(values["compile_instructions_timeout"]),
            paired=bool(values["compile_paired"]),
            paired_budget_s=values["compile_paired_budget"],
            paired_timeout_s=float(values["compile_paired_timeout"]),
            modules_dir=values["compile_modules_dir"],
            profile=bool(values["compile_profile"]),
            profile_failing=values["compile_profile_failing"] != "never",
            accept_label=values["compile_accept_label"] or None,
            reproducer=str(values["compile_reproducer"]),
            reproducer_dir=values["compile_reproducer_dir"],
            instructions_recount=bool(values["compile_instructions_recount"]),
            instructions_required=bool(values["compile_instructions_required"]),
        )
