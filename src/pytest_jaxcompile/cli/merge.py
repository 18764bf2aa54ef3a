"""``pytest-jaxcompile merge``: one verdict from the JSON reports of several CI jobs.

Every record of every report is judged again against a pins directory with the plugin's
own rules (`gate.conclude`: `verdicts.judge_all` and `pins.PinStore`), so a suite split
over shards or a matrix gets the verdict an unsharded session would give, printed in the
plugin's terminal format. Does not import jax.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections import Counter
from pathlib import Path

from pytest_jaxcompile._io import atomic_write_text
from pytest_jaxcompile._version import __version__
from pytest_jaxcompile.cli._args import (
    add_pins_argument,
    add_pr_comment_arguments,
    add_reports_argument,
)
from pytest_jaxcompile.gate.conclude import GateSettings, conclude, ordered
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.outcome import Outcome
from pytest_jaxcompile.gate.pins import PinFileError, PinStore
from pytest_jaxcompile.options import GITHUB_MODES, THRESHOLD_OPTIONS
from pytest_jaxcompile.options.subcommands import add_threshold_arguments, given_thresholds
from pytest_jaxcompile.output import in_github_actions
from pytest_jaxcompile.output.github import (
    GitHubTargets,
    annotation_commands,
    append_step_summary,
    pr_comment,
    record_path_resolver,
    step_summary,
)
from pytest_jaxcompile.output.json_report import (
    LoadedReport,
    ReportError,
    build_report,
    bundle_id,
    load_report,
    report_paths,
    write_report,
)
from pytest_jaxcompile.output.terminal import summary_lines
from pytest_jaxcompile.records import CompileRecord, row_name

HELP = "combine the JSON reports of several CI jobs into one summary and one exit status"
PROG = "pytest-jaxcompile merge"
EXIT_OK, EXIT_GATE_FAILED, EXIT_USAGE = 0, 1, 2
WIDTH = 80


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_reports_argument(parser)
    add_pins_argument(parser)
    add_threshold_arguments(parser, inherit=True)
    parser.add_argument(
        "--pin-update",
        action="store_true",
        help="write the reports' rows into the pins (never fails on drift)",
    )
    parser.add_argument(
        "--write-report",
        type=Path,
        default=None,
        metavar="PATH",
        help="write the merged records and verdicts as one JSON report (same schema)",
    )
    add_pr_comment_arguments(
        parser,
        "also write a short Markdown comment for the pull request: the verdict and the "
        "rows that fail or changed",
    )
    parser.add_argument(
        "--github",
        choices=GITHUB_MODES,
        default="auto",
        help="GitHub Actions output as the plugin's ini key compile_github (default: auto)",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="list ok rows too",
    )


class UsageProblem(Exception):
    """Bad input: reported as one line naming what is wrong, exit status 2."""


def run(args: argparse.Namespace) -> int:
    try:
        reports = [load_report(path) for path in report_paths(args.reports)]
        settings = _gate_settings(args, reports)
        store = PinStore.load(args.pins_dir.resolve())
    except (ReportError, UsageProblem) as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except PinFileError as error:
        print(f"{PROG}: error: cannot read pin file {error}", file=sys.stderr)
        return EXIT_USAGE

    _warn_duplicates(reports)
    records = [record for report in reports for record in report.records]
    ledgers = [ledger for report in reports for ledger in report.ledgers]
    rootdir = Path.cwd()
    outcome = conclude(
        records,
        [cell for report in reports for cell in report.ran_cells],
        [identity for report in reports for identity in report.environments],
        store,
        settings,
        rootdir=rootdir,
        ledgers=ledgers,
    )
    outcome.lost = [f"{report.path}: {lost}" for report in reports for lost in report.lost]
    walls = [report.session_s for report in reports if report.session_s is not None]
    outcome.session_s = sum(walls) if len(walls) == len(reports) else None
    outcome.workers = max(report.workers for report in reports)
    # The re-pin command every output prints names the gates the sessions used (their
    # --compile-paired, ...), as the sessions' own outputs did.
    for report in reports:  # what the gate itself spent after each report's tests
        for work, seconds in report.gate_s.items():
            outcome.gate_s[work] = outcome.gate_s.get(work, 0.0) + seconds
    outcome.profiled_rows = sum(report.profiled_rows for report in reports)
    _reproducers(outcome, reports, rootdir)
    outcome.repin_arguments = tuple(
        dict.fromkeys(argument for report in reports for argument in report.repin_arguments)
    )
    outcome.repin_environment = tuple(
        dict.fromkeys(word for report in reports for word in report.repin_environment)
    )
    # What the sessions' pins hold (a stored module only they could see), with the gate's
    # own from the pins here: the same re-pin, however the reports were merged.
    for report in reports:
        for cell, options in report.repin_keeps.items():
            kept = outcome.repin_keeps.get(cell, ())
            outcome.repin_keeps[cell] = tuple(dict.fromkeys([*kept, *options]))
    # In CI the way back is the CI's: the sessions ran there, or the merge runs there.
    outcome.github_actions = in_github_actions(os.environ) or any(
        report.github_actions for report in reports
    )
    outcome.accept_label = next(
        (report.accept_label for report in reports if report.accept_label is not None), None
    )

    print(f" jax compile times ({_merged(reports)}) ".center(WIDTH, "="))
    for report in reports:
        print(f"  {report.path}: {len(report.records)} row(s)")
    if outcome.has_news():
        for text, _markup in summary_lines(outcome, args.verbose):
            print(text)
    else:
        print("no compile rows in these reports")
    _github(args.github, outcome, reports)
    if args.pr_comment is not None:
        try:
            atomic_write_text(args.pr_comment, pr_comment(outcome, args.report_artifact))
        except OSError as error:
            print(f"{PROG}: error: cannot write {args.pr_comment}: {error}", file=sys.stderr)
            return EXIT_USAGE
    if args.write_report is not None:
        try:
            write_report(
                args.write_report, build_report(outcome, ordered(records), ledgers, __version__)
            )
        except OSError as error:
            print(f"{PROG}: error: cannot write {args.write_report}: {error}", file=sys.stderr)
            return EXIT_USAGE
    return EXIT_GATE_FAILED if outcome.failed else EXIT_OK


def _reproducers(outcome: Outcome, reports: list[LoadedReport], rootdir: Path) -> None:
    """The reports' reproducer bundles, named again on the rows they were written for."""
    folders = {
        identity: folder for report in reports for identity, folder in report.reproducers.items()
    }
    for verdict in outcome.verdicts:
        folder = folders.get(bundle_id(verdict.record))
        if folder is not None:
            outcome.reproducers[(verdict.record.key, verdict.record.row_id)] = rootdir / folder
    where = [report.reproducers_dir for report in reports if report.reproducers_dir is not None]
    if where and outcome.reproducers:
        outcome.reproducers_dir = rootdir / where[0]


def _merged(reports: list[LoadedReport]) -> str:
    return f"merged from {len(reports)} report{'s' if len(reports) != 1 else ''}"


def _gate_settings(args: argparse.Namespace, reports: list[LoadedReport]) -> GateSettings:
    """The command line's values; for the rest the reports', which must agree."""
    given = given_thresholds(args)
    judged = [(report.path, report.thresholds or Thresholds()) for report in reports]
    differing = [
        option
        for option in THRESHOLD_OPTIONS
        if option.threshold not in given
        and len({getattr(thresholds, str(option.threshold)) for _, thresholds in judged}) > 1
    ]
    if differing:
        listed = "; ".join(
            f"{path}: "
            + ", ".join(
                f"{option.threshold} {getattr(thresholds, str(option.threshold))!r}"
                for option in differing
            )
            for path, thresholds in judged
        )
        flags = " and ".join(option.short_flag for option in differing)
        raise UsageProblem(
            f"the reports were judged with different thresholds ({listed}); give {flags} "
            "to judge them all alike"
        )
    reported = judged[0][1] if judged else Thresholds()
    return GateSettings(
        thresholds=dataclasses.replace(reported, **given), pin_update=args.pin_update
    )


def _warn_duplicates(reports: list[LoadedReport]) -> None:
    """The same row under the same key in two reports is judged twice: say so."""
    seen = Counter(
        (*record.row_id, record.key)
        for report in reports
        for record in {(*r.row_id, r.key): r for r in report.records}.values()
    )
    repeated = sorted(
        row_name(cell, transform, variant)
        for (cell, transform, variant, _), n in seen.items()
        if n > 1
    )
    if repeated:
        shown = ", ".join(repeated[:5])
        more = f" and {len(repeated) - 5} more" if len(repeated) > 5 else ""
        print(
            f"{PROG}: warning: {len(repeated)} row(s) measured under the same key in more than "
            f"one report: {shown}{more}. Each is judged; --pin-update keeps the last report's.",
            file=sys.stderr,
        )


def _github(mode: str, outcome: Outcome, reports: list[LoadedReport]) -> None:
    targets = GitHubTargets.from_environment(os.environ, mode)
    if not outcome.has_news():
        return
    if targets.step_summary is not None:
        try:
            append_step_summary(
                targets.step_summary,
                step_summary(outcome, f"jax compile times ({_merged(reports)})"),
            )
        except OSError as error:
            print(f"{PROG}: warning: GitHub step summary not written: {error}", file=sys.stderr)
    if targets.annotations:
        resolvers = {}
        for report in reports:
            root = Path(report.rootdir) if report.rootdir else outcome.rootdir
            resolver = record_path_resolver(root, targets.workspace)
            resolvers.update({id(record): resolver for record in report.records})

        def path_of(record: CompileRecord) -> str | None:
            return resolvers[id(record)](record)

        for command in annotation_commands(outcome, path_of, targets.workspace):
            print(command)
