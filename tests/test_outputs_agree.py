"""Every output over random Outcomes: none crashes, none loses a failing row or the
session's failure sentence, and they agree on the counts.

The Outcomes cross any statuses, compared metrics and phases, pins or none, upgrade blocks,
warnings (a lost cache, mostly unpinned rows), lost rows, pin errors, clobbers, stale pins and
compile-count changes, with hostile test names (unicode, pipes, backticks, newlines, HTML).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from records_factory import make_record

from pytest_jaxcompile.backends.settings import Clobber
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.nearest import UPGRADE, NearestPin
from pytest_jaxcompile.gate.outcome import Coverage, Outcome
from pytest_jaxcompile.gate.pins import Pin
from pytest_jaxcompile.gate.stale import CompileCountChange, StalePin
from pytest_jaxcompile.gate.status import Status, Verdict, session_failed
from pytest_jaxcompile.gate.upgrades import UpgradeReport
from pytest_jaxcompile.gate.view import BlockKind, session_view
from pytest_jaxcompile.output.github import (
    annotation_commands,
    pr_comment,
    record_path_resolver,
    step_summary,
)
from pytest_jaxcompile.output.json_report import build_report, load_report, write_report
from pytest_jaxcompile.output.junit import junit_properties, verdict_properties
from pytest_jaxcompile.output.terminal import summary_lines

ROOT = Path("/nonexistent-root")
HOSTILE = st.text(alphabet=st.sampled_from(list("aZ09 _-|`\n\r<>&'\"%:,[]*#éΩ漢🙂\\")), max_size=12)
PHASES = (
    "compile_s",
    "trace_s",
    "lower_s",
    "compiled_temp_bytes",
    "flops",
    "compile_rss_growth_mib",
    "paired",  # a verdict the pairs decided (--compile-paired)
    "compile_instructions",
)
FIGURE = st.floats(min_value=0.001, max_value=1000.0, allow_nan=False)


@st.composite
def verdicts(draw: st.DrawFn, index: int) -> Verdict:
    status = draw(st.sampled_from(list(Status)))
    name = draw(HOSTILE)
    jax = draw(st.sampled_from(["0.10.2", "0.11.0"]))
    record = make_record(
        cell=f"tests/t{index}.py::test_{index}_{name}",
        transform=draw(st.sampled_from(["vag", "jit|x", "`t`"])),
        location=("tests/t.py", index + 1),
        jax_version=jax,
        jaxlib_version=jax,
        cache_state=draw(st.sampled_from(["cold", "warm", "none"])),
        compile_s=draw(FIGURE),
        compile_cpu_s=draw(st.none() | FIGURE),
        trace_s=draw(st.none() | FIGURE),
        lower_s=draw(st.none() | FIGURE),
        op_count=draw(st.none() | st.integers(0, 10_000)),
        compiled_temp_bytes=draw(st.none() | st.integers(0, 1 << 30)),
    )
    pairs = draw(st.none() | st.integers(2, 12))
    if pairs is not None:  # --compile-paired: the pairs' seconds, or why there are none
        record.paired_base_cpu_s = draw(st.lists(FIGURE, min_size=pairs, max_size=pairs))
        record.paired_new_cpu_s = draw(st.lists(FIGURE, min_size=pairs, max_size=pairs))
        record.paired_against = draw(HOSTILE)
        record.paired_cost_s = draw(st.none() | FIGURE)
    elif draw(st.booleans()):
        record.paired_note = "not paired: " + draw(HOSTILE)
    if draw(st.booleans()):  # the compile profile: the row's passes, and its pin's module's
        passes = st.dictionaries(HOSTILE, FIGURE, min_size=1, max_size=3)
        record.profile = {"new": draw(passes)} | (
            {"base": draw(passes)} if draw(st.booleans()) else {}
        )
    pin = (
        None
        if status is Status.UNPINNED
        else Pin(
            compile_s=draw(FIGURE),
            compile_cpu_s=draw(st.none() | FIGURE),
            trace_s=draw(st.none() | FIGURE),
            op_count=draw(st.none() | st.integers(0, 10_000)),
            compiled_temp_bytes=draw(st.none() | st.integers(0, 1 << 30)),
        )
    )
    nearest = None
    if status is Status.UNPINNED and draw(st.booleans()):
        nearest_pin = Pin(compile_s=draw(FIGURE))
        key = record.key
        nearest = NearestPin(
            type(key)(key.hardware, "0.9.0", key.mixed_precision, key.cache_state, key.framework),
            nearest_pin,
            UPGRADE,
            record.compile_s / nearest_pin.compile_s,
        )
    return Verdict(
        record,
        status,
        pin=pin,
        pin_file=ROOT / "pins" / "p.toml",
        tolerance=draw(st.none() | st.floats(0.0, 5.0)),
        note=draw(st.none() | HOSTILE),
        metric=draw(st.sampled_from(["wall", "cpu"])),
        phase=draw(st.sampled_from(PHASES)),
        nearest=nearest,
        cache_lost=draw(st.booleans()),
    )


@st.composite
def outcomes(draw: st.DrawFn) -> Outcome:
    rows = [draw(verdicts(index)) for index in range(draw(st.integers(0, 8)))]
    thresholds = Thresholds(
        time_advisory=draw(st.booleans()),
        require_pinned=draw(st.booleans()),
        fail_on_improvement=draw(st.booleans()),
        metric=draw(st.sampled_from(["wall", "cpu"])),
        max_upgrade_slowdown=draw(st.none() | st.floats(0.0, 2.0)),
    )
    pin_update = draw(st.booleans())
    upgraded = tuple(v for v in rows if v.nearest is not None)
    upgrades = [
        UpgradeReport(
            "jax",
            "cpu:cpu @ Test CPU x2",
            "0.9.0",
            version,
            tuple(v for v in upgraded if v.record.framework_version == version),
        )
        for version in sorted({v.record.framework_version for v in upgraded})
    ]
    clobbers = [
        Clobber("jax_enable_x64", False, True, "tests/t.py::test_x", fails=draw(st.booleans()))
        for _ in range(draw(st.integers(0, 1)))
    ]
    outcome = Outcome(
        rootdir=ROOT,
        pins_dir=ROOT / "pins",
        thresholds=thresholds,
        pin_update=pin_update,
        verdicts=rows,
        upgrades=upgrades,
        clobbers=clobbers,
        lost=draw(st.lists(HOSTILE, max_size=2)),
        pin_error=(
            "the pin file is locked. Nothing was written; fix it and re-run."
            if pin_update and draw(st.booleans())
            else None
        ),
        coverage=Coverage(judged=len(rows), new_runner=draw(st.integers(0, len(rows)))),
        stale=[StalePin(rows[0].record.key, rows[0].record.cell, "gone", ROOT / "pins" / "p.toml")]
        if rows and draw(st.booleans())
        else [],
        compile_count_changes=[CompileCountChange("tests/t.py::test_c", 3, 1, ("why\n<b>",))]
        if draw(st.booleans())
        else [],
        github_actions=draw(st.booleans()),
        accept_label=draw(st.sampled_from([None, "compile-change-accepted"])),
    )
    outcome.failed = (
        outcome.pin_error is not None
        or any(clobber.fails for clobber in clobbers)
        or (
            not pin_update
            and (session_failed(rows, thresholds) or any(u.fails(thresholds) for u in upgrades))
        )
    )
    return outcome


def _words(text: str) -> str:
    """Text as its words, one space apart: how a wrapped line still reads."""
    return " ".join(text.split())


def _markdown(text: str) -> str:
    """How the Markdown outputs write plain text: one line, no HTML."""
    return _words(text).replace("<", "&lt;").replace(">", "&gt;")


def _token(cell: str) -> str:
    """The part of a generated test name that every output keeps as it is."""
    match = re.match(r"tests/t\d+\.py::test_\d+_", cell)
    assert match is not None
    return match.group(0)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(outcome=outcomes())
def test_every_output_over_random_outcomes(
    outcome: Outcome, tmp_path_factory: pytest.TempPathFactory
) -> None:
    view = session_view(outcome)
    terminal = "\n".join(text for text, _ in summary_lines(outcome, verbose=True))
    terminal_words = _words(terminal)  # a long sentence is wrapped over short lines
    summary = step_summary(outcome)
    comment = pr_comment(outcome)
    annotations = annotation_commands(outcome, record_path_resolver(ROOT, None), None)
    report = build_report(outcome, [v.record for v in outcome.verdicts], [], "0.0.0")
    path = tmp_path_factory.mktemp("report") / "r.json"
    write_report(path, report)
    assert load_report(path).records == [v.record for v in outcome.verdicts]
    junit = [prop for row in view.rows for prop in verdict_properties(row)]
    junit += [prop for v in outcome.verdicts for prop in junit_properties(v.record)]

    # Every failing row, in every output that lists rows.
    failing = view.failing()
    for row in failing:
        token = _token(row.cell)
        for name, text in (
            ("terminal", terminal),
            ("step summary", summary),
            ("comment", comment),
            ("annotations", "\n".join(annotations)),
        ):
            assert token in text, (name, row.cell)
    assert sum(1 for v in report["verdicts"] if v["fails"]) == len(failing)
    assert sum(1 for name, value in junit if name.endswith(".fails") and value == "true") == (
        len(failing)
    )
    row_errors = [
        line
        for line in annotations
        if "title=jax compile " in line
        and line.startswith("::error")
        and "[" in line.split("::", 2)[1]
    ]
    assert len(row_errors) == len(failing)

    # The session's failure sentence, each output in its own words.
    assert (report["gate"] == "fail") is outcome.failed
    for block in view.failure_blocks():
        if block.kind is BlockKind.PIN_ERROR:
            assert _words(block.text) in terminal_words and _markdown(block.text) in summary
            assert _markdown(block.text) in comment
            continue
        assert _words(f"{block.text}; the session fails.") in terminal_words
        assert _markdown(f"{block.text}; the session fails.") in summary
        assert _markdown(f"{block.text}; this run fails.") in comment
    if outcome.failed and not outcome.pin_update:
        assert summary.startswith("## jax compile times: FAIL")
        assert comment.splitlines()[1].startswith("### jax compile times: FAIL")
    for text in (comment,):
        assert "the session fails" not in text and "-v lists" not in text

    # The way back, one sentence (and command) per block, in every output that shows it;
    # under GitHub Actions never a command that would pin the machine it is run on.
    for block in view.blocks:
        way_back = block.way_back()
        if way_back is None:
            continue
        assert _words(way_back) in terminal_words
        if block.command is None:
            assert (
                _markdown(str(block.advice)) in summary and _markdown(str(block.advice)) in comment
            )
        assert {
            "kind": block.kind.value,
            "status": None if block.status is None else block.status.value,
            "advice": block.advice,
            "command": block.command,
        } in report["way_back"]
    if outcome.github_actions and outcome.pin_error is None:
        for text in (terminal, summary, comment, "\n".join(annotations), json.dumps(report)):
            assert "--compile-pin-update" not in text
    loaded = load_report(path)
    assert (loaded.github_actions, loaded.accept_label) == (
        outcome.github_actions,
        outcome.accept_label,
    )

    # The same counts everywhere, in the Status order.
    counts = view.counts_text()
    assert [s for s, _ in view.counts()] == sorted(
        (s for s, _ in view.counts()), key=lambda s: s.severity
    )
    if counts:
        if not outcome.pin_update:
            assert f"compile rows: {counts}" in terminal
        assert f"Compile rows: {counts}." in summary and f"Compile rows: {counts}." in comment
    assert Counter(v["status"] for v in report["verdicts"]) == Counter(
        {status.value: n for status, n in view.counts()}
    )
    assert [(v["cell"], v["transform"]) for v in report["verdicts"]] == [
        (row.cell, row.transform) for row in view.rows
    ]
    json.dumps(report)  # plain data throughout
