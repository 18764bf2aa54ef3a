"""Where in the user's code a module grew: operations by source location (read from the
module's locations after the tests, only for the rows the gate explains), kept in the pin,
compared by function and file so that moved code is not growth, and named on the row's
default line."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from conftest import JaxProject
from records_factory import make_record

from pytest_jaxcompile.backends.jax.locations import source_histogram
from pytest_jaxcompile.gate.notes import what_changed
from pytest_jaxcompile.gate.pins import Pin, PinFileError, PinStore
from pytest_jaxcompile.gate.sources import source_growth, sources_text
from pytest_jaxcompile.gate.view.causes import brief

# A module printed with its debug info (Lowered.as_text(debug_info=True)), cut down: ops
# made in loss (model.py:5) and in helper (model.py:3, called from model.py:6), one in a
# library under site-packages called from model.py:6, one at the jit's own level.
DEBUG_TEXT = """\
#loc1 = loc("w")
module @jit_loss attributes {mhlo.num_partitions = 1 : i32} {
  func.func public @main(%arg0: tensor<4x4xf32> loc("w")) -> (tensor<4x4xf32>) {
    %0 = stablehlo.dot_general %arg0, %arg0, contracting_dims = [1] x [0] loc(#loc22)
    %1 = stablehlo.tanh %0 : tensor<4x4xf32> loc(#loc23)
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32> loc(#loc19)
    %2 = stablehlo.cosine %1 : tensor<4x4xf32> loc(#loc32)
    %3 = stablehlo.multiply %2, %2 : tensor<4x4xf32> loc(#loc32)
    %4 = stablehlo.sine %3 : tensor<4x4xf32> loc(#loc40)
    %5 = stablehlo.add %4, %4 : tensor<4x4xf32> loc(fused[#loc23, #loc32])
    return %5 : tensor<4x4xf32> loc(#loc19)
  } loc(#loc)
} loc(#loc)
#loc = loc(unknown)
#loc3 = loc("/src/proj/model.py":5:17 to :22)
#loc4 = loc("/src/proj/test_model.py":7:6 to :69)
#loc6 = loc("/src/proj/model.py":3:11 to :21)
#loc7 = loc("/src/proj/model.py":6:19 to :28)
#loc8 = loc("/env/lib/python3.11/site-packages/lib/ops.py":12:4)
#loc10 = loc("loss"(#loc3))
#loc11 = loc("test_loss"(#loc4))
#loc13 = loc("helper"(#loc6))
#loc14 = loc("loss"(#loc7))
#loc15 = loc("op"(#loc8))
#loc17 = loc(callsite(#loc10 at #loc11))
#loc19 = loc("jit(loss)"(#loc11))
#loc20 = loc(callsite(#loc14 at #loc11))
#loc22 = loc("jit(loss)/dot_general"(#loc17))
#loc23 = loc("jit(loss)/tanh"(#loc17))
#loc25 = loc(callsite(#loc13 at #loc20))
#loc26 = loc(callsite(#loc15 at #loc20))
#loc32 = loc("jit(loss)/cos"(#loc25))
#loc40 = loc("jit(loss)/sin"(#loc26))
"""


def test_each_op_counts_at_its_innermost_frame_outside_jax_and_site_packages() -> None:
    assert source_histogram(DEBUG_TEXT, Path("/src/proj")) == {
        "model.py:5 (loss)": 3,  # dot_general, tanh, and the fused add's first location
        "model.py:3 (helper)": 2,  # cosine, multiply
        "model.py:6 (loss)": 1,  # the library's sine, at the line of the user's code that called it
        "test_model.py:7 (test_loss)": 1,  # the jit's own constant, where the jit was called
    }
    outside = source_histogram(DEBUG_TEXT, Path("/elsewhere"))
    assert "/src/proj/model.py:5 (loss)" in outside  # a file outside the root: its path
    assert source_histogram("module @m {\n}\n") == {}


def _pin(sources: dict[str, int], ops: int) -> Pin:
    return Pin(compile_s=1.0, op_count=ops, fingerprint="sha256:old", sources=sources)


PINNED = {
    "model.py:9 (gaussians)": 30,
    "model.py:14 (loss)": 9,
    "test_model.py:6 (test_loss)": 5,
}


def test_a_function_that_grew_is_named_at_its_line_and_moved_code_is_not_growth() -> None:
    grown = make_record(
        op_count=224,
        fingerprint="sha256:new",
        source_ops={
            "model.py:9 (gaussians)": 180,
            "model.py:10 (gaussians)": 20,
            "model.py:14 (loss)": 9,
            "test_model.py:6 (test_loss)": 15,
        },
    )
    growth = source_growth(grown, _pin(PINNED, 44))
    assert growth == [("model.py:9 (gaussians)", 170), ("test_model.py:6 (test_loss)", 10)]
    assert (
        sources_text(growth)
        == "+170 ops at model.py:9 (gaussians), +10 at test_model.py:6 (test_loss)"
    )
    assert sources_text([("a.py:1 (f)", 27300), ("b.py:2 (g)", 180)]) == (
        "+27,300 ops at a.py:1 (f), +180 at b.py:2 (g)"
    )
    # gaussians moved 20 lines down, loss grew: only loss is named
    moved = make_record(
        op_count=60,
        fingerprint="sha256:new",
        source_ops={
            "model.py:29 (gaussians)": 30,
            "model.py:34 (loss)": 25,
            "test_model.py:6 (test_loss)": 5,
        },
    )
    assert source_growth(moved, _pin(PINNED, 44)) == [("model.py:34 (loss)", 16)]
    only_moved = make_record(
        op_count=44, source_ops={"model.py:29 (gaussians)": 30, "model.py:34 (loss)": 9}
    )
    assert source_growth(only_moved, _pin(PINNED, 44)) == []
    # a row or a pin without a histogram: nothing said
    assert source_growth(make_record(op_count=60), _pin(PINNED, 44)) == []
    assert source_growth(moved, Pin(compile_s=1.0, op_count=44)) == []


def test_the_default_line_names_where_it_grew_after_the_ops_that_grew() -> None:
    grown = make_record(
        op_count=235,
        fingerprint="sha256:new",
        op_histogram={"stablehlo.multiply": 85, "stablehlo.add": 150},
        source_ops={"model.py:9 (gaussians)": 200, "model.py:14 (loss)": 9},
    )
    pin = _pin(PINNED, 45)
    pin = Pin(**{**pin.__dict__, "ops": {"stablehlo.multiply": 15, "stablehlo.add": 30}})
    note = what_changed(grown, pin)
    assert note == (
        "module grew: 45 -> 235 ops (+422%): stablehlo.add +120, stablehlo.multiply +70; "
        "+170 ops at model.py:9 (gaussians)"
    )
    long = "DRIFT paired with pins/x.toml (laptop | jax 0.10.2 | full precision | none): " + (
        "6 pairs, cpu 0.2 s -> 0.6 s (medians), pairs' ratio 3.00x (95% sequential interval "
        "2.9x-3.1x, paired tolerance 4%)"
    )
    shown = brief(f"{long}; {note}")
    assert shown is not None and shown.endswith("; +170 ops at model.py:9 (gaussians)")
    shrunk = what_changed(make_record(op_count=10, source_ops={"model.py:9 (gaussians)": 1}), pin)
    assert shrunk is not None and " at " not in shrunk  # only growth is placed


def test_a_pin_keeps_its_sources_on_one_line_and_a_bad_count_is_named(tmp_path: Path) -> None:
    record = make_record(op_count=44, source_ops=dict(PINNED))
    PinStore.load(tmp_path).update([record])
    (path,) = tmp_path.iterdir()
    assert 'sources = { "model.py:14 (loss)" = 9, "model.py:9 (gaussians)" = 30, ' in (
        path.read_text()
    )
    (pin,) = [pin for group in PinStore.load(tmp_path).groups() for _, pin in group.all_pins()]
    assert pin.sources == PINNED
    path.write_text(
        path.read_text().replace('"model.py:14 (loss)" = 9', '"model.py:14 (loss)" = -9')
    )
    with pytest.raises(PinFileError, match="'sources' must be a table of source locations"):
        PinStore.load(tmp_path)


# ----------------------------------------------------------------------- end to end

MODEL = """
    import os
    import jax.numpy as jnp
    {pad}
    def gaussians(x):
        for i in range(int(os.environ.get("BASIS_DEPTH", "2"))):
            x = jnp.exp(-x * x) + jnp.sin(x) * (i + 1)
        return x


    def loss(w, x):
        y = jnp.tanh(x @ w)
        for _ in range(int(os.environ.get("LOSS_DEPTH", "0"))):
            y = jnp.cos(y) * 2.0
        return jnp.sum(gaussians(y))
"""
TEST = """
    import jax
    import jax.numpy as jnp
    from model import loss

    def test_loss(jax_compile):
        w, x = jnp.ones((64, 64)), jnp.ones((8, 64))
        jax_compile(jax.jit(jax.grad(loss)), w, x, transform="grad")
"""


def _model(project: JaxProject, pad: int = 0) -> None:
    source = textwrap.dedent(MODEL).replace("{pad}", "\n" * pad)
    (project.path / "model.py").write_text(source)


def _line(project: JaxProject, text: str) -> int:
    lines = (project.path / "model.py").read_text().splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)


def test_the_line_that_grew_is_named_and_a_moved_function_is_not(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.conftest(cache=False)
    _model(project)
    project.tests(TEST)
    assert project.run("--compile-pin-update").ret == 0
    (row,) = project.report()["records"]
    gaussians = f"model.py:{_line(project, 'jnp.exp')} (gaussians)"
    assert gaussians in row["source_ops"]  # a pin update reads every row's
    pinned = row["fingerprint"]
    growth = ("-o", "compile_max_ops_growth=0.1", "-o", "compile_reproducer=never")

    monkeypatch.setenv("BASIS_DEPTH", "12")
    grew = project.run(*growth)
    assert grew.ret == pytest.ExitCode.TESTS_FAILED
    (cause,) = [
        line.strip() for line in grew.stdout.lines if line.strip().startswith("module grew")
    ]
    first = re.search(r"; \+([\d,]+) ops at (\S+ \(\w+\))", cause)
    assert first is not None and first.group(2) == gaussians, cause
    assert "(loss)" not in cause

    # Moved down 12 lines, unchanged: the same fingerprint, nothing grew, nothing read
    monkeypatch.setenv("BASIS_DEPTH", "2")
    _model(project, pad=12)
    assert project.run(*growth).ret == 0
    (row,) = project.report()["records"]
    assert row["fingerprint"] == pinned  # locations are not in the fingerprint
    assert row["source_ops"] is None  # a passing row's locations are never read

    # Moved, and loss grew: only loss is named, at its line that grew
    monkeypatch.setenv("LOSS_DEPTH", "8")
    moved = project.run(*growth)
    assert moved.ret == pytest.ExitCode.TESTS_FAILED
    (cause,) = [
        line.strip() for line in moved.stdout.lines if line.strip().startswith("module grew")
    ]
    assert f"ops at model.py:{_line(project, 'jnp.cos')} (loss)" in cause, cause
    assert "gaussians" not in cause


def test_an_upgrade_blocks_slowest_rows_say_where_they_grew(tmp_path: Path) -> None:
    from pytest_jaxcompile.gate.limits import Thresholds
    from pytest_jaxcompile.gate.nearest import UPGRADE, NearestPin
    from pytest_jaxcompile.gate.outcome import Outcome
    from pytest_jaxcompile.gate.status import Status, Verdict
    from pytest_jaxcompile.gate.upgrades import UpgradeReport
    from pytest_jaxcompile.gate.view import BlockKind, session_view
    from pytest_jaxcompile.records import ComparabilityKey

    record = make_record(
        jax_version="0.10.3",
        compile_s=2.0,
        op_count=224,
        source_ops={"model.py:9 (gaussians)": 200, "model.py:14 (loss)": 9},
    )
    old = ComparabilityKey(record.hardware, "0.10.2", False, "cold")
    verdict = Verdict(
        record, Status.UNPINNED, nearest=NearestPin(old, _pin(PINNED, 44), UPGRADE, ratio=2.0)
    )
    upgrade = UpgradeReport("jax", record.hardware, "0.10.2", "0.10.3", (verdict,))
    outcome = Outcome(
        rootdir=tmp_path,
        pins_dir=tmp_path,
        thresholds=Thresholds(),
        pin_update=False,
        verdicts=[verdict],
        upgrades=[upgrade],
    )
    (block,) = session_view(outcome).blocks_of(BlockKind.UPGRADE)
    assert "tests/test_models.py::test_mlp [vag] grew: +170 ops at model.py:9 (gaussians)" in (
        block.details
    )
