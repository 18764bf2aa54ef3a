"""Every cache_state reached for real: real JAX, real persistent cache dirs, real pytest."""

from __future__ import annotations

from conftest import JaxProject
from jax_behaviour import (
    jax_persists_host_callbacks,
    jax_uses_a_cache_enabled_after_the_first_compile,
)

VAG_TEST = """
    import jax
    from jaxmodels import mlp_example_args, mlp_loss

    def test_mlp(jax_compile):
        args = mlp_example_args()
        compiled = jax_compile(jax.value_and_grad(mlp_loss), *args, transform="vag")
        loss, grads = compiled(*args)
        assert loss.shape == ()
"""

TINY_TEST = """
    import jax
    import jax.numpy as jnp

    def test_tiny(jax_compile):
        jax_compile(jax.jit(lambda x: x * 2), jnp.ones(3), transform="double")
"""

CALLBACK_TEST = """
    import jax
    import jax.numpy as jnp

    def host_identity(x):
        return jax.pure_callback(lambda a: a, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    def test_callback(jax_compile):
        jax_compile(jax.jit(lambda x: host_identity(x) * 2), jnp.ones(4), transform="cb")
"""


def test_cold_then_warm_across_two_sessions(project: JaxProject) -> None:
    project.conftest()
    project.tests(VAG_TEST)
    project.run().assert_outcomes(passed=1)
    cold = project.rows()[("test_mlp", "vag")]
    assert cold["cache_state"] == "cold"
    assert cold["cache"]["persisted"] is True
    assert cold["cache"]["entries_after"] > cold["cache"]["entries_before"]
    for phase in ("trace_s", "lower_s", "compile_s"):
        assert cold[phase] > 0

    project.run().assert_outcomes(passed=1)
    warm = project.rows()[("test_mlp", "vag")]
    assert warm["cache_state"] == "warm"
    assert warm["fingerprint"] == cold["fingerprint"]
    assert warm["cache"]["entries_after"] == warm["cache"]["entries_before"]


def test_no_cache_configured_is_none(project: JaxProject) -> None:
    project.conftest(cache=False)
    project.tests(VAG_TEST)
    project.run().assert_outcomes(passed=1)
    row = project.rows()[("test_mlp", "vag")]
    assert row["cache_state"] == "none"
    assert row["cache"]["dir"] is None


def test_in_process_hit_without_fresh_is_memory(project: JaxProject) -> None:
    project.conftest()
    project.tests(
        """
        import jax
        from jaxmodels import mlp_example_args, mlp_loss

        def test_twice(jax_compile):
            lowered = jax.jit(mlp_loss).lower(*mlp_example_args())
            jax_compile(lowered, transform="first")
            lowered.compile()  # kept on the Lowered by every jax (0.4.30 keeps no fresh one)
            jax_compile(lowered, transform="again", fresh=False)
        """
    )
    project.run().assert_outcomes(passed=1)
    rows = project.rows()
    assert rows[("test_twice", "first")]["cache_state"] == "cold"
    assert rows[("test_twice", "again")]["cache_state"] == "memory"
    assert project.verdicts()[("test_twice", "again")] == "not judged"


def test_fresh_measures_a_lowered_that_was_already_compiled(project: JaxProject) -> None:
    project.conftest(cache=False)
    project.tests(
        """
        import jax
        from jaxmodels import mlp_example_args, mlp_loss

        def test_precompiled(jax_compile):
            lowered = jax.jit(mlp_loss).lower(*mlp_example_args())
            lowered.compile()
            jax_compile(lowered, transform="again")
        """
    )
    project.run().assert_outcomes(passed=1)
    assert project.rows()[("test_precompiled", "again")]["cache_state"] == "none"


def test_host_callback_in_a_populated_cache_follows_what_jax_persists(
    project: JaxProject,
) -> None:
    project.conftest()
    project.tests(VAG_TEST, name="test_a_populate")
    project.tests(CALLBACK_TEST, name="test_b_callback")
    persists = jax_persists_host_callbacks()  # jax >= 0.11 does; earlier ones never do
    for session in range(2):
        project.run().assert_outcomes(passed=2)
        row = project.rows()[("test_callback", "cb")]
        assert row["cache"]["entries_before"] > 0  # a populated cache either way
        if not persists:  # every session pays the full compile, and says why
            assert row["cache_state"] == "cold"
            assert row["cache"]["persisted"] is False
            assert row["cache"]["reason"] == "host_callbacks"
            assert "host callbacks" in row["cache"]["reason_detail"]
            assert "before 0.11" in row["cache"]["reason_detail"]
        elif session == 0:
            assert row["cache_state"] == "cold"
            assert row["cache"]["persisted"] is True
            assert row["cache"]["reason"] is None
        else:
            assert row["cache_state"] == "warm"


def test_compile_under_the_default_threshold_is_cold_with_both_figures(
    project: JaxProject,
) -> None:
    project.conftest(min_compile_time=None)  # JAX's default: 1 s
    # A one-op module compiles in milliseconds: even a busy runner keeps it under 1 s.
    project.tests(TINY_TEST)
    for _ in range(2):
        project.run().assert_outcomes(passed=1)
        row = project.rows()[("test_tiny", "double")]
        assert row["cache_state"] == "cold"
        assert row["cache"]["persisted"] is False
        assert row["cache"]["reason"] == "below_min_compile_time"
        detail = row["cache"]["reason_detail"]
        assert "jax_persistent_cache_min_compile_time_secs = 1 s" in detail
        assert detail.startswith("compiled in ")


def test_cache_enabled_after_the_first_compile_is_unknown_not_guessed(
    project: JaxProject,
) -> None:
    # jax >= 0.4.31 decides at the first compile of the process whether the persistent cache
    # is in use; enabling it later leaves it unused while the configuration says "configured".
    project.pytester.makeconftest(
        f"""
        import jax, jax.numpy as jnp

        def pytest_configure(config):
            jax.config.update("jax_enable_compilation_cache", False)
            jnp.ones(3).block_until_ready()
            jax.config.update("jax_enable_compilation_cache", True)
            jax.config.update("jax_compilation_cache_dir", {str(project.cache_dir)!r})
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        """
    )
    project.tests(VAG_TEST)
    result = project.run("-v")
    result.assert_outcomes(passed=1)
    row = project.rows()[("test_mlp", "vag")]
    if jax_uses_a_cache_enabled_after_the_first_compile():  # jax 0.4.30: used, so cold
        assert row["cache_state"] == "cold"
        assert row["cache"]["persisted"] is True
        return
    assert row["cache_state"] == "unknown"
    assert row["cache"]["reason"] == "cache_not_consulted"
    assert project.verdicts()[("test_mlp", "vag")] == "not judged"
    result.stdout.fnmatch_lines(["*not judged*test_mlp*[[]vag[]]*[[]unknown[]]*"])
