"""The way back to green every output prints: the re-pin command, or in CI the CI's way.

Locally it is ``pytest --compile-pin-update`` and the tests, with every option that keeps the
figures the pins hold (`Outcome.repin_keeps`, decided by the gate from the pins), the
session's own options and the variables that named its key (`Outcome.repin_environment`):
run as printed, it succeeds. Under GitHub Actions a command run on a laptop would pin the
laptop, so the advice names the CI's way instead (`ci_way`): the pull request's accept label
where the workflow has one, else the re-pin workflow on the runner class.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pytest_jaxcompile.gate.outcome import Outcome

MAX_CELLS_IN_COMMAND = 3
MAX_TESTS_CHARS = 100  # of the tests named in a command: longer, their files instead
REPIN_WORKFLOW_RUN = "Actions > jax compile re-pin > Run workflow"


def repin_command(
    cells: Iterable[str],
    arguments: Iterable[str] = (),
    *,
    keeps: Mapping[str, Iterable[str]] | None = None,
    environment: Iterable[str] = (),
) -> str:
    """``pytest --compile-pin-update ...``: the session's re-pin `arguments` (its gates, as
    given: `Outcome.repin_arguments`) and the options that keep what the pins of the tests
    it re-pins hold (`keeps`, by test), then the tests; their files when there are many or
    their node ids run long; the files' directories when those are many or long; their
    common directory at most. `environment` (``NAME=value``) comes before ``pytest``. Every
    output prints this one command."""
    unique = sorted(set(cells))
    if _too_many(unique):
        unique = sorted({cell.split("::", 1)[0] for cell in unique})
    if _too_many(unique):
        unique = sorted({posixpath.dirname(path) or "." for path in unique})
    if _too_many(unique):
        unique = [posixpath.commonpath(unique) or "."]
    kept = [
        option
        for cell, options in sorted((keeps or {}).items())
        if any(_covers(word, cell) for word in unique)
        for option in options
    ]
    options = list(dict.fromkeys([*arguments, *kept]))
    prefix = "".join(f"{_shell_word(word)} " for word in dict.fromkeys(environment))
    quoted = " ".join(_shell_word(word) for word in [*options, *unique])
    return f"{prefix}pytest --compile-pin-update {quoted}".rstrip()


def _covers(word: str, cell: str) -> bool:
    """Whether pytest given `word` (a node id, a file, a directory) runs the test `cell`."""
    if word in (".", cell):
        return True
    return cell.startswith(word + "::") or cell.startswith(word.rstrip("/") + "/")


def _too_many(words: list[str]) -> bool:
    """More than a reader copies at a glance: many, or one line's worth of characters."""
    if len(words) > MAX_CELLS_IN_COMMAND:
        return True
    return len(words) > 1 and len(" ".join(words)) > MAX_TESTS_CHARS


def _shell_word(word: str) -> str:
    if word and all(char.isalnum() or char in "/._-:=+@%,^" for char in word):
        return word
    return "'" + word.replace("'", "'\\''") + "'"


@dataclass(frozen=True)
class Repin:
    """What the way back needs, from the `Outcome`: the command's parts, and whether and
    how CI takes a change instead."""

    arguments: tuple[str, ...] = ()
    environment: tuple[str, ...] = ()
    keeps: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    github_actions: bool = False
    accept_label: str | None = None

    @classmethod
    def of(cls, outcome: Outcome) -> Repin:
        return cls(
            outcome.repin_arguments,
            outcome.repin_environment,
            outcome.repin_keeps,
            outcome.github_actions,
            outcome.accept_label,
        )

    def command(self, cells: Iterable[str], extra: Iterable[str] = ()) -> str:
        """The re-pin command of `cells`; `extra`: options the figures re-pinned need."""
        return repin_command(
            cells,
            (*self.arguments, *extra),
            keeps=self.keeps,
            environment=self.environment,
        )

    def way_back(
        self,
        lead: str,
        local: str,
        cells: Iterable[str],
        hardware: Iterable[str],
        *,
        fails: bool,
        extra: Iterable[str] = (),
    ) -> tuple[str, str | None]:
        """(the sentence, the command or None): `local` (``If the change is intended,
        re-pin and commit the pin files:``) and the re-pin command; under GitHub Actions
        the CI's way (`ci_way`, opening with `lead`) and no command."""
        if self.github_actions:
            return ci_way(lead, hardware, self.accept_label, fails=fails), None
        return local, self.command(cells, extra)


def ci_way(lead: str, hardware: Iterable[str], label: str | None, *, fails: bool) -> str:
    """The one CI sentence: ``If the change is intended, add the label `L` to the pull
    request: the run then passes, and the merge makes the change the baseline for H.`` with
    an accept label; without one, the re-pin workflow on the runner class. `lead` opens it
    (``If the change is intended``); `fails`: whether the rows fail this run."""
    names = sorted(set(hardware)) or ["this runner class"]
    runner = " and ".join(names)
    if label is not None:
        if fails:
            return (
                f"{lead}, add the label `{label}` to the pull request: the run then passes, "
                f"and the merge makes the change the baseline for {runner}."
            )
        return f"{lead}: the merge makes the change the baseline for {runner}."
    return (
        f"{lead}, re-pin on {runner} with the re-pin workflow ({REPIN_WORKFLOW_RUN}) "
        "and commit its pins: a laptop's pins do not judge this runner class."
    )
