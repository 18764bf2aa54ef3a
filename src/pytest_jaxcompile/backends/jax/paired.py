"""Pair rows with their pins' modules: both compiled again, alternately, in one child.

`pair_modules` stages each job's two modules (the pin's, from the module store, and the
row's own, as JAX handed it to its backend) and runs `paired_child` once per platform,
with JAX's persistent cache off, after the tests (the pairing is never in a test's own
timing). Each job's record gets the pairs' seconds (``paired_*``), or a ``paired_note``
saying why it has none; the gate judges them (gate/paired.py, docs/paired.md).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TypeVar

from pytest_jaxcompile.backends import PairingPlan, PairJob, ProfileJob, StagedModule
from pytest_jaxcompile.backends.jax import child

CHILD_MODULE = "pytest_jaxcompile.backends.jax.paired_child"
CHILD_ENVIRONMENT = {
    "JAX_ENABLE_COMPILATION_CACHE": "false",  # every compile a real one
    "TF_CPP_MIN_LOG_LEVEL": "3",
}
# JAX_PLATFORMS for a module's platform, as JAX's backends name themselves
_JAX_PLATFORMS = {"gpu": "cuda,rocm", "cpu": "cpu", "tpu": "tpu"}
Job = TypeVar("Job", PairJob, ProfileJob)
BUDGET_SPENT = "the pairing budget (compile_paired_budget) ran out"


def by_platform(jobs: Iterable[Job]) -> list[tuple[str, list[Job]]]:
    """The jobs grouped by their new module's platform, in platform order: one child runs
    each group (a child's JAX starts one platform's backends)."""
    groups: dict[str, list[Job]] = {}
    for job in jobs:
        groups.setdefault(job.new.platform, []).append(job)
    return sorted(groups.items())


def stage_module(stage: Path, name: str, module: StagedModule) -> dict[str, object]:
    (stage / f"{name}.mlir").write_text(module.text, encoding="utf-8")
    (stage / f"{name}.options").write_bytes(module.options)
    return {"module": f"{name}.mlir", "options": f"{name}.options", "devices": module.devices}


def pair_modules(jobs: list[PairJob], plan: PairingPlan, timeout_s: float) -> None:
    """Pair every job, one child per platform, each in the jobs' order; fill each job's
    record."""
    for platform, platform_jobs in by_platform(jobs):
        with tempfile.TemporaryDirectory(prefix="jaxcompile-paired-") as directory:
            stage = Path(directory)
            entries = [
                {
                    "id": index,
                    "base": stage_module(stage, f"{index}-base", job.base),
                    "new": stage_module(stage, f"{index}-new", job.new),
                }
                for index, job in enumerate(platform_jobs)
            ]
            results = run_child(stage, platform, entries, plan.manifest(), timeout_s)
        for index, job in enumerate(platform_jobs):
            _fill(job, results.get(index), results.get(-1))


def run_child(
    stage: Path,
    platform: str,
    entries: list[dict[str, object]],
    plan: dict[str, object],
    timeout_s: float,
    profile_environment: dict[str, str] | None = None,
) -> dict[int, dict[str, object]]:
    """Run the pairing child over staged `entries` by `plan` (`PairingPlan.manifest`);
    with `profile_environment` (XLA's pass timers, backends/jax/profile.py) it profiles
    them instead of pairing them."""
    profile = profile_environment is not None
    child.write_manifest(stage, {**plan, "entries": entries, "profile": profile})
    environment = {
        **os.environ,
        **CHILD_ENVIRONMENT,
        **(profile_environment or {}),
        "JAX_PLATFORMS": _JAX_PLATFORMS.get(platform, platform),
    }
    return child.run(
        [sys.executable, "-m", CHILD_MODULE, str(stage)],
        stage,
        environment,
        timeout_s,
        "the profiling child" if profile else "the pairing child",
        "compile_paired_timeout",
    )


def _fill(
    job: PairJob, result: dict[str, object] | None, stopped: dict[str, object] | None
) -> None:
    record = job.record
    record.paired_against = job.against
    if result is None or "error" in result:
        why = (result or {}).get("error") or (stopped or {}).get("error") or "no result"
        record.paired_note = f"not paired: {why}"
        return
    if "base_cpu_s" not in result:  # the budget ran out before the row's first pair
        record.paired_note = f"not paired: {BUDGET_SPENT} before this row"
        return
    record.paired_base_cpu_s = _seconds(result["base_cpu_s"])
    record.paired_new_cpu_s = _seconds(result["new_cpu_s"])
    record.paired_base_wall_s = _seconds(result["base_wall_s"])
    record.paired_new_wall_s = _seconds(result["new_wall_s"])
    seconds = result.get("seconds")
    record.paired_cost_s = float(seconds) if isinstance(seconds, (int, float)) else None
    if result.get("stopped") == "budget":
        made = len(record.paired_new_wall_s)
        record.paired_note = f"not decided: {BUDGET_SPENT} after {made} pairs"


def _seconds(values: object) -> list[float]:
    assert isinstance(values, list)
    return [float(value) for value in values]
