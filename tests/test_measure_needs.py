"""A measured row reads of its module and executable only what the session needs.

A row whose module JAX's cache key shows is a pinned one takes that pin's fingerprint, op
count and ops, its text never printed; the executable's memory and cost analyses are read
only where a limit judges them, a pin update keeps them or an output shows them
(docs/benchmarks.md, "Measuring overhead"). A real session: the project's conftest notes
each ``Lowered.as_text`` and ``Compiled.memory_analysis`` call JAX makes, and calls JAX's own.
"""

from __future__ import annotations

import json

import pytest
from conftest import DEEPENING_MODEL, PROFILE_NEVER, JaxProject

# The persistent cache, and a note of JAX's calls the plugin makes, written at the end.
NOTING_CONFTEST = """
import json
import jax

CALLS = {{"as_text": 0, "memory_analysis": 0}}


def _noted(cls, name):
    original = getattr(cls, name)

    def noted(self, *args, **kwargs):
        CALLS[name] += 1
        return original(self, *args, **kwargs)

    setattr(cls, name, noted)


_noted(jax.stages.Lowered, "as_text")
_noted(jax.stages.Compiled, "memory_analysis")


def pytest_configure(config):
    jax.config.update("jax_compilation_cache_dir", {cache!r})
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)


def pytest_unconfigure(config):
    with open("calls.json", "w") as out:
        json.dump(CALLS, out)
"""


# The model with a test's limit on compiled memory (and no seconds asked for otherwise).
BUDGETED_MODEL = DEEPENING_MODEL.replace(
    "    def test_model",
    "    @pytest.mark.compile_budget(max_memory_growth=0.5)\n    def test_model",
).replace("import os", "import os\n    import pytest")


def _session(project: JaxProject, *args: str) -> tuple[pytest.RunResult, dict[str, int]]:
    result = project.pytester.runpytest_subprocess("-p", "no:cacheprovider", *PROFILE_NEVER, *args)
    calls: dict[str, int] = json.loads((project.path / "calls.json").read_text())
    return result, calls


def test_a_pinned_module_is_not_printed_and_analyses_are_read_only_where_needed(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.pytester.makeconftest(NOTING_CONFTEST.format(cache=str(project.cache_dir)))
    project.tests(DEEPENING_MODEL)
    project.run("--compile-pin-update").assert_outcomes(passed=1)  # cold: pins and fills
    pinned, calls = _session(project, "--compile-pin-update")  # warm pins, analyses read
    pinned.assert_outcomes(passed=1)
    assert calls["memory_analysis"] == 1, calls
    (pin_file,) = [p for p in project.pins_dir.glob("*.toml") if "--warm--" in p.name]
    pin_text = pin_file.read_text()

    # The gate as CI runs it: the module is the pinned one, nothing is printed or analysed.
    gate, calls = _session(project)
    gate.assert_outcomes(passed=1)
    assert calls == {"as_text": 0, "memory_analysis": 0}, calls
    assert "1 ok" in gate.stdout.str()

    # With a report the rows carry the pin's module figures, and the analyses are read.
    report = project.path / "report.json"
    reported, calls = _session(project, "--compile-report", str(report))
    reported.assert_outcomes(passed=1)
    assert calls == {"as_text": 0, "memory_analysis": 1}, calls
    (row,) = json.loads(report.read_text())["records"]
    assert f'fingerprint = "{row["fingerprint"]}"' in pin_text
    assert f"op_count = {row['op_count']}" in pin_text
    assert row["op_histogram"]["stablehlo.tanh"] == 4
    assert row["compiled_temp_bytes"] is not None

    # A test's compile_budget limit on memory asks for the analyses without any output.
    project.tests(BUDGETED_MODEL)
    budgeted, calls = _session(project)
    budgeted.assert_outcomes(passed=1)
    assert calls == {"as_text": 0, "memory_analysis": 1}, calls

    # A changed module is printed and read: it is not the pinned one.
    project.tests(DEEPENING_MODEL)
    monkeypatch.setenv("MODEL_DEPTH", "5")
    _, calls = _session(project, "--compile-report", str(report))
    assert calls["as_text"] == 1, calls
    (row,) = json.loads(report.read_text())["records"]
    assert f'fingerprint = "{row["fingerprint"]}"' not in pin_text
    assert row["op_histogram"]["stablehlo.tanh"] == 5
    assert row["cache_state"] == "cold"  # a module the cache has not seen
