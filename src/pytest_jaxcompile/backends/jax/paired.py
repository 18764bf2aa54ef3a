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
import re
import sys
import tempfile
import time
from pathlib import Path

from pytest_jaxcompile.backends import PairJob, StagedModule
from pytest_jaxcompile.backends.jax import child
from pytest_jaxcompile.backends.jax.paired_child import PROFILE_MARK
from pytest_jaxcompile.records import PROFILE_ALL_PASSES, PROFILE_OTHER_PASSES

CHILD_MODULE = "pytest_jaxcompile.backends.jax.paired_child"
CHILD_ENVIRONMENT = {
    "JAX_ENABLE_COMPILATION_CACHE": "false",  # every compile a real one
    "TF_CPP_MIN_LOG_LEVEL": "3",
}
# XLA's pass timers (read when the backend starts): "HLO pass: <name> time: 9 us (...)"
PROFILE_ENVIRONMENT = {"TF_CPP_MIN_LOG_LEVEL": "0", "TF_CPP_VMODULE": "hlo_pass_pipeline=1"}
_PASS_TIME = re.compile(r"HLO pass: (\S+) time: ([0-9.]+) (us|ms|s)\b")
_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
TOP_PASSES = 12
# JAX_PLATFORMS for a module's platform, as JAX's backends name themselves
_JAX_PLATFORMS = {"gpu": "cuda,rocm", "cpu": "cpu", "tpu": "tpu"}


def _stage(stage: Path, name: str, module: StagedModule) -> dict[str, object]:
    (stage / f"{name}.mlir").write_text(module.text, encoding="utf-8")
    (stage / f"{name}.options").write_bytes(module.options)
    return {"module": f"{name}.mlir", "options": f"{name}.options", "devices": module.devices}


def pair_modules(jobs: list[PairJob], pairs: int, timeout_s: float) -> None:
    """Pair every job, one child per platform; fill each job's record."""
    by_platform: dict[str, list[PairJob]] = {}
    for job in jobs:
        by_platform.setdefault(job.new.platform, []).append(job)
    for platform, platform_jobs in sorted(by_platform.items()):
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="jaxcompile-paired-") as directory:
            results = _run(Path(directory), platform, platform_jobs, pairs, timeout_s)
        for index, job in enumerate(platform_jobs):
            _fill(job, results.get(index), results.get(-1))
        paired = [job for job in platform_jobs if job.record.paired_new_cpu_s]
        left_s = timeout_s - (time.monotonic() - started)
        if paired and left_s > 0:
            with tempfile.TemporaryDirectory(prefix="jaxcompile-profile-") as directory:
                profiles = _profile(Path(directory), platform, paired, left_s)
            for index, job in enumerate(paired):
                job.record.paired_profile = profiles.get(index)


def _run(
    stage: Path,
    platform: str,
    jobs: list[PairJob],
    pairs: int,
    timeout_s: float,
    profile: bool = False,
) -> dict[int, dict[str, object]]:
    entries = [
        {
            "id": index,
            "base": _stage(stage, f"{index}-base", job.base),
            "new": _stage(stage, f"{index}-new", job.new),
        }
        for index, job in enumerate(jobs)
    ]
    child.write_manifest(stage, {"pairs": pairs, "entries": entries, "profile": profile})
    environment = {
        **os.environ,
        **CHILD_ENVIRONMENT,
        **(PROFILE_ENVIRONMENT if profile else {}),
        "JAX_PLATFORMS": _JAX_PLATFORMS.get(platform, platform),
    }
    return child.run(
        [sys.executable, "-m", CHILD_MODULE, str(stage)],
        stage,
        environment,
        timeout_s,
        "the pairing child",
        "--compile-paired-timeout",
    )


def _profile(
    stage: Path, platform: str, jobs: list[PairJob], timeout_s: float
) -> dict[int, dict[str, dict[str, float]]]:
    """Each job's modules compiled once more with XLA's pass timers on (after the pairs,
    which never run with them): seconds per HLO pass, by side."""
    _run(stage, platform, jobs, 0, timeout_s, profile=True)
    return pass_times((stage / child.LOG).read_text(errors="replace"))


def pass_times(log: str) -> dict[int, dict[str, dict[str, float]]]:
    """Seconds per HLO pass of each profiled compile in a profiling child's log, by entry
    and side: the `TOP_PASSES` passes that took longest over both sides, the rest summed
    as PROFILE_OTHER_PASSES, and PROFILE_ALL_PASSES (every pass)."""
    found: dict[int, dict[str, dict[str, float]]] = {}
    current: dict[str, float] | None = None
    for line in log.splitlines():
        if line.startswith(PROFILE_MARK):
            _, entry, side, edge = line.split()
            current = (
                found.setdefault(int(entry), {}).setdefault(side, {}) if edge == "start" else None
            )
            continue
        if current is None:
            continue
        match = _PASS_TIME.search(line)
        if match:
            name, amount, unit = match.group(1), float(match.group(2)), match.group(3)
            current[name] = current.get(name, 0.0) + amount * _UNITS[unit]
    return {entry: _compact(sides) for entry, sides in found.items()}


def _compact(sides: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    names = {name for passes in sides.values() for name in passes}
    ranked = sorted(names, key=lambda name: -max(p.get(name, 0.0) for p in sides.values()))
    kept = ranked[:TOP_PASSES]
    compact = {}
    for side, passes in sides.items():
        table = {name: round(passes.get(name, 0.0), 6) for name in kept}
        table[PROFILE_OTHER_PASSES] = round(sum(t for n, t in passes.items() if n not in kept), 6)
        table[PROFILE_ALL_PASSES] = round(sum(passes.values()), 6)
        compact[side] = table
    return compact


def _fill(
    job: PairJob, result: dict[str, object] | None, stopped: dict[str, object] | None
) -> None:
    record = job.record
    record.paired_against = job.against
    if result is None or "error" in result:
        why = (result or {}).get("error") or (stopped or {}).get("error") or "no result"
        record.paired_note = f"not paired: {why}"
        return
    record.paired_base_cpu_s = _seconds(result["base_cpu_s"])
    record.paired_new_cpu_s = _seconds(result["new_cpu_s"])
    record.paired_base_wall_s = _seconds(result["base_wall_s"])
    record.paired_new_wall_s = _seconds(result["new_wall_s"])
    seconds = result.get("seconds")
    record.paired_cost_s = float(seconds) if isinstance(seconds, (int, float)) else None


def _seconds(values: object) -> list[float]:
    assert isinstance(values, list)
    return [float(value) for value in values]
