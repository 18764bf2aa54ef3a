"""GitHub Actions output: the job's step summary (Markdown) and workflow-command annotations.

Pure functions of a `Outcome` and the environment mapping; the plugin writes the
step summary in ``pytest_sessionfinish`` (controller only) and prints the annotations in
its terminal summary; ``pytest-jaxcompile merge`` does the same for merged reports.

Workflow commands and their escaping follow GitHub's toolkit (``@actions/core``,
``command.ts``): in a message ``%``, ``\\r`` and ``\\n`` are percent-encoded; in a
property value ``:`` and ``,`` are too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_jaxcompile._io import relative
from pytest_jaxcompile.gate.outcome import Outcome
from pytest_jaxcompile.gate.pins import pin_line
from pytest_jaxcompile.gate.verdicts import (
    StalePin,
    Status,
    Tone,
    Verdict,
    by_key,
    severity_order,
)
from pytest_jaxcompile.output import outcome_of, summary_section
from pytest_jaxcompile.output.terminal import (
    advice,
    comparison,
    folded,
    spend_lines,
    status_sentence,
    unpinned_fold,
    upgrade_lines,
    warning_lines,
)
from pytest_jaxcompile.records import ComparabilityKey, CompileRecord

ENV_STEP_SUMMARY = "GITHUB_STEP_SUMMARY"
ENV_ACTIONS = "GITHUB_ACTIONS"
ENV_WORKSPACE = "GITHUB_WORKSPACE"
MAX_LISTED_ROWS = 500  # per table of the step summary
SUMMARY_BUDGET = 900_000  # bytes; GitHub refuses a step summary over 1 MiB

# Where a record's test lives, as a path relative to the repository root, or None.
PathOf = Callable[[CompileRecord], str | None]


@dataclass(frozen=True)
class GitHubTargets:
    """What to produce for GitHub, from the environment (and the `--compile-github` mode)."""

    step_summary: Path | None
    annotations: bool
    workspace: Path | None

    @property
    def active(self) -> bool:
        return self.step_summary is not None or self.annotations

    @classmethod
    def from_environment(cls, environ: Mapping[str, str], mode: str = "auto") -> GitHubTargets:
        if mode == "off":
            return cls(step_summary=None, annotations=False, workspace=None)
        summary = environ.get(ENV_STEP_SUMMARY, "").strip()
        workspace = environ.get(ENV_WORKSPACE, "").strip()
        return cls(
            step_summary=Path(summary) if summary else None,
            annotations=environ.get(ENV_ACTIONS, "").strip().lower() == "true",
            workspace=Path(workspace) if workspace else None,
        )


# --- escaping -------------------------------------------------------------------------


def escape_data(text: str) -> str:
    """A workflow command's message: GitHub decodes %25, %0D and %0A."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value (``file=``, ``title=``, ...)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(
    command: str, message: str, properties: Mapping[str, str | int | None]
) -> str:
    rendered = ",".join(
        f"{name}={escape_property(str(value))}"
        for name, value in properties.items()
        if value is not None and str(value) != ""
    )
    head = f"::{command} {rendered}" if rendered else f"::{command}"
    return f"{head}::{escape_data(message)}"


# --- paths ----------------------------------------------------------------------------


def workspace_path(path: Path, workspace: Path | None, fallback_root: Path) -> str:
    """`path` relative to the repository root (GITHUB_WORKSPACE), else to `fallback_root`."""
    resolved = path.resolve()
    for root in (workspace, fallback_root):
        if root is not None and resolved.is_relative_to(root.resolve()):
            return resolved.relative_to(root.resolve()).as_posix()
    return path.as_posix()


def record_path_resolver(rootdir: Path, workspace: Path | None) -> PathOf:
    """A record's test file relative to the workspace, for a session run in `rootdir`."""

    def path_of(record: CompileRecord) -> str | None:
        if record.location is None:
            return None
        return workspace_path(rootdir / record.location[0], workspace, rootdir)

    return path_of


# --- annotations ----------------------------------------------------------------------


def annotation_commands(
    outcome: Outcome, path_of: PathOf, workspace: Path | None
) -> list[str]:
    """``::error`` for the rows that fail the gate, ``::warning`` for the other regressed
    and improved rows and for stale pins, each at the test function or the pin."""
    if outcome.pin_update:
        lines = []
    else:
        lines = [
            _row_annotation(verdict, outcome, path_of)
            for verdict in sorted(outcome.verdicts, key=severity_order)
            if verdict.status.tone in (Tone.BAD, Tone.GOOD)
        ]
    lines += [_stale_annotation(stale, outcome, workspace) for stale in outcome.stale]
    if outcome.pin_error is not None:
        lines.append(
            workflow_command("error", f"pins NOT updated: {outcome.pin_error}",
                             {"title": "jax compile pins not updated"})
        )
    lines += [
        workflow_command("warning", f"compile rows missing: {lost}",
                         {"title": "jax compile rows missing"})
        for lost in outcome.lost
    ]
    if not outcome.pin_update:
        lines += [
            workflow_command("warning", "\n".join([change.headline(), *change.recompiles]),
                             {"title": "jax compile count changed"})
            for change in outcome.compile_count_changes
        ]
        lines += [
            workflow_command("warning", text.removeprefix("warning: "),
                             {"title": "jax compile gate"})
            for text in warning_lines(outcome)
        ]
        lines += [
            workflow_command(
                "error" if upgrade.fails(outcome.thresholds) else "warning",
                "\n".join(upgrade_lines(upgrade, outcome.thresholds)),
                {"title": f"{upgrade.framework} upgrade {upgrade.old} -> {upgrade.new}"},
            )
            for upgrade in outcome.upgrades
        ]
    return lines


def _row_annotation(verdict: Verdict, outcome: Outcome, path_of: PathOf) -> str:
    record = verdict.record
    failing = verdict.fails(outcome.thresholds)
    message = (
        f"{record.cell} [{record.transform}] compiled in {comparison(verdict)}, under "
        f"{record.key.describe()}: "
        + status_sentence(verdict.status, [verdict], outcome.thresholds).split(": ", 1)[1]
    )
    if verdict.note:
        message += f"\n{verdict.note}"
    what = advice(verdict.status, [verdict])
    if what is not None:
        message += "\n" + " ".join(what)
    title = f"jax compile {verdict.status.value}: {record.cell.rsplit('::', 1)[-1]} " \
            f"[{record.transform}]"
    line = record.location[1] if record.location is not None else None
    return workflow_command(
        "error" if failing else "warning",
        message,
        {"file": path_of(record), "line": line, "title": title},
    )


def _stale_annotation(stale: StalePin, outcome: Outcome, workspace: Path | None) -> str:
    message = (
        f"stale pin: {stale.cell} [{stale.transform}] ran in this session but measured "
        f"nothing for this transform, under {stale.key.describe()}. Delete it from the pin "
        "file if the transform is gone."
    )
    return workflow_command(
        "warning",
        message,
        {
            "file": workspace_path(stale.pin_file, workspace, outcome.rootdir),
            "line": pin_line(stale.pin_file, stale.cell, stale.transform),
            "title": f"stale jax compile pin: {stale.cell.rsplit('::', 1)[-1]} "
                     f"[{stale.transform}]",
        },
    )


# --- step summary ---------------------------------------------------------------------


def step_summary(outcome: Outcome, title: str = "jax compile times") -> str:
    """The Markdown appended to the job summary: the verdict first, then one table per key.

    Kept under GitHub's size limit: `ok` rows are dropped first, then the end is cut.
    """
    text = _step_summary(outcome, title, with_ok=True)
    if len(text.encode()) > SUMMARY_BUDGET:
        text = _step_summary(outcome, title, with_ok=False)
    if len(text.encode()) > SUMMARY_BUDGET:
        trailer = "\n\n... (cut to fit GitHub's step summary limit; see the JSON report)\n\n"
        room = SUMMARY_BUDGET - len(trailer.encode())  # the trailer counts too
        text = text.encode()[:room].decode(errors="ignore").rsplit("\n", 1)[0] + trailer
    return text


def _step_summary(outcome: Outcome, title: str, with_ok: bool) -> str:
    lines = [f"## {title}: {_headline(outcome)}", "", *_spend(outcome)]
    counts = ", ".join(f"{n} {status.value}" for status, n in outcome.counts())
    if counts:
        lines += [f"Compile rows: {counts}.", ""]
    lines += _action_lines(outcome)
    for key, verdicts in _groups(outcome):
        lines += _group_lines(key, verdicts, outcome, with_ok)
    if outcome.stale:
        lines += [
            f"### Stale pins ({len(outcome.stale)})",
            "",
            "Pinned transforms of tests that ran but measured nothing; delete them from the "
            "pin file if the transform is gone.",
            "",
            "| Test | Transform | Pin file |",
            "|---|---|---|",
        ]
        lines += [
            f"| {_code(stale.cell)} | {_cell(stale.transform)} | "
            f"{_code(relative(stale.pin_file, outcome.rootdir))} |"
            for stale in outcome.stale
        ]
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n\n"


def _spend(outcome: Outcome) -> list[str]:
    """What the session spent compiling, as a paragraph: it leads, as in the terminal."""
    return [
        paragraph
        for line in spend_lines(outcome)
        for paragraph in (f"{_text(line[0].upper() + line[1:])}.", "")
    ]


def _headline(outcome: Outcome) -> str:
    if outcome.pin_error is not None:
        return "pins NOT updated"
    if outcome.pin_update:
        return "pins updated"
    if outcome.failed:
        failing = [v.status for v in outcome.failing()]
        parts = [f"{failing.count(status)} {status.value}" for status in Status
                 if status in failing]
        return "FAIL (" + ", ".join(parts) + ")" if parts else "FAIL"
    return "pass"


def _action_lines(outcome: Outcome) -> list[str]:
    lines: list[str] = []
    for lost in outcome.lost:
        lines += [f"> [!WARNING]\n> Compile rows missing: {_text(lost)}", ""]
    if outcome.pin_error is not None:
        lines += [f"> [!CAUTION]\n> Pins NOT updated: {_text(outcome.pin_error)}", ""]
        return lines
    if outcome.pin_update:
        written = [relative(path, outcome.rootdir) for path in outcome.pins_written]
        lines += (
            ["Pin files written:", ""] + [f"- {_code(name)}" for name in written] + [""]
            if written else ["Pins updated: nothing changed.", ""]
        )
        return lines
    for text in warning_lines(outcome):
        lines += [f"> [!WARNING]\n> {_text(text.removeprefix('warning: '))}", ""]
    for change in outcome.compile_count_changes:
        block = [change.headline(), *change.recompiles]
        lines += ["> [!NOTE]"] + [f"> {_text(text)}  " for text in block] + [""]
    for upgrade in outcome.upgrades:
        block = upgrade_lines(upgrade, outcome.thresholds)
        kind = "CAUTION" if upgrade.fails(outcome.thresholds) else "NOTE"
        lines += [f"> [!{kind}]"] + [f"> {_text(text)}  " for text in block] + [""]
        return lines
    for status, _ in outcome.counts():
        if status in (Status.OK, Status.NOT_JUDGED):
            continue
        rows = outcome.with_status(status)
        lines += [_text(status_sentence(status, rows, outcome.thresholds)), ""]
        what = advice(status, rows)
        if what is not None:
            sentence, command = what
            lines += [sentence, "", "```bash", command, "```", ""]
    return lines


def _groups(outcome: Outcome) -> list[tuple[ComparabilityKey, list[Verdict]]]:
    """Groups by key; the groups holding the most severe verdicts come first."""
    groups = by_key(outcome.verdicts)
    return sorted(groups, key=lambda group: (group[1][0].status.severity, group[0]))


def _group_lines(
    key: ComparabilityKey, verdicts: list[Verdict], outcome: Outcome, with_ok: bool
) -> list[str]:
    lines = [f"### {_text(key.describe())}", ""]
    pin_file = next((v.pin_file for v in verdicts if v.pin_file is not None), None)
    if pin_file is not None:
        lines += [f"Pin file: {_code(relative(pin_file, outcome.rootdir))}", ""]
    fold = [v for v in verdicts if folded(v, outcome, verbose=False)]
    shown = [v for v in verdicts if v.status is not Status.OK and v not in fold]
    ok = [v for v in verdicts if v.status is Status.OK]
    if shown:
        lines += _table(shown)
    if fold:
        lines += [
            f"<details><summary>{_text(unpinned_fold(fold)[0].strip())}</summary>",
            "",
            *[_text(text) for text in unpinned_fold(fold)[1:]],
            "",
            *_table(fold),
            "</details>",
            "",
        ]
    if ok and not with_ok:
        lines += [f"{len(ok)} row(s) within tolerance (listed in the JSON report).", ""]
    elif ok:
        lines += [
            f"<details><summary>{len(ok)} row(s) within tolerance</summary>",
            "",
            *_table(ok),
            "</details>",
            "",
        ]
    return lines


def _table(verdicts: list[Verdict], limit: int = MAX_LISTED_ROWS) -> list[str]:
    lines = [
        "| Verdict | Test | Transform | Compile | Pin | Ratio | Tolerance | Note |",
        "|---|---|---|---:|---:|---:|---:|---|",
    ]
    listed = verdicts[:limit]
    for verdict in listed:
        record = verdict.record
        pin = "" if verdict.pin is None else f"{verdict.pin.compile_s:.3f} s"
        ratio = "" if verdict.ratio is None else f"{verdict.ratio:.2f}x"
        tolerance = "" if verdict.tolerance is None else f"{verdict.tolerance:.0%}"
        status = f"**{verdict.status.value}**" if verdict.status.tone is Tone.BAD else (
            verdict.status.value
        )
        note = verdict.note or ""
        if verdict.status is Status.NOT_JUDGED:
            note = f"[{record.cache_state}] {note}".strip()
        lines.append(
            f"| {status} | {_code(record.cell)} | {_cell(record.transform)} | "
            f"{record.compile_s:.3f} s | {pin} | {ratio} | {tolerance} | {_cell(note)} |"
        )
    if len(verdicts) > len(listed):
        lines += ["", f"... and {len(verdicts) - len(listed)} more row(s) "
                      "(see the JSON report)."]
    lines.append("")
    return lines


def _text(text: str) -> str:
    """Plain text in Markdown: no line breaks, no HTML."""
    return " ".join(text.split()).replace("<", "&lt;").replace(">", "&gt;")


def _cell(text: str) -> str:
    return _text(text).replace("|", "\\|")


def _code(text: str) -> str:
    """A code span inside a table cell; backticks in the text widen the fence."""
    body = _cell(text)
    return f"`` {body} ``" if "`" in body else f"`{body}`"


# --- pull-request comment -------------------------------------------------------------

COMMENT_MARKER = "<!-- pytest-jaxcompile -->"  # finds the comment to edit on the next push
COMMENT_BUDGET = 60_000  # characters; GitHub refuses a comment over 65,536
COMMENT_ORDER = (Status.DRIFT, Status.GREW, Status.MISS, Status.IMPROVED)  # what changed


def pr_comment(
    outcome: Outcome, report: str = "the `jaxcompile-report` artifact of this run",
    title: str = "jax compile times",
) -> str:
    """One short Markdown comment for a pull request: the verdict, only the rows that fail
    or changed (regressions, then misses, then improvements), unpinned rows as a count,
    what to do, and where the full report is. Under GitHub's size limit at any suite size."""
    changed = sorted(
        (v for v in outcome.verdicts if v.status in COMMENT_ORDER),
        key=lambda v: (COMMENT_ORDER.index(v.status), v.record.cell, v.record.transform),
    )
    for limit in (len(changed), 200, 50, 10, 0):
        text = _pr_comment(outcome, changed, limit, report, title)
        if len(text) <= COMMENT_BUDGET:
            return text
    return text[:COMMENT_BUDGET].rsplit("\n", 1)[0] + "\n"


def _pr_comment(
    outcome: Outcome, changed: list[Verdict], limit: int, report: str, title: str
) -> str:
    lines = [COMMENT_MARKER, f"### {title}: {_headline(outcome)}", "", *_spend(outcome)]
    counts = ", ".join(f"{n} {status.value}" for status, n in outcome.counts())
    if counts:
        lines += [f"Compile rows: {counts}.", ""]
    if changed:
        lines += _table(changed, limit)
    unpinned = outcome.with_status(Status.UNPINNED)
    if unpinned:
        lines += [_text(" ".join(text.strip() for text in unpinned_fold(unpinned))), ""]
    lines += _action_lines(outcome)
    lines += [f"The full report: {report}.", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def append_step_summary(path: Path, markdown: str) -> None:
    """Append (never overwrite): other steps and tools write the same file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8", newline="\n") as handle:
        handle.write(markdown)


class GitHubOutput:
    """GitHub Actions output of a session: registered only when GitHub's variables ask for
    it (and ``--compile-github`` is not ``off``), on the controller."""

    def __init__(self, config: pytest.Config, targets: GitHubTargets) -> None:
        self.config = config
        self.targets = targets
        self.problem: str | None = None

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        outcome = outcome_of(self.config)
        if outcome is None or self.targets.step_summary is None or not outcome.has_news():
            return
        try:
            append_step_summary(self.targets.step_summary, step_summary(outcome))
        except OSError as error:
            self.problem = f"GitHub step summary not written: {error}"

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        outcome = outcome_of(self.config)
        if self.problem is not None:
            summary_section(terminalreporter)
            terminalreporter.write_line(self.problem, yellow=True)
        if outcome is None or not self.targets.annotations or not outcome.has_news():
            return
        path_of = record_path_resolver(self.config.rootpath, self.targets.workspace)
        for command in annotation_commands(outcome, path_of, self.targets.workspace):
            terminalreporter.write_line(command)  # a workflow command: no markup
