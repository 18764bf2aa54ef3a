"""The documentation files that tools read: the example workflow and the report schema."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
WORKFLOW = REPO / "docs" / "examples" / "jaxcompile.yml"


def test_example_workflow_caches_on_what_invalidates_the_cache() -> None:
    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load(WORKFLOW.read_text())
    steps = workflow["jobs"]["tests"]["steps"]
    uses = [step.get("uses", "") for step in steps]
    assert any(use.startswith("actions/cache/restore@") for use in uses)
    assert any(use.startswith("actions/cache/save@") for use in uses)
    assert any(use.startswith("actions/upload-artifact@") for use in uses)
    key_step = next(step for step in steps if step.get("id") == "cache-key")["run"]
    for part in ("RUNNER_OS", "RUNNER_ARCH", "host_cpu_model()", "jax.__version__",
                 "jaxlib.__version__"):
        assert part in key_step
    test_step = next(step for step in steps if step.get("name") == "Tests")["run"]
    assert "--compile-report=reports/jaxcompile.json" in test_step
    upload = next(step for step in steps if step.get("uses", "").startswith("actions/upload"))
    assert upload["with"]["path"] == "reports/jaxcompile.json"
    assert upload["if"] == "always()"


def _documented(page: str) -> set[str]:
    """Every `name` in the first column (and the object fields named) of the page's tables."""
    import re

    names: set[str] = set()
    for line in (REPO / "docs" / page).read_text().splitlines():
        if line.startswith("| "):
            names.update(re.findall(r"`([a-z_0-9]+)`", line))
    return names


def test_report_schema_documents_every_field(tmp_path: Path) -> None:
    from records_factory import make_record

    from pytest_jaxcompile.gate.pins import PinStore
    from pytest_jaxcompile.gate.verdicts import StalePin, Thresholds, judge_all
    from pytest_jaxcompile.output.terminal import SessionOutcome, build_report

    record = make_record(location=("tests/t.py", 3))
    store = PinStore.load(tmp_path)
    outcome = SessionOutcome(rootdir=tmp_path, pins_dir=tmp_path, thresholds=Thresholds(),
                             pin_update=False, fail_on_improvement=False)
    outcome.verdicts = judge_all([record], store, outcome.thresholds)
    outcome.stale = [StalePin(record.key, record.cell, "gone", tmp_path / "p.toml")]
    outcome.environments = [(record.hardware, record.jax_version)]
    report = build_report(outcome, [record], [], "0.1.0")
    documented = _documented("report-schema.md")
    fields = set(report) | set(report["thresholds"]) | set(report["environments"][0])
    fields |= set(report["records"][0]) | set(report["verdicts"][0]) | set(report["stale"][0])
    for nested in ("cache", "host_state"):
        fields |= set(report["records"][0][nested])
    fields |= {"platform", "device_kind", "device_count", "cpu_model", "cpu_count", "machine"}
    fields |= set(report["verdicts"][0]["key"])
    assert fields - documented == set()
