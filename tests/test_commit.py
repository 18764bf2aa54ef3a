"""Commit metadata in records: from the CI environment, from one git call, only when writing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import JaxProject

from pytest_jaxcompile.corpus.commit import (
    commit_label,
    parse_git_status,
    run_git_status,
    session_commit,
)

GITHUB = ("GITHUB_SHA", "GITHUB_REF", "GITHUB_HEAD_REF", "GITHUB_BASE_REF")
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def _repo(path: Path) -> str:
    """A repository with one commit on branch `trunk`; returns its sha."""
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "-q", "-b", "trunk")
    (path / "tracked.txt").write_text("one\n")
    _git(path, "add", "tracked.txt")
    _git(path, "commit", "-q", "-m", "first")
    return _git(path, "rev-parse", "HEAD")


@pytest.fixture(autouse=True)
def _no_ci_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in GITHUB:
        monkeypatch.delenv(name, raising=False)


def test_parse_git_status() -> None:
    clean = "# branch.oid 1234abcd\n# branch.head main\n# branch.upstream origin/main\n"
    assert parse_git_status(clean) == {"sha": "1234abcd", "ref": "refs/heads/main", "dirty": False}
    dirty = "# branch.oid 1234abcd\n# branch.head (detached)\n1 .M N... 100644 a b c d.py\n"
    assert parse_git_status(dirty) == {"sha": "1234abcd", "ref": None, "dirty": True}
    assert parse_git_status("# branch.oid (initial)\n# branch.head main\n")["sha"] is None


def test_the_ci_environment_wins_and_git_adds_what_it_lacks(tmp_path: Path) -> None:
    environ = {
        "GITHUB_SHA": "f" * 40,
        "GITHUB_REF": "refs/pull/7/merge",
        "GITHUB_HEAD_REF": "feature",
        "GITHUB_BASE_REF": "main",
    }
    calls: list[Path] = []

    def git_status(cwd: Path) -> str | None:
        calls.append(cwd)
        return "# branch.oid 0123\n# branch.head (detached)\n1 .M N... 100644 a b c d.py\n"

    commit = session_commit(tmp_path, environ, git_status)
    assert commit == {
        "sha": "f" * 40,
        "ref": "refs/pull/7/merge",
        "head_ref": "feature",
        "base_ref": "main",
        "dirty": True,
    }
    assert calls == [tmp_path]
    assert commit_label(commit) == "ffffffffffff on feature, dirty"
    # A push: GitHub sets the pull-request refs empty.
    push = {
        "GITHUB_SHA": "e" * 40,
        "GITHUB_REF": "refs/heads/main",
        "GITHUB_HEAD_REF": "",
        "GITHUB_BASE_REF": "",
    }
    assert session_commit(tmp_path, push, lambda cwd: None) == {
        "sha": "e" * 40,
        "ref": "refs/heads/main",
        "head_ref": None,
        "base_ref": None,
        "dirty": None,
    }
    assert session_commit(tmp_path, {}, lambda cwd: None) is None


@pytest.mark.integration
@needs_git
def test_git_gives_commit_branch_and_dirty_tracked_files_only(tmp_path: Path) -> None:
    sha = _repo(tmp_path / "repo")
    (tmp_path / "repo" / "sub").mkdir()
    (tmp_path / "repo" / "results.jsonl").write_text("{}\n")  # untracked: not dirty
    commit = session_commit(tmp_path / "repo" / "sub", {})
    assert commit == {
        "sha": sha,
        "ref": "refs/heads/trunk",
        "head_ref": None,
        "base_ref": None,
        "dirty": False,
    }
    (tmp_path / "repo" / "tracked.txt").write_text("two\n")
    commit = session_commit(tmp_path / "repo", {})
    assert commit is not None and commit["dirty"] is True
    (tmp_path / "elsewhere").mkdir()
    assert run_git_status(tmp_path / "elsewhere") is None  # not in a repository
    assert session_commit(tmp_path / "elsewhere", {}) is None


COUNTING_GIT = """#!/bin/sh
echo "$@" >> "{log}"
exec "{git}" "$@"
"""

SUITE = """
    import jax
    import jax.numpy as jnp

    def test_one(jax_compile):
        jax_compile(jax.jit(lambda v: v * 2), jnp.ones(4), transform="jit")

    def test_two(jax_compile):
        jax_compile(jax.jit(lambda v: v + 3), jnp.ones(4), transform="jit")
"""


@needs_git
def test_sessions_that_write_records_call_git_once_and_stamp_every_row(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = project.path / "bin"
    bin_dir.mkdir()
    log = project.path / "git-calls.log"
    git = bin_dir / "git"
    git.write_text(COUNTING_GIT.format(log=log, git=shutil.which("git")))
    git.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    project.conftest(cache=False)
    project.tests(SUITE)
    sha = _repo(project.path)
    log.unlink()

    # pytest-benchmark, when installed, runs git itself: left out here.
    result = project.pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:benchmark")
    assert result.ret == pytest.ExitCode.OK
    assert not log.exists()  # writes no records: git is never run

    result = project.run("-p", "no:benchmark", "--compile-record-dir=records")
    assert result.ret == pytest.ExitCode.OK
    assert log.read_text().splitlines() == ["status --porcelain=v2 --branch --untracked-files=no"]
    expected = {
        "sha": sha,
        "ref": "refs/heads/trunk",
        "head_ref": None,
        "base_ref": None,
        "dirty": False,
    }
    (written,) = (project.path / "records").glob("*.jsonl")
    rows = [json.loads(line) for line in written.read_text().splitlines()]
    assert len(rows) == 2 and all(row["commit"] == expected for row in rows)
    assert [row["commit"] for row in project.report()["records"]] == [expected, expected]
