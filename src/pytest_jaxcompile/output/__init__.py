"""Outputs: each renders an `Outcome` (terminal, JSON report, JUnit, GitHub, dashboard).

What every output object of a pytest session shares lives here: the `Outcome` the session
collector concluded (kept in ``config.stash[OUTCOME_KEY]``, read with `outcome_of`), the
section header of the terminal summary, raising the exit status, and whether the session
runs under GitHub Actions.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from pytest_jaxcompile.gate.outcome import Outcome

OUTCOME_KEY = pytest.StashKey[Outcome]()
SECTION_KEY = pytest.StashKey[bool]()
ENV_ACTIONS = "GITHUB_ACTIONS"


def in_github_actions(environ: Mapping[str, str]) -> bool:
    """Whether this runs in a GitHub Actions job ($GITHUB_ACTIONS is 'true'): its
    annotations are printed, and the way back a failing session names is the CI's."""
    return environ.get(ENV_ACTIONS, "").strip().lower() == "true"


def outcome_of(config: pytest.Config) -> Outcome | None:
    return config.stash.get(OUTCOME_KEY, None)


def fail_session(session: pytest.Session, failed: bool) -> None:
    """Raise the exit status to "tests failed"; never lower it, never OR codes."""
    if failed and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def summary_section(terminalreporter: pytest.TerminalReporter) -> None:
    """The plugin's section header, written once however many outputs have lines."""
    config = terminalreporter.config
    if not config.stash.get(SECTION_KEY, False):
        config.stash[SECTION_KEY] = True
        terminalreporter.write_sep("=", "jax compile times")
