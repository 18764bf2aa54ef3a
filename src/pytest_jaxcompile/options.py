"""Options and ini keys, resolved once per session (CLI beats env beats ini)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_jaxcompile.backends.jax.guard import Requirements
from pytest_jaxcompile.gate.conclude import GateSettings
from pytest_jaxcompile.gate.verdicts import (
    DEFAULT_FLOOR_S,
    DEFAULT_MAX_LOAD,
    DEFAULT_TOLERANCE,
    METRIC_CPU,
    METRIC_WALL,
    Thresholds,
)
from pytest_jaxcompile.output.github import MODES as GITHUB_MODES

HARDWARE_ENV = "JAXCOMPILE_HARDWARE"


@dataclass(frozen=True)
class Settings:
    pin_update: bool
    pins_dir: Path
    thresholds: Thresholds
    hardware_override: str | None
    fail_on_improvement: bool
    report_path: Path | None
    mixed_precision_default: bool
    census: bool
    trace_profile: bool
    requirements: Requirements
    repeat: int
    record_dir: Path | None = None
    github: str = "auto"  # "auto": GitHub output when its variables are set; "off": never

    @classmethod
    def from_config(cls, config: pytest.Config) -> Settings:
        return cls(
            pin_update=bool(config.getoption("compile_pin_update")),
            pins_dir=_path(config, "compile_pins_dir", "compile_pins_dir", default="pins"),
            thresholds=Thresholds(
                tolerance=_number(config, "compile_tolerance", DEFAULT_TOLERANCE),
                floor_s=_number(config, "compile_floor", DEFAULT_FLOOR_S),
                max_ops_growth=_optional_number(config, "compile_max_ops_growth"),
                time_advisory=_flag(config, "compile_time_advisory"),
                expect_warm=_flag(config, "compile_expect_warm"),
                metric=_metric(config),
                max_load=_number(config, "compile_max_load", DEFAULT_MAX_LOAD),
                strict=_flag(config, "compile_strict"),
            ),
            hardware_override=(
                config.getoption("compile_hardware")
                or os.environ.get(HARDWARE_ENV)
                or str(config.getini("compile_hardware") or "").strip()
                or None
            ),
            fail_on_improvement=_flag(config, "compile_fail_on_improvement"),
            report_path=_optional_path(config, "compile_report"),
            mixed_precision_default=bool(config.getini("compile_mixed_precision")),
            census=_flag(config, "compile_census"),
            trace_profile=bool(config.getoption("compile_trace_profile")),
            requirements=_requirements(config),
            repeat=_repeat(config),
            record_dir=_optional_path(config, "compile_record_dir"),
            github=_choice(config, "compile_github", GITHUB_MODES, default="auto"),
        )

    @property
    def gate(self) -> GateSettings:
        return GateSettings(
            thresholds=self.thresholds,
            pin_update=self.pin_update,
            fail_on_improvement=self.fail_on_improvement,
        )


def _choice(config: pytest.Config, name: str, choices: tuple[str, ...], default: str) -> str:
    """CLI value (argparse checked it), else ini value, else the default."""
    cli = config.getoption(name)
    if cli is not None:
        return str(cli)
    raw = str(config.getini(name) or "").strip()
    if not raw:
        return default
    if raw not in choices:
        raise pytest.UsageError(
            f"ini option {name} = {raw!r} must be one of {', '.join(choices)}"
        )
    return raw


def _metric(config: pytest.Config) -> str:
    value = str(config.getoption("compile_metric") or config.getini("compile_metric") or "")
    value = value.strip() or METRIC_WALL
    if value not in (METRIC_WALL, METRIC_CPU):
        raise pytest.UsageError(f"compile_metric = {value!r}: expected 'wall' or 'cpu'")
    return value


def _repeat(config: pytest.Config) -> int:
    cli = config.getoption("compile_repeat")
    raw = str(cli if cli is not None else config.getini("compile_repeat") or "1").strip()
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise pytest.UsageError(f"compile_repeat = {raw!r}: expected a whole number >= 1")
    return value


def _requirements(config: pytest.Config) -> Requirements:
    try:
        return Requirements.from_ini(
            flags=config.getini("compile_required_xla_flags"),
            cache=bool(config.getini("compile_require_cache")),
            cacheable=bool(config.getini("compile_require_cacheable")),
            platform=str(config.getini("compile_expected_platform") or ""),
        )
    except ValueError as error:
        raise pytest.UsageError(f"ini option {error}") from None


def _flag(config: pytest.Config, name: str) -> bool:
    return bool(config.getoption(name) or config.getini(name))


def _number(config: pytest.Config, name: str, default: float) -> float:
    """CLI value, else ini value, else the default; a bad value names its source."""
    value = _optional_number(config, name)
    return default if value is None else value


def _optional_number(config: pytest.Config, name: str) -> float | None:
    cli = config.getoption(name)
    if cli is not None:
        return float(cli)  # argparse already validated it
    raw = str(config.getini(name) or "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise pytest.UsageError(f"ini option {name} = {raw!r} is not a number") from None
    if value < 0:
        raise pytest.UsageError(f"ini option {name} = {raw!r} must not be negative")
    return value


def _path(config: pytest.Config, option: str, ini: str, default: str) -> Path:
    cli = config.getoption(option)
    if cli:
        return Path(config.invocation_params.dir, cli).resolve()
    raw = str(config.getini(ini) or "").strip() or default
    return Path(config.rootpath, raw).resolve()


def _optional_path(config: pytest.Config, name: str) -> Path | None:
    cli = config.getoption(name)
    if cli:
        return Path(config.invocation_params.dir, cli).resolve()
    raw = str(config.getini(name) or "").strip()
    return Path(config.rootpath, raw).resolve() if raw else None


def non_negative_float(text: str) -> float:
    """argparse type for the numeric options."""
    import argparse

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must not be negative")
    return value
