"""Compile memory and compiled cost: the figures, their pins, and the two gates."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import JaxProject
from records_factory import make_record

from pytest_jaxcompile.backends.memory import MIB, RssBlock, RssSampler, RssWatch
from pytest_jaxcompile.gate.budget import parse_budget
from pytest_jaxcompile.gate.judging import judge
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.pins import PinFileError, PinStore
from pytest_jaxcompile.gate.status import Status, row_fails
from pytest_jaxcompile.gate.view import figures
from pytest_jaxcompile.record_checks import RecordDataError, check_record_data

THRESHOLDS = Thresholds(tolerance=0.5, floor_s=0.25, rss_floor_mib=100.0)
PINNED = dict(
    compiled_temp_bytes=2048,
    flops=93824.0,
    compile_rss_growth_mib=40.0,
    compile_rss_peak_mib=300.0,
    compile_rss_scope="compile",
)


@pytest.fixture
def store(tmp_path: Path) -> PinStore:
    PinStore.load(tmp_path).update([make_record(**PINNED)])
    return PinStore.load(tmp_path)


def _row(**figures: Any) -> Any:
    return make_record(**{**PINNED, **figures})


# --------------------------------------------------------------------------- the figures


def test_a_persistent_cache_hit_reports_what_the_miss_did(project: JaxProject) -> None:
    project.conftest()
    project.tests(MODEL_TESTS)
    project.run().assert_outcomes(passed=2)
    cold = project.rows()[("test_model", "vag")]
    project.run().assert_outcomes(passed=2)
    warm = project.rows()[("test_model", "vag")]
    assert (cold["cache_state"], warm["cache_state"]) == ("cold", "warm")
    names = (
        "compiled_temp_bytes",
        "compiled_argument_bytes",
        "compiled_output_bytes",
        "compiled_code_bytes",
        "flops",
        "bytes_accessed",
    )
    assert [warm[name] for name in names] == [cold[name] for name in names]
    assert cold["compiled_temp_bytes"] > 0 and cold["flops"] > 0 and cold["bytes_accessed"] > 0
    assert cold["compiled_argument_bytes"] > cold["compiled_output_bytes"] > 0
    # The CPU backend of jax 0.10 and 0.12 reports no code size (0); jax 0.4.30's does.
    assert cold["compiled_code_bytes"] >= 0


class _Fake:
    def __init__(self, memory: object, cost: object) -> None:
        self._memory, self._cost = memory, cost

    def memory_analysis(self) -> object:
        if isinstance(self._memory, Exception):
            raise self._memory
        return self._memory

    def cost_analysis(self) -> object:
        if isinstance(self._cost, Exception):
            raise self._cost
        return self._cost


@dataclasses.dataclass
class _Stats:
    temp_size_in_bytes: int = 100
    argument_size_in_bytes: int = 8
    output_size_in_bytes: int = 4
    generated_code_size_in_bytes: int = 0


def test_cost_analysis_as_a_list_of_dicts_a_dict_or_nothing() -> None:
    from pytest_jaxcompile.backends.jax.measure import compiled_figures

    # jax 0.4.30: a list, one dict per HLO module of the executable; summed.
    old = compiled_figures(
        _Fake(
            _Stats(),
            [{"flops": 10.0, "bytes accessed": 4.0}, {"flops": 5.0, "bytes accessed": 1.0}],
        )
    )
    assert (old["flops"], old["bytes_accessed"], old["compiled_temp_bytes"]) == (15.0, 5.0, 100)
    new = compiled_figures(_Fake(_Stats(), {"flops": 7.0}))
    assert (new["flops"], new["bytes_accessed"]) == (7.0, None)
    # A backend without the analyses, or XLA's "unknown" (-1): absent, never a guess.
    none = compiled_figures(_Fake(NotImplementedError("no"), RuntimeError("UNIMPLEMENTED")))
    assert set(none.values()) == {None}
    unknown = compiled_figures(_Fake(None, {"flops": -1.0}))
    assert unknown["flops"] is None and unknown["compiled_temp_bytes"] is None


def _until_sampled(block: RssBlock, samples: int = 2) -> None:
    """Wait (sleeping, so the thread can take the GIL) until the thread has read `samples`
    more times: `b"x" * n` holds the GIL while it writes, so a block freed at once could be
    gone before the thread ever ran, and the kernel's mark only helps on a new process peak."""
    import time

    wanted = block.samples_taken + samples
    deadline = time.monotonic() + 60
    while block.samples_taken < wanted:
        assert time.monotonic() < deadline, "the sampling thread never sampled"
        time.sleep(0.001)


def test_the_sampler_sees_memory_touched_inside_the_block() -> None:
    with RssSampler(0.001) as sampler:
        block = b"x" * (64 * MIB)  # touched: every page is written
        _until_sampled(sampler)
        del block
    result = sampler.stop()
    assert result is sampler.result
    assert result.peak_bytes - result.before_bytes >= 60 * MIB
    assert result.growth_mib >= 60 and result.peak_mib >= result.growth_mib
    assert result.figures("compile") == {
        "compile_rss_peak_mib": result.peak_mib,
        "compile_rss_growth_mib": result.growth_mib,
        "compile_rss_scope": "compile",
    }


def _sampling_threads() -> int:
    import threading

    return sum(1 for thread in threading.enumerate() if thread.name == "jaxcompile-rss")


def test_a_watch_samples_block_after_block_with_one_thread() -> None:
    """A census'd session's test calls, in turn: one thread, and each block's figures its own
    (a block after the memory was freed does not inherit the previous block's peak)."""
    threads_before = _sampling_threads()
    watch = RssWatch(0.001)
    results = []
    for size in (64, 0, 32):
        with watch.block() as block:
            touched = b"x" * (size * MIB)
            _until_sampled(block)
            del touched
        results.append(block.stop())
        assert block.result is results[-1]
        assert _sampling_threads() == threads_before + 1
    watch.close()
    assert _sampling_threads() == threads_before
    big, idle, medium = results
    assert big.peak_bytes - big.before_bytes >= 60 * MIB and big.samples > 2
    assert idle.growth_mib < 16 and idle.samples > 2
    assert 28 <= medium.growth_mib < 60
    with pytest.raises(RuntimeError, match="closed"):
        watch.block().__enter__()


def test_a_watch_that_never_sampled_starts_no_thread() -> None:
    threads_before = _sampling_threads()
    watch = RssWatch()
    watch.close()
    watch.close()  # closing twice is harmless
    assert _sampling_threads() == threads_before


@pytest.mark.integration
def test_a_spike_between_samples_is_caught_by_the_kernels_high_water_mark() -> None:
    """In a fresh process the spike is a new high-water mark: the peak is exact even though
    the sampler, at one sample a minute, never ran inside the block."""
    script = textwrap.dedent("""
        from pytest_jaxcompile.backends.memory import MIB, RssSampler
        with RssSampler(60.0) as sampler:
            spike = b"x" * (96 * MIB)
            del spike
        result = sampler.result
        print(result.exact, result.samples, result.growth_mib)
    """)
    output = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.split()
    exact, samples, growth = output[0], int(output[1]), float(output[2])
    assert exact == "True"
    assert samples == 2  # before and after the block: nothing in between
    assert growth >= 90


# --------------------------------------------------------------------------- records, pins


def test_records_validate_the_memory_fields() -> None:
    data = _row().to_dict()
    check_record_data(data)
    for name, bad in (
        ("compiled_temp_bytes", 1.5),
        ("flops", -1),
        ("compile_rss_peak_mib", "big"),
        ("compile_rss_scope", 3),
        ("max_memory_growth", float("nan")),
    ):
        with pytest.raises(RecordDataError, match=name):
            check_record_data({**data, name: bad})


def test_pins_keep_the_judged_figures_and_a_census_row_keeps_no_rss(tmp_path: Path) -> None:
    census = make_record(
        transform="jit(f)",
        source="census",
        compile_rss_scope="test",
        compile_rss_growth_mib=12.0,
        compiled_temp_bytes=None,
    )
    (path,) = PinStore.load(tmp_path).update([_row(), census])
    text = path.read_text()
    assert "compiled_temp_bytes = 2048\nflops = 93824.0\ncompile_rss_growth_mib = 40.0\n" in text
    assert text.count("compile_rss_growth_mib") == 1  # the census row's covers its test
    pin = PinStore.load(tmp_path).get(census.key, census.cell, "vag")
    assert pin is not None and (pin.compiled_temp_bytes, pin.flops) == (2048, 93824.0)


def test_a_bad_memory_field_in_a_pin_names_it_and_its_line(tmp_path: Path) -> None:
    (path,) = PinStore.load(tmp_path).update([_row()])
    path.write_text(
        path.read_text().replace("compiled_temp_bytes = 2048", "compiled_temp_bytes = 2.5")
    )
    with pytest.raises(
        PinFileError, match="'compiled_temp_bytes' must be a whole number >= 0"
    ) as error:
        PinStore.load(tmp_path)
    assert error.value.line is not None
    assert "compiled_temp_bytes" in path.read_text().splitlines()[error.value.line - 1]


# --------------------------------------------------------------------------- the gates


def test_temp_bytes_over_the_limit_is_grew_naming_the_figure(store: PinStore) -> None:
    limit = dataclasses.replace(THRESHOLDS, max_memory_growth=0.5)
    grew = judge(_row(compiled_temp_bytes=12288), store, limit)
    assert (grew.status, grew.phase) == (Status.GREW, "compiled_temp_bytes")
    assert grew.note is not None
    assert grew.note.startswith("compiled temp bytes grew: 2,048 -> 12,288 (+500%, limit +50%)")
    assert figures(grew, limit).ratio == pytest.approx(6.0)
    assert row_fails(grew.status, dataclasses.replace(limit, time_advisory=True))
    assert judge(_row(compiled_temp_bytes=3072), store, limit).status is Status.OK  # +50%
    # No gate unless asked; deterministic, so judged whatever the load.
    assert judge(_row(compiled_temp_bytes=12288), store, THRESHOLDS).status is Status.OK
    loaded = _row(
        compiled_temp_bytes=12288,
        host_state=dataclasses.replace(make_record().host_state, load_per_core=5.0),
    )
    assert judge(loaded, store, limit).status is Status.GREW
    # A time DRIFT that also grew in temp bytes is GREW: deterministic beats measured.
    slow = judge(_row(compile_s=5.0, compiled_temp_bytes=12288), store, limit)
    assert (slow.status, slow.phase) == (Status.GREW, "compiled_temp_bytes")


def test_flops_over_the_limit_is_grew_and_the_marker_wins(store: PinStore) -> None:
    limit = dataclasses.replace(THRESHOLDS, max_flops_growth=0.1)
    grew = judge(_row(flops=200000.0), store, limit)
    assert (grew.status, grew.phase) == (Status.GREW, "flops")
    assert grew.note is not None and grew.note.startswith("flops grew: 93,824 -> 200,000")
    # The test's marker value wins over the session's, both ways.
    assert judge(_row(flops=200000.0, max_flops_growth=2.0), store, limit).status is Status.OK
    assert (
        judge(_row(compiled_temp_bytes=4096, max_memory_growth=0.5), store, THRESHOLDS).status
        is Status.GREW
    )


def test_an_op_count_growth_keeps_its_own_note(tmp_path: Path) -> None:
    PinStore.load(tmp_path).update([_row(op_count=40)])
    store = PinStore.load(tmp_path)
    both = dataclasses.replace(THRESHOLDS, max_ops_growth=0.1, max_memory_growth=0.1)
    verdict = judge(_row(op_count=80, compiled_temp_bytes=9999), store, both)
    assert verdict.status is Status.GREW
    assert verdict.note is not None and verdict.note.startswith("module grew: 40 -> 80 ops")


def test_rss_growth_is_judged_like_time_with_its_own_floor(store: PinStore) -> None:
    # Pinned +40 MiB; tolerance 50 %, floor 100 MiB: drifts above 140 MiB (both rules).
    drift = judge(_row(compile_rss_growth_mib=150.0, compile_rss_peak_mib=500.0), store, THRESHOLDS)
    assert (drift.status, drift.phase) == (Status.DRIFT, "compile_rss_growth_mib")
    assert drift.note is not None and drift.note.startswith(
        "RSS growth during the compile drifted: 150.0 MiB, pin 40.0 MiB (peak 500.0 MiB"
    )
    assert not row_fails(drift.status, dataclasses.replace(THRESHOLDS, time_advisory=True))
    assert judge(_row(compile_rss_growth_mib=139.0), store, THRESHOLDS).status is Status.OK
    small_pin_floor = dataclasses.replace(THRESHOLDS, rss_floor_mib=10.0)
    # 59 MiB is within the tolerance (40 x 1.5), 61 MiB is over it and over the floor.
    assert judge(_row(compile_rss_growth_mib=59.0), store, small_pin_floor).status is Status.OK
    assert judge(_row(compile_rss_growth_mib=61.0), store, small_pin_floor).status is (Status.DRIFT)
    # A census row's figure covers its whole test: shown, never judged.
    census = _row(compile_rss_growth_mib=900.0, compile_rss_scope="test")
    assert judge(census, store, THRESHOLDS).status is Status.OK


def test_pins_of_the_current_release_keep_loading_and_judging(tmp_path: Path) -> None:
    """A pin without the memory fields: they are not judged; time still is."""
    PinStore.load(tmp_path).update([make_record(compile_s=1.0)])
    store = PinStore.load(tmp_path)
    pin = store.get(make_record().key, make_record().cell, "vag")
    assert pin is not None and pin.compiled_temp_bytes is None and pin.flops is None
    strict = dataclasses.replace(
        THRESHOLDS, max_memory_growth=0.0, max_flops_growth=0.0, rss_floor_mib=0.0
    )
    assert judge(_row(compile_s=1.0), store, strict).status is Status.OK
    assert judge(_row(compile_s=3.0), store, strict).status is Status.DRIFT


def test_marker_growth_limits_are_validated() -> None:
    budget = parse_budget((), {"max_memory_growth": 0.5, "max_flops_growth": 1})
    assert (budget.max_memory_growth, budget.max_flops_growth) == (0.5, 1.0)
    with pytest.raises(ValueError, match="max_memory_growth must be a finite number >= 0"):
        parse_budget((), {"max_memory_growth": -1})


# --------------------------------------------------------------------------- end to end

MODEL_TESTS = """
    import os
    import jax
    import pytest
    import jaxmodels as m

    BATCH = int(os.environ.get("MODEL_BATCH", "8"))

    def test_model(jax_compile):
        params = m.mlp_init(0, m.mlp_widths(6))
        x = m.example_inputs((BATCH, m.IN_WIDTH), seed=1)
        y = m.example_inputs((BATCH, m.OUT_WIDTH), seed=2)
        jax_compile(jax.value_and_grad(m.mlp_loss), params, x, y, transform="vag")

    @pytest.mark.compile_budget
    def test_census():
        x = m.example_inputs((BATCH, m.IN_WIDTH), seed=1)
        assert jax.jit(lambda a: (a * 2).sum())(x).shape == ()
"""


def test_a_4x_batch_fails_on_temp_bytes_and_the_unchanged_model_passes(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.conftest(cache=False)
    project.tests(MODEL_TESTS)
    project.pytester.makeini("[pytest]\ncompile_max_memory_growth = 0.5\n")
    project.pin_update().assert_outcomes(passed=2)
    pinned = project.rows()[("test_model", "vag")]
    # A measured row carries the compile's peak RSS, its growth, and temp and flops.
    assert pinned["compile_rss_scope"] == "compile"
    assert pinned["compile_rss_peak_mib"] >= pinned["compile_rss_growth_mib"] >= 0
    assert pinned["compile_rss_peak_mib"] > 50  # a process with JAX loaded
    assert pinned["compiled_temp_bytes"] > 0 and pinned["flops"] > 0
    census = next(row for key, row in project.rows().items() if key[0] == "test_census")
    assert census["compile_rss_scope"] == "test" and census["compile_rss_peak_mib"] > 50
    assert census["compiled_temp_bytes"] is None and census["flops"] is None

    unchanged = project.run()
    unchanged.assert_outcomes(passed=2)
    assert project.verdicts()[("test_model", "vag")] != "GREW"
    assert "GREW" not in unchanged.stdout.str()

    monkeypatch.setenv("MODEL_BATCH", "32")
    result = project.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    grown = project.rows()[("test_model", "vag")]
    assert grown["op_count"] == pinned["op_count"]  # the same program, on more data
    assert 4 <= grown["compiled_temp_bytes"] / pinned["compiled_temp_bytes"] <= 6
    assert project.verdicts()[("test_model", "vag")] == "GREW"
    result.stdout.fnmatch_lines(
        [
            "  GREW       test_models.py::test_model [[]vag[]] * B memory, pin * B memory "
            "(*x, limit +*%)",
            "      compiled temp bytes grew: * -> * (+*%, limit +50%)*",
        ]
    )
    verdict = next(v for v in project.report()["verdicts"] if v["transform"] == "vag")
    assert verdict["phase"] == "compiled_temp_bytes"
    assert verdict["pin_compiled_temp_bytes"] == pinned["compiled_temp_bytes"]

    # A pin written by the current release, without the memory fields, keeps judging time.
    for field in ("compiled_temp_bytes", "flops", "compile_rss_growth_mib"):
        project.set_pin_field(field, None)
    assert "compiled_temp_bytes" not in "".join(
        text.decode() for text in project.pin_files().values()
    )
    project.set_pin_field("compile_s", 0.0001)
    project.set_pin_field("trace_s", None)
    project.set_pin_field("lower_s", None)
    timed = project.run("--compile-floor=0", "--compile-tolerance=0.1")
    assert project.verdicts()[("test_model", "vag")] == "DRIFT"
    assert timed.ret == pytest.ExitCode.TESTS_FAILED


def test_the_first_compile_of_a_process_drifts_on_rss_over_a_tiny_pin(
    project: JaxProject,
) -> None:
    """A process's first XLA compile grows its RSS by tens of MiB (XLA and LLVM start up):
    over a hand-set pin of 0 MiB and a floor of 1 MiB, DRIFT naming RSS."""
    project.conftest(cache=False)
    project.tests("""
        import numpy as np
        import jaxmodels as m

        def test_first(jax_compile):
            params = [(np.ones((16, 4), np.float32), np.zeros(4, np.float32))]
            x, y = np.ones((8, 16), np.float32), np.ones((8, 4), np.float32)
            jax_compile(m.mlp_loss, params, x, y, transform="loss")
    """)
    project.pin_update().assert_outcomes(passed=1)
    first = project.rows()[("test_first", "loss")]
    assert first["compile_rss_growth_mib"] > 1.0
    project.set_pin_field("compile_rss_growth_mib", 0.0)
    result = project.run("-o", "compile_rss_floor_mib=1", "--compile-tolerance=1000")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert project.verdicts()[("test_first", "loss")] == "DRIFT"
    result.stdout.fnmatch_lines(
        ["      RSS growth during the compile drifted: * MiB, pin 0.0 MiB*"]
    )
    assert "compile_rss_floor_mib" in project.pytester.runpytest_subprocess("--help").stdout.str()


def test_bad_memory_options_are_usage_errors_naming_them(project: JaxProject) -> None:
    project.tests("def test_nothing():\n    pass\n")
    result = project.pytester.runpytest_subprocess("-o", "compile_rss_floor_mib=-1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*compile_rss_floor_mib*must be a finite number >= 0*"])
    project.pytester.makeini("[pytest]\ncompile_rss_floor_mib = lots\n")
    result = project.pytester.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini option compile_rss_floor_mib = 'lots' is not a number*"])


def test_the_dashboard_shows_temp_bytes_and_rss_growth(tmp_path: Path) -> None:
    from pytest_jaxcompile.output.charts import Trends
    from pytest_jaxcompile.output.dashboard import html_page, markdown, table_rows

    store = PinStore.load(tmp_path)
    records = [
        _row(compiled_temp_bytes=12288, compile_rss_growth_mib=3.2),
        _row(
            transform="jit(f)",
            source="census",
            compiled_temp_bytes=None,
            compile_rss_scope="test",
            compile_rss_growth_mib=7.5,
        ),
    ]
    rows = table_rows(records, store, THRESHOLDS)
    text = markdown(rows, THRESHOLDS)
    assert "| ratio | temp | RSS growth | verdict |" in text
    assert "| 12.0 KiB | +3.2 MiB | unpinned |" in text
    assert "| — | +7.5 MiB (test) | unpinned |" in text
    page = html_page(rows, Trends(), store, THRESHOLDS, "a corpus")
    assert "<th>temp</th><th>RSS growth</th>" in page
    assert '<td class="num">12.0 KiB</td><td class="num">+3.2 MiB</td>' in page
