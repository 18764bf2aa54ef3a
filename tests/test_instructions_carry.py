"""--compile-instructions counts only what changed: a row whose module, compile options and
instrument are its pin's takes the pin's count, and valgrind starts only for the others."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from records_factory import make_record

from pytest_jaxcompile.backends.jax import instructions
from pytest_jaxcompile.backends.jax.instructions import CARRIED, Captured, InstructionStager
from pytest_jaxcompile.gate.conclude import GateSettings, conclude
from pytest_jaxcompile.gate.instructions import carried_instructions
from pytest_jaxcompile.gate.judging import judge
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.pins import PinStore, read_pin_file
from pytest_jaxcompile.gate.status import Status
from pytest_jaxcompile.gate.view import session_view
from pytest_jaxcompile.options import BY_NAME
from pytest_jaxcompile.output.terminal import closing_lines
from pytest_jaxcompile.records import CompileRecord

IDENTITY = "callgrind 3.19.0, jaxlib 0.10.2, x86_64 avx2+f16c, glibc 2.36, python 3.11.7"
OPTIONS = b"serialized compile options"
DIGEST = instructions.options_digest(OPTIONS)


def counted(count: int = 1_000_000, **overrides: Any) -> CompileRecord:
    values: dict[str, Any] = {
        "compile_instructions": count,
        "compile_instructions_identity": IDENTITY,
        "compile_options_digest": DIGEST,
    }
    return make_record(**(values | overrides))


@pytest.fixture
def store(tmp_path: Path) -> PinStore:
    PinStore.load(tmp_path).update([counted()])
    return PinStore.load(tmp_path)


def uncounted(**overrides: Any) -> CompileRecord:
    """A row as the stager sees it before counting: its identity and options digest set."""
    values: dict[str, Any] = {
        "compile_instructions_identity": IDENTITY,
        "compile_options_digest": DIGEST,
    }
    return make_record(**(values | overrides))


# ----------------------------------------------------------------------- the carry rule


def test_the_pin_stores_the_options_digest(tmp_path: Path, store: PinStore) -> None:
    (pin,) = read_pin_file(next(tmp_path.glob("*.toml"))).pins.values()
    assert pin.compile_options_digest == DIGEST
    assert f'compile_options_digest = "{DIGEST}"' in next(tmp_path.glob("*.toml")).read_text()


def test_a_row_whose_module_options_and_instrument_are_its_pins_carries_the_count(
    store: PinStore,
) -> None:
    assert carried_instructions(uncounted(), store) == 1_000_000


@pytest.mark.parametrize(
    "changed",
    [
        {"fingerprint": "sha256:other"},  # another module
        {"compile_options_digest": instructions.options_digest(b"other options")},
        {"compile_instructions_identity": "callgrind 3.22.0, jaxlib 0.10.2"},  # instrument
        {"compile_options_digest": None},  # options unknown
        {"transform": "jit"},  # not pinned
    ],
)
def test_anything_changed_is_counted_again(store: PinStore, changed: dict[str, Any]) -> None:
    assert carried_instructions(uncounted(**changed), store) is None


def test_a_pin_of_an_earlier_release_without_a_digest_is_counted_again(tmp_path: Path) -> None:
    PinStore.load(tmp_path).update([counted(compile_options_digest=None)])
    assert carried_instructions(uncounted(), PinStore.load(tmp_path)) is None


def test_a_carried_row_is_judged_from_the_pin_and_says_so(store: PinStore) -> None:
    verdict = judge(counted(compile_instructions_note=CARRIED), store, Thresholds())
    assert verdict.status is Status.OK
    assert verdict.note is not None and "module unchanged: count carried" in verdict.note


# ----------------------------------------------------------------------- the stager


@dataclasses.dataclass
class Cpu:
    platform: str = "cpu"


class Options:
    def __init__(self, data: bytes = OPTIONS) -> None:
        self.data = data

    def SerializeAsString(self) -> bytes:  # protobuf's name
        return self.data


@pytest.fixture
def stager(monkeypatch: pytest.MonkeyPatch) -> tuple[InstructionStager, list[str]]:
    """A stager whose valgrind reports a version; `started` notes each start of valgrind."""
    started: list[str] = []
    monkeypatch.setattr(instructions, "installed_valgrind", lambda: "valgrind-3.19.0")
    monkeypatch.setattr(instructions, "instrument_identity", lambda valgrind, jaxlib: IDENTITY)
    monkeypatch.setattr(instructions, "module_bytes", lambda module: b"module")

    def valgrind_version() -> str:
        started.append("check")
        return "valgrind-3.19.0"

    def run_child(
        directory: Path, staged: list[Any], timeout_s: float, *args: Any, **kwargs: Any
    ) -> dict[int, Any]:
        started.append(" ".join(item.record.transform for item in staged))
        return {index: {"instructions": 2_000_000} for index in range(len(staged) + 1)}

    monkeypatch.setattr(instructions, "valgrind_version", valgrind_version)
    monkeypatch.setattr(instructions, "run_child", run_child)
    return InstructionStager(timeout_s=60), started


def _stage(stager: InstructionStager, record: CompileRecord, options: bytes = OPTIONS) -> None:
    stager.add(record, Captured(calls=[(Cpu(), object(), None, (Options(options), False))]))


def test_an_unchanged_module_is_carried_without_starting_valgrind(
    store: PinStore, stager: tuple[InstructionStager, list[str]]
) -> None:
    counting, started = stager
    record = make_record()
    _stage(counting, record)
    assert record.compile_options_digest == DIGEST
    counting.count("0.10.2", lambda row: carried_instructions(row, store))
    assert started == []
    assert (record.compile_instructions, record.compile_instructions_note) == (1_000_000, CARRIED)
    assert record.compile_instructions_identity == IDENTITY


def test_only_the_changed_module_is_counted(
    store: PinStore, stager: tuple[InstructionStager, list[str]]
) -> None:
    counting, started = stager
    same, changed = make_record(), make_record(transform="jit")
    _stage(counting, same)
    _stage(counting, changed)
    counting.count("0.10.2", lambda row: carried_instructions(row, store))
    assert started == ["check", "jit"]
    assert same.compile_instructions == 1_000_000
    assert (changed.compile_instructions, changed.compile_instructions_note) == (2_000_000, None)


def test_changed_options_are_counted_and_recount_counts_everything(
    store: PinStore, stager: tuple[InstructionStager, list[str]]
) -> None:
    counting, started = stager
    record = make_record()
    _stage(counting, record, b"other options")
    counting.count("0.10.2", lambda row: carried_instructions(row, store))
    assert record.compile_instructions == 2_000_000
    again = make_record()
    _stage(counting, again)
    counting.count("0.10.2", None)  # compile_instructions_recount: no carry
    assert again.compile_instructions == 2_000_000 and started == ["check", "vag", "check", "vag"]


def test_the_recount_option_is_an_ini_key_only() -> None:
    option = BY_NAME["compile_instructions_recount"]
    assert option.kind == "flag" and not option.on_command_line


# ----------------------------------------------------------------------- the terminal


def test_rows_not_counted_and_unpinned_counts_are_named_in_the_closing_lines(
    tmp_path: Path,
) -> None:
    rows = [
        make_record(compile_instructions_note="not counted: the module has host callbacks"),
        counted(2_500_000, transform="jit"),
    ]
    outcome = conclude(
        rows,
        [rows[0].cell],
        [],
        PinStore.load(tmp_path),
        GateSettings(Thresholds(max_load=None), pin_update=False),
        rootdir=tmp_path,
    )
    text = [line for line, _ in closing_lines(session_view(outcome))]
    assert "warning: 1 row(s) not counted under valgrind (their seconds are still judged)." in text
    assert "  tests/test_models.py::test_mlp [vag]: the module has host callbacks" in text
    assert "warning: 1 row(s) counted with no pinned count of this instrument." in text
    assert "  tests/test_models.py::test_mlp [jit]: 2.5 M instructions" in text
    assert "Pin them with: pytest --compile-pin-update tests/test_models.py::test_mlp" in text
    # the counted row's: the command counts again, or it would pin no count
    counted_repin = "pytest --compile-pin-update --compile-instructions tests/test_models.py::"
    assert f"Pin them with: {counted_repin}test_mlp" in text
