"""The torch.compile backend: real torch on the CPU, real inductor cache dirs, real pytest.

Skipped where torch is not installed: the JAX-only install passes without it.
"""

from __future__ import annotations

import pytest
from conftest import JaxProject

pytest.importorskip("torch")

TORCH_TESTS = """
    import pytest, torch

    def scaled_sum(x):
        return (torch.sin(x) * 2 + 1).sum()

    def test_fn(torch_compile):
        compiled = torch_compile(scaled_sum, torch.randn(8), transform="scaled_sum")
        assert compiled(torch.randn(8)).shape == ()
"""


@pytest.fixture
def torch_project(project: JaxProject, monkeypatch: pytest.MonkeyPatch) -> JaxProject:
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(project.path / "inductor-cache"))
    project.pytester.makeini("[pytest]\n")
    return project


def test_cold_then_warm_across_two_processes_sharing_the_inductor_cache(
    torch_project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch_project.tests(TORCH_TESTS)
    torch_project.run("--compile-pin-update").assert_outcomes(passed=1)
    cold = torch_project.rows()[("test_fn", "scaled_sum")]
    assert (cold["framework"], cold["cache_state"]) == ("torch", "cold")
    assert cold["torch_version"].startswith("2.")
    # Only what torch measured is named: its backend compile; the rest of the frame's
    # compile time is the named residual, and inductor's spans lie inside the backend's.
    assert set(cold["phases"]) == {"backend_compile_s", "compile_other_s"}
    assert cold["compile_s"] == pytest.approx(sum(cold["phases"].values()))
    assert cold["backend_compile_s"] == cold["phases"]["backend_compile_s"] > 0
    overlays = cold["overlays"]
    assert 0 < overlays["inductor_code_gen_s"] <= overlays["inductor_s"]
    assert overlays["inductor_s"] <= cold["backend_compile_s"] <= cold["compile_s"]
    assert cold["trace_s"] is None and cold["jax_version"] == ""
    # Memory: the process's peak RSS over torch.compile's first call; no compiled analyses.
    assert cold["compile_rss_scope"] == "first_call"
    assert cold["compile_rss_peak_mib"] >= cold["compile_rss_growth_mib"] >= 0
    assert cold["compiled_temp_bytes"] is None and cold["flops"] is None
    ledger = cold["ledger"]
    assert ledger["wall_s"] == pytest.approx(ledger["compile_s"] + ledger["execute_and_python_s"])
    # A cold first call is mostly compile: a compile_s covering a small part of the wall
    # would be a partial span (a frame or a phase the metrics missed).
    assert cold["compile_s"] > 0.5 * ledger["wall_s"]
    assert cold["missing_metrics"] is None
    assert ledger["compile_other_s"] == pytest.approx(cold["phases"]["compile_other_s"])
    (pin_file,) = torch_project.pins_dir.glob("*.toml")
    assert 'framework = "torch"' in pin_file.read_text()
    assert "torch_version = " in pin_file.read_text()

    # XLA's rules never judge torch rows: a required XLA flag and a changed XLA_FLAGS are
    # no concern of a torch.compile test.
    torch_project.pytester.makeini(
        "[pytest]\ncompile_required_xla_flags = --xla_cpu_multi_thread_eigen=false\n"
    )
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=1")
    result = torch_project.run("-v")
    result.assert_outcomes(passed=1)
    assert "clobbered" not in result.stdout.str()
    warm = torch_project.rows()[("test_fn", "scaled_sum")]
    assert warm["cache_state"] == "warm"
    # On an FX-graph hit torch measures no inductor span: null and named, never 0.0.
    assert warm["missing_metrics"] == ["inductor_compile_time_s", "code_gen_time_s"]
    assert "inductor_s" not in warm["overlays"] and warm["compile_s"] > 0
    result.stdout.fnmatch_lines(["cpu:* | torch 2.* | full precision | warm*"])
    assert torch_project.verdicts()[("test_fn", "scaled_sum")] == "unpinned"  # warm: own key


def test_a_guard_failure_recompile_fails_max_compiles_and_a_raising_call_keeps_its_seconds(
    torch_project: JaxProject,
) -> None:
    """Two failing tests, one session (each torch session imports torch and runs inductor):
    a recompile over the budget, named with its reason; a first call that raises."""
    torch_project.tests(
        """
        import pytest, torch

        def total(x):
            return (x.cos() + 1).sum()

        @pytest.mark.compile_budget(max_compiles=1)
        def test_recompiles():
            compiled = torch.compile(total)
            compiled(torch.randn(4))
            compiled(torch.randn(4, 2))  # another rank: a guard fails, dynamo recompiles

        def broken(x):
            return x.view(3)  # 8 elements do not fit: the first call raises

        def test_raises(torch_compile):
            torch_compile(broken, torch.randn(8), transform="broken")
        """
    )
    result = torch_project.run()
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*2 torch.compile frame compiles in this test, over its "
            "compile_budget(max_compiles=1):",
            "  total at *test_models.py:*: 2x",
            "    compile 2: recompile: *rank mismatch*",
        ]
    )
    rows = torch_project.rows()
    assert rows[("test_recompiles", "total#2")]["source"] == "census"
    (ledger,) = [
        ledger
        for ledger in torch_project.report()["ledgers"]
        if ledger["cell"].endswith("::test_recompiles")
    ]
    assert ledger["framework"] == "torch" and ledger["compiles"] == 2
    (recompile,) = ledger["recompiles"]
    assert recompile.startswith("total compile 2: recompile: ") and "rank" in recompile
    assert ledger["compile_s"] + ledger["execute_and_python_s"] == pytest.approx(
        ledger["wall_s"], abs=1e-9
    )

    # The call that raised: its compile kept, failed, with the seconds it spent.
    raised = [row for (name, _), row in rows.items() if name == "test_raises"]
    assert raised, "the failing call's compile was kept"
    assert all(row["outcome"] == "failed" for row in raised)
    assert all(row["ledger"]["wall_s"] > 0 for row in raised)


def test_torch_is_never_imported_by_a_jax_suite(project: JaxProject) -> None:
    project.conftest(cache=False)
    project.tests(
        """
        import sys, jax, pytest
        from jaxmodels import mlp_example_args, mlp_loss

        @pytest.mark.compile_budget
        def test_jax_only(jax_compile):
            jax_compile(jax.jit(mlp_loss), *mlp_example_args(), transform="jit")
            jax.jit(lambda x: x + 1)(1.0)

        def test_after():
            assert "torch" not in sys.modules
        """
    )
    project.run("--compile-census").assert_outcomes(passed=2)


def test_cache_state_follows_the_fx_graph_cache() -> None:
    from pytest_jaxcompile.backends.torch.measure import FrameCompile, classify_frame
    from pytest_jaxcompile.records import CacheState

    def frame(fx_hits: int, fx_misses: int, aot_hits: int, aot_misses: int) -> FrameCompile:
        return FrameCompile(
            name="forward",
            location="m.py:1",
            compile_s=1.0,
            backend_compile_s=0.9,
            inductor_s=0.7,
            code_gen_s=0.5,
            triton_s=0.0,
            fx_cache_hits=fx_hits,
            fx_cache_misses=fx_misses,
            autograd_cache_hits=aot_hits,
            autograd_cache_misses=aot_misses,
            graph_op_count=3,
            recompile_reason=None,
            fail_reason=None,
            start_time_us=0,
        )

    # A module's AOTAutograd lookup may miss while inductor's FX graph is served: warm.
    assert classify_frame(frame(1, 0, 0, 1), True).cache_state is CacheState.WARM
    assert classify_frame(frame(0, 1, 0, 0), True).cache_state is CacheState.COLD
    assert classify_frame(frame(0, 0, 1, 0), True).cache_state is CacheState.WARM
    assert classify_frame(frame(0, 0, 0, 1), True).cache_state is CacheState.COLD
    assert classify_frame(frame(0, 0, 0, 0), True).cache_state is CacheState.UNKNOWN
    assert classify_frame(frame(1, 0, 0, 0), False).cache_state is CacheState.NONE
