"""Settings that silently stop applying, caught for real: flags, cache, platform, warmth."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import JaxProject
from jax_behaviour import jax_persists_host_callbacks, needs_backend_hooks

from pytest_jaxcompile.backends.jax.measure import is_cache_entry
from pytest_jaxcompile.output.terminal import wrap

SETTINGS_GUARD_DOC = Path(__file__).resolve().parent.parent / "docs" / "settings-guard.md"
START_FLAGS = "--xla_force_host_platform_device_count=1"


def printed(line: str) -> list[str]:
    """`line` as the summary prints it: a long one wrapped over several, at places that move
    with the length of the temporary paths it names."""
    return [text for text, _ in wrap((line, {}))]


MEASURE = """
    import jax
    from jaxmodels import mlp_example_args, mlp_loss

    def measure(jax_compile, name):
        jax_compile(jax.jit(mlp_loss), *mlp_example_args(), transform=name)
"""


WRAPPER = """
import os
# A wrapper library that "configures" XLA at import, discarding the user's flags.
os.environ["XLA_FLAGS"] = "--xla_dump_hlo_as_text"
"""


def _clobbering_suite(project: JaxProject) -> None:
    """test_a starts JAX's backend (its compile); test_b then imports the wrapper."""
    project.pytester.makepyfile(wrapper=WRAPPER)
    project.tests(
        MEASURE
        + """
    def test_a(jax_compile):
        measure(jax_compile, "jit")

    def test_b(jax_compile):
        import wrapper  # noqa: F401
        measure(jax_compile, "jit")

    def test_c(jax_compile):
        measure(jax_compile, "jit")
    """
    )


@needs_backend_hooks()
def test_xla_flags_overwritten_after_the_backend_started_are_reported_not_in_force(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """XLA read XLA_FLAGS when test_a started its backend: the wrapper's later value is
    not what XLA compiles with (the required flag still is), but it changes cache keys."""
    monkeypatch.setenv("XLA_FLAGS", START_FLAGS)
    project.conftest(cache=False)
    _clobbering_suite(project)
    project.pytester.makeini(f"[pytest]\ncompile_required_xla_flags = {START_FLAGS}\n")
    result = project.run()
    result.assert_outcomes(passed=3)  # the required flag is in force: XLA started with it
    assert result.ret == pytest.ExitCode.OK  # the clobber is a warning
    result.stdout.fnmatch_lines(
        printed(
            "warning: settings clobbered: XLA_FLAGS changed after JAX's backend started: XLA "
            f"started with '{START_FLAGS}'; '--xla_dump_hlo_as_text' from "
            "test_models.py::test_b on (changed by test_models.py::test_b (call)) is not in "
            "force: XLA read XLA_FLAGS once, when its backend started, and does not apply "
            "this change, but JAX hashes XLA_FLAGS into every persistent-cache key: compiles "
            "from then on miss the entries cached under the old value and compile cold; flags "
            "removed from the environment: --xla_force_host_platform_device_count (XLA still "
            "compiles with the flags it started with)"
        ),
        consecutive=True,
    )
    rows = project.rows()
    at_start = {
        "flags": {"--xla_force_host_platform_device_count": "1"},
        "captured_at": "backend_start",
    }
    assert rows[("test_a", "jit")]["settings"]["xla_flags"] == at_start["flags"]
    assert rows[("test_b", "jit")]["xla_flags"] == "--xla_dump_hlo_as_text"
    assert rows[("test_b", "jit")]["settings"]["xla_flags_at_backend_start"] == at_start
    (clobber,) = project.report()["clobbers"]
    assert clobber["first_cell"] == "test_models.py::test_b"
    assert clobber["at_backend_start"] == START_FLAGS
    assert clobber["fails"] is False


@needs_backend_hooks()
def test_xla_flags_clobbered_before_the_backend_started_fail_a_required_flag(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wrapper runs before anything starts JAX's backend: XLA reads its flags."""
    monkeypatch.setenv("XLA_FLAGS", START_FLAGS)
    project.conftest(cache=False)
    project.pytester.makepyfile(wrapper=WRAPPER)
    project.tests(
        MEASURE
        + """
    import pytest

    @pytest.fixture
    def wrapper_imported():
        import wrapper  # noqa: F401

    def test_a():
        pass  # nothing has started JAX's backend yet

    def test_b(wrapper_imported, jax_compile):  # the wrapper first, then the backend
        measure(jax_compile, "jit")

    def test_c(jax_compile):
        measure(jax_compile, "jit")
    """
    )
    project.pytester.makeini(f"[pytest]\ncompile_required_xla_flags = {START_FLAGS}\n")
    result = project.run()
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*transform 'jit' compiled without the required XLA flag(s) "
            "--xla_force_host_platform_device_count=1 (JAX's backend started without it: "
            "XLA_FLAGS then was '--xla_dump_hlo_as_text'; required by ini "
            "compile_required_xla_flags)"
        ]
    )
    result.stdout.fnmatch_lines(
        printed(
            "settings clobbered (a required setting): XLA_FLAGS changed during the session: "
            f"'{START_FLAGS}' at process start (before any plugin), "
            "'--xla_dump_hlo_as_text' from test_models.py::test_b on (the first test that saw "
            "it) (changed by test_models.py::test_b (setup)); flags set in the environment were "
            "DISCARDED: --xla_force_host_platform_device_count; the session fails."
        ),
        consecutive=True,
    )


LATE_FLAG = "--xla_dump_hlo_as_text"


@needs_backend_hooks()
def test_a_conftest_that_overwrites_xla_flags_before_the_backend_starts_is_a_clobber(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The background's wrapper, imported in conftest.py: the flag set in the environment
    is discarded before XLA reads it; the baseline is taken before any conftest.py."""
    monkeypatch.setenv("XLA_FLAGS", START_FLAGS)
    project.pytester.makepyfile(wrapper=WRAPPER)
    project.pytester.makeconftest("import wrapper  # noqa: F401\n")
    project.tests(MEASURE + "\n    def test_a(jax_compile):\n        measure(jax_compile, 'jit')\n")
    project.pytester.makeini(f"[pytest]\ncompile_required_xla_flags = {START_FLAGS}\n")
    result = project.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        printed(
            "settings clobbered (a required setting): XLA_FLAGS changed during the session: "
            f"'{START_FLAGS}' at process start (before any plugin), "
            "'--xla_dump_hlo_as_text' from test_models.py::test_a on (the first test that saw "
            "it) (changed by conftest.py); flags set in the environment were DISCARDED: "
            "--xla_force_host_platform_device_count; the session fails."
        ),
        consecutive=True,
    )
    (clobber,) = project.report()["clobbers"]
    assert clobber["discarded"] == ["--xla_force_host_platform_device_count"]
    assert clobber["changed_by"] == "conftest.py"
    assert clobber["since"] == "process start (before any plugin)"
    assert clobber["late"] is False and clobber["fails"] is True


def test_a_wrapper_loaded_as_a_plugin_that_overwrites_xla_flags_is_a_clobber(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The background's wrapper, loaded with ``-p`` (imported before the plugin is): the
    baseline is the environment the process started with, so the flag it discarded is
    named, and so is the wrapper, with no required flag asked for."""
    monkeypatch.setenv("XLA_FLAGS", START_FLAGS)
    project.pytester.makepyfile(wrapper=WRAPPER)
    project.conftest(cache=False)
    project.tests(MEASURE + "\n    def test_a(jax_compile):\n        measure(jax_compile, 'jit')\n")
    result = project.run("-p", "wrapper")
    assert result.ret == pytest.ExitCode.OK  # no required flag: a warning
    result.stdout.fnmatch_lines(
        printed(
            "warning: settings clobbered: XLA_FLAGS changed during the session: "
            f"'{START_FLAGS}' at process start (before any plugin), "
            "'--xla_dump_hlo_as_text' from test_models.py::test_a on (the first test that saw "
            "it) (changed by a plugin loaded before pytest-jaxcompile (-p wrapper)); flags set "
            "in the environment were DISCARDED: --xla_force_host_platform_device_count"
        ),
        consecutive=True,
    )
    (clobber,) = project.report()["clobbers"]
    assert clobber["discarded"] == ["--xla_force_host_platform_device_count"]
    assert clobber["changed_by"] == "a plugin loaded before pytest-jaxcompile (-p wrapper)"
    assert clobber["since"] == "process start (before any plugin)"


LIBRARY = """
import os
# A library that adds a flag of its own at import, keeping the user's.
os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_dump_hlo_as_text"
"""


@needs_backend_hooks()
def test_flags_a_library_adds_before_the_backend_starts_are_in_force_and_no_clobber(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adding flags and discarding none before XLA reads them is said once, not a clobber;
    the required flag is the same before and after: the session passes."""
    monkeypatch.setenv("XLA_FLAGS", START_FLAGS)
    project.pytester.makepyfile(library=LIBRARY)
    project.pytester.makeconftest("import library  # noqa: F401\n")
    project.tests(
        MEASURE
        + """
    def test_a(jax_compile):
        measure(jax_compile, "jit")

    def test_b(jax_compile):
        measure(jax_compile, "jit")
    """
    )
    project.pytester.makeini(f"[pytest]\ncompile_required_xla_flags = {START_FLAGS}\n")
    result = project.run()
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.OK
    note = "XLA flags set during start-up, by conftest.py: --xla_dump_hlo_as_text (in force)"
    result.stdout.fnmatch_lines([note])
    assert result.stdout.str().count("XLA flags set during start-up") == 1
    assert "clobbered" not in result.stdout.str()
    report = project.report()
    assert report["clobbers"] == []
    assert report["settings_notes"] == [note]


@needs_backend_hooks()
def test_flags_set_after_the_backend_started_in_a_session_activated_late_are_not_in_force(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No pins and no option: the plugin starts at collection, after conftest.py started
    JAX's backend and then set a flag XLA never read. The flag is not called in force: the
    plugin cannot know what XLA read, and says so."""
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    project.pytester.makeconftest(
        """
        import os
        import jax.numpy as jnp

        jnp.zeros(1)  # starts JAX's backend: XLA reads XLA_FLAGS now, and only now
        os.environ["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false"
        """
    )
    project.tests(MEASURE + "\n    def test_a(jax_compile):\n        measure(jax_compile, 'jit')\n")
    result = project.pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    output = result.stdout.str()
    assert "jax compile times" in output  # activated at collection
    assert "(in force)" not in output
    # ... nor does it name the row's variant: the row is the default settings' row.
    assert "test_models.py::test_a [jit]" in output and "[jit | " not in output
    result.stdout.fnmatch_lines(
        printed(
            "XLA flags set during start-up, by a conftest.py or plugin, before the session "
            "started: --xla_cpu_multi_thread_eigen=false (in force only if set before JAX's "
            "backend started, which was before the plugin began watching: what XLA read is not "
            "known)"
        ),
        consecutive=True,
    )


REQUIRE_BOTH = f"[pytest]\ncompile_required_xla_flags =\n    {START_FLAGS}\n    {LATE_FLAG}\n"


@needs_backend_hooks()
def test_a_required_flag_set_after_the_backend_started_is_not_in_force(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The environment shows the flag at every compile; XLA never read it. The flag that
    was there when the backend started passes."""
    monkeypatch.setenv("XLA_FLAGS", START_FLAGS)
    project.pytester.makeconftest(
        f"""
        import os
        import jax.numpy as jnp

        jnp.zeros(1)  # starts JAX's backend: XLA reads XLA_FLAGS now, and only now
        os.environ["XLA_FLAGS"] = "{START_FLAGS} {LATE_FLAG}"
        """
    )
    project.tests(MEASURE + "\n    def test_a(jax_compile):\n        measure(jax_compile, 'jit')\n")
    project.pytester.makeini(REQUIRE_BOTH)
    result = project.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            f"*transform 'jit' compiled without the required XLA flag(s) {LATE_FLAG} "
            f"(JAX's backend started without it: XLA_FLAGS then was '{START_FLAGS}'; XLA "
            "reads XLA_FLAGS only when its backend starts, so the later value "
            f"'{START_FLAGS} {LATE_FLAG}' is not in force; required by ini "
            "compile_required_xla_flags)"
        ]
    )
    row = project.rows()[("test_a", "jit")]
    assert row["xla_flags"] == f"{START_FLAGS} {LATE_FLAG}"
    assert row["settings"]["xla_flags_at_backend_start"]["captured_at"] == "backend_start"
    # conftest.py set it after the backend started: a late flag, not in force, named
    (clobber,) = project.report()["clobbers"]
    assert clobber["late"] is True and clobber["fails"] is False
    assert clobber["changed_by"] == "conftest.py"
    assert clobber["at_start"] == START_FLAGS  # what XLA started with


@needs_backend_hooks()
def test_a_backend_started_before_the_plugin_watched_is_judged_on_the_session_start_value(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plugin loaded before pytest-jaxcompile starts JAX's backend: the value at session
    start is the closest known, and the message says so."""
    monkeypatch.setenv("XLA_FLAGS", START_FLAGS)
    project.pytester.makepyfile(
        earlyjax="import jax.numpy as jnp\n\njnp.zeros(1)  # starts JAX's backend at import\n"
    )
    project.tests(MEASURE + "\n    def test_a(jax_compile):\n        measure(jax_compile, 'jit')\n")
    project.pytester.makeini(REQUIRE_BOTH)
    result = project.run("-p", "earlyjax")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            f"*transform 'jit' compiled without the required XLA flag(s) {LATE_FLAG} "
            "(XLA_FLAGS at session start (JAX's backend had already started; the closest "
            f"known value to what XLA read) was '{START_FLAGS}'; required by ini "
            "compile_required_xla_flags)"
        ]
    )
    row = project.rows()[("test_a", "jit")]
    assert row["settings"]["xla_flags_at_backend_start"]["captured_at"] == "session_start"


def test_required_cache_missing_fails_naming_the_setting(project: JaxProject) -> None:
    project.conftest(cache=False)
    project.tests(MEASURE + "\n    def test_a(jax_compile):\n        measure(jax_compile, 'jit')\n")
    project.pytester.makeini("[pytest]\ncompile_require_cache = true\n")
    result = project.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*compiled without a persistent compilation cache (no persistent compilation cache "
            "is configured*; required by ini compile_require_cache)"
        ]
    )


def test_host_callback_module_is_cacheable_exactly_where_jax_persists_it(
    project: JaxProject,
) -> None:
    project.conftest()
    project.tests(
        """
        import jax, jax.numpy as jnp, pytest

        def host_identity(x):
            return jax.pure_callback(lambda a: a, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

        @pytest.mark.compile_budget(cacheable=True)
        def test_callback(jax_compile):
            jax_compile(jax.jit(lambda x: host_identity(x) * 2), jnp.ones(4), transform="cb")

        @pytest.mark.compile_budget(cacheable=True)
        def test_plain(jax_compile):
            jax_compile(jax.jit(lambda x: x * 2), jnp.ones(4), transform="plain")
        """
    )
    result = project.run()
    row = project.rows()[("test_callback", "cb")]
    if jax_persists_host_callbacks():  # jax >= 0.11: the module is written like any other
        result.assert_outcomes(passed=2)
        assert row["cache"]["persisted"] is True
        assert row["cache"]["reason"] is None
        return
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*transform 'cb' can never be served from the persistent cache: the module uses "
            "host callbacks*"
        ]
    )
    assert row["cache"]["reason"] == "host_callbacks"


def test_expected_platform_gpu_on_a_cpu_machine_fails_clearly(project: JaxProject) -> None:
    project.conftest(cache=False)
    project.tests(MEASURE + "\n    def test_a(jax_compile):\n        measure(jax_compile, 'jit')\n")
    project.pytester.makeini("[pytest]\ncompile_expected_platform = gpu\n")
    result = project.run()
    result.assert_outcomes(errors=1)  # the fixture refuses to measure: the test cannot run
    result.stdout.fnmatch_lines(
        [
            "*compile_expected_platform = gpu, but JAX's default backend is cpu: the job "
            "silently fell back*"
        ]
    )
    assert project.report()["records"] == []


def test_bad_expected_platform_is_a_usage_error(project: JaxProject) -> None:
    project.tests("def test_nothing():\n    pass\n")
    project.pytester.makeini("[pytest]\ncompile_expected_platform = gpus\n")
    result = project.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*compile_expected_platform = 'gpus' must be one of cuda, rocm, gpu, tpu, cpu*"]
    )


def test_expect_warm_fails_an_unchanged_cold_module_and_passes_a_changed_one(
    project: JaxProject,
) -> None:
    project.conftest()
    depth_test = (
        MEASURE
        + """
    def test_a(jax_compile):
        jax_compile(jax.jit(mlp_loss), *mlp_example_args(DEPTH), transform="jit")
    """
    )
    project.tests(depth_test.replace("DEPTH", "2"))
    project.run("--compile-pin-update")  # cold
    project.run("--compile-pin-update")  # warm
    assert project.run("--compile-expect-warm").ret == pytest.ExitCode.OK

    for path in project.cache_dir.iterdir():  # the CI cache was not restored
        if is_cache_entry(path.name):
            path.unlink()
    result = project.run("--compile-expect-warm")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert project.verdicts()[("test_a", "jit")] == "MISS"
    result.stdout.fnmatch_lines(
        [
            "  MISS       test_models.py::test_a [[]jit[]]*",
            "      compiled cold, its module unchanged since its warm pin (*)",
            "MISS: 1 row(s) compiled cold although their module is unchanged since its warm pin*",
        ]
    )

    project.tests(depth_test.replace("DEPTH", "3"))  # a changed model recompiles by design
    result = project.run("--compile-expect-warm", "-o", "compile_time_advisory=true", "-v")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*expected recompile: the module changed since its warm pin*"])


CHANGES_THE_CACHE = {
    "dir": "jax.config.update('jax_compilation_cache_dir', {other!r})",
    "disabled": "jax.config.update('jax_enable_compilation_cache', False)",
    "dir unset": "jax.config.update('jax_compilation_cache_dir', None)",
}


@pytest.mark.parametrize("configured", ["conftest", "environment"])
@pytest.mark.parametrize("change", sorted(CHANGES_THE_CACHE))
def test_cache_settings_changed_mid_session_name_the_setting_and_fail_a_required_cache(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch, change: str, configured: str
) -> None:
    """test_b changes the persistent cache under the session (a library that sets its own
    cache dir, or turns the cache off): reported naming the setting and test_b, the first
    test that compiled under it; under compile_require_cache the session fails.

    Configured in conftest.py, JAX is imported before the session starts and its settings
    then are the baseline; configured by environment alone (as in the CI examples), JAX is
    first imported by a test and the session's first compile is the baseline."""
    other = str(project.path / "elsewhere")
    if configured == "conftest":
        project.conftest()
        since = "session start"
    else:
        monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(project.cache_dir))
        project.pytester.makeconftest("")
        since = "the session's first compile (test_models.py::test_a)"
    project.tests(
        MEASURE
        + f"""
    import jax

    def test_a(jax_compile):
        measure(jax_compile, "a")

    def test_b(jax_compile):
        {CHANGES_THE_CACHE[change].format(other=other)}
        measure(jax_compile, "b")

    def test_c(jax_compile):
        measure(jax_compile, "c")
    """
    )
    setting, at_start, later = {
        "dir": ("jax_compilation_cache_dir", str(project.cache_dir), other),
        "disabled": ("jax_enable_compilation_cache", True, False),
        "dir unset": ("jax_compilation_cache_dir", str(project.cache_dir), None),
    }[change]
    described = (
        f"{setting} changed during the session: {at_start!r} at {since}, {later!r} "
        "from test_models.py::test_b on (the first test that saw it)"
    )
    result = project.run()
    assert result.ret == pytest.ExitCode.OK  # without a cache requirement: a warning
    result.stdout.fnmatch_lines(
        printed(f"warning: settings clobbered: {described}"), consecutive=True
    )
    if (change, configured) == ("disabled", "conftest"):
        assert f"warning: settings clobbered: {described}\n" in SETTINGS_GUARD_DOC.read_text()
    (clobber,) = project.report()["clobbers"]
    assert (clobber["setting"], clobber["at_start"], clobber["at_compile"]) == (
        setting,
        at_start,
        later,
    )
    assert (clobber["first_cell"], clobber["fails"]) == ("test_models.py::test_b", False)

    project.pytester.makeini("[pytest]\ncompile_require_cache = true\n")
    result = project.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        printed(f"settings clobbered (a required setting): {described}; the session fails."),
        consecutive=True,
    )
    (clobber,) = project.report()["clobbers"]
    assert (clobber["setting"], clobber["first_cell"], clobber["fails"]) == (
        setting,
        "test_models.py::test_b",
        True,
    )


def test_the_docs_say_plainly_what_an_in_process_pytest_main_cannot_see() -> None:
    """A wrapper imported by the program that then calls pytest.main([...]) changed
    XLA_FLAGS before the plugin existed: not caught, so the settings guard's page says so,
    with the two ways that do catch it."""
    from pathlib import Path

    page = (Path(__file__).parent.parent / "docs" / "settings-guard.md").read_text()
    said = " ".join(
        page.split("**Not seen: a change made before pytest started in the same")[1].split()
    )
    said = said.split("\n\n")[0]
    for words in (
        "runs `pytest.main([...])` in that process",
        "the change is not reported",
        "`python -m pytest ...`",
        "`compile_required_xla_flags`",
    ):
        assert words in said, words
