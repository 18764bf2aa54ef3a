"""compile_accept: an accepted change is reported, not failed, in every output.

The example gate workflow sets it (``JAXCOMPILE_ACCEPT=true``) from a pull request's accept
label; the lifecycle through the workflow's own steps is tests/test_ci_baseline.py.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from records_factory import make_record

from pytest_jaxcompile.gate.conclude import GateSettings, conclude
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.outcome import Outcome
from pytest_jaxcompile.gate.pins import PinStore
from pytest_jaxcompile.gate.view import session_view
from pytest_jaxcompile.gate.view.blocks import ACCEPTED
from pytest_jaxcompile.output.github import step_summary
from pytest_jaxcompile.output.json_report import build_report
from pytest_jaxcompile.output.terminal import closing_lines

pytestmark = pytest.mark.logic


def _conclude(tmp_path: Path, thresholds: Thresholds) -> Outcome:
    """A DRIFT row and a GREW row against pins made a moment before."""
    pins = tmp_path / "pins"
    store = PinStore.load(pins)
    slow = make_record(cell="tests/t.py::test_slow", op_count=100)
    grown = make_record(cell="tests/t.py::test_grown", op_count=100)
    store.update([slow, grown])
    measured = [
        dataclasses.replace(slow, compile_s=5.0, fingerprint="sha256:new"),
        dataclasses.replace(grown, op_count=300, fingerprint="sha256:grown"),
    ]
    return conclude(
        measured,
        [row.cell for row in measured],
        [],
        PinStore.load(pins),
        GateSettings(thresholds, pin_update=False),
        rootdir=tmp_path,
    )


def test_an_accepted_change_passes_and_says_so_where_it_would_have_failed(
    tmp_path: Path,
) -> None:
    limits = Thresholds(max_ops_growth=0.1)
    failing = _conclude(tmp_path / "plain", limits)
    assert failing.failed
    assert [v.status.value for v in failing.verdicts] == ["GREW", "DRIFT"]

    accepted = _conclude(tmp_path / "accepted", dataclasses.replace(limits, accept=True))
    assert not accepted.failed
    assert [v.status.value for v in accepted.verdicts] == ["GREW", "DRIFT"]  # as measured
    assert all(v.would_fail(accepted.thresholds) for v in accepted.verdicts)
    assert not any(v.fails(accepted.thresholds) for v in accepted.verdicts)

    view = session_view(accepted)
    statuses = [block for block in view.blocks if block.status is not None]
    assert [block.reported_only for block in statuses] == [ACCEPTED, ACCEPTED]
    # an accepted change needs no way back: no re-pin advice where it is accepted
    assert [block.command for block in statuses] == [None, None]
    text = " ".join(" ".join(line for line, _ in closing_lines(view)).split())  # unwrapped
    assert f"; {ACCEPTED}." in text
    assert "the session fails" not in text
    assert "--compile-pin-update" not in text
    summary = step_summary(accepted)
    assert f"; {ACCEPTED}." in summary
    assert "--compile-pin-update" not in summary
    report = build_report(accepted, [v.record for v in accepted.verdicts], [], "0")
    assert report["gate"] == "pass"
    assert report["thresholds"]["accept"] is True

    # without it the same rows fail and print their way back
    text = "\n".join(line for line, _ in closing_lines(session_view(failing)))
    assert "the session fails" in text and ACCEPTED not in text


def test_accept_is_refused_unless_a_boolean_where_it_is_read() -> None:
    from pytest_jaxcompile.options import BY_NAME, OptionError, parse_value

    option = BY_NAME["compile_accept"]
    assert parse_value(option, "true", "environment variable JAXCOMPILE_ACCEPT") is True
    with pytest.raises(OptionError, match="JAXCOMPILE_ACCEPT"):
        parse_value(option, "nan", "environment variable JAXCOMPILE_ACCEPT")
