"""One number check: nan, inf, negatives and bools are refused at every entry, by name.

A comparison with nan is never true and one with inf never false, so either would let a
slower compile pass (``measured > pinned * (1 + nan)`` is False). Each entry (option, ini
key, marker, pin file, record file, JSON report) refuses them through `_numbers`, and the
error names its place. A session stopped by a bad ini key: tests/test_gate.py.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from corpus_helpers import row, write_lines
from records_factory import make_record

from pytest_jaxcompile._numbers import NumberError, finite_number, whole_number
from pytest_jaxcompile.backends import host_state
from pytest_jaxcompile.cli import main
from pytest_jaxcompile.gate.budget import NUMBER_ARGUMENTS, parse_budget
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.outcome import Outcome
from pytest_jaxcompile.gate.pins import PinFileError, PinStore, read_pin_file
from pytest_jaxcompile.options import BY_NAME, OptionError, parse_value
from pytest_jaxcompile.output.json_report import (
    ReportError,
    build_report,
    load_report,
    write_report,
)
from pytest_jaxcompile.record_checks import RecordDataError, check_record_data

# Every bad number: Python values, and as the entries' texts spell them.
BAD_VALUES = [math.nan, math.inf, -math.inf, -1, float("1e999"), True, False, "1", 10**400]
BAD_TEXTS = ["nan", "inf", "-1", "1e999", "True"]


# --- the check itself -----------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 0.0, 0.5, 3, 1e300, 10**300])
def test_a_finite_number_at_least_zero_passes_as_a_float(value: float) -> None:
    assert finite_number(value) == float(value)
    assert isinstance(finite_number(value), float)


@pytest.mark.parametrize("value", [*BAD_VALUES, None, [1.0]])
def test_anything_else_is_refused_saying_what_was_expected(value: object) -> None:
    with pytest.raises(NumberError) as error:
        finite_number(value)
    assert str(error.value) == f"must be a finite number >= 0, got {value!r}"


def test_a_whole_number_is_an_int_not_a_bool_nor_a_float() -> None:
    assert whole_number(0) == 0
    assert whole_number(7, minimum=1) == 7
    for value in (2.0, True, -1, math.nan, "3", None):
        with pytest.raises(NumberError, match="must be a whole number >= 0"):
            whole_number(value)
    with pytest.raises(NumberError, match=r"must be a whole number >= 1, got 0"):
        whole_number(0, minimum=1)


# --- options and ini keys -------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "compile_tolerance",
        "compile_floor",
        "compile_undecided_band",
        "compile_loaded_accelerator_tolerance",
        "compile_max_memory_growth",
        "compile_max_speedup",
    ],
)
@pytest.mark.parametrize("text", BAD_TEXTS)
def test_a_number_option_refuses_them_naming_the_option(name: str, text: str) -> None:
    option = BY_NAME[name]
    with pytest.raises(OptionError) as error:
        parse_value(option, text, "option")
    assert str(error.value).startswith(f"option {option.flag} = {text!r} ")
    with pytest.raises(OptionError) as error:
        parse_value(option, text, "ini option")
    assert str(error.value).startswith(f"ini option {name} = {text!r} ")


@pytest.mark.parametrize("text", ["1e999", "2.0", "True", "-1"])
def test_a_count_option_refuses_what_is_no_whole_number(text: str) -> None:
    with pytest.raises(OptionError, match=r"compile_repeat = .*expected a whole number >= 1"):
        parse_value(BY_NAME["compile_repeat"], text, "ini option")


@pytest.mark.parametrize("text", BAD_TEXTS)
def test_the_load_override_refuses_them_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    monkeypatch.setenv("JAXCOMPILE_LOAD_PER_CORE", text)
    with pytest.raises(ValueError, match=rf"^JAXCOMPILE_LOAD_PER_CORE='{text}' is not a finite"):
        host_state()
    monkeypatch.setenv("JAXCOMPILE_LOAD_PER_CORE", "2.5")
    assert host_state().load_per_core == 2.5


# --- the marker -----------------------------------------------------------------------


@pytest.mark.parametrize("name", NUMBER_ARGUMENTS)
@pytest.mark.parametrize("value", BAD_VALUES)
def test_every_number_argument_of_the_marker_refuses_them(name: str, value: object) -> None:
    with pytest.raises(ValueError) as error:
        parse_budget((), {name: value})
    assert str(error.value) == (
        f"@pytest.mark.compile_budget: {name} must be a finite number >= 0, got {value!r}"
    )


@pytest.mark.parametrize("value", [2.0, True, -1, math.nan])
def test_max_compiles_is_a_whole_number(value: object) -> None:
    with pytest.raises(ValueError, match="max_compiles must be a whole number >= 0"):
        parse_budget((), {"max_compiles": value})


@pytest.mark.parametrize(
    "argument",
    [
        'tolerance=float("nan")',
        'tolerance=float("inf")',
        "max_ops_growth=-1",
        "tolerance=1e999",
        "max_flops_growth=True",
    ],
)
def test_a_bad_marker_argument_fails_its_test_naming_test_and_argument(
    pytester: pytest.Pytester, argument: str
) -> None:
    pytester.makepyfile(
        test_marked=f"""
        import pytest

        @pytest.mark.compile_budget({argument})
        def test_model():
            pass

        def test_other():
            pass
        """
    )
    result = pytester.runpytest_inprocess()
    assert result.ret != pytest.ExitCode.OK
    name = argument.split("=")[0]
    result.stdout.fnmatch_lines(
        [
            f"*test_marked.py::test_model: @pytest.mark.compile_budget: {name} must be a "
            "finite number >= 0, got *"
        ]
    )


# --- pin files ------------------------------------------------------------------------


def _pin_file(directory: Path, field: str, value: str) -> tuple[Path, int]:
    """A pin file as the store writes it, with `field = value` in its pin; and that line."""
    (path,) = PinStore.load(directory).update([make_record(compile_cpu_s=1.1)])
    lines = path.read_text().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("[pins."))
    existing = next((i for i, line in enumerate(lines) if line.startswith(f"{field} = ")), None)
    if existing is None:
        lines.insert(header + 1, f"{field} = {value}")
        existing = header + 1
    else:
        lines[existing] = f"{field} = {value}"
    path.write_text("\n".join(lines) + "\n")
    return path, existing + 1


@pytest.mark.parametrize("field", ["tolerance", "compile_s", "compile_cpu_s", "flops"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "1e999", "true"])
def test_a_pin_file_refuses_them_naming_file_and_line(
    tmp_path: Path, field: str, value: str
) -> None:
    path, line = _pin_file(tmp_path, field, value)
    with pytest.raises(PinFileError) as error:
        read_pin_file(path)
    assert (error.value.path, error.value.line) == (path, line)
    assert (
        f"{path}:{line}: pin tests/test_models.py::test_mlp [vag]: '{field}' must be a "
        "finite number >= 0, got " in str(error.value)
    )


@pytest.mark.parametrize("value", ["2.0", "true", "-1", "nan"])
def test_a_pin_file_refuses_a_count_that_is_no_whole_number(tmp_path: Path, value: str) -> None:
    path, line = _pin_file(tmp_path, "op_count", value)
    with pytest.raises(PinFileError, match="'op_count' must be a whole number >= 0") as error:
        read_pin_file(path)
    assert error.value.line == line


def test_a_pin_file_with_a_bad_number_stops_the_session_naming_file_and_line(
    pytester: pytest.Pytester,
) -> None:
    path, line = _pin_file(pytester.path / "pins", "tolerance", "nan")
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest_inprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: pytest-jaxcompile: cannot read pin file {path}:{line}: pin "
            "tests/test_models.py::test_mlp [[]vag[]]: 'tolerance' must be a finite number >= 0, "
            "got nan"
        ]
    )


# --- records --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field",
    [
        "tolerance",
        "max_ops_growth",
        "max_memory_growth",
        "max_flops_growth",
        "compile_s",
        "compile_cpu_s",
    ],
)
@pytest.mark.parametrize("value", BAD_VALUES)
def test_a_record_refuses_them_naming_the_field(field: str, value: object) -> None:
    data = make_record().to_dict() | {field: value}
    with pytest.raises(RecordDataError, match=rf"^'{field}' must be a finite number >= 0"):
        check_record_data(data)


@pytest.mark.parametrize(
    ("field", "text"),
    [
        ("tolerance", "NaN"),
        ("tolerance", "Infinity"),
        ("max_ops_growth", "-1"),
        ("tolerance", "1e999"),
        ("compile_s", "true"),
    ],
)
def test_check_refuses_a_record_file_naming_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, text: str
) -> None:
    PinStore.load(tmp_path / "pins").update([make_record()])
    path = write_lines(tmp_path / "records" / "a.jsonl", [row(1, transform="jit"), row(2)])
    lines = path.read_text().splitlines()
    data = json.loads(lines[1])
    data[field] = "MARK"
    lines[1] = json.dumps(data).replace('"MARK"', text)
    path.write_text("\n".join(lines) + "\n")
    assert main(["check", str(tmp_path / "records"), "--pins-dir", str(tmp_path / "pins")]) == 2
    err = capsys.readouterr().err
    assert (
        f"pytest-jaxcompile check: error: {path}:2: '{field}' must be a finite number >= 0" in err
    )


# --- JSON reports given to merge ------------------------------------------------------


def _report_data(tmp_path: Path) -> dict[str, Any]:
    session = Outcome(
        rootdir=tmp_path, pins_dir=tmp_path / "pins", thresholds=Thresholds(), pin_update=False
    )
    return build_report(session, [make_record()], [], "0.1.0")


def _report(tmp_path: Path, change: str, text: str) -> Path:
    """A report as the plugin writes it, with the (dotted) field set to `text` verbatim."""
    path = tmp_path / "report.json"
    data = _report_data(tmp_path)
    target: Any = data
    *parents, name = change.split(".")
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    target[name] = "MARK"
    path.write_text(json.dumps(data, indent=2).replace('"MARK"', text))
    return path


@pytest.mark.parametrize(
    ("field", "named"),
    [
        ("thresholds.tolerance", "thresholds 'tolerance' must be "),
        ("thresholds.floor_s", "thresholds 'floor_s' must be "),
        (
            "thresholds.loaded_accelerator_tolerance",
            "thresholds 'loaded_accelerator_tolerance' must be ",
        ),
        ("thresholds.undecided_band", "thresholds 'undecided_band' must be "),
        ("records.0.tolerance", "records[0] (tests/test_models.py::test_mlp [vag]): 'tolerance' "),
        ("records.0.compile_s", "records[0] (tests/test_models.py::test_mlp [vag]): 'compile_s' "),
        ("session_s", "'session_s' must be"),
    ],
)
@pytest.mark.parametrize("text", ["NaN", "Infinity", "-1", "1e999", "true"])
def test_a_report_refuses_them_naming_file_and_field(
    tmp_path: Path, field: str, named: str, text: str
) -> None:
    path = _report(tmp_path, field, text)
    with pytest.raises(ReportError) as error:
        load_report(path)
    assert str(error.value).startswith(f"{path}: {named}")


def test_a_report_refuses_a_ledger_count_that_is_no_whole_number(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    data = _report_data(tmp_path)
    data["ledgers"] = [
        {
            "cell": "c",
            "wall_s": 1.0,
            "compile_s": 0.5,
            "trace_s": None,
            "lower_s": None,
            "backend_compile_s": 0.5,
            "execute_and_python_s": 0.5,
            "compile_fraction": 0.5,
            "compiles": 2.5,
            "persistent_cache_hits": 0,
        }
    ]
    write_report(path, data)
    with pytest.raises(ReportError, match=r"ledgers\[0\]: 'compiles' must be a whole number"):
        load_report(path)


@pytest.mark.parametrize(
    ("field", "text"),
    [
        ("thresholds.tolerance", "NaN"),
        ("records.0.tolerance", "Infinity"),
        ("thresholds.max_ops_growth", "1e999"),
    ],
)
def test_merge_refuses_a_bad_report_naming_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, text: str
) -> None:
    path = _report(tmp_path, field, text)
    assert main(["merge", str(path), "--pins-dir", str(tmp_path / "pins")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pytest-jaxcompile merge: error: {path}: ")
    assert "must be a finite number >= 0" in err
    assert field.rsplit(".", 1)[-1] in err


def test_an_implausible_value_is_named_as_the_user_can_set_it() -> None:
    """A flag by its flag and ini key; an ini-only option by its ini key alone."""
    from pytest_jaxcompile.options import implausible

    flag, ini_only = implausible(
        {"compile_tolerance": 50.0, "compile_loaded_accelerator_tolerance": 50.0}
    )
    assert flag.startswith("--compile-tolerance (ini compile_tolerance) = 50 allows +5000%")
    assert ini_only.startswith("ini compile_loaded_accelerator_tolerance = 50 allows +5000%")
