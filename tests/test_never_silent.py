"""The gate never goes silent: a new runner, a lost cache, slow tracing, a jax upgrade.

Real JAX on the CPU, real persistent cache directories, real pytest sessions.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, JaxProject, compile_summary, edit_pins

from pytest_jaxcompile.gate.pins import PinStore
from pytest_jaxcompile.gate.view.blocks import NOTHING_MEASURED

MLP_TEST = """
    import jax
    from jaxmodels import mlp_example_args, mlp_loss

    def test_mlp(jax_compile):
        jax_compile(jax.jit(mlp_loss), *mlp_example_args(), transform="jit")
"""


def test_a_new_runner_is_compared_with_the_nearest_pin_and_can_be_required(
    project: JaxProject,
) -> None:
    project.conftest(cache=False)
    project.tests(MLP_TEST)
    project.pin_update("--compile-hardware=runner-a").assert_outcomes(passed=1)
    result = project.run("--compile-hardware=runner-b")
    assert result.ret == pytest.ExitCode.OK  # an advisory, by default
    verdict = project.report()["verdicts"][0]
    assert verdict["status"] == "unpinned"
    assert verdict["nearest"]["key"]["hardware"] == "runner-a"
    assert verdict["nearest"]["relation"] == "other hardware"
    summary = "\n".join(compile_summary(result))
    assert (
        "warning: 1 of 1 row(s) have no pin under their key: 1 pinned only under other "
        "hardware (new runner)" in summary
    )
    assert "1 compared with their nearest pin under another key: median" in summary

    project.pytester.makeini("[pytest]\ncompile_require_pinned = true\n")
    result = project.run("--compile-hardware=runner-b")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "  unpinned   test_models.py::test_mlp [[]jit[]] *",
            "      nearest pin runner-a | jax * | full precision | none: * s (*x)",
            "unpinned: 1 row(s) have no pin under their key; the session fails.",
            # The re-pin command keeps the hand-set hardware name, so it pins this key.
            "Pin them with: pytest --compile-pin-update --compile-hardware=runner-b "
            "test_models.py::test_mlp",
        ]
    )


def test_a_ci_runner_named_by_hand_is_compared_with_the_local_pins(
    project: JaxProject,
) -> None:
    """Pinned on a laptop (the detected name), run as a hosted runner is (a hand-set name):
    each row is compared with the local pin, the key named."""
    project.conftest(cache=False)
    project.tests(MLP_TEST)
    project.pin_update().assert_outcomes(passed=1)
    (local,) = {verdict["key"]["hardware"] for verdict in project.report()["verdicts"]}
    assert local.startswith("cpu:cpu @ ")

    result = project.run("--compile-hardware=gha-ubuntu-latest", "-v")
    assert result.ret == pytest.ExitCode.OK
    nearest = project.report()["verdicts"][0]["nearest"]
    assert (nearest["key"]["hardware"], nearest["relation"]) == (local, "other hardware")
    result.stdout.fnmatch_lines(
        [
            "  unpinned   test_models.py::test_mlp [[]jit[]] *",
            f"      nearest pin {local} | jax * | full precision | none: * s (*x)",
            "warning: 1 of 1 row(s) have no pin under their key: 1 pinned only under other "
            "hardware (new runner). *",
            # The long warning is wrapped; its advice on the next line.
            "  *Pin this runner class and jax version (on CI: the re-pin workflow, *",
        ]
    )

    result = project.run(
        "--compile-hardware=gha-ubuntu-latest", "-o", "compile_require_pinned=true"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["unpinned: 1 row(s) have no pin under their key; *"])


def test_a_pin_recorded_on_a_gpu_never_judges_a_cpu_row_under_the_same_name(
    project: JaxProject,
) -> None:
    """One hand-set hardware name for a GPU runner and a CPU one: the GPU's pin is refused,
    the row says why and is unpinned (never noisy or drifted against it)."""
    project.conftest(cache=False)
    project.tests(MLP_TEST)
    project.pin_update("--compile-hardware=runner").assert_outcomes(passed=1)
    edit_pins(
        project.pins_dir,
        "none",
        {"test_mlp": {"platform": "gpu", "device_kind": "NVIDIA A100-SXM4-80GB"}},
    )
    result = project.run("--compile-hardware=runner", "-v")
    assert result.ret == pytest.ExitCode.OK
    verdict = project.report()["verdicts"][0]
    assert verdict["status"] == "unpinned"
    assert "pin" not in verdict or verdict["pin"] is None
    result.stdout.fnmatch_lines(
        [
            "  unpinned   test_models.py::test_mlp [[]jit[]] *",
            # Under -v the note's parts, one a line.
            "      pin recorded on gpu NVIDIA A100-SXM4-80GB",
            "      this row ran on cpu: not compared",
        ],
        consecutive=True,
    )
    result = project.run("--compile-hardware=runner", "-o", "compile_require_pinned=true")
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_new_test_file_in_a_pinned_project_is_no_runner_warning(project: JaxProject) -> None:
    project.conftest(cache=False)
    project.tests(MLP_TEST)
    project.pin_update().assert_outcomes(passed=1)
    project.tests(MLP_TEST.replace("test_mlp", "test_new_a"), name="test_new")
    project.tests(MLP_TEST.replace("test_mlp", "test_new_b"), name="test_newer")
    # Time-advisory: the pinned row's verdict is beside the point (and load-dependent).
    result = project.run("-o", "compile_time_advisory=true")
    assert result.ret == pytest.ExitCode.OK
    verdicts = project.verdicts()
    assert (verdicts[("test_new_a", "jit")], verdicts[("test_new_b", "jit")]) == (
        "unpinned",
        "unpinned",
    )
    assert verdicts[("test_mlp", "jit")] != "unpinned"
    summary = "\n".join(compile_summary(result))
    assert "warning:" not in summary and "runner" not in summary
    assert project.report()["warnings"] == []


def test_a_lost_cache_warns_by_default_and_fails_when_expected_warm(
    project: JaxProject,
) -> None:
    project.conftest(cache=True, min_compile_time=0.0)
    project.tests(MLP_TEST)
    project.run("--compile-pin-update").assert_outcomes(passed=1)  # cold pin, cache filled
    project.run("--compile-pin-update").assert_outcomes(passed=1)  # warm pin
    shutil.rmtree(project.cache_dir)
    result = project.run("-o", "compile_floor=5")  # the warning, not the cold row's seconds
    assert result.ret == pytest.ExitCode.OK
    assert project.rows()[("test_mlp", "jit")]["cache_state"] == "cold"
    result.stdout.fnmatch_lines(
        [
            "warning: 1 row(s) compiled cold although their module is unchanged since its warm "
            "pin: *",
            "  (compile_expect_warm makes this a MISS that fails).",  # the wrapped line's end
        ],
        consecutive=True,
    )
    assert project.report()["verdicts"][0]["cache_lost"] is True

    shutil.rmtree(project.cache_dir)
    result = project.run("--compile-expect-warm")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert project.verdicts() == {("test_mlp", "jit"): "MISS"}


def test_a_miss_after_the_cache_settings_drifted_names_the_reason_and_its_cold_pin(
    project: JaxProject,
) -> None:
    """Pinned cold and warm with min compile time 0; then the setting raised far above any
    compile (keeping the module out of the cache) and the cache lost: the MISS names the
    recorded reason, the cold pin it is shown with and that pin's file, `cache_lost` is
    true, and no profile note that does not belong to it is added."""
    project.conftest(cache=True, min_compile_time=0.0)
    project.tests(MLP_TEST)
    project.run("--compile-pin-update").assert_outcomes(passed=1)  # cold pin, cache filled
    project.run("--compile-pin-update").assert_outcomes(passed=1)  # warm pin
    project.conftest(cache=True, min_compile_time=1000.0)
    shutil.rmtree(project.cache_dir)
    result = project.run("--compile-expect-warm", "-v")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    row = project.rows()[("test_mlp", "jit")]
    assert (row["cache_state"], row["cache"]["reason"]) == ("cold", "below_min_compile_time")
    (verdict,) = project.report()["verdicts"]
    assert (verdict["status"], verdict["cache_lost"]) == ("MISS", True)
    groups = PinStore.load(project.pins_dir).groups()
    (cold,) = [group for group in groups if group.key.cache_state == "cold"]
    pinned_cold, cold_file = cold.get("test_models.py::test_mlp", "jit"), cold.path.name
    # The cold pin, in its file, as the row's header names it; not the warm pin's seconds.
    assert verdict["pin_file"] == f"pins/{cold_file}"
    assert pinned_cold is not None and verdict["pin_compile_s"] == pinned_cold.compile_s
    summary = "\n".join(compile_summary(result))
    assert f"(pins/{cold_file})" in summary
    assert "yet it compiled cold; shown against its cold pin." in verdict["note"]
    assert "JAX did not store it: below_min_compile_time (" in verdict["note"]
    assert "cache dir, jax version, XLA flags" not in verdict["note"]
    assert "module is not stored" not in summary


SLOW_TRACE = """
    import os, time
    import jax
    from jaxmodels import mlp_example_args, mlp_loss

    def traced(*args):
        time.sleep(float(os.environ.get("EXTRA_TRACE_S", "0")))  # Python time while tracing
        return mlp_loss(*args)

    def test_mlp(jax_compile):
        jax_compile(jax.jit(traced), *mlp_example_args(), transform="jit")
"""


def test_a_tracing_slowdown_under_a_warm_cache_is_drift(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.conftest(cache=True, min_compile_time=0.0)
    project.tests(SLOW_TRACE)
    project.run().assert_outcomes(passed=1)  # fills the cache
    project.run("--compile-pin-update").assert_outcomes(passed=1)  # warm pin, trace pinned
    assert project.rows()[("test_mlp", "jit")]["cache_state"] == "warm"
    monkeypatch.setenv("EXTRA_TRACE_S", "0.6")  # the same module: still a warm hit
    result = project.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    row = project.rows()[("test_mlp", "jit")]
    assert row["cache_state"] == "warm"
    assert row["trace_s"] >= 0.6  # the sleep; a loaded runner can add to it
    verdict = project.report()["verdicts"][0]
    assert (verdict["status"], verdict["phase"]) == ("DRIFT", "trace_s")
    result.stdout.fnmatch_lines([f"      trace time drifted: {row['trace_s']:.3f} s, pin 0.* s*"])


OLD_JAX = "0.9.2"


def test_a_jax_upgrade_prints_the_upgrade_block_and_can_gate(project: JaxProject) -> None:
    # scripts/test.sh builds a venv with jax OLD_JAX and this plugin, and names its Python.
    configured = os.environ.get("JAXCOMPILE_OLD_JAX_PYTHON")
    if not configured:
        pytest.skip(f"no jax {OLD_JAX} Python named (JAXCOMPILE_OLD_JAX_PYTHON)")
    python = Path(configured)
    assert python.exists(), f"JAXCOMPILE_OLD_JAX_PYTHON={configured} does not exist"
    project.conftest(cache=False)
    project.tests(MLP_TEST)
    # Read, not imported: pytester unloads what a test imports, and jaxlib's extension does
    # not survive a second import in this process (a later test importing jax aborted).
    jax_version = importlib.metadata.version("jax")
    if jax_version == OLD_JAX:
        pytest.skip(f"this Python runs jax {OLD_JAX} itself")
    pinned = subprocess.run(
        [
            str(python),
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--compile-pin-update",
            "--compile-hardware=ci-runner",
        ],
        cwd=project.path,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )
    assert pinned.returncode == 0, pinned.stdout[-3000:] + pinned.stderr[-3000:]
    assert f"jax-{OLD_JAX}" in " ".join(path.name for path in project.pins_dir.iterdir())

    result = project.run("--compile-hardware=ci-runner")
    assert result.ret == pytest.ExitCode.OK

    result.stdout.fnmatch_lines(
        [
            "warning: 1 of 1 row(s) have no pin under their key: 1 pinned only under another jax "
            "version (upgrade). *",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            f"jax upgrade {OLD_JAX} -> {jax_version} on ci-runner: 1 row(s) compared with "
            f"their {OLD_JAX} pins, median *x (report only; compile_max_upgrade_slowdown makes "
            "it a gate).",
            "  slowest: test_models.py::test_mlp [[]jit[]] *x",
        ]
    )
    upgrade = project.report()["upgrades"][0]
    assert (upgrade["old"], upgrade["new"], upgrade["rows"]) == (OLD_JAX, jax_version, 1)
    gated = project.run("--compile-hardware=ci-runner", "-o", "compile_max_upgrade_slowdown=0")
    # Judge the gated run by its own figure: the ratio moves between runs.
    gated_ratio = project.report()["upgrades"][0]["median_ratio"]
    expected = pytest.ExitCode.TESTS_FAILED if gated_ratio > 1 else pytest.ExitCode.OK
    assert gated.ret == expected
    assert sys.version_info >= (3, 10)


def test_a_pin_update_that_measured_no_compile_says_so(project: JaxProject) -> None:
    """A suite that jits without the fixture, census off: `--compile-pin-update` pins
    nothing, and says so rather than ending silently (which reads as pinned)."""
    project.conftest(cache=False)
    project.tests(
        """
        import jax
        from jaxmodels import mlp_example_args, mlp_loss

        def test_mlp():
            assert jax.jit(mlp_loss)(*mlp_example_args()) > 0
        """
    )
    result = project.run("--compile-pin-update")
    assert result.ret == pytest.ExitCode.OK
    assert NOTHING_MEASURED in compile_summary(result)
    # docs/pins.md quotes the line (wrapped; in backticks)
    assert f"`{NOTHING_MEASURED}`" in " ".join((REPO / "docs" / "pins.md").read_text().split())
    assert not (project.path / "pins").exists()
    assert project.report()["pin_update"] is True

    result = project.run("--compile-pin-update", "--compile-census")
    assert NOTHING_MEASURED not in compile_summary(result)
    assert list((project.path / "pins").glob("*.toml"))
