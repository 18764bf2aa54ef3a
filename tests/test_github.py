"""GitHub Actions output: step summary and annotations, as logic and through pytest."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import JaxProject, edit_pins, set_pins
from records_factory import HARDWARE, make_record

from pytest_jaxcompile.gate.judging import judge_all
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.outcome import Outcome as SessionOutcome
from pytest_jaxcompile.gate.pins import PinStore
from pytest_jaxcompile.gate.stale import StalePin
from pytest_jaxcompile.output.github import (
    GitHubTargets,
    annotation_commands,
    append_step_summary,
    escape_data,
    escape_property,
    record_path_resolver,
    step_summary,
    workflow_command,
    workspace_path,
)

# --- logic ----------------------------------------------------------------------------


def test_escaping_follows_the_toolkit_rules() -> None:
    assert escape_data("50% of a\r\nb") == "50%25 of a%0D%0Ab"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    assert escape_data("a:b,c") == "a:b,c"  # only properties escape : and ,
    command = workflow_command(
        "error", "slower: 2x\nre-pin", {"file": "t,1.py", "line": 3, "title": "x: y", "col": None}
    )
    assert command == "::error file=t%2C1.py,line=3,title=x%3A y::slower: 2x%0Are-pin"
    assert workflow_command("warning", "m", {}) == "::warning::m"


def test_targets_come_from_the_environment_and_off_wins() -> None:
    env = {"GITHUB_STEP_SUMMARY": "/tmp/s.md", "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": "/w"}
    targets = GitHubTargets.from_environment(env)
    assert targets == GitHubTargets(Path("/tmp/s.md"), True, Path("/w"))
    assert GitHubTargets.from_environment(env, "off") == GitHubTargets(None, False, None)
    assert GitHubTargets.from_environment({}) == GitHubTargets(None, False, None)
    assert not GitHubTargets.from_environment({"GITHUB_ACTIONS": "false"}).annotations


def test_paths_are_relative_to_the_workspace(tmp_path: Path) -> None:
    root = tmp_path / "repo" / "pkg"
    assert workspace_path(root / "tests/t.py", tmp_path / "repo", root) == "pkg/tests/t.py"
    assert workspace_path(root / "tests/t.py", None, root) == "tests/t.py"
    assert workspace_path(root / "tests/t.py", tmp_path / "elsewhere", root) == "tests/t.py"
    path_of = record_path_resolver(root, tmp_path / "repo")
    assert path_of(make_record(location=("tests/t.py", 7))) == "pkg/tests/t.py"
    assert path_of(make_record(location=None)) is None


def _outcome(
    tmp_path: Path, fail_on_improvement: bool = False, hardware: str = HARDWARE
) -> SessionOutcome:
    store = PinStore.load(tmp_path / "pins")
    drift = make_record(
        cell="tests/t.py::test_drift", location=("tests/t.py", 10), hardware=hardware
    )
    improved = make_record(
        cell="tests/t.py::test_fast|x", location=("tests/t.py", 20), hardware=hardware
    )
    ok = make_record(cell="tests/t.py::test_ok", hardware=hardware)
    warm = make_record(cell="tests/t.py::test_warm", cache_state="warm", hardware=hardware)
    store.update([drift, improved, ok, warm])
    key = drift.key
    store = PinStore.load(tmp_path / "pins")
    measured = [
        make_record(cell=drift.cell, location=drift.location, compile_s=5.0, hardware=hardware),
        make_record(
            cell=improved.cell, location=improved.location, compile_s=0.1, hardware=hardware
        ),
        ok,
        warm,
        make_record(cell="tests/t.py::test_new", location=("tests/t.py", 30), hardware=hardware),
    ]
    outcome = SessionOutcome(
        rootdir=tmp_path,
        pins_dir=store.directory,
        thresholds=Thresholds(fail_on_improvement=fail_on_improvement),
        pin_update=False,
    )
    outcome.verdicts = judge_all(measured, store, outcome.thresholds)
    outcome.stale = [StalePin(key, "tests/t.py::test_ok", "vag", store.path_for(key))]
    outcome.failed = True
    return outcome


def test_an_advisory_drift_and_a_pin_update_of_budget_rows_say_what_they_do(
    tmp_path: Path,
) -> None:
    from pytest_jaxcompile.gate.status import Status, Verdict
    from pytest_jaxcompile.gate.view.meaning import BUDGET_NOT_PINNED

    advisory = _outcome(tmp_path)
    advisory.thresholds = Thresholds(time_advisory=True)
    store = PinStore.load(tmp_path / "pins")
    advisory.verdicts = judge_all([v.record for v in advisory.verdicts], store, advisory.thresholds)
    advisory.failed = False
    assert "compiled slower than their pin by more than the tolerance" in step_summary(advisory)
    assert "; reported only (time advisory)." in step_summary(advisory)

    # A pin update whose key holds budget rows only: nothing pinned there, and said so.
    budget = SessionOutcome(
        rootdir=tmp_path, pins_dir=tmp_path / "pins", thresholds=Thresholds(), pin_update=True
    )
    budget.verdicts = [Verdict(make_record(budget_only=True), Status.BUDGET)]
    lines = step_summary(budget).splitlines()
    assert f"1 {BUDGET_NOT_PINNED}." in lines
    assert not [line for line in lines if line.endswith("row(s) pinned.")]


ACCEPT = (
    "If the change is intended, add the label `compile-change-accepted` to the pull request: "
    "the run then passes, and the merge makes the change the baseline for gha-ubuntu-latest."
)
REPIN_WORKFLOW = (
    "If the change is intended, re-pin on gha-ubuntu-latest with the re-pin workflow "
    "(Actions > jax compile re-pin > Run workflow) and commit its pins: a laptop's pins do "
    "not judge this runner class."
)


@pytest.mark.parametrize(
    ("label", "sentence"), [("compile-change-accepted", ACCEPT), (None, REPIN_WORKFLOW)]
)
def test_in_github_actions_every_output_names_the_ci_way_back_never_a_laptop_command(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    label: str | None,
    sentence: str,
) -> None:
    """Under GITHUB_ACTIONS a command run on a laptop pins the laptop: the annotations, the
    step summary, the comment, the terminal and the JSON report give the CI's way, one
    sentence, and `merge` renders it again from the reports."""
    from pytest_jaxcompile.cli import main
    from pytest_jaxcompile.output.github import pr_comment
    from pytest_jaxcompile.output.json_report import build_report, load_report, write_report
    from pytest_jaxcompile.output.terminal import summary_lines

    outcome = _outcome(tmp_path, hardware="gha-ubuntu-latest")
    outcome.github_actions, outcome.accept_label = True, label
    outcome.repin_environment = ("JAXCOMPILE_HARDWARE=gha-ubuntu-latest",)
    annotations = annotation_commands(outcome, record_path_resolver(tmp_path, None), None)
    (drift,) = [line for line in annotations if line.startswith("::error")]
    terminal = [text for text, _ in summary_lines(outcome, verbose=True)]
    report = build_report(outcome, [v.record for v in outcome.verdicts], [], "0.0.0")
    markdown = sentence.replace(">", "&gt;")  # as Markdown writes plain text
    outputs = {
        "annotations": escape_data(sentence) in drift,
        "step summary": markdown in step_summary(outcome),
        "comment": markdown in pr_comment(outcome),
        "terminal": sentence in terminal,
        "report": {"kind": "status", "status": "DRIFT", "advice": sentence, "command": None}
        in report["way_back"],
    }
    assert outputs == dict.fromkeys(outputs, True)
    every = "\n".join(
        [*annotations, step_summary(outcome), pr_comment(outcome), *terminal, str(report)]
    )
    assert "--compile-pin-update" not in every

    # merge, from the report: the same sentence, in its terminal and its annotations.
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "report.json"
    write_report(path, report)
    loaded = load_report(path)
    assert (loaded.github_actions, loaded.accept_label) == (True, label)
    assert main(["merge", str(path)]) == 1
    merged = capsys.readouterr().out
    assert sentence in merged and "--compile-pin-update" not in merged
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    assert main(["merge", str(path)]) == 1
    assert escape_data(sentence) in capsys.readouterr().out


def test_annotations_point_at_the_test_function_and_the_stale_pin(tmp_path: Path) -> None:
    outcome = _outcome(tmp_path)
    lines = annotation_commands(outcome, record_path_resolver(tmp_path, tmp_path), tmp_path)
    assert [line.split(" ", 1)[0] for line in lines] == ["::error", "::warning", "::warning"]
    drift, improved, stale = lines
    assert drift.startswith(
        "::error file=tests/t.py,line=10,title=jax compile DRIFT%3A test_drift [vag]::"
        "tests/t.py::test_drift [vag] compiled in 5.000 s, pin 1.000 s (5.00x, tolerance 75%25)"
    )
    assert (
        "%0AIf the change is intended, re-pin and commit the pin files: pytest "
        "--compile-pin-update tests/t.py::test_drift" in drift
    )
    assert improved.startswith("::warning file=tests/t.py,line=20,")
    pin_file = outcome.stale[0].pin_file
    line = pin_file.read_text().splitlines().index('[pins."tests/t.py::test_ok".vag]') + 1
    assert stale.startswith(
        f"::warning file=pins/{pin_file.name},line={line},title=stale jax compile pin%3A "
    )
    # Improvements that fail the gate are errors.
    failing = annotation_commands(
        _outcome(tmp_path, fail_on_improvement=True), record_path_resolver(tmp_path, None), None
    )
    assert [line.split(" ", 1)[0] for line in failing][:2] == ["::error", "::error"]


def test_step_summary_puts_the_verdict_first_and_groups_by_key(tmp_path: Path) -> None:
    text = step_summary(_outcome(tmp_path))
    lines = text.splitlines()
    assert lines[0] == "## jax compile times: FAIL (1 DRIFT)"
    # What the session spent compiling comes first, as in the terminal's section.
    assert lines[2].startswith("Compile time: ") and "compile row(s): 4 cold, 1 warm." in lines[2]
    assert lines[4] == "Compile rows: 1 DRIFT, 1 improved, 1 unpinned, 2 ok."
    # The re-pin command comes before the tables.
    command = lines.index("pytest --compile-pin-update tests/t.py::test_drift")
    cold = lines.index("### cpu:cpu @ Test CPU x2 | jax 0.10.2 | full precision | cold")
    warm = lines.index("### cpu:cpu @ Test CPU x2 | jax 0.10.2 | full precision | warm")
    assert command < cold < warm  # the group with DRIFT first
    rows = [line for line in lines[cold:warm] if line.startswith("| ")]
    assert rows[1].startswith("| **DRIFT** | `tests/t.py::test_drift` | vag | 5.000 s | 1.000 s")
    assert rows[2].startswith("| improved | `tests/t.py::test_fast\\|x` | vag |")  # | escaped
    # Unpinned rows are folded (a count per file), their table in a details block.
    assert "<details><summary>1 unpinned row(s): tests/t.py 1</summary>" in (lines[cold:warm])
    assert rows[4].startswith("| unpinned | `tests/t.py::test_new` |")
    assert "<details><summary>1 row(s) within tolerance</summary>" in lines[cold:warm]
    assert "### Stale pins (1)" in lines
    assert text.endswith("\n\n")


def test_the_step_summary_is_appended_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    path.write_text("earlier step\n")
    append_step_summary(path, "## one\n\n")
    append_step_summary(path, "## two\n\n")
    assert path.read_text() == "earlier step\n## one\n\n## two\n\n"


# --- through pytest -------------------------------------------------------------------

SUITE = """
    import jax
    from jaxmodels import mlp_example_args, mlp_loss

    def test_drift(jax_compile):
        jax_compile(jax.jit(mlp_loss), *mlp_example_args(), transform="jit")

    def test_improved(jax_compile):
        jax_compile(jax.jit(mlp_loss), *mlp_example_args(), transform="jit")

    def test_stale(jax_compile):
        jax_compile(jax.jit(mlp_loss), *mlp_example_args(), transform="jit")
        {gone}
"""


def _github_project(project: JaxProject) -> Path:
    project.conftest(cache=False)
    project.tests(
        SUITE.replace(
            "{gone}", 'jax_compile(jax.grad(mlp_loss), *mlp_example_args(), transform="gone")'
        )
    )
    project.pin_update().assert_outcomes(passed=3)
    set_pins(project.pins_dir, {"test_drift": 0.000001, "test_improved": 1000.0}, 1000.0)
    project.tests(SUITE.replace("{gone}", ""))
    summary = project.path / "step-summary.md"
    summary.write_text("# earlier step\n")
    return summary


def _def_line(project: JaxProject, name: str) -> int:
    lines = (project.path / "test_models.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.startswith(f"def {name}("))


def test_summary_and_annotations_when_the_variables_are_set(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = _github_project(project)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(project.path.parent))
    result = project.run("-n", "2", "--compile-floor", "0")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    folder = project.path.name
    result.stdout.fnmatch_lines(
        [
            f"::error file={folder}/test_models.py,line={_def_line(project, 'test_drift')},"
            "title=jax compile DRIFT%3A test_drift [[]jit[]]::test_models.py::test_drift [[]jit[]] "
            "compiled in *",
            f"::warning file={folder}/test_models.py,line={_def_line(project, 'test_improved')},*",
            f"::warning file={folder}/pins/*.toml,line=*,title=stale jax compile pin%3A "
            "test_stale [[]gone[]]::*",
        ]
    )
    text = summary.read_text()
    assert text.startswith("# earlier step\n## jax compile times: FAIL (1 DRIFT)\n")
    assert text.count("## jax compile times") == 1  # the main process only, not the workers
    # The compile spend as the terminal's first line says it, the workers' rows merged.
    spend = next(line for line in result.stdout.lines if line.startswith("compile time: "))
    assert f"\n\nC{spend[1:]}.\n\n" in text
    assert "| **DRIFT** | `test_models.py::test_drift` | jit |" in text
    # The way back is the CI's (this runner class's re-pin workflow), never a command that
    # would pin the laptop it is run on.
    assert "If the change is intended, re-pin on cpu:" in text
    assert "with the re-pin workflow (Actions &gt; jax compile re-pin &gt; Run workflow)" in text
    assert "--compile-pin-update" not in text + result.stdout.str()
    assert "| `test_models.py::test_stale` | gone |" in text

    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(project.path))  # a directory: cannot append
    result = project.run("--compile-floor", "0")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the DRIFT row, not an internal error
    result.stdout.fnmatch_lines(["GitHub step summary not written: *", "::error file=*"])


def test_nothing_for_github_when_unset_or_off(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = _github_project(project)
    result = project.run("--compile-floor", "0")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "::error" not in result.stdout.str() and "::warning" not in result.stdout.str()
    assert summary.read_text() == "# earlier step\n"

    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    result = project.run("--compile-floor", "0", "-o", "compile_github=off")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "::error" not in result.stdout.str()
    assert summary.read_text() == "# earlier step\n"


def test_github_mode_from_the_command_line_beats_the_ini_file(
    pytester: pytest.Pytester,
) -> None:
    from pytest_jaxcompile.resolved import Settings

    assert Settings.from_config(pytester.parseconfig()).github == "auto"
    pytester.makeini("[pytest]\ncompile_github = off\n")
    assert Settings.from_config(pytester.parseconfig()).github == "off"
    assert Settings.from_config(pytester.parseconfig("-o", "compile_github=auto")).github == "auto"


def test_bad_github_mode_in_the_ini_file_is_a_usage_error(project: JaxProject) -> None:
    project.pytester.makeini("[pytest]\ncompile_github = sometimes\n")
    project.tests("def test_nothing():\n    pass\n")
    result = project.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*compile_github = 'sometimes' must be one of auto, off*"])


def test_a_huge_step_summary_stays_under_githubs_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_jaxcompile.output import github

    monkeypatch.setattr(github, "SUMMARY_BUDGET", 20_000)  # instead of building 1 MB
    outcome = _outcome(tmp_path)
    ok = [v for v in outcome.verdicts if v.status.value == "ok"]
    outcome.verdicts += ok * 3000
    text = step_summary(outcome)
    assert len(text.encode()) <= github.SUMMARY_BUDGET
    assert "row(s) within tolerance (listed in the JSON report)." in text
    assert "| **DRIFT** |" in text
    outcome.verdicts += [v for v in outcome.verdicts if v.status.value == "DRIFT"] * 300
    text = step_summary(outcome)
    assert len(text.encode()) <= github.SUMMARY_BUDGET
    assert text.endswith("see the JSON report)\n\n")


def test_help_lists_the_github_option(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--help")
    result.stdout.fnmatch_lines(["  compile_github (string):", "*GitHub Actions output: 'auto'*"])


EVERY_FAILING_KIND = """
    import jax
    from jaxmodels import mlp_example_args, mlp_loss

    def scaled(factor):
        return jax.jit(lambda *args: mlp_loss(*args) * factor)  # a module of its own

    def test_noisy(jax_compile):
        jax_compile(scaled(1.0), *mlp_example_args(), transform="jit")

    def test_drift(jax_compile):
        jax_compile(scaled(2.0), *mlp_example_args(), transform="jit")

    def test_grew(jax_compile):
        jax_compile(scaled(3.0), *mlp_example_args(), transform="jit")

    def test_miss(jax_compile):
        jax_compile(scaled(4.0), *mlp_example_args(), transform="jit")
"""


def test_a_busy_runner_with_every_failing_status_writes_its_summary(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """noisy, MISS, GREW and DRIFT rows in one session on a loaded runner: the step summary
    is written and the session fails on its findings, never with an internal error."""
    project.conftest(cache=True, min_compile_time=0.0)
    project.tests(EVERY_FAILING_KIND)
    project.run("--compile-pin-update").assert_outcomes(passed=4)  # cold pins
    project.run("--compile-pin-update").assert_outcomes(passed=4)  # warm pins
    shutil.rmtree(project.cache_dir)  # the cache is lost: every row compiles cold again
    other = {"fingerprint": "sha256:changed"}  # expected recompiles, judged on time
    edit_pins(
        project.pins_dir, "warm", {"test_noisy": other, "test_drift": other, "test_grew": other}
    )
    edit_pins(
        project.pins_dir,
        "cold",
        {
            "test_noisy": {"tolerance": 1000.0},
            "test_drift": {"compile_s": 1e-6, "compile_cpu_s": 1e-6},
            "test_grew": {"op_count": 1, "tolerance": 1000.0},
        },
    )
    summary = project.path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("JAXCOMPILE_LOAD_PER_CORE", "3")
    result = project.run(
        "--compile-expect-warm", "-o", "compile_max_ops_growth=0.1", "--compile-floor=0"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert project.verdicts() == {
        ("test_noisy", "jit"): "noisy",
        ("test_drift", "jit"): "DRIFT",
        ("test_grew", "jit"): "GREW",
        ("test_miss", "jit"): "MISS",
    }
    text = summary.read_text()
    assert text.startswith("## jax compile times: FAIL (1 MISS, 1 GREW, 1 DRIFT)\n")
    for status in ("**MISS**", "**GREW**", "**DRIFT**", "| noisy |"):
        assert status in text
    result.stdout.fnmatch_lines(["::error file=*title=jax compile MISS*"])

    summary.unlink()
    result = project.run("--compile-expect-warm", "-k", "noisy")
    assert result.ret == pytest.ExitCode.OK  # a noisy row alone does not fail
    assert summary.read_text().startswith("## jax compile times: pass\n")


def _upgrade_and_drift(tmp_path: Path) -> SessionOutcome:
    """A session under jax 0.10.2 with a row pinned only under 0.10.1 (an upgrade block)
    and a row that drifted on CPU seconds (judged with compile_metric = cpu)."""
    from pytest_jaxcompile.gate.conclude import GateSettings, conclude

    store = PinStore(tmp_path / "pins")
    store.update(
        [
            make_record(cell="tests/t.py::test_up", jax_version="0.10.1", jaxlib_version="0.10.1"),
            make_record(cell="tests/t.py::test_drift", compile_s=0.222, compile_cpu_s=0.218),
        ]
    )
    rows = [
        make_record(cell="tests/t.py::test_up", compile_s=1.5),
        make_record(cell="tests/t.py::test_drift", compile_s=0.622, compile_cpu_s=0.598),
    ]
    return conclude(
        rows,
        (),
        (),
        PinStore.load(tmp_path / "pins"),
        GateSettings(Thresholds(metric="cpu", floor_s=0.1), pin_update=False),
        rootdir=tmp_path,
    )


def test_an_upgrade_block_does_not_cut_the_step_summary_short(tmp_path: Path) -> None:
    outcome = _upgrade_and_drift(tmp_path)
    assert outcome.upgrades and outcome.failed
    text = step_summary(outcome)
    assert "jax upgrade 0.10.1 -&gt; 0.10.2" in text
    drift = next(line for line in text.splitlines() if line.startswith("DRIFT: 1 row(s)"))
    assert drift.endswith("the session fails.")
    assert "pytest --compile-pin-update tests/t.py::test_drift" in text.splitlines()
    # Its annotation ends with the command that pins the new version.
    annotations = annotation_commands(outcome, record_path_resolver(tmp_path, None), None)
    (upgrade,) = [line for line in annotations if "jax upgrade 0.10.1 -> 0.10.2" in line]
    assert "%0APin 0.10.2 when it is the baseline: pytest --compile-pin-update " in upgrade


def test_the_step_summary_table_shows_the_figures_the_verdict_compared(tmp_path: Path) -> None:
    """Judged on CPU seconds: the row's and the pin's CPU seconds, their unit, and the ratio of
    those same figures (not wall seconds beside a CPU ratio)."""
    text = step_summary(_upgrade_and_drift(tmp_path))
    row = next(line for line in text.splitlines() if line.startswith("| **DRIFT** |"))
    assert row.startswith(
        "| **DRIFT** | `tests/t.py::test_drift` | vag | 0.598 s cpu | 0.218 s cpu | 2.74x | "
        "tolerance 75% |"
    )
    assert "0.622" not in row and "0.222" not in row
    assert f"{0.598 / 0.218:.2f}x" == "2.74x"
