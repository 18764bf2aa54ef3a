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
