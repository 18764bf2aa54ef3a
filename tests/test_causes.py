"""Causes named: what grew in a module, and its text kept for diffing."""

from __future__ import annotations

import pytest
from conftest import JaxProject

MLP_TEST = """
    import jax
    from jaxmodels import mlp_example_args, mlp_loss

    def test_mlp(jax_compile):
        jax_compile(jax.jit(mlp_loss), *mlp_example_args(), transform="jit")

    def test_unchanged(jax_compile):
        jax_compile(jax.jit(lambda x: x * 2), 1.0, transform="double")
"""


def test_a_grown_model_names_the_operations_that_grew_and_keeps_its_text(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.conftest(cache=False)
    project.tests(MLP_TEST)
    monkeypatch.setenv("JAXMODELS_DEPTH", "4")
    project.run("--compile-pin-update").assert_outcomes(passed=2)
    pin_text = next(project.pins_dir.glob("*.toml")).read_text()
    assert '"stablehlo.tanh" = 4' in pin_text  # the histogram is pinned

    monkeypatch.setenv("JAXMODELS_DEPTH", "40")
    artifacts = project.path / "modules"
    result = project.run("--compile-max-ops-growth=0.1", f"--compile-artifacts-dir={artifacts}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert project.verdicts() == {("test_mlp", "jit"): "GREW", ("test_unchanged", "double"): "ok"}
    result.stdout.fnmatch_lines(["      module grew: * ops (*, limit +10%): *stablehlo.tanh +36*"])
    verdict = next(v for v in project.report()["verdicts"] if v["transform"] == "jit")
    assert "stablehlo.tanh +36" in verdict["op_changes"]
    assert verdict["op_changes"][0].split()[1].startswith("+")  # largest change first
    # The failing row's module text is kept, named by cell and transform; nothing else.
    (saved,) = artifacts.iterdir()
    assert saved.name == "test_models.py_test_mlp--jit.mlir"
    assert saved.read_text().count("stablehlo.tanh") == 40
    result.stdout.fnmatch_lines(["module text of 1 failing row(s) saved in modules"])


def test_a_miss_names_the_cache_key_part_and_the_flag_that_changed(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.conftest(cache=True, min_compile_time=0.0)
    project.tests(MLP_TEST)
    project.run("--compile-pin-update").assert_outcomes(passed=2)  # cold
    project.run("--compile-pin-update").assert_outcomes(passed=2)  # warm
    pin_text = "\n".join(path.read_text() for path in project.pins_dir.glob("*.toml"))
    assert '[pins."test_models.py::test_mlp".jit.key_parts]' in pin_text
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
    result = project.run("--compile-expect-warm")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert project.verdicts()[("test_mlp", "jit")] == "MISS"
    result.stdout.fnmatch_lines([
        "*Its cache key changed: the XLA flags part (+--xla_cpu_multi_thread_eigen=false)*"
    ])


OPTIONS_TEST = """
    import os
    import jax
    from jaxmodels import mlp_example_args, mlp_loss

    def test_mlp(jax_compile):
        options = {"xla_cpu_enable_fast_math": True} if os.environ.get("FAST") else {}
        jax_compile(jax.jit(mlp_loss, compiler_options=options), *mlp_example_args(),
                    transform="jit")
"""


def test_a_changed_compile_option_is_named_as_the_compile_options_part(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    import inspect

    import jax

    if "compiler_options" not in inspect.signature(jax.jit).parameters:
        pytest.skip(f"jax {jax.__version__}'s jit takes no compiler_options")
    project.conftest(cache=True, min_compile_time=0.0)
    project.tests(OPTIONS_TEST)
    project.run("--compile-pin-update").assert_outcomes(passed=1)
    project.run("--compile-pin-update").assert_outcomes(passed=1)
    monkeypatch.setenv("FAST", "1")
    result = project.run("-v")
    assert project.rows()[("test_mlp", "jit")]["cache_state"] == "cold"
    result.stdout.fnmatch_lines(["*its cache key changed: the compile_options part*"])
