"""--compile-instructions tells the user: what it counts and each count as it arrives, the
compiler's floor beside each count, every row not counted (failing the session under
--compile-instructions-required), and the determinism settings of the counting child."""

from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from records_factory import make_record

from pytest_jaxcompile._numbers import giga, instructions_text
from pytest_jaxcompile.backends.jax import child
from pytest_jaxcompile.backends.jax.instructions import (
    FLOOR_S,
    PER_OP_S,
    START_S,
    Progress,
    Staged,
    estimate_s,
)
from pytest_jaxcompile.backends.jax.instrument import (
    DETERMINISM,
    HASH_SEED,
    NO_ASLR,
    SYSTEM_MALLOC,
    child_command,
    child_environment,
)
from pytest_jaxcompile.gate.conclude import GateSettings, conclude
from pytest_jaxcompile.gate.judging import judge
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.pins import PinStore
from pytest_jaxcompile.gate.view import session_view
from pytest_jaxcompile.options import BY_NAME
from pytest_jaxcompile.output.terminal import closing_lines

IDENTITY = "callgrind 3.19.0, jaxlib 0.10.2, x86_64 avx2+f16c, glibc 2.36, python 3.11.7"

# ----------------------------------------------------------------------- the lines said


def test_the_estimate_is_the_child_s_start_the_floor_and_a_rate_per_op() -> None:
    assert estimate_s([]) == START_S + FLOOR_S
    # The background's 16,564-op module: ~1,175 s of counting, beside the child's start.
    assert estimate_s([16_564]) - START_S - FLOOR_S == pytest.approx(1_175, rel=0.05)
    assert estimate_s([10, None]) == START_S + 3 * FLOOR_S + PER_OP_S * 10


def test_counting_says_what_it_counts_and_then_each_count_beside_the_floor() -> None:
    said: list[str] = []
    rows = [
        Staged(make_record(transform="jit", op_count=16_564)),
        Staged(make_record(transform="grad", op_count=40)),
    ]
    progress = Progress(rows, said.append)
    progress.starting()
    progress.arrived(2, {"id": 2, "instructions": 860_000_000})  # the floor module
    progress.arrived(0, {"id": 0, "instructions": 38_900_000_000, "seconds": 1175.2})
    progress.arrived(1, {"id": 1, "error": "RuntimeError: no dump"})
    assert said == [
        "counting instructions of 2 module(s) (16,604 ops) under valgrind, about 22 min "
        "from their sizes (an estimate)",
        "[1/2] tests/test_models.py::test_mlp [jit]: 38.9 G instructions "
        "(compiler floor 0.86 G), counted in 1175 s",
        "[2/2] tests/test_models.py::test_mlp [grad]: not counted: RuntimeError: no dump",
    ]


def test_counting_in_several_children_says_so_with_the_shorter_estimate() -> None:
    said: list[str] = []
    rows = [Staged(make_record(transform=name, op_count=16_564)) for name in ("jit", "grad")]
    Progress(rows, said.append).starting(children=2)
    assert said == [
        "counting instructions of 2 module(s) (33,128 ops) under valgrind in 2 children at "
        "once, each on its own CPU, about 22 min from their sizes (an estimate)"
    ]


def test_instruction_counts_read_in_billions() -> None:
    assert (giga(38_912_000_000), giga(860_000_000), giga(2_500_000)) == (
        "38.9 G",
        "0.86 G",
        "2.5 M",
    )
    assert instructions_text(1_045_000_000, None) == "1.04 G instructions"


@pytest.mark.integration
def test_a_child_s_results_reach_the_caller_while_it_runs(tmp_path: Path) -> None:
    """The child writes its first result, then waits for the file the caller's callback
    makes on reading it: only a result read while the child runs lets it see that file."""
    go = tmp_path / "go"
    script = textwrap.dedent(
        f"""
        import json, pathlib, time
        results = pathlib.Path({str(tmp_path)!r}) / "results.jsonl"
        with results.open("a") as stream:
            stream.write(json.dumps({{"id": 0}}) + "\\n")
        for _ in range(600):
            if pathlib.Path({str(go)!r}).exists():
                break
            time.sleep(0.1)
        with results.open("a") as stream:
            stream.write(json.dumps({{"id": 1, "saw": pathlib.Path({str(go)!r}).exists()}}) + "\\n")
        """
    )
    arrived: list[int] = []

    def on_result(index: int, result: dict[str, Any]) -> None:
        arrived.append(index)
        go.touch()

    results = child.run(
        [sys.executable, "-c", script], tmp_path, {}, 120, "the child", "--timeout", on_result
    )
    assert arrived == [0, 1]
    assert results[1]["saw"] is True


# ----------------------------------------------------------------------- the floor and the rows


def test_the_floor_is_beside_the_count_in_the_verdict(tmp_path: Path) -> None:
    record = make_record(
        compile_instructions=1_045_000_000,
        compile_instructions_identity=IDENTITY,
        compile_instructions_floor=860_000_000,
    )
    unpinned = judge(record, PinStore.load(tmp_path), Thresholds())
    assert unpinned.note is not None
    assert "compile instructions 1,045,000,000 (compiler floor 0.86 G) not pinned" in unpinned.note
    PinStore.load(tmp_path).update([record])
    pinned = judge(record, PinStore.load(tmp_path), Thresholds())
    assert pinned.note is not None
    assert "(+0.00%, tolerance 1.50%; compiler floor 0.86 G; callgrind" in pinned.note


def _uncounted_outcome(tmp_path: Path, required: bool, pin_update: bool = False) -> Any:
    rows = [make_record(compile_instructions_note="not counted: the counting child ran past")]
    return conclude(
        rows,
        [rows[0].cell],
        [],
        PinStore.load(tmp_path),
        GateSettings(Thresholds(max_load=None), pin_update, instructions_required=required),
        rootdir=tmp_path,
    )


def test_a_row_not_counted_is_a_warning_and_fails_under_required(tmp_path: Path) -> None:
    warned = _uncounted_outcome(tmp_path, required=False)
    assert not warned.failed
    text = [line for line, _ in closing_lines(session_view(warned))]
    assert "warning: 1 row(s) not counted under valgrind (their seconds are still judged)." in text
    required = _uncounted_outcome(tmp_path, required=True)
    assert required.failed
    lines = [line for line, _ in closing_lines(session_view(required))]
    assert any(
        "1 row(s) not counted under valgrind (--compile-instructions-required)" in line
        for line in lines
    ), lines
    assert "  tests/test_models.py::test_mlp [vag]: the counting child ran past" in lines
    assert not _uncounted_outcome(tmp_path, required=True, pin_update=True).failed


def test_the_required_option_is_a_flag() -> None:
    option = BY_NAME["compile_instructions_required"]
    assert option.kind == "flag" and option.flag == "--compile-instructions-required"


# ----------------------------------------------------------------------- determinism


@pytest.mark.integration
def test_the_child_runs_with_the_determinism_settings_kept(tmp_path: Path) -> None:
    environment = child_environment(DETERMINISM)
    assert environment["PYTHONHASHSEED"] == ("0" if HASH_SEED in DETERMINISM else "random")
    assert (environment.get("PYTHONMALLOC") == "malloc") is (SYSTEM_MALLOC in DETERMINISM)
    assert child_environment(())["PYTHONHASHSEED"] == "random"
    assert "PYTHONMALLOC" not in child_environment(())
    command = child_command(tmp_path, tmp_path, DETERMINISM)
    randomisation_off = NO_ASLR in DETERMINISM and shutil.which("setarch") is not None
    assert (Path(command[0]).name == "setarch") is randomisation_off
    assert child_command(tmp_path, tmp_path, ())[0] == "valgrind"
