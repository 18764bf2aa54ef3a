"""The pairing child: compiles each row's pinned module and its new module alternately.

Run by `pytest_jaxcompile.backends.jax.paired` as ``python -m
pytest_jaxcompile.backends.jax.paired_child STAGE_DIR``, with JAX's persistent cache off.
It imports JAX once, compiles a throwaway module (XLA's and LLVM's one-time set-up is in
no pair), and then, for each entry of ``manifest.json`` in its order (the likeliest
regression first), compiles the two modules alternately (base, new; new, base; ...),
timing each compile in wall seconds and in the process's CPU seconds (every thread of the
compile; this process does nothing else meanwhile), and judges the pairs at each of the
manifest's ``looks`` with the sequential rule (gate/sequential.py): the first look that
decides the entry, or finds that the looks left cannot (futility), ends it. Past the
manifest's ``deadline`` (``compile_paired_budget``) it starts no look, except the first
entry's first. The same machine, the same moment and
the same process hold both sides of every pair, so what differs between them is the
modules. One JSON line per entry goes
to ``results.jsonl``: ``{"id", "base_cpu_s", "new_cpu_s", "base_wall_s", "new_wall_s",
"seconds"}`` (and ``"stopped": "budget"`` where the deadline cut it) or ``{"id", "error"}``.
With ``"profile": true`` in the manifest (the compile profile, backends/jax/profile.py:
the parent then turns XLA's pass timers on) it instead compiles each side an entry has
(``new``, and ``base`` where the pin's module is stored) between two marker lines on
stderr, a few times (`profile_entry`): the parent reads the passes' times between them
(`profile.pass_times`). It never
imports pytest.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from pytest_jaxcompile.backends.jax.child import MANIFEST, append_result, warm_up
from pytest_jaxcompile.backends.jax.reproduce import Compiler
from pytest_jaxcompile.backends.jax.reproduce import timed as _timed
from pytest_jaxcompile.gate.sequential import judge_look, judged_seconds

SIDES = ("base", "new")
PROFILE_MARK = "@@jaxcompile-profile"  # brackets a profiled compile's lines on stderr
PROFILE_ROUNDS = 3  # compiles of each side profiled; the parent keeps each pass's least
PROFILE_ONE_ROUND_S = 5.0  # a compile longer than this is profiled once: noise is small


def order_of(pair: int) -> tuple[str, str]:
    """Which side compiles first in pair number `pair`: base first in even pairs."""
    return SIDES if pair % 2 == 0 else (SIDES[1], SIDES[0])


def pair_entry(
    compiler: Compiler,
    stage: Path,
    entry: dict[str, Any],
    manifest: dict[str, Any],
    first: bool = False,
) -> dict[str, Any]:
    """Pair one entry until a look of the sequential rule decides it (gate/sequential.py),
    or its last look. Past the pairing's deadline (``compile_paired_budget``) no look
    starts, except the `first` entry's first: a budget never leaves the likeliest
    regression unjudged; a look begun is finished (its pairs decide nothing before it)."""
    started = time.perf_counter()
    deadline = manifest.get("deadline")

    def over_budget(made: int) -> bool:
        return deadline is not None and time.time() >= deadline and not (first and made == 0)

    if over_budget(0):
        return {"id": entry["id"], "stopped": "budget"}

    def loaded(side: str) -> tuple[Any, ...]:
        spec = entry[side]
        return compiler.load(
            (stage / spec["module"]).read_bytes(),
            (stage / spec["options"]).read_bytes(),
            int(spec["devices"]),
        )

    if manifest.get("warm_up_each"):  # untimed: each module's first compile in this process
        for side in SIDES:
            _timed(compiler, loaded(side))
    samples: dict[str, list[tuple[float, float]]] = {side: [] for side in SIDES}
    result: dict[str, Any] = {"id": entry["id"]}
    for look, rank in manifest["looks"]:
        made = len(samples["new"])
        if over_budget(made):
            result["stopped"] = "budget"
            break
        for pair in range(made, int(look)):
            for side in order_of(pair):
                samples[side].append(_timed(compiler, loaded(side)))
        if _decided(samples, int(rank), manifest):
            break
    for side in SIDES:
        result[f"{side}_wall_s"] = [round(wall, 6) for wall, _ in samples[side]]
        result[f"{side}_cpu_s"] = [round(cpu, 6) for _, cpu in samples[side]]
    result["seconds"] = round(time.perf_counter() - started, 3)
    return result


def _decided(
    samples: dict[str, list[tuple[float, float]]], rank: int, manifest: dict[str, Any]
) -> bool:
    """Whether the pairing stops at this look (it decides the pairs, or finds the looks
    left up to the manifest's last cannot), on the seconds the gate judges them by
    (`judged_seconds`, as `PairedComparison.of` reads them, with the same last look)."""
    cpu = [[cpu for _, cpu in samples[side]] for side in SIDES]
    wall = [[wall for wall, _ in samples[side]] for side in SIDES]
    judged = judged_seconds((cpu[0], cpu[1]), (wall[0], wall[1]))
    if judged is None:
        return False
    _, base, new = judged
    last = manifest["looks"][-1]
    look = judge_look(
        base,
        new,
        rank,
        float(manifest["tolerance"]),
        float(manifest["floor_s"]),
        (int(last[0]), int(last[1])),
    )
    return look.ends


def profile_entry(compiler: Compiler, stage: Path, entry: dict[str, Any]) -> dict[str, Any]:
    """Compile each side the entry has between two markers on stderr, where XLA's pass
    timers log (the parent runs this child with ``TF_CPP_VMODULE=hlo_pass_pipeline=1``):
    `PROFILE_ROUNDS` rounds, alternating which side goes first, so that the parent can
    keep each pass's least time (a busy machine's preemption lands in one round, not in
    all); one round where a compile takes longer than `PROFILE_ONE_ROUND_S`."""
    sides = [side for side in SIDES if side in entry]
    specs = {side: entry[side] for side in sides}
    for round_ in range(PROFILE_ROUNDS):
        longest = 0.0
        for side in order_of(round_):
            if side not in specs:
                continue
            spec = specs[side]
            loaded = compiler.load(
                (stage / spec["module"]).read_bytes(),
                (stage / spec["options"]).read_bytes(),
                int(spec["devices"]),
            )
            print(f"{PROFILE_MARK} {entry['id']} {side} start", file=sys.stderr, flush=True)
            wall, _ = _timed(compiler, loaded)
            print(f"{PROFILE_MARK} {entry['id']} {side} end", file=sys.stderr, flush=True)
            longest = max(longest, wall)
        if longest > PROFILE_ONE_ROUND_S:
            break
    return {"id": entry["id"], "profiled": True}


def main(argv: list[str]) -> int:
    stage = Path(argv[0])
    import jax

    jax.config.update("jax_enable_compilation_cache", False)  # type: ignore[no-untyped-call]
    manifest = json.loads((stage / MANIFEST).read_text())
    profile = bool(manifest.get("profile"))
    compiler = Compiler()
    warm_up()
    for index, entry in enumerate(manifest["entries"]):
        try:
            if profile:
                result = profile_entry(compiler, stage, entry)
            else:
                result = pair_entry(compiler, stage, entry, manifest, first=index == 0)
        except Exception as error:  # one row's failure is that row's note, not the run's
            result = {"id": entry["id"], "error": f"{type(error).__name__}: {error}"}
        append_result(stage, result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
