"""GitHub Actions output: the job's step summary (Markdown) and workflow-command annotations.

Pure functions of a `Outcome` and the environment mapping; the plugin writes the
step summary in ``pytest_sessionfinish`` (controller only) and prints the annotations in
its terminal summary; ``pytest-jaxcompile merge`` does the same for merged reports.

Workflow commands and their escaping follow GitHub's toolkit (``@actions/core``,
``command.ts``): in a message ``%``, ``\\r`` and ``\\n`` are percent-encoded; in a
property value ``:`` and ``,`` are too.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_jaxcompile._io import relative
from pytest_jaxcompile.gate.outcome import Outcome
from pytest_jaxcompile.gate.pins import pin_line
from pytest_jaxcompile.gate.stale import StalePin
from pytest_jaxcompile.gate.status import Status, Tone
from pytest_jaxcompile.gate.view import (
    BUDGET_NOT_PINNED,
    Block,
    BlockKind,
    GroupView,
    RowView,
    SessionView,
    session_view,
    split_folds,
)
from pytest_jaxcompile.output import in_github_actions, outcome_of, summary_section
from pytest_jaxcompile.records import CompileRecord, transform_label

ENV_STEP_SUMMARY = "GITHUB_STEP_SUMMARY"
ENV_WORKSPACE = "GITHUB_WORKSPACE"
MAX_LISTED_ROWS = 500  # per table of the step summary
SUMMARY_BUDGET = 900_000  # bytes; GitHub refuses a step summary over 1 MiB

# Where a record's test lives, as a path relative to the repository root, or None.
PathOf = Callable[[CompileRecord], str | None]


@dataclass(frozen=True)
class GitHubTargets:
    """What to produce for GitHub, from the environment (and the `compile_github` mode)."""

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
            annotations=in_github_actions(environ),
            workspace=Path(workspace) if workspace else None,
        )


# --- escaping -------------------------------------------------------------------------


def escape_data(text: str) -> str:
    """A workflow command's message: GitHub decodes %25, %0D and %0A."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value (``file=``, ``title=``, ...)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(command: str, message: str, properties: Mapping[str, str | int | None]) -> str:
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


def annotation_commands(outcome: Outcome, path_of: PathOf, workspace: Path | None) -> list[str]:
    """``::error`` for the rows and blocks that fail the gate, ``::warning`` for the other
    regressed and improved rows, stale pins and the session's other blocks, each at the test
    function or the pin where it has one."""
    view = session_view(outcome)
    # A row's advice is its status's, word for word: the one re-pin command every output
    # prints for the rows of that status.
    advice = {
        block.status: way_back
        for block in view.blocks_of(BlockKind.STATUS)
        if block.status is not None and (way_back := block.way_back()) is not None
    }
    lines = [
        _row_annotation(row, path_of, advice.get(row.status))
        for row in sorted(view.rows, key=lambda row: (row.status.severity, *row.record.row_id))
        if (row.fails or row.tone in (Tone.BAD, Tone.GOOD)) and not outcome.pin_update
    ]
    for block in view.blocks:
        if block.kind is BlockKind.STALE:
            lines += [_stale_annotation(stale, outcome, workspace) for stale in outcome.stale]
        elif block.kind not in (
            BlockKind.STATUS,
            BlockKind.PINS_UPDATED,
            BlockKind.SETTINGS,
            BlockKind.PAIRED,
        ):
            lines.append(_block_annotation(block))
    return lines


_TITLES = {
    BlockKind.PIN_ERROR: "jax compile pins not updated",
    BlockKind.LOST: "jax compile rows missing",
    BlockKind.CLOBBER: "jax compile settings clobbered",
    BlockKind.WARNING: "jax compile gate",
    BlockKind.ALWAYS_COLD: "jax compile rows always cold",
    BlockKind.COMPILE_COUNT: "jax compile count changed",
}


ANNOTATION_DETAILS = "Details: the job's step summary."


def _sentence(block: Block, fails: str = "the session fails") -> str:
    """A block's text with the words of GitHub's job output for what it does."""
    if block.fails and block.kind is not BlockKind.PIN_ERROR:
        return f"{block.text}; {fails}."
    if block.reported_only:
        return f"{block.text}; {block.reported_only}."
    if block.kind in (
        BlockKind.WARNING,
        BlockKind.CLOBBER,
        BlockKind.UPGRADE,
        BlockKind.STATUS,
        BlockKind.ALWAYS_COLD,
    ):
        return f"{block.text}."
    return block.text


def _block_annotation(block: Block) -> str:
    lines = [_sentence(block), *block.details]
    if block.advice is not None:
        lines.append(str(block.way_back()))
    title = _TITLES.get(block.kind) or block.text.split(":", 1)[0]
    return workflow_command(
        "error" if block.fails else "warning", "\n".join(lines), {"title": title}
    )


def _row_annotation(row: RowView, path_of: PathOf, advice: str | None) -> str:
    """Short: what the row measured, its line of cause and the re-pin command; the whole
    note is in the step summary (and the JSON report)."""
    record = row.record
    measured = "compiled in" if row.figures.unit == "s" else "measured"
    message = (
        f"{row.name} {measured} {row.figures.text()}, under "
        f"{row.key.describe()}: {row.meaning}" + (f"; {SUMMARY_FAILS}." if row.fails else ".")
    )
    if row.cause:
        message += f"\n{row.cause}"
    if advice is not None:
        message += "\n" + advice
    if len(row.details) > (1 if row.cause else 0):
        message += f"\n{ANNOTATION_DETAILS}"
    title = (
        f"jax compile {row.status.value}: {row.cell.rsplit('::', 1)[-1]} "
        f"[{transform_label(row.transform, row.variant)}]"
    )
    line = record.location[1] if record.location is not None else None
    return workflow_command(
        "error" if row.fails else "warning",
        message,
        {"file": path_of(record), "line": line, "title": title},
    )


def _stale_annotation(stale: StalePin, outcome: Outcome, workspace: Path | None) -> str:
    message = (
        f"stale pin: {stale.name} ran in this session but measured "
        f"nothing for this transform, under {stale.key.describe()}. Delete it from the pin "
        "file if the transform is gone."
    )
    return workflow_command(
        "warning",
        message,
        {
            "file": workspace_path(stale.pin_file, workspace, outcome.rootdir),
            "line": pin_line(stale.pin_file, stale.cell, stale.transform, stale.variant),
            "title": f"stale jax compile pin: {stale.cell.rsplit('::', 1)[-1]} "
            f"[{transform_label(stale.transform, stale.variant)}]",
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
    view = session_view(outcome)
    lines = [f"## {title}: {view.headline}", "", *_spend(view)]
    if view.counts():
        lines += [f"Compile rows: {view.counts_text()}.", ""]
    lines += _block_lines(view, SUMMARY_FAILS)
    lines += _reproducer_lines(view, None)
    for group in view.groups:
        lines += _group_lines(group, outcome, with_ok)
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
            f"| {_code(stale.cell)} | {_cell(transform_label(stale.transform, stale.variant))} | "
            f"{_code(relative(stale.pin_file, outcome.rootdir))} |"
            for stale in outcome.stale
        ]
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n\n"


SUMMARY_FAILS = "the session fails"  # the step summary's words for what fails
COMMENT_FAILS = "this run fails"  # a pull-request comment's


def _spend(view: SessionView) -> list[str]:
    """What the session and the gate spent (the view's), as paragraphs: they lead, as in
    the terminal."""
    return [
        paragraph
        for line in ([] if view.spend is None else view.spend.lines())
        for paragraph in (f"{_text(line[0].upper() + line[1:])}.", "")
    ]


def _reproducer_lines(view: SessionView, report: str | None) -> list[str]:
    """The view's reproducer line, as a paragraph; in a comment, where it is uploaded."""
    if view.reproducers is None:
        return []
    where = "" if report is None else f" ({report})"
    return [f"{_text(view.reproducers[0].upper() + view.reproducers[1:])}{where}.", ""]


def _block_lines(view: SessionView, fails: str) -> list[str]:
    """The session's blocks in the view's order: a call-out each, a paragraph and the
    command per status. Stale pins get a table of their own (at the end)."""
    lines: list[str] = []
    for block in view.blocks:
        if block.kind is BlockKind.STALE:
            continue
        if block.kind is BlockKind.PINS_UPDATED:
            lines += (
                ["Pin files written:", ""] + [f"- {_code(name)}" for name in block.paths] + [""]
                if block.paths
                else ["Pins updated: nothing changed.", ""]
            )
            continue
        text = _sentence(block, fails)
        if block.kind is BlockKind.STATUS:
            lines += [_text(text), ""]
            if block.command is not None:
                lines += [str(block.advice), "", "```bash", block.command, "```", ""]
            elif block.advice is not None:  # CI's way: a sentence, no command
                lines += [_text(block.advice), ""]
            continue
        body = [text, *block.details]
        if block.advice is not None:
            body.append(str(block.way_back()))
        lines += [f"> [!{_callout(block)}]"] + [f"> {_text(line)}  " for line in body] + [""]
    return lines


def _callout(block: Block) -> str:
    if block.fails:
        return "CAUTION"
    if block.kind in (BlockKind.UPGRADE, BlockKind.COMPILE_COUNT, BlockKind.PAIRED):
        return "NOTE"
    return "WARNING"


def _group_lines(group: GroupView, outcome: Outcome, with_ok: bool) -> list[str]:
    lines = [f"### {_text(group.key.describe())}", ""]
    if group.pin_file is not None:
        lines += [f"Pin file: {_code(relative(group.pin_file, outcome.rootdir))}", ""]
    if outcome.pin_update:  # compared with the pins just written: nothing to list
        if group.pinned_rows or not (group.budget_rows or group.not_pinned):
            lines += [f"{group.pinned_rows} row(s) pinned.", ""]
        if group.not_pinned:
            lines += [
                f"{group.not_pinned_rows} row(s) not pinned ({_text(group.not_pinned_text())}).",
                "",
            ]
        if group.budget_rows:
            lines += [f"{group.budget_rows} {BUDGET_NOT_PINNED}.", ""]
        return lines
    shown, folds = split_folds(row for row in group.rows if row.status is not Status.OK)
    ok = [row for row in group.rows if row.status is Status.OK]
    if shown:
        lines += _table(shown)
    for fold in folds:
        ratios = fold.ratios_text()
        lines += [
            f"<details><summary>{len(fold.rows)} {fold.status.value} row(s): "
            f"{_text(fold.per_file_text())}</summary>",
            "",
            *([] if ratios is None else [_text(ratios), ""]),
            *_table(list(fold.rows)),
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


def _table(rows: list[RowView], limit: int = MAX_LISTED_ROWS) -> list[str]:
    """The rows with the figures their verdicts compared: the metric's own figures, unit,
    ratio and limit."""
    lines = [
        "| Verdict | Test | Transform | Measured | Pin | Ratio | Limit | Note |",
        "|---|---|---|---:|---:|---:|---:|---|",
    ]
    listed = rows[:limit]
    for row in listed:
        figures = row.figures
        pin = "" if figures.pinned is None else figures.value(figures.pinned)
        status = f"**{row.status.value}**" if row.tone is Tone.BAD else row.status.value
        note = " ".join(row.causes)
        if row.status is Status.NOT_JUDGED:
            note = f"[{row.record.cache_state}] {note}".strip()
        lines.append(
            f"| {status} | {_code(row.cell)} | "
            f"{_cell(transform_label(row.transform, row.variant))} | "
            f"{_cell(figures.value(figures.measured))} | {_cell(pin)} | "
            f"{figures.ratio_text()} | {_cell(figures.limit_text())} | {_cell(note)} |"
        )
    if len(rows) > len(listed):
        lines += ["", f"... and {len(rows) - len(listed)} more row(s) (see the JSON report)."]
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


def pr_comment(
    outcome: Outcome,
    artifact: str | None = None,
    title: str = "jax compile times",
) -> str:
    """One short Markdown comment for a pull request: the verdict, only the rows that fail
    or changed (in the Status order), folded rows as a count, what to do, and, when the
    workflow names one (`artifact`), the artifact with the full report. Under GitHub's size
    limit at any suite size."""
    report = None if artifact is None else f"the `{artifact}` artifact of this run"
    view = session_view(outcome)
    changed = sorted(
        (row for row in view.rows if row.fails or row.tone in (Tone.BAD, Tone.GOOD)),
        key=lambda row: (row.status.severity, *row.record.row_id),
    )
    for limit in (len(changed), 200, 50, 10, 0):
        text = _pr_comment(view, changed, limit, report, title)
        if len(text) <= COMMENT_BUDGET:
            return text
    return text[:COMMENT_BUDGET].rsplit("\n", 1)[0] + "\n"


def _pr_comment(
    view: SessionView, changed: list[RowView], limit: int, report: str | None, title: str
) -> str:
    lines = [COMMENT_MARKER, f"### {title}: {view.headline}", "", *_spend(view)]
    if view.counts():
        lines += [f"Compile rows: {view.counts_text()}.", ""]
    if changed:
        lines += _table(changed, limit)
    for fold in [] if view.outcome.pin_update else split_folds(view.rows)[1]:
        ratios = fold.ratios_text()
        lines += [
            _text(
                f"{len(fold.rows)} {fold.status.value} row(s): {fold.per_file_text()}"
                + ("" if ratios is None else f"; {ratios}")
            ),
            "",
        ]
    lines += _block_lines(view, COMMENT_FAILS)
    lines += _reproducer_lines(view, report)
    if report is not None:  # only an artifact the workflow says it uploads
        lines += [f"The full report: {report}.", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def append_step_summary(path: Path, markdown: str) -> None:
    """Append (never overwrite): other steps and tools write the same file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8", newline="\n") as handle:
        handle.write(markdown)


class GitHubOutput:
    """GitHub Actions output of a session: registered only when GitHub's variables ask for
    it (and ``compile_github`` is not ``off``), on the controller."""

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
