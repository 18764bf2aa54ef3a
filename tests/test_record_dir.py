"""--compile-record-dir end to end, and `check` against the plugin on the same rows."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import JaxProject
from corpus_helpers import cli

THREE_TRANSFORMS = """
    import jax
    import jax.numpy as jnp

    def test_three(jax_compile):
        x = jnp.ones(16)
        jax_compile(jax.grad(lambda v: jnp.tanh(v).sum()), x, transform="slower")
        jax_compile(jax.jit(lambda v: v * 2), x, transform="faster")
        jax_compile(jax.jit(lambda v: v + 1), x, transform="bumped")
"""


def _records(directory: Path) -> list[dict[str, object]]:
    return [
        json.loads(line)
        for path in sorted(directory.glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]


def _edit_pins(pins_dir: Path) -> None:
    """slower: pinned far too fast; faster: far too slow; bumped: only under an older jax."""
    (path,) = pins_dir.glob("*.toml")
    text = path.read_text()
    text = re.sub(r"(\.slower\]\ncompile_s = )[0-9.e-]+", r"\g<1>0.00001", text)
    text = re.sub(r"(\.faster\]\ncompile_s = )[0-9.e-]+", r"\g<1>1000.0", text)
    text = re.sub(r"(?m)^(trace_s|lower_s) = .*\n", "", text)  # times under test: compile
    # The pin's table and its subtables ([pins."...".bumped.ops], ...), each with its lines.
    tables = re.findall(r'\[pins\."[^"]+"\.bumped(?:\.[a-z_]+)?\]\n(?:[^\[\n].*\n|\n)*', text)
    assert tables
    for table in tables:
        text = text.replace(table, "")
    path.write_text(text)
    version = re.search(r'jax_version = "([^"]+)"', text)
    assert version is not None
    old = text.replace(f'jax_version = "{version.group(1)}"', 'jax_version = "0.0.1"')
    old = old[: old.index("[pins")] + "".join(tables)
    (pins_dir / "older-jax.toml").write_text(old)


def test_check_gives_the_plugins_verdicts_on_the_same_rows(project: JaxProject) -> None:
    project.conftest(cache=False)  # rows are `none` in every session: one key throughout
    project.tests(THREE_TRANSFORMS)
    result = project.run("--compile-pin-update", "--compile-record-dir=pinning")
    assert result.ret == pytest.ExitCode.OK
    (first,) = (project.path / "pinning").glob("*.jsonl")
    result.stdout.fnmatch_lines([f"compile records written: pinning/{first.name}"])
    first_bytes = first.read_bytes()
    _edit_pins(project.pins_dir)

    # Strict on both sides: on a loaded machine rows would otherwise be `noisy` (the same
    # verdict from both, but this test wants the time verdicts).
    result = project.run("--compile-record-dir=records", "--compile-floor=0", "--compile-strict")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    plugin = {(v["cell"], v["transform"]): v for v in project.report()["verdicts"]}
    assert {k[1]: v["status"] for k, v in plugin.items()} == {
        "slower": "DRIFT",
        "faster": "improved",
        "bumped": "unpinned",
    }
    records = _records(project.path / "records")
    assert records == project.report()["records"]  # the same rows, as JSON lines

    checked = cli(
        project.path, "check", "records", "--floor", "0", "--strict", "--json", "check.json"
    )
    assert checked.returncode == 1, checked.stderr
    offline = {
        (v["cell"], v["transform"]): v
        for v in json.loads((project.path / "check.json").read_text())["verdicts"]
    }
    assert offline.keys() == plugin.keys()
    for row_id, verdict in plugin.items():
        for name in (
            "status",
            "compile_s",
            "pin_compile_s",
            "ratio",
            "tolerance",
            "note",
            "key",
            "pin_file",
            "metric",
            "compile_cpu_s",
            "pin_compile_cpu_s",
        ):
            assert offline[row_id][name] == verdict[name], (row_id, name)
    assert [
        (v["nearest"] or {}).get("relation") == "upgrade" for k, v in sorted(offline.items())
    ] == [
        True,
        False,
        False,  # bumped, faster, slower
    ]
    assert "jax upgrade 0.0.1 -> " in checked.stdout  # the bumped row, in one block

    # History is never rewritten: the first session's file is as it was.
    assert list((project.path / "pinning").iterdir()) == [first]
    assert first.read_bytes() == first_bytes


def test_with_xdist_only_the_controller_writes_one_file_with_every_row(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.conftest(cache=False)
    project.pytester.makeini("[pytest]\ncompile_record_dir = results/compile\n")
    project.tests(THREE_TRANSFORMS, name="test_one")
    project.tests(THREE_TRANSFORMS.replace("test_three", "test_other"), name="test_two")
    sub = project.path / "sub"
    sub.mkdir()
    monkeypatch.chdir(sub)  # started elsewhere: the ini path is still from the rootdir
    result = project.pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", str(project.path)
    )
    result.assert_outcomes(passed=2)
    assert not (sub / "results").exists()
    files = list((project.path / "results" / "compile").iterdir())
    assert len(files) == 1 and files[0].suffix == ".jsonl"
    rows = _records(project.path / "results" / "compile")
    assert sorted((str(r["cell"]).split("::")[-1], r["transform"]) for r in rows) == sorted(
        (test, transform)
        for test in ("test_three", "test_other")
        for transform in ("slower", "faster", "bumped")
    )


def test_no_measured_rows_write_no_file(project: JaxProject) -> None:
    project.tests("def test_plain():\n    assert True\n")
    result = project.run("--compile-record-dir=records")
    assert result.ret == pytest.ExitCode.OK
    assert not (project.path / "records").exists()


def test_a_record_dir_that_cannot_be_written_fails_the_session_with_a_message(
    project: JaxProject,
) -> None:
    project.conftest(cache=False)
    project.tests(THREE_TRANSFORMS)
    (project.path / "taken").write_text("a file, not a directory\n")
    result = project.run("--compile-record-dir=taken")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["compile records NOT written: *taken*; the session fails."])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert (project.path / "taken").read_text() == "a file, not a directory\n"


TWO_JITS = """
    import jax
    import jax.numpy as jnp

    def test_two(jax_compile):
        x = jnp.ones(16)
        jax_compile(jax.jit(lambda v: jnp.tanh(v).sum()), x, transform="tanh")
        jax_compile(jax.jit(lambda v: v * 3), x, transform="scale")
"""


def test_check_judges_a_history_as_the_plugin_would_its_last_session(
    project: JaxProject,
) -> None:
    """Pin cold, pin warm, three warm reruns: the first session's cold rows are older than
    the warm pins and a newer warm row measured their cells, so neither `check` (with or
    without --expect-warm) nor the dashboard raises anything about them."""
    project.conftest()  # a real persistent cache, empty at first
    project.tests(TWO_JITS)
    sessions = [("--compile-pin-update",), ("--compile-pin-update",), (), (), ()]
    for extra in sessions:
        result = project.run("--compile-record-dir=records", "--compile-floor=10", *extra)
        assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    states = [record["cache_state"] for record in _records(project.path / "records")]
    assert states == ["cold"] * 2 + ["warm"] * 8  # the history the rule is about
    assert len(project.pin_files()) == 2  # a cold pin file and a warm one

    checked = cli(project.path, "check", "records", "--floor", "10")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "compiled cold although" not in checked.stdout
    assert "warning" not in checked.stdout
    assert "2 cold row(s) of cells a newer warm row measured" in checked.stdout
    assert "compile rows: 2 " in checked.stdout  # the two warm rows only

    expecting = cli(project.path, "check", "records", "--floor", "10", "--expect-warm")
    assert expecting.returncode == 0, expecting.stdout + expecting.stderr
    assert "MISS" not in expecting.stdout

    page = cli(project.path, "report", "records", "--floor", "10", "--html", "page.html")
    assert page.returncode == 0, page.stderr
    html = (project.path / "page.html").read_text()
    # Nothing changed, nothing needs attention, and every pin was measured (no stale pins).
    assert "No row of the history was DRIFT, MISS or GREW against the pins." in html
    assert '<p class="all-clear">Nothing: no failing row' in html
    assert 'id="stale-pins"' not in html
