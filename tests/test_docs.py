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
    for part in ("runner.os", "runner.arch", "host_cpu_model()", "jax.__version__",
                 "jaxlib.__version__"):
        assert part in key_step
    test_step = next(step for step in steps if step.get("name") == "Tests")["run"]
    assert "--compile-report=reports/jaxcompile.json" in test_step
    upload = next(step for step in steps if step.get("uses", "").startswith("actions/upload"))
    assert upload["with"]["path"] == "reports/jaxcompile.json"
    assert upload["if"] == "always()"
