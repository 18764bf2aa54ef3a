"""The instruction gate: how exact the count is, what it catches, and what it costs.

    python benchmarks/instruction_gate.py [--idle 5] [--busy 5] [--unchanged 20]
        [--modules all|NAME,NAME] [--tolerance 0.01] [--json PATH]

Real modules are lowered here (the example MLP and attention of examples/jaxmodels.py,
forward and gradient, plus MLPs of 4, 8, 20, 21 and 22 layers and attention blocks of three
widths) and staged exactly as `--compile-instructions` stages a row's module. Each session
is one counting child (the plugin's own `run_child`), which counts every module in turn:

spread
    ``--idle`` sessions on the machine as it is and ``--busy`` sessions with every core kept
    busy by busy-loop processes this script starts (and stops). Per module: the largest
    minus the smallest count over all those sessions, in percent of the smallest.
false DRIFT
    The first idle session is the pin. Every other session (idle, busy, and more idle ones
    up to ``--unchanged`` unchanged sessions in all) is judged at ``--tolerance``: a module
    whose count is over the pin by more than it is a false DRIFT.
detection
    In every session, the 21- and 22-layer MLPs' counts are judged against the 20-layer
    pin: 22 layers is 10 % more layers, 21 layers 5 %. Caught when over the tolerance.
cost
    Per session: the child's wall seconds (valgrind start, JAX import, warm-up, the counts)
    and the seconds of the counts alone, per module; beside them the plain in-process
    compile seconds of the same modules.

``--pytest-sessions`` instead runs real pytest sessions (subprocesses) over a generated
project of ten tests, each compiling an MLP gradient of its own depth through the
``jax_compile`` fixture, and prints each session's wall seconds beside a plain session's:

    python benchmarks/instruction_gate.py --pytest-sessions [--carry-sessions 20]

unchanged
    after a pin with counts, a session where no module changed: every count carried, no
    valgrind started (the terminal's "counting instructions" line absent), against the
    plain session (target <= 1.1x).
one of ten
    one test's model a layer deeper: that one row counted, nine carried.
children
    every row recounted (``-o compile_instructions_recount=true``) with the CPUs the machine
    has (one child per CPU where the modules' estimate allows) and kept to one CPU
    (``taskset -c 0``: one child): the wall seconds saved, and whether the counts agree.
carry
    ``--carry-sessions`` pairs of sessions on the unchanged project, one recounting, one
    carrying: every row's verdict equal in both.

``--carry-only`` runs the pin and the carry pairs alone, over the project's first
``--tests`` models (fewer models: shorter recounting sessions, as many pairs):

    python benchmarks/instruction_gate.py --pytest-sessions --carry-only --tests 4 \
        --carry-sessions 20
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "src"))


def _modules() -> dict[str, Callable[[], Any]]:
    """Name -> a function returning a jax.stages.Lowered."""
    import jax
    import jax.numpy as jnp
    import jaxmodels as m

    def mlp(depth: int, width: int = 64) -> Callable[[], Any]:
        def lower() -> Any:
            params = m.mlp_init(0, [width] * (depth + 1))
            x = jnp.ones((8, width), jnp.float32)

            def loss(params: Any, x: Any) -> Any:
                for w, b in params:
                    x = jnp.tanh(x @ w + b)
                return jnp.sum(x * x)

            return jax.jit(jax.grad(loss)).lower(params, x)

        return lower

    def attention(dim: int) -> Callable[[], Any]:
        def lower() -> Any:
            params = m.attention_init(0, dim)
            x = jnp.ones((4, 16, dim), jnp.float32)
            return jax.jit(jax.grad(m.attention_loss)).lower(params, x)

        return lower

    def example(fn: Callable[..., Any], args: Callable[[], tuple[Any, ...]]) -> Callable[[], Any]:
        return lambda: jax.jit(fn).lower(*args())

    return {
        "example_mlp_loss": example(m.mlp_loss, m.mlp_example_args),
        "example_mlp_grad": example(jax.grad(m.mlp_loss), m.mlp_example_args),
        "example_attention_loss": example(m.attention_loss, m.attention_example_args),
        "example_attention_grad": example(jax.grad(m.attention_loss), m.attention_example_args),
        "mlp4_grad": mlp(4),
        "mlp8_grad": mlp(8),
        "mlp20_grad": mlp(20),
        "mlp21_grad": mlp(21),
        "mlp22_grad": mlp(22),
        "attention32_grad": attention(32),
        "attention64_grad": attention(64),
        "attention128_grad": attention(128),
    }


def _stage(names: list[str]) -> tuple[list[Any], dict[str, float]]:
    """The staged compiles of the modules, and their plain compile seconds (best of 3)."""
    from pytest_jaxcompile.backends.jax.instructions import InstructionStager, capture
    from pytest_jaxcompile.backends.jax.residue import clear_in_process_caches
    from pytest_jaxcompile.records import CompileRecord

    builders = _modules()
    stager = InstructionStager(timeout_s=0)
    plain: dict[str, float] = {}
    for name in names:
        lowered = builders[name]()
        with capture() as captured:
            lowered.compile()
        record = CompileRecord(name, name, "bench", "", "", False, "none", 0.0)
        stager.add(record, captured)
        times = []
        for _ in range(3):
            clear_in_process_caches()  # a real compile each time, as the fixture's fresh=True
            start = time.perf_counter()
            lowered.compile(compiler_options={})  # not the Lowered's cached executable
            times.append(time.perf_counter() - start)
        plain[name] = min(times)
    return stager.staged, plain


def _busy() -> None:
    while True:
        pass


def _session(staged: list[Any], names: list[str], busy: bool, timeout_s: float) -> dict[str, Any]:
    from pytest_jaxcompile.backends.jax.instructions import run_child

    workers = []
    if busy:
        workers = [
            multiprocessing.get_context("spawn").Process(target=_busy, daemon=True)
            for _ in range(os.cpu_count() or 2)
        ]
        for worker in workers:
            worker.start()
    try:
        start = time.perf_counter()
        with tempfile.TemporaryDirectory() as directory:
            results = run_child(Path(directory), staged, timeout_s)
        wall = time.perf_counter() - start
    finally:
        for worker in workers:
            worker.terminate()
            worker.join()
    if -1 in results:
        raise SystemExit(f"counting child failed: {results[-1]}")
    return {
        "busy": busy,
        "wall_s": wall,
        "counts": {names[i]: results[i]["instructions"] for i in range(len(names))},
        "seconds": {names[i]: results[i].get("seconds") for i in range(len(names))},
        "attempts": {names[i]: results[i].get("attempts", 1) for i in range(len(names))},
    }


PROJECT_TESTS = """
import os

import jax
import jax.numpy as jnp
import pytest

DEEPER = os.environ.get("BENCH_DEEPER", "")
DEPTHS = [int(depth) for depth in os.environ.get("BENCH_DEPTHS", "").split(",") if depth]


def mlp_grad(depth):
    def loss(ws, x):
        for w in ws:
            x = jnp.tanh(x @ w)
        return jnp.sum(x * x)

    ws = [jnp.ones((64, 64), jnp.float32) * 0.01 for _ in range(depth)]
    return jax.jit(jax.grad(loss)).lower(ws, jnp.ones((8, 64), jnp.float32))


@pytest.mark.parametrize("depth", DEPTHS or range(20, 40, 2))
def test_model(jax_compile, depth):
    deeper = 1 if DEEPER == str(depth) else 0
    jax_compile(mlp_grad(depth + deeper), transform="grad")
"""


def _pytest_session(
    project: Path, *options: str, env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()
) -> dict[str, Any]:
    """One pytest session in `project`: its wall seconds, whether valgrind started, and each
    row's status and count from its JSON report."""
    import subprocess

    report = project / "report.json"
    report.unlink(missing_ok=True)
    command = [*prefix, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    command += ["-p", "no:xdist", f"--compile-report={report}", *options]
    started = time.perf_counter()
    done = subprocess.run(
        command, cwd=project, capture_output=True, text=True, env={**os.environ, **(env or {})}
    )
    wall = time.perf_counter() - started
    output = done.stdout + done.stderr
    rows: dict[str, tuple[str, int | None]] = {}
    counted_here = 0  # rows counted in this session (not carried from the pin)
    if report.exists():
        data = json.loads(report.read_text())
        counts = {
            (record["cell"], record["transform"]): record.get("compile_instructions")
            for record in data["records"]
        }
        counted_here = sum(
            1
            for record in data["records"]
            if record.get("compile_instructions") is not None
            and record.get("compile_instructions_note") is None
        )
        for verdict in data["verdicts"]:
            key = (verdict["cell"], verdict["transform"])
            rows[f"{key[0]} [{key[1]}]"] = (verdict["status"], counts.get(key))
    return {
        "wall_s": wall,
        "exit": done.returncode,
        "valgrind": "counting instructions of" in output,
        "children": "children at once" in output,
        "rows": rows,
        "counted": counted_here,
        "tail": output[-2000:],
    }


def carry(
    keep: Callable[[str, dict[str, Any]], dict[str, Any]],
    project: Path,
    pin: dict[str, Any],
    sessions: int,
    env: dict[str, str],
) -> int:
    """`sessions` pairs on the unchanged project, one recounting every row and one carrying
    every count: each row's verdict in both, and how far the recounts moved from the pin."""
    instructions = ("--compile-instructions",)
    recount = (*instructions, "-o", "compile_instructions_recount=true")
    pinned = {row: count for row, (_, count) in pin["rows"].items()}
    equal, moved, statuses = 0, 0.0, set()
    for _ in range(sessions):
        counted = keep("carry: recount", _pytest_session(project, *recount, env=env))
        carried = keep("carry: carried", _pytest_session(project, *instructions, env=env))
        verdicts = {row: status for row, (status, _) in counted["rows"].items()}
        equal += verdicts == {row: status for row, (status, _) in carried["rows"].items()}
        statuses.update(verdicts.values())
        for row, (_, count) in counted["rows"].items():
            if count is not None and pinned.get(row):
                moved = max(moved, abs(count - pinned[row]) / pinned[row])
        print(f"carry: {equal} equal so far, counts within {moved:.3%} of the pin", flush=True)
    print(
        f"carry: {equal} of {sessions} pairs of sessions with equal verdicts over "
        f"{len(pinned)} row(s) (verdicts seen: {', '.join(sorted(statuses))}); the recounts "
        f"within {moved:.3%} of the pinned counts"
    )
    return 0 if equal == sessions else 1


def pytest_sessions(
    carry_sessions: int, json_path: Path | None, carry_only: bool = False, tests: int = 10
) -> int:
    """The ``--pytest-sessions`` scenarios (see the module's docstring); with `carry_only`
    the pin and the carry pairs alone, over the first `tests` of the ten models."""
    import shutil

    results: dict[str, Any] = {}

    def keep(name: str, session: dict[str, Any]) -> dict[str, Any]:
        results.setdefault(name, []).append(session)
        if json_path is not None:
            json_path.write_text(json.dumps(results, indent=1))
        counted = session["counted"]
        print(
            f"{name}: {session['wall_s']:.1f} s, exit {session['exit']}, valgrind "
            f"{'started' if session['valgrind'] else 'not started'}"
            f"{' (several children)' if session['children'] else ''}, {counted} row(s) "
            "counted, not carried",
            file=sys.stderr,
            flush=True,
        )
        return session

    with tempfile.TemporaryDirectory(prefix="instruction-sessions-") as scratch:
        project = Path(scratch)
        (project / "test_models.py").write_text(PROJECT_TESTS)
        (project / "pytest.ini").write_text("[pytest]\n")
        instructions = ("--compile-instructions",)
        recount = (*instructions, "-o", "compile_instructions_recount=true")
        if carry_only:
            models = {"BENCH_DEPTHS": ",".join(str(d) for d in range(20, 20 + 2 * tests, 2))}
            pin_update = (*instructions, "--compile-pin-update")
            pin = keep("pin", _pytest_session(project, *pin_update, env=models))
            return carry(keep, project, pin, carry_sessions, models)
        plain = [keep("plain", _pytest_session(project)) for _ in range(3)]
        pin = keep("pin", _pytest_session(project, *instructions, "--compile-pin-update"))
        unchanged = [keep("unchanged", _pytest_session(project, *instructions)) for _ in range(3)]
        deeper = {"BENCH_DEEPER": "30"}  # one of the ten tests' model a layer deeper
        one = keep("one of ten", _pytest_session(project, *instructions, env=deeper))
        wide = keep("recount, every CPU", _pytest_session(project, *recount))
        narrow = (
            keep(
                "recount, one CPU",
                _pytest_session(project, *recount, prefix=("taskset", "-c", "0")),
            )
            if shutil.which("taskset")
            else None
        )
        carry(keep, project, pin, carry_sessions, {})  # says its own figures
    plain_s = min(session["wall_s"] for session in plain)
    print(f"\nplain session (best of 3): {plain_s:.1f} s")
    best = min(session["wall_s"] for session in unchanged)
    print(
        f"unchanged, every count carried (best of 3): {best:.1f} s, x{best / plain_s:.2f}; "
        f"valgrind started in {sum(session['valgrind'] for session in unchanged)} of 3"
    )
    print(
        f"one of ten changed: {one['wall_s']:.1f} s (x{one['wall_s'] / plain_s:.2f}); "
        f"{one['counted']} row(s) counted, the rest carried"
    )
    if narrow is not None:
        same = sum(
            1
            for row, (_, count) in wide["rows"].items()
            if count is not None and narrow["rows"].get(row, (None, None))[1] == count
        )
        print(
            f"recount: {wide['wall_s']:.1f} s with every CPU"
            f"{' (several children)' if wide['children'] else ' (one child)'}, "
            f"{narrow['wall_s']:.1f} s on one CPU; counts equal in {same} of {len(wide['rows'])}"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--pytest-sessions", action="store_true", help="the pytest-session scenarios instead"
    )
    parser.add_argument("--carry-sessions", type=int, default=20)
    parser.add_argument(
        "--carry-only",
        action="store_true",
        help="--pytest-sessions: the pin and the carry pairs alone",
    )
    parser.add_argument(
        "--tests",
        type=int,
        default=10,
        help="--carry-only: the project's first N models (of 10 by default)",
    )
    parser.add_argument("--idle", type=int, default=5)
    parser.add_argument("--busy", type=int, default=5)
    parser.add_argument(
        "--unchanged",
        type=int,
        default=20,
        help="unchanged sessions judged for false DRIFT, pin excluded",
    )
    parser.add_argument("--modules", default="all")
    parser.add_argument(
        "--tolerance",
        type=float,
        default=None,
        help="the tolerance judged in detail (default: the plugin's); 1, 1.5, 2 and 5 %% "
        "are tabled as well",
    )
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument(
        "--json", type=Path, default=None, help="sessions written here, after each session"
    )
    parser.add_argument(
        "--report",
        type=Path,
        nargs="+",
        default=None,
        help="only print the report of --json files, their sessions in the order given (the "
        "first file's first session is the pin)",
    )
    parser.add_argument(
        "--beside",
        action="store_true",
        help="mark these sessions as run beside another counting session (two at a time "
        "on the machine), to be merged with --report",
    )
    args = parser.parse_args(argv)
    if args.pytest_sessions:
        return pytest_sessions(args.carry_sessions, args.json, args.carry_only, args.tests)

    from pytest_jaxcompile._constants import DEFAULT_INSTRUCTIONS_TOLERANCE

    tolerance = DEFAULT_INSTRUCTIONS_TOLERANCE if args.tolerance is None else args.tolerance
    if args.report is not None:
        parts = [json.loads(path.read_text()) for path in args.report]
        sessions = [session for part in parts for session in part["sessions"]]
        plain = parts[0]["plain_s"]
        spread_sessions = parts[0].get("spread_sessions", len(sessions))
        _report(list(plain), sessions, plain, tolerance, spread_sessions)
        return 0
    names = list(_modules()) if args.modules == "all" else args.modules.split(",")
    staged, plain = _stage(names)
    extra_idle = max(0, args.unchanged + 1 - args.idle - args.busy)
    plan = [False] * args.idle + [True] * args.busy + [False] * extra_idle
    sessions = []
    for number, busy in enumerate(plan, 1):
        session = _session(staged, names, busy, args.timeout)
        session["beside"] = args.beside
        sessions.append(session)
        if args.json is not None:  # every session kept, so a report can be made of any part
            saved = {
                "sessions": sessions,
                "plain_s": plain,
                "spread_sessions": args.idle + args.busy,
            }
            args.json.write_text(json.dumps(saved, indent=1))
        print(
            f"session {number}/{len(plan)} ({'busy' if busy else 'idle'}): "
            f"{session['wall_s']:.0f} s",
            file=sys.stderr,
            flush=True,
        )
    _report(names, sessions, plain, tolerance, args.idle + args.busy)
    return 0


def _judged(
    names: list[str], sessions: list[dict[str, Any]], tolerance: float
) -> tuple[int, int, dict[str, int]]:
    """At `tolerance`: unchanged modules over the first session's pin (false DRIFT), the
    sessions holding one, and per grown MLP the sessions whose count is over the 20-layer
    pin (caught)."""
    pin = sessions[0]["counts"]
    over = [
        [name for name in names if s["counts"][name] > pin[name] * (1 + tolerance)]
        for s in sessions[1:]
    ]
    caught = {
        name: sum(1 for s in sessions if s["counts"][name] > pin["mlp20_grad"] * (1 + tolerance))
        for name in ("mlp21_grad", "mlp22_grad")
        if {name, "mlp20_grad"} <= set(names)
    }
    return sum(map(len, over)), sum(1 for found in over if found), caught


def _report(
    names: list[str],
    sessions: list[dict[str, Any]],
    plain: dict[str, float],
    tolerance: float,
    spread_sessions: int,
) -> None:
    pin = sessions[0]["counts"]
    beside = sum(bool(s.get("beside")) for s in sessions)
    print(
        f"{len(names)} modules, {len(sessions)} sessions "
        f"({sum(s['busy'] for s in sessions)} with every core busy"
        + (f", {beside} run beside another counting session" if beside else "")
        + f"), tolerance {tolerance:.2%}"
    )
    print("\nmodule                   count (pin)    spread   plain s   counted s   recounts")
    worst = 0.0
    for name in names:
        counts = [s["counts"][name] for s in sessions[:spread_sessions]]
        spread = (max(counts) - min(counts)) / min(counts)
        worst = max(worst, spread)
        seconds = [s["seconds"][name] for s in sessions if s["seconds"][name] is not None]
        counted = f"{min(seconds):9.1f}" if seconds else "        -"
        recounts = sum(s.get("attempts", {}).get(name, 1) - 1 for s in sessions)
        print(
            f"{name:<24} {pin[name]:>13,}  {spread:7.3%}  {plain[name]:8.3f}  {counted}"
            f"   {recounts:8d}"
        )
    print(f"\nlargest spread of any module over the first {spread_sessions} sessions: {worst:.3%}")
    everywhere = [
        (max(s["counts"][name] for s in sessions) - pin[name]) / pin[name] for name in names
    ]
    print(f"largest count over its pin in any session: {max(everywhere):+.3%}")
    false_drift, sessions_with, caught = _judged(names, sessions, tolerance)
    print(
        f"false DRIFT: {false_drift} module(s) in {sessions_with} of {len(sessions) - 1} "
        "unchanged sessions"
    )
    labels = {"mlp22_grad": "22 layers (+10 %)", "mlp21_grad": "21 layers (+5 %)"}
    for name, count in caught.items():
        growth = [s["counts"][name] / pin["mlp20_grad"] - 1 for s in sessions]
        print(
            f"20-layer pin, {labels[name]}: caught in {count} of {len(sessions)} sessions "
            f"(count {min(growth):+.2%} to {max(growth):+.2%} over the pin)"
        )
    print("\ntolerance  false DRIFT (sessions)  22 layers caught  21 layers caught")
    for each in sorted({0.01, 0.015, 0.02, 0.05, tolerance}):
        drift, with_drift, found = _judged(names, sessions, each)
        print(
            f"{each:9.1%}  {drift:4d} ({with_drift:2d} of {len(sessions) - 1})"
            f"        {found.get('mlp22_grad', 0):3d} of {len(sessions)}"
            f"         {found.get('mlp21_grad', 0):3d} of {len(sessions)}"
        )
    walls = [s["wall_s"] for s in sessions]
    counted = [sum(v for v in s["seconds"].values() if v is not None) for s in sessions]
    alone = sessions[:spread_sessions]  # the idle and busy sessions, each alone
    idle = [s["wall_s"] for s in alone if not s["busy"] and not s.get("beside")]
    busy = [s["wall_s"] for s in alone if s["busy"]]
    print(
        f"\ncost per session: {min(walls):.0f}-{max(walls):.0f} s wall "
        f"(idle {min(idle):.0f}-{max(idle):.0f} s"
        + (f", busy {min(busy):.0f}-{max(busy):.0f} s" if busy else "")
        + f"), of which counting {min(counted):.0f}-{max(counted):.0f} s "
        f"({min(counted) / len(names):.1f} s per module at best); plain compiles of the same "
        f"modules: {sum(plain.values()):.2f} s in all"
    )


if __name__ == "__main__":
    sys.exit(main())
