"""The compile profile: where inside XLA a row's compile spends its time, by HLO pass and
by phase.

`profile_modules` stages each job's module (and its pin's, where the module store holds
it) and runs `paired_child` once per platform in profiling mode, with XLA's pass timers on
(``TF_CPP_MIN_LOG_LEVEL=0 TF_CPP_VMODULE=hlo_pass_pipeline=1,cpu_compiler=1,ir_compiler=1``,
read when XLA's backend starts), after the tests: every HLO pass logs ``HLO pass: <name>
time: 9 us (...)`` between the child's markers, and the CPU compiler its phases (the HLO
pass pipelines, code generation, each LLVM module's compile), each module's compile a few
times, and `pass_times` reads them (each pass's and phase's least time) into each job's
record's ``profile`` (the top passes, the rest, all, and the phases). The gate compares
the two sides (gate/profile.py, docs/profile.md).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from pytest_jaxcompile.backends import ProfileJob
from pytest_jaxcompile.backends.jax import child
from pytest_jaxcompile.backends.jax.paired import by_platform, run_child, stage_module
from pytest_jaxcompile.backends.jax.paired_child import PROFILE_MARK
from pytest_jaxcompile.records import (
    PROFILE_ALL_PASSES,
    PROFILE_OTHER_PASSES,
    PROFILE_PHASE_CODEGEN,
    PROFILE_PHASE_HLO,
    PROFILE_PHASE_LLVM,
    PROFILE_PHASES,
)

# XLA's pass timers (read when the backend starts): "HLO pass: <name> time: 9 us (...)";
# and the CPU compiler's phase timers (cpu_compiler.cc, ir_compiler.cc).
PROFILE_ENVIRONMENT = {
    "TF_CPP_MIN_LOG_LEVEL": "0",
    "TF_CPP_VMODULE": "hlo_pass_pipeline=1,cpu_compiler=1,ir_compiler=1",
}
_PASS_TIME = re.compile(r"HLO pass: (\S+) time: ([0-9.]+) (us|ms|s)\b")
# "Running HLO passes on [jit_f] for CPU time: 3.19 ms (...)", "Compiling [jit_f] for CPU
# using JIT time: 154 ms (...)", "Compiled LLVM module: <name> time: 35.7 ms (...)".
_PHASE_TIMES = (
    (
        PROFILE_PHASE_HLO,
        re.compile(r"Running HLO passes on \[.*\] for \S+ time: ([0-9.]+) (us|ms|s)\b"),
    ),
    (
        PROFILE_PHASE_CODEGEN,
        re.compile(r"Compiling \[.*\] for \S+ using JIT time: ([0-9.]+) (us|ms|s)\b"),
    ),
    (PROFILE_PHASE_LLVM, re.compile(r"Compiled LLVM module: \S+ time: ([0-9.]+) (us|ms|s)\b")),
)
_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
TOP_PASSES = 12


def profile_modules(jobs: list[ProfileJob], timeout_s: float) -> None:
    """Profile every job, one child per platform; fill each profiled job's record."""
    for platform, platform_jobs in by_platform(jobs):
        with tempfile.TemporaryDirectory(prefix="jaxcompile-profile-") as directory:
            stage = Path(directory)
            entries = []
            for index, job in enumerate(platform_jobs):
                entry: dict[str, object] = {
                    "id": index,
                    "new": stage_module(stage, f"{index}-new", job.new),
                }
                if job.base is not None and job.base.platform == platform:
                    entry["base"] = stage_module(stage, f"{index}-base", job.base)
                entries.append(entry)
            run_child(stage, platform, entries, {}, timeout_s, PROFILE_ENVIRONMENT)
            profiles = pass_times((stage / child.LOG).read_text(errors="replace"))
        for index, job in enumerate(platform_jobs):
            job.record.profile = profiles.get(index)


def pass_times(log: str) -> dict[int, dict[str, dict[str, float]]]:
    """Seconds per HLO pass of each profiled compile in a profiling child's log, by entry
    and side: each pass's least time over the side's compiles (the child compiles each
    side a few times; a preempted pass is long in one of them only), then the `TOP_PASSES`
    passes that took longest over both sides, the rest summed as PROFILE_OTHER_PASSES, and
    PROFILE_ALL_PASSES (every pass). A compile that did not finish (no end marker) is left
    out."""
    rounds: dict[int, dict[str, list[dict[str, float]]]] = {}
    current: dict[str, float] | None = None
    for line in log.splitlines():
        if line.startswith(PROFILE_MARK):
            _, entry, side, edge = line.split()
            if edge == "start":
                current = {}
            elif current is not None:
                rounds.setdefault(int(entry), {}).setdefault(side, []).append(current)
                current = None
            continue
        if current is None:
            continue
        match = _PASS_TIME.search(line)
        if match:
            name, amount, unit = match.group(1), float(match.group(2)), match.group(3)
            current[name] = current.get(name, 0.0) + amount * _UNITS[unit]
            continue
        for phase, pattern in _PHASE_TIMES:
            found = pattern.search(line)
            if found:
                seconds = float(found.group(1)) * _UNITS[found.group(2)]
                current[phase] = current.get(phase, 0.0) + seconds
                break
    return {
        entry: _compact({side: _least(compiles) for side, compiles in sides.items()})
        for entry, sides in rounds.items()
    }


def _least(compiles: list[dict[str, float]]) -> dict[str, float]:
    """Each pass's least seconds over one module's compiles (absent from one: 0)."""
    names = {name for passes in compiles for name in passes}
    return {name: min(passes.get(name, 0.0) for passes in compiles) for name in names}


def _compact(sides: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    names = {name for timed in sides.values() for name in timed if name not in PROFILE_PHASES}
    ranked = sorted(names, key=lambda name: -max(p.get(name, 0.0) for p in sides.values()))
    kept = ranked[:TOP_PASSES]
    compact = {}
    for side, timed in sides.items():
        passes = {name: t for name, t in timed.items() if name not in PROFILE_PHASES}
        table = {name: round(passes.get(name, 0.0), 6) for name in kept}
        table[PROFILE_OTHER_PASSES] = round(sum(t for n, t in passes.items() if n not in kept), 6)
        table[PROFILE_ALL_PASSES] = round(sum(passes.values()), 6)
        table |= {phase: round(timed[phase], 6) for phase in PROFILE_PHASES if phase in timed}
        compact[side] = table
    return compact
