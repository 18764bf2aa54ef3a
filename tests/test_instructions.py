"""--compile-instructions: the instruction count's comparison, its identity rule, its pins and
records, and the gate end to end with real JAX compiled under real valgrind."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import INTENDED, JaxProject, needs_valgrind, printed_repin
from records_factory import make_record

from pytest_jaxcompile._constants import DEFAULT_INSTRUCTIONS_TOLERANCE, INSTRUCTIONS_PHASE
from pytest_jaxcompile.backends.jax.instructions import CARRIED
from pytest_jaxcompile.gate.judging import judge
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.pins import PinFileError, PinStore, read_pin_file
from pytest_jaxcompile.gate.status import Status, row_fails
from pytest_jaxcompile.options import BY_NAME, OptionError, parse_value
from pytest_jaxcompile.record_checks import RecordDataError, check_record_data
from pytest_jaxcompile.records import CompileRecord, HostState

IDENTITY = "callgrind 3.19.0, jaxlib 0.10.2, x86_64 avx2+f16c, glibc 2.36, python 3.11.7"
BUSY = HostState(cpu_count=2, load_avg_1m=8.0, load_per_core=4.0, process_cpu_s=1.0)
THRESHOLDS = Thresholds(instructions_tolerance=0.01)


def counted(count: int, identity: str = IDENTITY, **overrides: Any) -> CompileRecord:
    return make_record(
        compile_instructions=count, compile_instructions_identity=identity, **overrides
    )


@pytest.fixture
def store(tmp_path: Path) -> PinStore:
    PinStore.load(tmp_path).update([counted(1_000_000)])
    return PinStore.load(tmp_path)


# ----------------------------------------------------------------------- the comparison


@pytest.mark.parametrize(
    ("count", "status"),
    [
        (1_000_000, Status.OK),
        (1_009_999, Status.OK),  # within 1 %
        (1_010_001, Status.DRIFT),
        (980_000, Status.IMPROVED),
    ],
)
def test_a_count_is_judged_against_its_pin_with_the_instructions_tolerance(
    store: PinStore, count: int, status: Status
) -> None:
    verdict = judge(counted(count), store, THRESHOLDS)
    assert verdict.status is status
    if status is Status.DRIFT:
        assert verdict.phase == INSTRUCTIONS_PHASE and verdict.metric == "instructions"
        assert verdict.note is not None
        assert "compile instructions 1,000,000 -> 1,010,001 (+1.00%" in verdict.note
        assert IDENTITY in verdict.note  # the instrument is named
        assert row_fails(verdict.status, THRESHOLDS)


def test_a_grown_count_is_drift_whatever_the_load_and_an_unchanged_one_is_ok(
    store: PinStore,
) -> None:
    grown = judge(counted(1_100_000, host_state=BUSY), store, THRESHOLDS)
    assert grown.status is Status.DRIFT and grown.phase == INSTRUCTIONS_PHASE
    # Seconds alone would call this row noisy; the count says the work is the same.
    same = judge(counted(1_000_000, host_state=BUSY), store, THRESHOLDS)
    assert same.status is Status.OK
    plain = judge(make_record(host_state=BUSY), store, THRESHOLDS)
    assert plain.status is Status.NOISY


def test_counts_are_compared_only_under_an_equal_identity(store: PinStore) -> None:
    other = IDENTITY.replace("avx2", "avx")
    verdict = judge(counted(2_000_000, other), store, THRESHOLDS)
    assert verdict.status is Status.OK  # the seconds are unchanged; the count is not compared
    assert verdict.note is not None and "not pinned with this instrument" in verdict.note


def test_a_pin_of_another_hardware_key_with_an_equal_identity_judges_the_row(
    store: PinStore,
) -> None:
    # A pin made on a developer's machine judges a CI runner whose count would be the same.
    runner = counted(1_100_000, hardware="cpu:cpu @ CI runner x4")
    verdict = judge(runner, store, THRESHOLDS)
    assert verdict.status is Status.DRIFT
    assert verdict.pin is not None and verdict.pin.compile_instructions == 1_000_000
    assert (
        judge(counted(1_000_000, hardware="cpu:cpu @ CI runner x4"), store, THRESHOLDS).status
        is Status.OK
    )


def test_a_row_not_counted_says_why_and_keeps_its_seconds_verdict(store: PinStore) -> None:
    row = make_record(compile_s=3.0, compile_instructions_note="not counted: it timed out")
    verdict = judge(row, store, THRESHOLDS)
    assert verdict.status is Status.DRIFT and verdict.phase == "compile_s"
    assert verdict.note is not None and "compile instructions not counted" in verdict.note


# ----------------------------------------------------------------------- pins and records


def test_pins_keep_the_count_and_its_identity(tmp_path: Path, store: PinStore) -> None:
    (group,) = [read_pin_file(path) for path in tmp_path.glob("*.toml")]
    (pin,) = group.pins.values()
    assert (pin.compile_instructions, pin.compile_instructions_identity) == (1_000_000, IDENTITY)
    # A re-pin without counting keeps the count while the module is unchanged.
    store.update([make_record(compile_s=2.0)])
    (pin,) = read_pin_file(next(tmp_path.glob("*.toml"))).pins.values()
    assert pin.compile_instructions == 1_000_000 and pin.compile_s == 2.0


@pytest.mark.parametrize("bad", ["-1", "1.5", "nan", "inf", '"many"'])
def test_a_pin_file_with_a_bad_count_is_refused(tmp_path: Path, store: PinStore, bad: str) -> None:
    path = next(tmp_path.glob("*.toml"))
    path.write_text(
        path.read_text().replace("compile_instructions = 1000000", f"compile_instructions = {bad}")
    )
    with pytest.raises(PinFileError, match="compile_instructions"):
        read_pin_file(path)


@pytest.mark.parametrize("bad", [-1, 1.5, float("nan"), float("inf"), True, "1"])
def test_a_record_with_a_bad_count_is_refused(bad: object) -> None:
    data = counted(5).to_dict()
    check_record_data(data)
    data["compile_instructions"] = bad
    with pytest.raises(RecordDataError, match="compile_instructions"):
        check_record_data(data)


@pytest.mark.parametrize("bad", ["nan", "inf", "-0.1", "x"])
def test_the_options_are_validated_by_the_one_validator(bad: str) -> None:
    for name in ("compile_instructions_tolerance", "compile_instructions_timeout"):
        with pytest.raises(OptionError, match=name.replace("_", "-")):
            parse_value(BY_NAME[name], bad, "option")
    assert parse_value(BY_NAME["compile_instructions"], "true", "ini option") is True


# ----------------------------------------------------------------------- real valgrind


# The smallest modules that show the gate: a 1-layer MLP's gradient (about 0.12 G
# instructions) grown to 2 layers (about 0.39 G: far over the tolerance, where 20 -> 22
# layers is +2.6 %, docs/instructions.md) and jnp.sin of three numbers (about 0.08 G, the
# compiler's floor and little more). Each counting child's start (valgrind, JAX's import,
# the warm-up) costs more than counting them, so one project's sessions show it all.
COUNTED_TESTS = """
    import os

    import jax
    import jax.numpy as jnp


    def test_mlp(jax_compile):
        depth = int(os.environ["MLP_DEPTH"])

        def loss(ws, x):
            for w in ws:
                x = jnp.tanh(x @ w)
            return jnp.sum(x)

        ws = [jnp.ones((32, 32)) for _ in range(depth)]
        jax_compile(jax.grad(loss), ws, jnp.ones((4, 32)), transform="grad")


    def test_small(jax_compile):
        jax_compile(jnp.sin, jnp.ones(3), transform="sin")
"""
MLP, SMALL = "test_models.py::test_mlp", "test_models.py::test_small"


def _pinned_counts(project: JaxProject) -> dict[str, int | None]:
    (path,) = project.pins_dir.glob("*.toml")
    return {cell.split("::")[-1]: pin.compile_instructions for (cell, _), pin in _pins(path)}


def _pins(path: Path) -> list[tuple[tuple[str, str], Any]]:
    return list(read_pin_file(path).pins.items())


def _counts(project: JaxProject) -> dict[str, int]:
    return {name: row["compile_instructions"] for (name, _), row in project.rows().items()}


@needs_valgrind
def test_the_instruction_gate_from_a_first_count_to_a_repin_after_drift(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One project, every session of the gate's life, in three counting sessions: both rows
    counted in one child and pinned, carried while unchanged, counted again when told to
    (recount), a grown module's DRIFT under xdist beside the unchanged row counted alone in
    another child (a count depends neither on the modules before it nor on a child beside
    it, nor on the cores kept busy by that child), the re-pin refused without counting,
    and the printed re-pin, its count the one made on the busy machine."""
    project.conftest(cache=False)
    project.tests(COUNTED_TESTS)
    project.pytester.makeini("[pytest]\ncompile_floor = 600\n")  # seconds never fail here
    monkeypatch.setenv("MLP_DEPTH", "1")
    assert project.run("--compile-pin-update").ret == pytest.ExitCode.OK
    assert _pinned_counts(project) == {"test_mlp": None, "test_small": None}

    # Pinned with their counts, in one child (the small modules are not worth a second
    # child's start): test_small counted after test_mlp. The session says what it counts
    # and each count as it arrives (before pytest's summary line), beside the floor.
    pin_with_count = ["--compile-pin-update", "--compile-instructions"]
    pinned = project.run(*pin_with_count)
    assert pinned.ret == pytest.ExitCode.OK, pinned.stdout.str()
    pinned.stdout.fnmatch_lines(
        [
            "pytest-jaxcompile: counting instructions of 2 module(s) (* ops) under valgrind, "
            "about * from their sizes (an estimate)",
            "pytest-jaxcompile: [[]1/2[]] test_models.py::test_mlp [[]grad[]]: * instructions "
            "(compiler floor *), counted in * s",
            "pytest-jaxcompile: [[]2/2[]] test_models.py::test_small [[]sin[]]: * instructions "
            "(compiler floor *), counted in * s",
            "*jax compile times*",
        ]
    )
    output = pinned.stdout.str()
    assert output.index("counted in") < output.index("passed in")
    records = project.report()["records"]
    assert all(0 < r["compile_instructions_floor"] < r["compile_instructions"] for r in records)
    first = _pinned_counts(project)
    assert first["test_small"] is not None and first["test_mlp"] is not None
    assert first["test_mlp"] != first["test_small"]  # another module, another count
    (path,) = project.pins_dir.glob("*.toml")
    pins = dict(_pins(path))
    assert pins[(MLP, "grad")].compile_instructions_identity

    # The module as pinned: its count is carried from the pin, and valgrind never runs
    # (a `valgrind` first on PATH notes every run but `--version`). The ini key counts too.
    real, runs = shutil.which("valgrind"), project.path / "valgrind-runs"
    wrapper = project.path / "bin" / "valgrind"
    wrapper.parent.mkdir()
    wrapper.write_text(
        f'#!/bin/sh\n[ "$1" = --version ] || echo "$@" >> {runs}\nexec {real} "$@"\n'
    )
    wrapper.chmod(0o755)
    with monkeypatch.context() as path_first:
        path_first.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")
        carried = project.run("-v", "-o", "compile_instructions=true", MLP)
        assert carried.ret == pytest.ExitCode.OK, carried.stdout.str()
        (verdict,) = project.report()["verdicts"]
        assert verdict["status"] == "ok" and CARRIED in verdict["note"], verdict
        assert not runs.exists(), runs.read_text()

        # compile_instructions_recount counts it again: valgrind starts (here past its
        # timeout, and under --compile-instructions-required that fails the session).
        recount = project.run(
            "-o",
            "compile_instructions=true",
            "-o",
            "compile_instructions_recount=true",
            "-o",
            "compile_instructions_timeout=1",
            "--compile-instructions-required",
            MLP,
        )
    assert recount.ret == pytest.ExitCode.TESTS_FAILED, recount.stdout.str()
    recount.stdout.fnmatch_lines(
        [
            "*1 row(s) not counted under valgrind (--compile-instructions-required)*",
            "  test_models.py::test_mlp [[]grad[]]: the counting child ran past "
            "compile_instructions_timeout (1 s)",
        ]
    )
    assert "count carried" not in recount.stdout.str()
    assert runs.exists()
    (record,) = project.report()["records"]
    assert record["compile_instructions"] is None, record
    assert "compile_instructions_timeout (1 s)" in record["compile_instructions_note"]

    # One more layer, under pytest-xdist: each worker counts its own row (told to count
    # again) in a child of its own, after its tests, and says so on its stderr, named by the
    # worker (the controller never shows a worker's terminal); the controller's summary has
    # every count: the grown row's DRIFT, whatever the load, and test_small, counted alone
    # beside the other worker's child (every core busy counting: a busy machine), ok
    # against its count made quietly after test_mlp's.
    monkeypatch.setenv("MLP_DEPTH", "2")
    grown = project.run(
        "--compile-instructions",
        "-o",
        "compile_instructions_recount=true",
        "-v",
        "-n",
        "2",
        "--dist",
        "load",
    )
    assert grown.ret == pytest.ExitCode.TESTS_FAILED, grown.stdout.str() + grown.stderr.str()
    said = [line for line in grown.stderr.lines if "pytest-jaxcompile:" in line]
    arrivals, workers = {}, set()
    for line in said:
        worker, _, rest = line.partition(" pytest-jaxcompile: ")
        assert worker in ("[gw0]", "[gw1]"), line
        arrived = re.fullmatch(r"\[1/1\] (.+?): (.*)", rest)
        if arrived is not None:  # the row's name: the test's node id, then its transform
            arrivals[arrived[1].split(" ")[0]] = arrived[2]
        else:
            assert re.match(r"counting instructions of 1 module\(s\)", rest), line
            workers.add(worker)
    assert set(arrivals) == {MLP, SMALL} and workers == {"[gw0]", "[gw1]"}, said
    assert all("instructions (compiler floor" in what for what in arrivals.values()), said
    grown_counts = _counts(project)
    assert grown_counts["test_mlp"] > first["test_mlp"], (grown_counts, first)
    # Within what the gate tolerates (docs/instructions.md#determinism-made).
    small = (grown_counts["test_small"], first["test_small"])
    assert abs(small[0] - small[1]) <= DEFAULT_INSTRUCTIONS_TOLERANCE * min(small), small
    assert project.verdicts()[("test_small", "sin")] == "ok"
    grown.stdout.fnmatch_lines(
        [
            "*DRIFT*test_models.py::test_mlp [[]grad[]]* instructions, pin * instructions (*x, *",
            "*DRIFT in compile instructions *,* -> *,* (+*%, tolerance 1.50%; compiler floor *; "
            "callgrind 3.*",
            "DRIFT: 1 row(s) compiled with more instructions than their pin by more than 1.50%, "
            "whatever the load; the session fails.",
        ]
    )
    repin = printed_repin(grown.stdout.str(), INTENDED)
    assert repin == [*pin_with_count, MLP]  # the command that pinned the count counts again

    # A re-pin that does not count would drop the pinned count: refused, nothing written.
    refused = project.run("--compile-pin-update", MLP)
    assert refused.ret == pytest.ExitCode.TESTS_FAILED
    assert "re-pin with --compile-instructions. Nothing was written" in refused.stdout.str()
    assert _pinned_counts(project) == first

    # The printed re-pin (it counts, in a child alone): the count it pins is the one made
    # under xdist with every core busy counting, within what the gate tolerates.
    assert project.run(*repin).ret == pytest.ExitCode.OK
    second = _pinned_counts(project)
    busy = grown_counts["test_mlp"]
    mlp_second = second["test_mlp"]
    assert mlp_second is not None and mlp_second > first["test_mlp"]
    assert abs(mlp_second - busy) <= DEFAULT_INSTRUCTIONS_TOLERANCE * busy, (mlp_second, busy)
    assert second["test_small"] == first["test_small"]  # not re-pinned, not touched


POOL_GET = "xla::cpu::ParallelFusionEmitter::FusionCompilerPool::GetInstance()"
POOL_CREATE = "xla::cpu::FusionCompiler::CreateContext()"


def _dump(fetched: int, created: int, elsewhere: int = 1) -> bytes:
    """A callgrind dump (compressed names, as callgrind writes them) of a compile that took
    `fetched` fusion compilers from XLA's pool, `created` of them new."""
    return textwrap.dedent(
        f"""\
        # callgrind format
        events: Ir
        fn=(1) xla::cpu::ParallelFusionEmitter::AddFusion(xla::HloFusionInstruction const*)
        0 900
        cfn=(2) {POOL_GET}
        calls={fetched} 0
        0 700
        fn=(2)
        0 40
        cfn=(3) {POOL_CREATE}
        calls={created} 0
        0 600
        fn=(4) xla::cpu::CpuCompiler::RunBackend()
        cfn=(3)
        calls={elsewhere} 0
        0 150
        fn=(3)
        0 750
        summary: 3140
        """
    ).encode()


@pytest.mark.parametrize(
    ("fetched", "created", "reused"), [(4, 4, 0), (4, 3, 1), (4, 1, 3), (1, 1, 0)]
)
def test_a_dump_says_how_many_fusions_recycled_a_fusion_compiler(
    fetched: int, created: int, reused: int
) -> None:
    from pytest_jaxcompile.backends.jax.instructions_child import fusion_compilers_reused

    # CreateContext called outside the pool is not an instance the pool created.
    assert fusion_compilers_reused(_dump(fetched, created, elsewhere=2)) == reused


@pytest.mark.parametrize(
    ("reused", "enough"),
    [
        ([0], True),  # none recycled: the fewest there can be
        ([1], False),
        ([1, 0], True),
        ([1, 1], False),  # twice, but a module that usually recycles none gets a third count
        ([1, 1, 1], True),  # recycles one in every count: that is the module
        ([3, 3, 3], True),
        ([1, 2, 2], False),  # the fewest came once
        ([1, 2, 2, 1], True),
        ([2, 1, 3, 4, 5], True),  # at most five counts
    ],
)
def test_a_module_is_counted_again_until_the_fewest_recycled_is_settled(
    reused: list[int], enough: bool
) -> None:
    from pytest_jaxcompile.backends.jax.instructions_child import enough_counts

    assert enough_counts(reused) is enough


def test_a_dump_without_xla_s_fusion_compiler_pool_says_nothing_of_it() -> None:
    from pytest_jaxcompile.backends.jax.instructions_child import fusion_compilers_reused

    older_jaxlib = _dump(4, 4).replace(POOL_GET.encode(), b"xla::cpu::IrEmitter::Emit()")
    assert fusion_compilers_reused(older_jaxlib) is None


def test_a_dump_is_read_to_its_edges_and_by_whole_numbers() -> None:
    """The dump is read by literal searches (a regex over megabytes took ~10 s a count under
    valgrind): a block at the dump's first line or its last, without a final newline, is
    read, and function (2) is never read as (23)."""
    from pytest_jaxcompile.backends.jax.instructions_child import fusion_compilers_reused

    dump = _dump(4, 1, elsewhere=2)
    pool_first = (
        f"fn=(2) {POOL_GET}\n0 40\ncfn=(3) {POOL_CREATE}\ncalls=1 0\n"
        "fn=(1) xla::cpu::ParallelFusionEmitter::AddFusion()\ncfn=(2)\ncalls=4 0"
    ).encode()
    assert fusion_compilers_reused(pool_first) == 3
    assert fusion_compilers_reused(dump.rstrip(b"\n").rsplit(b"\n", 1)[0]) == 3
    more = dump.replace(b"calls=1 0\n", b"calls=1 0\ncfn=(23)\ncalls=9 0\n", 1)
    assert fusion_compilers_reused(more) == 3  # (23)'s calls are another function's
    last = dump + b"fn=(2)\ncfn=(3)\ncalls=1 0"
    assert fusion_compilers_reused(last) == 2  # a fifth instance created, at the very end
    # Not a function's naming line (a file's, a longer name), a call without its calls
    # line, a block or a call cut off at the dump's end: each read as nothing.
    odd = f"fl=(9) {POOL_GET}\nfn=(8) {POOL_GET}(int)\n".encode() + dump.replace(
        b"fn=(2)\n0 40\n", b"fn=(2)\n0 40\ncfn=(3)\n0 7\n", 1
    )
    assert fusion_compilers_reused(odd) == 3
    assert fusion_compilers_reused(odd + b"fn=(2)") == 3
    assert fusion_compilers_reused(odd + b"fn=(2)\ncfn=(3)") == 3


@pytest.mark.parametrize(
    ("cpus", "worker", "cpu"),
    [
        ({0, 1}, None, 0),  # a serial session: the first CPU it may use
        ({0, 1}, "gw0", 0),
        ({0, 1}, "gw1", 1),  # the second worker's child keeps to another CPU
        ({0, 1}, "gw2", 0),  # more workers than CPUs: round robin
        ({2, 5, 7}, "gw1", 5),  # an affinity mask of its own
        ({3}, "gw4", 3),
        ({0, 1}, "master", 0),
        (set(), "gw1", None),
    ],
)
def test_each_xdist_worker_s_counting_child_keeps_to_its_own_cpu(
    cpus: set[int], worker: str | None, cpu: int | None
) -> None:
    from pytest_jaxcompile.backends.jax.instructions_child import one_cpu_of

    assert one_cpu_of(cpus, worker) == cpu


@pytest.mark.parametrize(
    ("worker", "slot", "workers", "cpu"),
    [
        (None, 1, 1, 1),  # a second child of a session without xdist
        ("gw0", 1, 2, 2),  # two workers: gw0's children take CPUs 0, 2, ...
        ("gw1", 1, 2, 3),  # ... and gw1's 1, 3, ...
        ("gw1", 2, 2, 1),  # more children than CPUs: round robin
    ],
)
def test_several_children_of_one_process_keep_to_cpus_of_their_own(
    worker: str | None, slot: int, workers: int, cpu: int
) -> None:
    from pytest_jaxcompile.backends.jax.instructions_child import one_cpu_of

    assert one_cpu_of({0, 1, 2, 3}, worker, slot, workers) == cpu


def _staged(*op_counts: int) -> list[Any]:
    from pytest_jaxcompile.backends.jax.instructions import Staged

    return [Staged(make_record(transform=f"t{ops}", op_count=ops)) for ops in op_counts]


def test_modules_are_counted_in_one_child_per_cpu_only_where_that_saves_a_childs_start() -> None:
    from pytest_jaxcompile.backends.jax.instructions import START_S, children_for, module_estimate_s

    small = _staged(50, 60, 70)  # seconds of counting in all: less than a child's start
    assert sum(module_estimate_s(item.record.op_count) for item in small) < START_S
    assert children_for(small, cpus=4) == 1
    large = _staged(16_000, 9_000, 3_000, 40)
    assert children_for(large, cpus=4) == 4
    assert children_for(large, cpus=2) == 2  # this process's share of the CPUs
    assert children_for(large[:1], cpus=4) == 1  # one module: one child
    assert children_for(large, cpus=1) == 1


def test_groups_balance_the_estimated_counting_and_keep_the_staged_order() -> None:
    from pytest_jaxcompile.backends.jax.instructions import child_groups

    staged = _staged(100, 16_000, 200, 9_000, 300)
    groups = child_groups(staged, 2)
    assert sorted(index for group in groups for index in group) == [0, 1, 2, 3, 4]
    assert [1] in groups  # the largest alone; the rest beside it
    assert all(group == sorted(group) for group in groups)
    assert child_groups(staged, 1) == [[0, 1, 2, 3, 4]]
    assert child_groups(staged[:1], 3) == [[0]]  # no empty group


def test_the_estimate_said_at_the_start_divides_the_counting_among_the_children() -> None:
    from pytest_jaxcompile.backends.jax.instructions import START_S, estimate_s

    one, two = estimate_s([16_000, 16_000]), estimate_s([16_000, 16_000], children=2)
    assert START_S < two < one
    assert one - START_S > 1.9 * (two - START_S)


def test_without_valgrind_the_option_is_a_usage_error_naming_the_install(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    empty = pytester.mkdir("no-valgrind")
    monkeypatch.setenv("PATH", str(empty))
    result = pytester.runpytest_inprocess("--compile-instructions")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*needs valgrind*apt-get install valgrind*"])


def test_a_non_cpu_backend_row_says_counting_covers_the_cpu_compiler_only() -> None:
    from pytest_jaxcompile.backends.jax.instructions import CPU_ONLY, Captured, InstructionStager

    @dataclasses.dataclass
    class Device:
        platform: str = "gpu"

    stager = InstructionStager(timeout_s=1)
    record = make_record()
    stager.add(record, Captured(calls=[(Device(), None, None, (None, False))]))
    stager.count("0.10.2")
    assert record.compile_instructions is None
    assert record.compile_instructions_note is not None
    assert CPU_ONLY in record.compile_instructions_note


@pytest.mark.instruments
def test_valgrind_on_the_path_reports_its_version() -> None:
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is not installed")
    from pytest_jaxcompile.backends.jax.instrument import valgrind_version

    expected = subprocess.run(["valgrind", "--version"], capture_output=True, text=True)
    assert valgrind_version() == expected.stdout.strip()
