"""Causes named: what grew in a module, and its text kept for diffing."""

from __future__ import annotations

import hashlib
import logging
import re

import pytest
from conftest import JaxProject

from pytest_jaxcompile.gate.view.causes import BRIEF_CHARS

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
    project.pin_update().assert_outcomes(passed=2)
    pin_text = next(project.pins_dir.glob("*.toml")).read_text()
    assert '"stablehlo.tanh" = 4' in pin_text  # the histogram is pinned

    monkeypatch.setenv("JAXMODELS_DEPTH", "40")
    artifacts = project.path / "modules"
    result = project.run(
        "-o", "compile_max_ops_growth=0.1", "-o", f"compile_artifacts_dir={artifacts}"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert project.verdicts() == {("test_mlp", "jit"): "GREW", ("test_unchanged", "double"): "ok"}
    verdict = next(v for v in project.report()["verdicts"] if v["transform"] == "jit")
    assert "stablehlo.tanh +36" in verdict["op_changes"]
    assert verdict["op_changes"][0].split()[1].startswith("+")  # largest change first
    # The default summary's line under the row names the operations that grew most, with
    # their counts, largest first, as many as the short line holds (the JSON lists them all).
    (cause,) = [line for line in result.stdout.lines if "module grew: " in line]
    shown = cause.split(" ops (+", 1)[1].split("): ", 1)[1].split("; ", 1)[0].split(", ")
    # and where in the code it grew: the function whose layers the model added
    assert re.search(r"; \+[\d,]+ ops at jaxmodels\.py:\d+ \(mlp_apply\)$", cause.strip()), cause
    assert len(shown) >= 2 and shown == verdict["op_changes"][: len(shown)], cause
    assert cause.strip().startswith("module grew: ") and "limit +10%" in cause
    assert len(cause.strip()) <= BRIEF_CHARS
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
    assert re.search(r'(?m)^key_parts = \{ .*computation = "', pin_text)  # one line
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
    result = project.run("--compile-expect-warm")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert project.verdicts()[("test_mlp", "jit")] == "MISS"
    # The row's short line names the key's part that changed: what a reader fixes.
    result.stdout.fnmatch_lines(
        [
            "      compiled cold, its module unchanged since its warm pin (* s); cache key "
            "changed: the XLA flags part (+--xla_cpu_multi_thread_eigen=false)*"
        ]
    )
    # The MISS row is compared with its warm pin, but listed under its own (cold) key,
    # whose header names the cold key's pin file, never the warm one's.
    (header,) = [line for line in result.stdout.lines if line.startswith("cpu:") and "|" in line]
    assert header.split("  (")[0].endswith("| cold")
    assert "--cold--" in header and "--warm--" not in header, header


def _key_records(module_scale: float) -> tuple[str, list[tuple[object, object]]]:
    """A real module's persistent-cache key, as JAX computes it, and what JAX logs of it
    at DEBUG (each part's hash: what a capture with key parts reads)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax._src import cache_key, compiler, xla_bridge

    lowered = jax.jit(lambda x: jnp.sin(x) * module_scale).lower(jnp.ones(5))
    records: list[tuple[object, object]] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append((record.msg, record.args))

    logger, keep = logging.getLogger(cache_key.__name__), Keep()
    level = logger.level
    logger.addHandler(keep)
    logger.setLevel(logging.DEBUG)
    try:
        key = cache_key.get(
            lowered.compiler_ir("stablehlo"),
            np.array([[jax.devices()[0]]]),
            compiler.get_compile_options(num_replicas=1, num_partitions=1),
            xla_bridge.get_backend(),
        )
    finally:
        logger.removeHandler(keep)
        logger.setLevel(level)
    return key, records


@pytest.mark.integration  # real JAX in this process: a module lowered, never compiled
def test_the_computation_hashed_once_logs_what_jax_logs_and_leaves_the_key_alone() -> None:
    """The key parts' cost on a large module (benchmarks/census_overhead.py): the
    computation's hash is logged without serializing the module again, the same records."""
    from jax._src import cache_key

    from pytest_jaxcompile.backends.jax.keyparts import COMPUTATION_PART, ComputationHashedOnce

    jax_own = [_key_records(scale) for scale in (3.0, 4.0)]
    original, hashing = cache_key._log_cache_key_hash, cache_key._hash_computation
    serialized: list[object] = []
    serialize = cache_key._serialize_ir

    def noted(*args: object) -> bytes:
        serialized.append(args[0])
        return serialize(*args)  # type: ignore[arg-type]

    once = ComputationHashedOnce()
    once.install()
    cache_key._serialize_ir = noted
    try:
        hashed_once = [_key_records(scale) for scale in (3.0, 4.0)]
    finally:
        cache_key._serialize_ir = serialize
        once.uninstall()
    assert cache_key._log_cache_key_hash is original  # JAX's own again
    assert cache_key._hash_computation is hashing
    # each module serialized once, for its key: the first key's check hashed what JAX hashed
    assert len(serialized) == 2
    # A key another thread began before the uninstall still calls the object: JAX's way.
    once(hashlib.sha256(), "jax_lib version", lambda hash_obj: None)
    assert once.checked is True  # the first key showed the two ways equal
    assert hashed_once == jax_own
    assert jax_own[0][0] != jax_own[1][0]  # two modules, two keys
    computation = [
        args for _, records in jax_own for _, args in records if args[0] == COMPUTATION_PART
    ]
    assert len(computation) == 4 and computation[0] != computation[2]


def test_a_misss_short_line_keeps_the_key_part_past_the_line_budget() -> None:
    """Without a cold pin the note runs longer; the key's changed parts are still named."""
    from pytest_jaxcompile.gate.view.causes import BRIEF_CHARS, brief

    changed = "the XLA flags part (+--xla_cpu_multi_thread_eigen=false), the compile_options part"
    note = (
        "expected a persistent-cache hit: the module is unchanged since its warm pin (0.018 s), "
        f"yet it compiled cold; no cold pin to show it against. Its cache key changed: {changed}"
    )
    short = brief(note) or ""
    assert short == (
        "compiled cold, its module unchanged since its warm pin (0.018 s); cache key changed: "
        f"{changed}"
    )
    assert len(short) > BRIEF_CHARS  # kept although over the budget


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
    project.pin_update().assert_outcomes(passed=1)
    project.pin_update().assert_outcomes(passed=1)
    monkeypatch.setenv("FAST", "1")
    result = project.run("-v")
    assert project.rows()[("test_mlp", "jit")]["cache_state"] == "cold"
    result.stdout.fnmatch_lines(["*its cache key changed: the compile_options part*"])


RETRACING_TESTS = """
    import logging
    import os

    import jax
    import jax.numpy as jnp
    import numpy as np
    import pytest
    from jax._src import config

    SHAPES = [int(n) for n in os.environ.get("SHAPES", "3,4,5").split(",")]

    def f(x):
        return jnp.sin(x) * 2

    @pytest.mark.compile_budget(max_compiles=1)
    def test_shapes():
        compiled = jax.jit(f)
        for n in SHAPES:
            compiled(np.ones(n, np.float32)).block_until_ready()

    @pytest.mark.compile_budget(max_compiles=5)
    def test_logs_are_the_users(caplog):
        assert config.explain_cache_misses.value  # JAX explains while the test runs
        logging.getLogger("app").warning("mine")
        compiled = jax.jit(f)
        for n in (3, 4):
            compiled(np.ones(n, np.float32)).block_until_ready()
        assert [record.getMessage() for record in caplog.records] == ["mine"]

    def test_unbudgeted():
        assert not config.explain_cache_misses.value  # never turned on, and restored
        jax.jit(f)(np.ones(3, np.float32)).block_until_ready()
"""


def test_max_compiles_names_each_new_input_shape_and_leaves_the_logs_alone(
    project: JaxProject,
) -> None:
    # The persistent cache is on: its cache-miss records are raised to WARNING while JAX
    # explains, and must still not reach the test's captured logs.
    project.conftest(cache=True, min_compile_time=0.0)
    project.tests(RETRACING_TESTS)
    result = project.run("--compile-census")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*3 backend compiles in this test, over its compile_budget(max_compiles=1)*",
            "*  jit(f): 3x (3 compiled by XLA, 0 from the persistent cache)",
            "*    compile 2: f (test_models.py:*): * f32[[]4[]]*",
            "*    compile 3: f (test_models.py:*): * f32[[]5[]]*",
        ]
    )
    assert "TRACING CACHE MISS" not in result.stdout.str()


def test_a_changed_compile_count_names_why_the_function_compiled_again(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.conftest(cache=False)
    project.tests(RETRACING_TESTS)
    monkeypatch.setenv("SHAPES", "3")
    project.run("--compile-census", "--compile-pin-update", "-k", "test_shapes")
    monkeypatch.setenv("SHAPES", "3,4")
    result = project.run("--compile-census", "-k", "test_shapes")
    result.assert_outcomes(failed=1)  # over max_compiles=1 as well
    result.stdout.fnmatch_lines(
        [
            "compile count changed: test_models.py::test_shapes: 2 backend compile(s), pinned 1",
            "    jit(f) compile 2: f (test_models.py:*): * f32[[]4[]]*",
        ]
    )
    (change,) = project.report()["compile_count_changes"]
    (why,) = change["recompiles"]
    assert why.startswith("jit(f) compile 2: f (test_models.py:") and "f32[4]" in why


CENSUS_TEST = """
    import jax
    import jax.numpy as jnp
    import numpy as np
    import pytest

    @pytest.mark.compile_budget
    def test_step():
        jax.jit(lambda x: jnp.tanh(x) @ x.T)(np.ones((8, 8), np.float32)).block_until_ready()
"""


def test_a_census_miss_names_the_flag_and_a_flag_is_not_a_changed_module(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.conftest(cache=True, min_compile_time=0.0)
    project.tests(CENSUS_TEST)
    project.run("--compile-pin-update").assert_outcomes(passed=1)  # cold
    project.run("--compile-pin-update").assert_outcomes(passed=1)  # warm
    (row,) = project.rows().values()
    assert row["cache_state"] == "warm"
    # The module's own fingerprint, and the key's parts beside it, as for fixture rows.
    assert row["fingerprint"].startswith("computation:")
    assert "XLA flags" in row["cache_key_parts"]
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
    result = project.run("--compile-expect-warm")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert project.verdicts() == {("test_step", "jit(<lambda>)"): "MISS"}
    # The row's short line names the key's part that changed: what a reader fixes.
    result.stdout.fnmatch_lines(
        [
            "      compiled cold, its module unchanged since its warm pin (* s); cache key "
            "changed: the XLA flags part (+--xla_cpu_multi_thread_eigen=false)*"
        ]
    )
