"""Start-up: a project that never uses the plugin pays for its option table and little else.

The session's machinery (collector, backends, outputs) starts only when the session uses it:
an option given, the pins directory present, a ``compile_budget`` marker or a measuring
fixture collected. The plugin's modules are exempt from pytest's assertion rewriting.
"""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path

import pytest

import pytest_jaxcompile

# What loading the plugin may import of the package: the option table and what it is built
# from, the marker's name and help, the activation. Not the number checks (`_numbers`: no
# value to check) nor the version (`__version__` is imported on first use).
AT_LOAD = {
    "pytest_jaxcompile",
    "pytest_jaxcompile._constants",
    "pytest_jaxcompile.activation",
    "pytest_jaxcompile.options",
    "pytest_jaxcompile.options.pytest_options",
    "pytest_jaxcompile.options.table",
    "pytest_jaxcompile.options.values",
    "pytest_jaxcompile.plugin",
}

PACKAGE_DIR = Path(pytest_jaxcompile.__file__).parent

MODULES_AT_END = """
    import json, sys

    def pytest_unconfigure(config):
        names = sorted(name for name in sys.modules if name.split(".")[0] in
                       ("pytest_jaxcompile", "jax", "torch", "numpy", "psutil"))
        with open("modules.json", "w") as f:
            json.dump(names, f)
"""

PLAIN_TESTS = """
    def test_one():
        assert 1 + 1 == 2

    def test_two():
        assert "a" in "abc"
"""


def modules_at_end(pytester: pytest.Pytester, *args: str) -> set[str]:
    pytester.makeconftest(MODULES_AT_END)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
    result.assert_outcomes(passed=2)
    assert "jax compile times" not in result.stdout.str()
    names: list[str] = json.loads((pytester.path / "modules.json").read_text())
    return set(names)


def test_a_project_that_does_not_use_the_plugin_imports_only_the_option_table(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_plain=PLAIN_TESTS)
    assert modules_at_end(pytester) == AT_LOAD


def test_an_existing_pins_directory_starts_the_session(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain=PLAIN_TESTS)
    pytester.mkdir("pins")
    loaded = modules_at_end(pytester)
    assert "pytest_jaxcompile.session" in loaded
    assert not {"jax", "torch"} & loaded  # nothing measured: no framework imported


def test_a_given_option_starts_the_session(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain=PLAIN_TESTS)
    pytester.makeini("[pytest]\ncompile_tolerance = 0.5\n")
    assert "pytest_jaxcompile.session" in modules_at_end(pytester)


MARKED = """
    import jax
    import jax.numpy as jnp
    import pytest

    @pytest.mark.compile_budget(max_compiles=1)
    def test_two_shapes():
        f = jax.jit(lambda x: x * 2)
        f(jnp.ones(3)).block_until_ready()
        f(jnp.ones(4)).block_until_ready()
"""


@pytest.mark.parametrize("workers", [None, "2"])
def test_a_project_that_uses_only_the_marker_is_gated(
    pytester: pytest.Pytester, workers: str | None
) -> None:
    """No pins directory, no option: the marker seen at collection starts the session (on a
    pytest-xdist controller, which collects nothing: the worker's rows)."""
    pytester.makepyfile(test_marked=MARKED)
    args = ["-p", "no:cacheprovider", *(["-n", workers] if workers else [])]
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*max_compiles=1*"])
    if workers:
        assert "jax compile times" in result.stdout.str()


def test_a_fixture_requested_at_run_time_starts_the_session(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_dynamic="""
        import jax
        import jax.numpy as jnp

        def test_dynamic(request):
            jax_compile = request.getfixturevalue("jax_compile")
            jax_compile(jax.jit(lambda x: x + 1), jnp.ones(3), transform="jit")
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*jax compile times*", "*unpinned*"])


def test_every_module_of_the_plugin_is_exempt_from_assertion_rewriting() -> None:
    """pytest rewrites the asserts of an entry-point plugin's whole package on import, unless
    a module's docstring says PYTEST_DONT_REWRITE (pytest's documented opt-out)."""
    modules = sorted(PACKAGE_DIR.rglob("*.py"))
    assert len(modules) > 50
    missing = [
        str(path.relative_to(PACKAGE_DIR))
        for path in modules
        if "PYTEST_DONT_REWRITE" not in (ast.get_docstring(ast.parse(path.read_text())) or "")
    ]
    assert not missing, "modules without PYTEST_DONT_REWRITE in their docstring: " + ", ".join(
        missing
    )


def test_sessions_modules_are_loaded_unrewritten(pytester: pytest.Pytester) -> None:
    """In a session that uses the plugin, its modules' asserts are Python's own."""
    pytester.makepyfile(
        test_asserts=textwrap.dedent(
            """
            import pytest_jaxcompile.gate.judging as judging

            def test_plain_assert():
                assert not [name for name in dir(judging) if name.startswith("@py")]
            """
        )
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--compile-durations=1")
    result.assert_outcomes(passed=1)


def test_modules_are_found_by_pythons_own_loader_even_when_marked_for_rewriting(
    pytester: pytest.Pytester,
) -> None:
    """pytest marks an installed entry-point plugin's package for rewriting (an editable
    install, as here, is not marked: the conftest marks it), and its hook then compiles each
    module from source at every start where no bytecode is written: the plugin's modules are
    found ahead of that hook, with their .pyc."""
    pytester.makeconftest(
        """
        import pytest

        pytest.register_assert_rewrite("pytest_jaxcompile")
        """
    )
    pytester.makepyfile(
        test_loader=textwrap.dedent(
            """
            import importlib.machinery
            import sys

            def test_loader():
                assert "pytest_jaxcompile.gate.judging" not in sys.modules
                import pytest_jaxcompile.gate.judging as judging

                loader = judging.__spec__.loader
                assert type(loader) is importlib.machinery.SourceFileLoader, type(loader)
            """
        )
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_the_finder_leaves_with_the_session(pytester: pytest.Pytester) -> None:
    """The plugin's finder is on sys.meta_path while the session runs and gone once it has
    ended: a Python finder still there when the interpreter shuts down costs the shutdown
    about 8 M instructions (benchmarks/startup.py), more than the finder saves."""
    pytester.makeconftest(
        """
        import atexit, json, sys

        seen = {}

        def finders():
            return [type(finder).__qualname__ for finder in sys.meta_path]

        def pytest_sessionfinish(session):
            seen["during"] = finders()

        @atexit.register
        def after():
            seen["after"] = finders()
            with open("finders.json", "w") as f:
                json.dump(seen, f)
        """
    )
    pytester.makepyfile(test_plain=PLAIN_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    seen = json.loads((pytester.path / "finders.json").read_text())
    assert "PlainImports" in seen["during"]
    assert "PlainImports" not in seen["after"]


def test_the_public_names_are_typed_in_the_stub_and_each_is_found_at_its_home() -> None:
    """`__init__.pyi` types exactly the names `__all__` lists (re-exported `X as X`), and
    each public name, imported on first use, is the object its stub import names."""
    import importlib

    stub = ast.parse((PACKAGE_DIR / "__init__.pyi").read_text())
    typed = {
        alias.asname: (node.module, alias.name)
        for node in stub.body
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
        if alias.asname == alias.name
    }
    assert set(typed) == set(pytest_jaxcompile.__all__)
    for name, (module, attribute) in typed.items():
        home = getattr(importlib.import_module(module), attribute)
        assert getattr(pytest_jaxcompile, name) is home, name
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        _ = pytest_jaxcompile.missing  # type: ignore[attr-defined]
