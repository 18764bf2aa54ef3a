"""The workflows users copy are audited: zizmor, offline, finds nothing, as shipped.

No finding is filtered out: the command the docs give users (docs/github-actions.md) exits 0
on the examples as they are, their actions pinned to commit SHAs. Skipped only where zizmor
is not installed (it is in the `test` extra).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sysconfig
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = [
    REPO / "docs" / "examples" / "jaxcompile.yml",
    REPO / "docs" / "examples" / "jaxcompile-repin.yml",
]
FAILING_SEVERITIES = {"medium", "high"}
# An action pinned to a full commit SHA, its release named in a comment (as Dependabot keeps it).
PINNED_USES = re.compile(r"^\s*(?:- )?uses: [\w.-]+/[\w./-]+@[0-9a-f]{40}  # v\d+(?:\.\d+)*$")


def _zizmor() -> str | None:
    """The zizmor next to this Python (its venv's scripts), else the one on PATH."""
    beside = Path(sysconfig.get_path("scripts")) / "zizmor"
    return str(beside) if beside.is_file() else shutil.which("zizmor")


ZIZMOR = _zizmor()
needs_zizmor = pytest.mark.skipif(ZIZMOR is None, reason="zizmor is not installed")


def workflows() -> list[Path]:
    """Both examples and every workflow or action the repository itself has."""
    found = list(EXAMPLES)
    github = REPO / ".github"
    if github.is_dir():
        found += sorted(p for p in github.rglob("*") if p.suffix in (".yml", ".yaml"))
    return found


def audit(paths: list[Path]) -> list[dict[str, Any]]:
    """zizmor's findings as JSON: offline (no GitHub API), no config file, regular persona."""
    assert ZIZMOR is not None
    done = subprocess.run(
        [
            ZIZMOR,
            "--offline",
            "--no-config",
            "--no-progress",
            "--no-exit-codes",
            "--format",
            "json",
            *map(str, paths),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    findings: list[dict[str, Any]] = json.loads(done.stdout)
    return findings


def failing(findings: list[dict[str, Any]]) -> list[str]:
    """Medium and high findings, one line each."""
    lines = []
    for finding in findings:
        severity = str(finding["determinations"]["severity"]).lower()
        if severity not in FAILING_SEVERITIES:
            continue
        where = ""
        for location in finding.get("locations", []):
            local = location.get("symbolic", {}).get("key", {}).get("Local", {})
            path = local.get("verbatim_path") or local.get("given_path") or ""
            row = location.get("concrete", {}).get("location", {}).get("start_point", {})
            where = f"{path}:{row.get('row', -1) + 1}"
            break
        lines.append(f"{where}: {finding['ident']} ({severity}): {finding.get('desc', '')}")
    return lines


@pytest.mark.integration
@needs_zizmor
def test_example_workflows_have_no_finding() -> None:
    findings = audit(workflows())
    assert [f"{line}" for line in failing(findings)] == []
    assert [finding["ident"] for finding in findings] == []


@pytest.mark.integration
@needs_zizmor
def test_the_documented_audit_command_exits_0_on_the_examples_as_copied(
    tmp_path: Path,
) -> None:
    """docs/github-actions.md's command, run where the docs say the copies go."""
    assert ZIZMOR is not None
    text = (REPO / "docs" / "github-actions.md").read_text()
    (command,) = re.findall(r"^zizmor --offline [^\n]*$", text, re.MULTILINE)
    argv = shlex.split(command)
    assert argv[-1] == ".github/workflows/"
    copies = tmp_path / ".github" / "workflows"
    copies.mkdir(parents=True)
    for path in EXAMPLES:
        shutil.copy(path, copies / path.name)
    done = subprocess.run(
        [ZIZMOR, *argv[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    for path in EXAMPLES:
        assert f"completed .github/workflows/{path.name}" in done.stderr


def test_every_action_is_pinned_to_a_commit_with_its_release_named() -> None:
    """What zizmor's unpinned-uses checks, stated without it (runs where it is not installed)."""
    for path in workflows():
        for line in path.read_text().splitlines():
            if re.match(r"^\s*(?:- )?uses: ", line):
                assert PINNED_USES.match(line), f"{path.name}: {line.strip()}"


@pytest.mark.integration
@needs_zizmor
def test_the_audit_fails_an_injectable_workflow(tmp_path: Path) -> None:
    """The filter is not vacuous: the mistakes the examples avoid are reported."""
    bad = tmp_path / "bad.yml"
    bad.write_text(
        textwrap.dedent("""
        name: bad
        on:
          pull_request:
        jobs:
          greet:
            name: greet
            runs-on: ubuntu-latest
            steps:
              - uses: actions/checkout@v4
              - run: echo "${{ github.event.pull_request.title }}"
    """)
    )
    found = " ".join(failing(audit([bad])))
    for ident in ("template-injection", "artipacked", "excessive-permissions"):
        assert ident in found, found


def test_examples_read_only_no_persisted_credentials() -> None:
    """What the audit relies on, stated without it (runs where zizmor is not installed)."""
    for path in EXAMPLES:
        workflow = yaml.safe_load(path.read_text())
        assert workflow["permissions"] == {"contents": "read"}, path
        for name, job in workflow["jobs"].items():
            # No job widens them, except the one that posts the pull-request comment: it
            # may write pull requests only, runs no project code and checks nothing out.
            if name == "comment":
                assert job["permissions"] == {"pull-requests": "write"}, path
                assert not any("checkout" in step.get("uses", "") for step in job["steps"])
                assert "head.repo.full_name == github.repository" in job["if"]
                continue
            assert "permissions" not in job, path
            for step in job["steps"]:
                if str(step.get("uses", "")).startswith("actions/checkout@"):
                    assert step["with"]["persist-credentials"] is False, path
                assert "${{" not in str(step.get("run", "")), (path, step.get("name"))


def test_gate_expects_warm_exactly_when_a_cache_was_restored() -> None:
    workflow = yaml.safe_load(EXAMPLES[0].read_text())
    job = workflow["jobs"]["tests"]
    steps = {step.get("id") or step.get("name"): step for step in job["steps"]}
    assert steps["cache-restore"]["uses"].startswith("actions/cache/restore@")
    tests = steps["tests"]
    assert tests["env"]["CACHE_RESTORED"] == (
        "${{ steps.cache-restore.outputs.cache-matched-key }}"
    )
    script = tests["run"]
    assert '[ -n "$CACHE_RESTORED" ]' in script and "--compile-expect-warm" in script

    repin = yaml.safe_load(EXAMPLES[1].read_text())
    # PyYAML reads the key `on` as True.
    assert set(repin[True]) == {"workflow_dispatch"}
    (job,) = repin["jobs"].values()
    assert job["runs-on"] == workflow["jobs"]["tests"]["runs-on"]
    gate_env = workflow["jobs"]["tests"]["env"]
    for name in ("JAX_COMPILATION_CACHE_DIR", "JAXCOMPILE_HARDWARE"):
        assert job["env"][name] == gate_env[name]
    runs = [step.get("run", "") for step in job["steps"]]
    assert sum("--compile-pin-update" in run and "-n auto" in run for run in runs) == 2
    assert "-n auto" in tests["run"]  # compile times depend on -n: the same in both
    uploads = [
        step["with"]["path"]
        for step in job["steps"]
        if str(step.get("uses", "")).startswith("actions/upload-artifact@")
    ]
    assert "pins/" in uploads


def test_the_cache_is_saved_only_from_successful_runs_of_the_default_branch() -> None:
    """A failed run's modules (a change not yet accepted) never reach the next run's cache."""
    steps = yaml.safe_load(EXAMPLES[0].read_text())["jobs"]["tests"]["steps"]
    (save,) = (
        s
        for s in steps
        if str(s.get("uses", "")).startswith("actions/cache/save@")
        and s["with"]["path"] == ".jax_cache"
    )
    condition = save["if"]
    assert condition.startswith("success() && ") and "always()" not in condition
    assert "github.ref == format('refs/heads/{0}', github.event.repository.default_branch)" in (
        condition
    )


def test_the_release_workflow_publishes_a_version_tag_with_least_permissions() -> None:
    release = yaml.safe_load((REPO / ".github" / "workflows" / "release.yml").read_text())
    # PyYAML reads the key `on` as True.
    assert release[True] == {"push": {"tags": ["v*"]}}
    assert release["permissions"] == {}
    build, publish = release["jobs"]["build"], release["jobs"]["publish"]
    assert build["permissions"] == {"contents": "read"}
    assert publish["permissions"] == {"id-token": "write"}  # trusted publishing, no token
    assert set(publish["needs"]) == {"test", "build"} and publish["environment"]["name"] == "pypi"
    # nothing is published untested: the test job runs the CI entry point, which runs the
    # suite and the demo
    runs_tests = "\n".join(step.get("run", "") for step in release["jobs"]["test"]["steps"])
    assert "bash .ci/run" in runs_tests
    assert ci_run_steps()[1:3] == ["bash scripts/test.sh", "bash scripts/demo.sh"]
    assert any(
        step.get("uses", "").startswith("pypa/gh-action-pypi-publish@") for step in publish["steps"]
    )
    assert not any("with" in step and "password" in step["with"] for step in publish["steps"])
    runs = "\n".join(step.get("run", "") for step in build["steps"])
    for command in ("python -m build", "twine check --strict", "_version.py", "CHANGELOG.md"):
        assert command in runs


def test_the_gate_runs_once_per_change() -> None:
    """A push to a same-repository pull request is one run: pushes run on main only."""
    workflow = yaml.safe_load(EXAMPLES[0].read_text())
    triggers = workflow[True]  # PyYAML reads the key `on` as True
    assert set(triggers) == {"push", "pull_request"}
    assert triggers["push"] == {"branches": ["main"]}


def test_the_projects_ci_runs_on_every_change_what_ci_run_runs_in_jobs_of_its_own() -> None:
    """.github/workflows/ci.yml gates pushes and pull requests: README's test command and the
    demo in one job, each version-matrix session (noxfile.py's) in its own; read-only."""
    ci = yaml.safe_load((REPO / ".github" / "workflows" / "ci.yml").read_text())
    # PyYAML reads the key `on` as True.
    assert set(ci[True]) == {"push", "pull_request"}
    assert ci["permissions"] == {}
    jobs = ci["jobs"]
    for name, job in jobs.items():
        assert job["permissions"] == {"contents": "read"}, name
        runs = [str(step.get("run", "")) for step in job["steps"]]
        scripts = [index for index, run in enumerate(runs) if run.startswith("bash scripts/")]
        assert scripts and runs.index("bash .ci/tools") < min(scripts), name  # tools first
        for step in job["steps"]:
            if str(step.get("uses", "")).startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False, name
            assert "${{" not in str(step.get("run", "")), (name, step.get("name"))
    test_runs = [str(step.get("run", "")) for step in jobs["test"]["steps"]]
    readme = (REPO / "README.md").read_text()
    assert "bash scripts/test.sh   # the plugin's own checks" in readme  # README's command
    assert test_runs.index("bash scripts/test.sh") < test_runs.index("bash scripts/demo.sh")
    # The matrix: exactly the sessions .ci/run's scripts/matrix.sh runs, each on its Python.
    noxfile = (REPO / "noxfile.py").read_text()
    sessions = re.search(r"nox\.options\.sessions = \[(.*)\]", noxfile)
    assert sessions is not None
    expected = set(re.findall(r'"(\w+)"', sessions.group(1)))
    included = jobs["matrix"]["strategy"]["matrix"]["include"]
    assert {each["session"] for each in included} == expected == {"oldest", "newest"}
    pythons = dict(re.findall(r'^(OLDEST|NEWEST)_PYTHON = "([\d.]+)"', noxfile, re.MULTILINE))
    assert {each["session"]: each["python"] for each in included} == {
        "oldest": pythons["OLDEST"],
        "newest": pythons["NEWEST"],
    }
    (matrix_step,) = [s for s in jobs["matrix"]["steps"] if "matrix.sh" in str(s.get("run"))]
    assert matrix_step["run"] == 'bash scripts/matrix.sh -s "$SESSION"'
    assert matrix_step["env"] == {"SESSION": "${{ matrix.session }}"}
    # .ci/run runs the same commands, tools first (the release's test job runs .ci/run), and
    # both matrix sessions on every run, as the jobs do.
    assert ci_run_steps() == [
        "bash .ci/tools",
        "bash scripts/test.sh",
        "bash scripts/demo.sh",
        *(f"bash scripts/matrix.sh -s {session}" for session in ("oldest", "newest")),
    ]


def ci_run_steps() -> list[str]:
    """The commands .ci/run runs, in order: each through its `step "title" COMMAND` line."""
    text = (REPO / ".ci" / "run").read_text()
    return re.findall(r'^step "[^"]+" (.+)$', text, re.MULTILINE)
