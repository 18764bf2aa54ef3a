"""Which commit a session measured: the records' ``commit`` field.

Filled once per session, at its end, and only in sessions that write records (the JSON
report or the records directory); never at plugin load. The CI environment wins where it
is set (GitHub Actions: ``GITHUB_SHA``, ``GITHUB_REF``, ``GITHUB_HEAD_REF``,
``GITHUB_BASE_REF``); git fills in the rest with a single
``git status --porcelain=v2 --branch --untracked-files=no`` in the rootdir, which gives
the commit, the branch and whether tracked files differ from it. Without git, outside a
repository, or when git takes longer than `GIT_TIMEOUT_S`, the fields git would give stay
null; a session where nothing is known gets no ``commit`` at all.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_jaxcompile.records import CompileRecord

GIT_TIMEOUT_S = 10.0
SHORT_SHA = 12


def run_git_status(cwd: Path) -> str | None:
    """The porcelain status of the repository around `cwd`, or None when git cannot say."""
    try:
        result = subprocess.run(
            ["git", "status", "--porcelain=v2", "--branch", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
            # a read-only look: never take the index lock another git process may hold
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout if result.returncode == 0 else None


def parse_git_status(text: str) -> dict[str, Any]:
    """sha, ref and dirty from ``git status --porcelain=v2 --branch`` output."""
    values: dict[str, Any] = {"sha": None, "ref": None, "dirty": False}
    for line in text.splitlines():
        if line.startswith("# branch.oid "):
            oid = line.split(" ", 2)[2].strip()
            values["sha"] = None if oid == "(initial)" else oid
        elif line.startswith("# branch.head "):
            head = line.split(" ", 2)[2].strip()
            values["ref"] = None if head == "(detached)" else f"refs/heads/{head}"
        elif line and not line.startswith("#"):
            values["dirty"] = True  # a changed tracked file (untracked ones are not asked)
    return values


def session_commit(
    rootdir: Path,
    environ: Mapping[str, str] | None = None,
    git_status: Callable[[Path], str | None] = run_git_status,
) -> dict[str, Any] | None:
    """The session's commit: the CI environment where set, git (run once) for the rest."""
    environ = os.environ if environ is None else environ

    def env(name: str) -> str | None:
        return environ.get(name) or None  # GitHub sets the PR refs empty on pushes

    commit: dict[str, Any] = {
        "sha": env("GITHUB_SHA"),
        "ref": env("GITHUB_REF"),
        "head_ref": env("GITHUB_HEAD_REF"),
        "base_ref": env("GITHUB_BASE_REF"),
        "dirty": None,
    }
    status = git_status(rootdir)
    if status is not None:
        found = parse_git_status(status)
        if found["sha"] is not None or found["ref"] is not None:
            commit["dirty"] = found["dirty"]
        for name in ("sha", "ref"):
            if commit[name] is None:
                commit[name] = found[name]
    if all(value is None for value in commit.values()):
        return None
    return commit


def stamp(records: Iterable[CompileRecord], commit: dict[str, Any] | None) -> None:
    """Give every record that has none the session's commit (one shared, read-only dict)."""
    if commit is None:
        return
    for record in records:
        if record.commit is None:
            record.commit = commit


def commit_label(commit: Mapping[str, Any]) -> str:
    """``1a2b3c4d5e6f on refs/heads/main, dirty``: what trend output shows of a commit."""
    sha = commit.get("sha")
    parts = [sha[:SHORT_SHA] if isinstance(sha, str) and sha else "unknown commit"]
    ref = commit.get("head_ref") or commit.get("ref")
    if isinstance(ref, str) and ref:
        parts.append(f" on {ref}")
    if commit.get("dirty") is True:
        parts.append(", dirty")
    if sha is None and len(parts) == 1:
        return ""
    return "".join(parts)
