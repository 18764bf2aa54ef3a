"""The CI baseline follows main: the example gate workflow's own steps, replayed here.

`workflow_runner` runs the `tests` job of docs/examples/jaxcompile.yml in a pytester project
with real JAX, GitHub's variables, and a local directory standing in for the Actions cache:
a drift between the docs' workflow and what this test expects fails it. The job's `-n auto`
runs without workers here (`PYTEST_XDIST_AUTO_NUM_WORKERS=0`, the suite's budget; xdist's
verdicts are tests/test_xdist.py's).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, JaxProject
from workflow_runner import ActionsCache, JobRun, run_job

pytestmark = pytest.mark.integration

WORKFLOW = REPO / "docs" / "examples" / "jaxcompile.yml"
NOT_HERE = ("Install",)  # the test's Python has the project installed
LABEL = "compile-change-accepted"
TRACKED = {"conftest.py", "tox.ini", "jaxmodels.py", "test_models.py"}
TESTS = """
import jax
import jaxmodels

DEPTH = {depth}


def test_mlp(jax_compile):
    jax_compile(jax.jit(jaxmodels.mlp_loss), *jaxmodels.mlp_example_args(DEPTH), transform="jit")


def test_attention(jax_compile):
    params, x = jaxmodels.attention_example_args()
    jax_compile(jax.jit(jaxmodels.attention_loss), params, x, transform="jit")
"""


class Repository:
    """The project as a repository on GitHub: its commits and the events they start."""

    def __init__(self, project: JaxProject, cache: ActionsCache, env: dict[str, str]) -> None:
        self.project = project
        self.cache = cache
        self.env = env
        self.commits = 0
        self.main = ""

    def commit(self, depth: int) -> str:
        self.project.tests(TESTS.format(depth=depth))
        self.commits += 1
        return f"{self.commits:040x}"

    def _run(self, github: dict[str, Any], hardware: str) -> JobRun:
        # a fresh checkout: what a run leaves (caches, baseline, reports) is not in the next
        for path in self.project.path.iterdir():
            if path.name not in TRACKED:
                shutil.rmtree(path) if path.is_dir() else path.unlink()
        # another runner class: the workflow as a team edits it (runs-on, its hardware name)
        workflow = self.project.path.parent / f"jaxcompile-{hardware}.yml"
        workflow.write_text(WORKFLOW.read_text().replace("gha-ubuntu-latest", hardware))
        return run_job(
            workflow,
            "tests",
            self.project.path,
            self.cache,
            github,
            env=self.env,
            skip=NOT_HERE,
        )

    def push(self, sha: str, hardware: str = "gha-ubuntu-latest") -> JobRun:
        self.main = sha
        event = {"repository": {"default_branch": "main"}}
        github = {"event_name": "push", "sha": sha, "ref": "refs/heads/main", "event": event}
        return self._run(github, hardware)

    def pull_request(self, sha: str, labels: tuple[str, ...] = ()) -> JobRun:
        event = {
            "repository": {"default_branch": "main"},
            "pull_request": {
                "base": {"sha": self.main},
                "labels": [{"name": label} for label in labels],
                "head": {"repo": {"full_name": "o/r"}},
            },
        }
        github = {"event_name": "pull_request", "sha": sha, "ref": "refs/pull/7/merge"}
        return self._run({**github, "event": event}, "gha-ubuntu-latest")

    def report(self) -> dict[str, Any]:
        path = self.project.path / "reports" / "jaxcompile.json"
        report: dict[str, Any] = json.loads(path.read_text())
        return report

    def verdicts(self) -> dict[str, str]:
        return {v["cell"].split("::")[-1]: v["status"] for v in self.report()["verdicts"]}

    def records(self) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = self.report()["records"]
        return records


def baselines_of(cache: ActionsCache) -> list[str]:
    return [key for key in cache.saved_keys() if key.startswith("jaxcompile-baseline-")]


def _said(run: JobRun, step: str) -> str:
    return " ".join(run.step(step).output.split())


def test_the_baseline_follows_main_and_a_label_accepts_a_change(
    project: JaxProject, tmp_path: Path
) -> None:
    project.pytester.makeconftest((REPO / "conftest_example.py").read_text())
    project.pytester.makeini(
        "[pytest]\ncompile_max_ops_growth = 0.5\ncompile_floor = 30\n"
        "compile_profile_failing = never\n"
    )
    env = dict(os.environ, PYTEST_XDIST_AUTO_NUM_WORKERS="0")
    cache = ActionsCache(tmp_path / "actions-cache")
    repo = Repository(project, cache, env)

    # The first run of the default branch: no baseline yet; it records one and says so.
    first = repo.push(repo.commit(depth=2))
    assert first.succeeded, first.output
    assert "No compile baseline for gha-ubuntu-latest yet: this run records it" in (
        first.step("Compile baseline").output
    )
    assert "pins updated" in _said(first, "Tests")
    assert first.step("Save the compile baseline").outcome == "success"
    baselines = baselines_of(cache)
    assert len(baselines) == 1 and baselines[0].endswith(repo.main)
    assert "-gha-ubuntu-latest-jax-" in baselines[0]

    # A pull request that grows the model fails, judged against its base's baseline, and
    # fails again when re-run on the compilation cache its first run left.
    change = repo.commit(depth=6)
    for _ in range(2):
        failing = repo.pull_request(change)
        assert not failing.succeeded, failing.output
        assert failing.step("Tests").outcome == "failure"
        said = _said(failing, "Tests")
        assert "Compile baseline restored: " + baselines[0] in failing.output
        assert repo.verdicts()["test_mlp"] == "GREW"
        assert repo.verdicts()["test_attention"] == "ok", failing.output
        assert "1 row(s) paired" in said or "paired 1 changed row" in said
        # the way back named is the label, never a command that pins a laptop
        assert f"add the label `{LABEL}`" in said or f"label `{LABEL}`" in said, said
        assert "--compile-pin-update" not in said
        assert failing.step("Save the compile baseline").outcome == "skipped"

    # The same pull request with the accept label passes and says the change is accepted.
    accepted = repo.pull_request(change, labels=(LABEL,))
    assert accepted.succeeded, accepted.output
    said = _said(accepted, "Tests")
    assert "accepted (compile_accept)" in said
    assert repo.verdicts()["test_mlp"] == "GREW"  # reported as measured
    assert baselines_of(cache) == baselines

    # The merge: the default branch's run makes the grown model the baseline; its rows are
    # reported against the baseline they replace, and the run stays green.
    merged = repo.push(change)
    assert merged.succeeded, merged.output
    judged = _said(merged, "Judged against the previous baseline")
    assert "GREW" in judged and "accepted (compile_accept)" in judged
    baselines = baselines_of(cache)
    assert len(baselines) == 2 and baselines[-1].endswith(change)

    # The next pull request is judged against the new baseline: the grown model is ok now.
    following = repo.pull_request(repo.commit(depth=6))
    assert following.succeeded, following.output
    assert "Compile baseline restored: " + baselines[-1] in following.output
    assert set(repo.verdicts().values()) == {"ok"}
    # an accepted change stops costing: the baseline holds its module, nothing compiles afresh
    assert not [record for record in repo.records() if record.get("twin_cache_state")]

    # A new runner class records its own baseline on its first run of the default branch.
    other = repo.push(repo.main, hardware="gha-ubuntu-24-arm")
    assert other.succeeded, other.output
    assert "No compile baseline for gha-ubuntu-24-arm yet: this run records it" in other.output
    assert any(
        re.match(r"jaxcompile-baseline-gha-ubuntu-24-arm-jax-.*-" + repo.main, key)
        for key in cache.saved_keys()
    )
