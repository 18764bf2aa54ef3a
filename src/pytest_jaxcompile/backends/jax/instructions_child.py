"""The counting child: compiles staged modules under callgrind, one count per module.

Run by `pytest_jaxcompile.backends.jax.instructions` as
``valgrind --tool=callgrind --instr-atstart=no --dump-before=getppid ... python -m
pytest_jaxcompile.backends.jax.instructions_child STAGE_DIR``. It imports JAX once
(uninstrumented: ~8x faster than instrumented), compiles a throwaway module so that XLA's
lazy initialisation is not counted, turns instrumentation on, and then brackets each
module's compile with two calls of ``os.getppid()``: callgrind dumps its counters before
each call (``--dump-before=getppid``), so the dump at the second call holds exactly the
instructions executed between the two, on every thread. Nothing else in the child calls
``getppid``.

The stage dir holds ``manifest.json`` (entries: ``id``, ``module`` file of MLIR bytecode,
``options`` file of serialized ``CompileOptions``, ``devices``) next to those files; the
child appends one JSON line per entry to ``results.jsonl``: ``{"id", "instructions"}`` or
``{"id", "error"}`` (``seconds``: the counted compile's wall seconds; ``attempts``: how many
times it was counted and ``reused``: the fusion compilers each count recycled, see `_count`).
It never imports pytest; of the plugin it imports only `child` (the warm-up and the
stage's file names, shared with the pairing child).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import gc
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pytest_jaxcompile.backends.jax.child import MANIFEST, RESULTS, warm_up
from pytest_jaxcompile.backends.jax.reproduce import Compiler

# Which of a process's counting children at once this one is, and how many xdist workers
# count beside it: with the worker's name, the CPU it keeps to (`one_cpu_of`).
CHILD_SLOT_ENV = "PYTEST_JAXCOMPILE_CHILD_SLOT"
XDIST_WORKER_COUNT_ENV = "PYTEST_XDIST_WORKER_COUNT"

DUMP_PREFIX = "callgrind.out"
SETTLE_S = 0.5  # wall seconds the child waits before each count
MIN_ATTEMPTS = 3  # counts of a module whose first count recycled a fusion compiler
MAX_ATTEMPTS = 5  # counts of one module at most (see _count)
# XLA's CPU fusion-compiler pool (jaxlib >= 0.7): an instance per fusion, recycled when a
# pool thread has given one back in time: a race the host's scheduler decides.
_POOL_GET = rb"xla::cpu::ParallelFusionEmitter::FusionCompilerPool::GetInstance()"
_POOL_CREATE = rb"xla::cpu::FusionCompiler::CreateContext()"


def _instrumentation_on() -> None:
    """``callgrind_control -i on`` for this process, waited for while running Python.

    callgrind_control talks to valgrind's gdbserver, which answers only while the process
    runs code (it polls every few thousand blocks), so the wait is a loop, not a blocking
    ``wait()``. Collection then counts from the next instruction; what the loop costs is
    before the first marker and never in a count.
    """
    control = subprocess.Popen(
        ["callgrind_control", "--instr=on", str(os.getpid())],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    while control.poll() is None:
        pass
    if control.returncode != 0:
        error = control.stderr.read().decode(errors="replace") if control.stderr else ""
        raise RuntimeError(f"callgrind_control --instr=on failed: {error.strip()}")


def _summary(dump: bytes, name: str) -> int:
    """The total of a callgrind dump (its ``summary:`` or ``totals:`` line)."""
    found = re.search(rb"^(?:summary|totals): *(\d+)", dump, re.MULTILINE)
    if found is None:
        raise RuntimeError(f"{name} holds no summary line")
    return int(found.group(1))


def _lines_starting(data: bytes, prefix: bytes) -> Iterator[int]:
    """Where each line of `data` that starts with `prefix` starts.

    Literal searches, not regular expressions: this runs under valgrind, instrumented, over
    a dump of megabytes, where a multiline regex took ~10 s of each count's wall time."""
    if data.startswith(prefix):
        yield 0
    needle = b"\n" + prefix
    at = data.find(needle)
    while at != -1:
        yield at + 1
        at = data.find(needle, at + 1)


def _function_id(dump: bytes, name: bytes) -> bytes | None:
    """The number callgrind's compressed dump gives a function: its first ``fn=(12) name``
    or ``cfn=(12) name`` line."""
    tail = b") " + name
    at = dump.find(tail)
    while at != -1:
        end = at + len(tail)
        if end == len(dump) or dump[end : end + 1] == b"\n":
            head = dump[dump.rfind(b"\n", 0, at) + 1 : at]
            for prefix in (b"fn=(", b"cfn=("):
                number = head[len(prefix) :]
                if head.startswith(prefix) and number.isdigit():
                    return number
        at = dump.find(tail, at + 1)
    return None


def _calls(block: bytes, callee: bytes) -> int:
    """Calls of the function numbered `callee` made in `block` of a dump: each
    ``cfn=(callee)`` line's next line, ``calls=N ...``."""
    total = 0
    for start in _lines_starting(block, b"cfn=(" + callee + b")"):
        line_end = block.find(b"\n", start)
        if line_end == -1:
            continue
        calls = re.match(rb"calls=(\d+)", block[line_end + 1 : line_end + 64])
        if calls is not None:
            total += int(calls.group(1))
    return total


def fusion_compilers_reused(dump: bytes) -> int | None:
    """How many fusions of the counted compile took a recycled fusion compiler from XLA's
    pool instead of creating one (None: this jaxlib has no such pool, or the compile used
    none).

    Creating an instance (an MLIR context, its dialects, the pass pipeline's set-up) costs
    about 19 M instructions, so a count with a recycled one is ~3 % lower than one without,
    and whether one is back in the pool in time is a race between two threads (under
    valgrind the host's scheduler, so load, decides it). A count where every fusion created
    its own instance is the one every run can reproduce.
    """
    get = _function_id(dump, _POOL_GET)
    create = _function_id(dump, _POOL_CREATE)
    if get is None or create is None:
        return None
    fetched = _calls(dump, get)
    created = 0
    # The calls GetInstance itself makes: the lines from its "fn=" to the next "fn=".
    for start in _lines_starting(dump, b"fn=(" + get + b")"):
        body = dump.find(b"\n", start) + 1
        if body == 0:
            continue
        end = dump.find(b"\nfn=", body - 1)
        created += _calls(dump[body : end + 1 if end != -1 else len(dump)], create)
    return max(fetched - created, 0) if fetched else None


def _latest_dump(out_dir: Path) -> Path:
    dumps = [path for path in out_dir.glob(f"{DUMP_PREFIX}.*") if path.suffix[1:].isdigit()]
    if not dumps:
        raise RuntimeError("callgrind wrote no dump at the marker (is this under callgrind?)")
    return max(dumps, key=lambda path: int(path.suffix[1:]))


def _clear_dumps(out_dir: Path) -> None:
    for path in out_dir.glob(f"{DUMP_PREFIX}.*"):
        path.unlink(missing_ok=True)


def one_cpu_of(cpus: set[int], worker: str | None, slot: int = 0, workers: int = 1) -> int | None:
    """The CPU a counting child keeps to: child `slot` of xdist worker ``gwN`` (of
    `workers`) takes CPU N + slot * workers of those it may use (round robin), so no two
    children of a session share one CPU while there are CPUs enough."""
    if not cpus:
        return None
    ordered = sorted(cpus)
    index = int(worker[2:]) if worker and worker.startswith("gw") and worker[2:].isdigit() else 0
    return ordered[(index + slot * max(1, workers)) % len(ordered)]


def _whole(value: str | None, default: int) -> int:
    return int(value) if value is not None and value.isdigit() and int(value) > 0 else default


def xdist_workers() -> int:
    """How many pytest-xdist workers count beside this process (1 without xdist)."""
    return _whole(os.environ.get(XDIST_WORKER_COUNT_ENV), 1)


def _one_cpu() -> int | None:
    """Run on one CPU, before JAX starts a thread: every thread pool XLA and LLVM size
    from the CPUs this process may use then has one thread (valgrind runs one thread at
    a time anyway), so work is not split differently from run to run."""
    if hasattr(os, "sched_getaffinity"):
        cpu = one_cpu_of(
            os.sched_getaffinity(0),
            os.environ.get("PYTEST_XDIST_WORKER"),
            _whole(os.environ.get(CHILD_SLOT_ENV), 0),
            xdist_workers(),
        )
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})
        return cpu
    return None


def _settle() -> None:
    """Before a count: Python's garbage collected and then off, so a collection never
    lands inside a count; and a pause, so that XLA's threads finish what the previous
    compile and its executable's teardown left them (a spinning or freeing thread would
    otherwise run inside the next count, more or less depending on scheduling)."""
    gc.collect()
    time.sleep(SETTLE_S)
    gc.disable()


def _count_once(
    compiler: Compiler, loaded: tuple[Any, ...], out_dir: Path
) -> tuple[int, int | None, float]:
    """One count of one compile: (instructions, fusion compilers reused, wall seconds)."""
    _settle()
    start = time.perf_counter()  # outside the markers: never counted
    os.getppid()  # marker: callgrind dumps (and zeroes) before this call
    executable = compiler.compile(loaded)
    os.getppid()  # marker: this dump holds the compile, on every thread
    seconds = time.perf_counter() - start
    gc.enable()
    del executable  # torn down outside the count (its threads' work too: _settle)
    dump = _latest_dump(out_dir)
    text = dump.read_bytes()  # read once: a dump is megabytes, and this runs under valgrind
    instructions = _summary(text, dump.name)
    reused = fusion_compilers_reused(text)
    _clear_dumps(out_dir)
    return instructions, reused, seconds


def enough_counts(reused: list[int]) -> bool:
    """Whether counts that recycled `reused` fusion compilers (in order) settle the module's
    count (`_count`)."""
    fewest = min(reused)
    seen = reused.count(fewest)
    return fewest == 0 or len(reused) >= MAX_ATTEMPTS or (seen >= 2 and len(reused) >= MIN_ATTEMPTS)


def _count(compiler: Compiler, stage: Path, entry: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """The module's count with the fewest fusion compilers recycled (see
    `fusion_compilers_reused`).

    A count that recycled none is kept at once: none is the fewest there can be. Otherwise
    the module is counted again, at least MIN_ATTEMPTS times in all and until the fewest has
    been seen twice (at most MAX_ATTEMPTS), and the first count with the fewest is kept. A
    module with more fusions than its compile creates instances for recycles a few in every
    count (three counts); one that usually recycles none but did in one count is counted
    until a count without comes, or three counts recycled (stopping after two, as an earlier
    rule did, kept a count with one recycled for one module in 1 of 12 benchmark sessions:
    docs/benchmarks.md#instruction-gate).
    """
    attempts: list[tuple[int, int, float]] = []
    while len(attempts) < MAX_ATTEMPTS:
        loaded = compiler.load(
            (stage / entry["module"]).read_bytes(),
            (stage / entry["options"]).read_bytes(),
            int(entry["devices"]),
        )
        instructions, reused, seconds = _count_once(compiler, loaded, out_dir)
        attempts.append((reused or 0, instructions, seconds))
        if enough_counts([attempt[0] for attempt in attempts]):
            break
    reused, instructions, seconds = min(attempts, key=lambda attempt: attempt[0])
    return {
        "instructions": instructions,
        "seconds": round(seconds, 3),
        "attempts": len(attempts),
        "reused": [attempt[0] for attempt in attempts],
    }


def main(argv: list[str]) -> int:
    stage = Path(argv[0])
    out_dir = Path(argv[1])
    cpu = _one_cpu()
    import jax

    jax.config.update("jax_enable_compilation_cache", False)  # type: ignore[no-untyped-call]
    manifest = json.loads((stage / MANIFEST).read_text())
    compiler = Compiler()
    warm_up()
    _instrumentation_on()
    results = stage / RESULTS
    for entry in manifest["entries"]:
        result: dict[str, Any] = {"id": entry["id"], "cpu": cpu}
        try:
            result |= _count(compiler, stage, entry, out_dir)
        except Exception as error:  # one module's failure is that row's note, not the run's
            result["error"] = f"{type(error).__name__}: {error}"
        gc.enable()
        _clear_dumps(out_dir)
        with results.open("a") as stream:
            stream.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
