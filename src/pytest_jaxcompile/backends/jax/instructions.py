"""Count the XLA compiler's instructions under valgrind: a figure load cannot change.

`InstructionStager` keeps, for each row the `jax_compile` fixture measures, the module and
compile options JAX handed its backend (captured around the measured ``compile()``), and at
the end of the session (per xdist worker) `InstructionStager.count` compiles them all in one
child process under callgrind (`instructions_child`), filling each record's
``compile_instructions`` and ``compile_instructions_identity``, or its
``compile_instructions_note`` saying why it was not counted. The pytest process itself never
runs under valgrind. docs/instructions.md says how the count is made exact, what it costs
and what the identity holds.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_jaxcompile._numbers import instructions_text
from pytest_jaxcompile.backends import CarriedCount, Say
from pytest_jaxcompile.backends.jax import child
from pytest_jaxcompile.backends.jax.instructions_child import xdist_workers
from pytest_jaxcompile.backends.jax.instrument import (
    DETERMINISM,
    InstrumentError,
    child_command,
    child_environment,
    installed_valgrind,
    instrument_identity,
    options_digest,
    valgrind_version,
)
from pytest_jaxcompile.backends.jax.moduletext import ModuleText
from pytest_jaxcompile.records import CompileRecord

# The estimate of a count's cost said when counting starts (`estimate_s`): wall seconds
# under valgrind on a 2-core machine. A 16,564-op module counted in 1,175 s (38.9 G
# instructions); a one-op module in ~9 s (83 M, of which the compiler's floor 79 M); a
# child's start (valgrind, JAX's import, the warm-up compiles, the exit) took ~120 s.
START_S = 120.0  # the child's start and exit
FLOOR_S = 10.0  # one count of a tiny module
PER_OP_S = 0.0703  # (1,175 s - FLOOR_S) / 16,564 ops
CPU_ONLY = "instruction counting covers the CPU compiler only"
CARRIED = "module unchanged: count carried"  # the note of a row judged from its pin's count


@dataclass
class Staged:
    """One measured row's compile, as JAX handed it to the backend."""

    record: CompileRecord
    module: bytes | None = None  # MLIR bytecode (or text), as the counting child reads it
    options: bytes | None = None
    devices: int = 1
    note: str | None = None  # why it cannot be staged at all
    # the lowered module, printed only if its text is read (its sha256: the fingerprint)
    module_text: ModuleText | None = None
    platform: str = "cpu"
    callbacks: bool = False  # the module has host callbacks
    ir: Any = None  # the MLIR module JAX compiled: its locations are read only if asked

    @property
    def text(self) -> str | None:
        """The lowered module's text: printed on first read (pairing, a reproducer)."""
        return None if self.module_text is None else self.module_text.text

    @property
    def count_note(self) -> str | None:
        """Why the counting child cannot count it; None when it can."""
        if self.note is not None:
            return self.note
        if self.platform != "cpu":
            return f"{CPU_ONLY}; this row compiled for {self.platform}"
        if self.callbacks:
            return "the module has host callbacks, which a compile in another process cannot hold"
        return None


@dataclass
class Captured:
    """What one ``compile()`` handed JAX's backend: filled inside `capture`."""

    calls: list[tuple[Any, Any, Any, Any]] = field(default_factory=list)


@contextlib.contextmanager
def capture() -> Iterator[Captured]:
    """Note each ``compile_or_get_cached`` call (backend, module, devices, options) of the
    compiles inside: the exact module and options the test compiled, cache hits too."""
    from jax._src import compiler

    captured = Captured()
    original = compiler.compile_or_get_cached

    def noting(*args: Any, **kwargs: Any) -> Any:
        names = ("backend", "computation", "devices", "compile_options", "host_callbacks")
        values = dict(zip(names, args, strict=False)) | kwargs
        captured.calls.append(
            (
                values.get("backend"),
                values.get("computation"),
                values.get("devices"),
                (values.get("compile_options"), bool(values.get("host_callbacks"))),
            )
        )
        return original(*args, **kwargs)

    compiler.compile_or_get_cached = noting
    try:
        yield captured
    finally:
        compiler.compile_or_get_cached = original


class InstructionStager:
    """The modules of this process's measured rows, counted at the session's end."""

    def __init__(self, timeout_s: float, counting: bool = True) -> None:
        self.timeout_s = timeout_s
        self.counting = counting  # --compile-instructions (else staged to pair or profile them)
        self.staged: list[Staged] = []  # kept to the end: to pair, profile or store them
        self._counted = 0  # the staged rows a count already went over

    def add(
        self, record: CompileRecord, captured: Captured, module_text: ModuleText | None = None
    ) -> None:
        """Stage the row's compile (the last module JAX compiled in its ``compile()``), with
        the lowered `module_text` (printed only where read)."""
        if not captured.calls:
            self.staged.append(Staged(record, note="no compile reached JAX's backend"))
            return
        backend, module, devices, (options, callbacks) = captured.calls[-1]
        count = getattr(devices, "size", None) or 1
        platform = str(getattr(backend, "platform", "cpu"))
        serialized = None if options is None else bytes(options.SerializeAsString())
        if serialized is not None and self.counting:  # the count's: pinned beside it
            record.compile_options_digest = options_digest(serialized)
        self.staged.append(
            Staged(
                record,
                # bytecode only where it will be counted (the counting child reads it)
                module=module_bytes(module) if self.counting and platform == "cpu" else None,
                options=serialized,
                devices=int(count),
                module_text=module_text,
                platform=platform,
                callbacks=bool(callbacks),
                ir=module,
            )
        )

    def staged_for(self, record: CompileRecord) -> Staged | None:
        """The staged compile of this row (the record itself, not an equal one)."""
        return next((staged for staged in self.staged if staged.record is record), None)

    def count(
        self,
        jaxlib_version: str,
        carry: CarriedCount | None = None,
        say: Say | None = None,
    ) -> None:
        """Count every staged module in one child under callgrind; fill the records.

        With `carry`, a row whose fingerprint, options and instrument equal its pin's takes
        the pin's count (noted `CARRIED`) and is not counted: valgrind starts only when some
        row is left to count. Rows staged since the last count only. The child counts a
        trivial module first (`floor_staged`): the compiler's floor, kept on every counted
        row. `say` gets a line when counting starts and one per module counted."""
        pending = self.staged[self._counted :]
        self._counted = len(self.staged)
        if not pending:
            return
        countable = [staged for staged in pending if staged.count_note is None]
        for staged in pending:
            if staged.count_note is not None:
                staged.record.compile_instructions_note = f"not counted: {staged.count_note}"
        if not countable:
            return
        try:
            identity = instrument_identity(installed_valgrind(), jaxlib_version)
        except InstrumentError as error:
            _not_counted(countable, str(error))
            return
        if carry is not None:
            countable = [staged for staged in countable if not _carried(staged, identity, carry)]
        if not countable:
            return
        try:
            valgrind_version()  # a program runs under callgrind here
        except InstrumentError as error:
            _not_counted(countable, str(error))
            return
        floor = floor_staged()
        progress = Progress(countable, say)
        groups = child_groups(countable, children_for(countable, worker_cpu_share()))
        progress.starting(len(groups))
        results = run_children(countable, groups, self.timeout_s, progress.arrived, floor)
        floor_count = results.get(len(countable), {}).get("instructions")
        for index, staged in enumerate(countable):
            result = results.get(index, {})
            if "instructions" in result:
                staged.record.compile_instructions = int(result["instructions"])
                staged.record.compile_instructions_identity = identity
                staged.record.compile_instructions_floor = (
                    None if floor_count is None else int(floor_count)
                )
            else:
                staged.record.compile_instructions_note = f"not counted: {result.get('error', '')}"


def worker_cpu_share() -> int:
    """The CPUs this process's counting children may take: the usable ones (affinity mask,
    cgroup quota), shared evenly among pytest-xdist's workers, each of which counts its own
    rows; at least 1."""
    from pytest_jaxcompile.backends.hardware import usable_cpu_count

    return max(1, usable_cpu_count() // xdist_workers())


def children_for(staged: list[Staged], cpus: int) -> int:
    """How many counting children to run at once: one per CPU of `cpus` (each child keeps to
    one), at most one per module, and one more only per START_S of estimated counting (a
    child's start costs about that much again)."""
    seconds = sum(module_estimate_s(item.record.op_count) for item in staged)
    return max(1, min(cpus, len(staged), int(seconds // START_S)))


def child_groups(staged: list[Staged], children: int) -> list[list[int]]:
    """`staged`'s indices split into `children` groups of about equal estimated counting
    time (the longest module first, each to the least loaded group); each group's indices in
    their staged order, so rows are counted in the order they ran."""
    groups: list[list[int]] = [[] for _ in range(max(1, children))]
    loads = [0.0] * len(groups)
    by_cost = sorted(
        range(len(staged)), key=lambda index: -module_estimate_s(staged[index].record.op_count)
    )
    for index in by_cost:
        least = loads.index(min(loads))
        groups[least].append(index)
        loads[least] += module_estimate_s(staged[index].record.op_count)
    return [sorted(group) for group in groups if group]


def run_children(
    staged: list[Staged],
    groups: list[list[int]],
    timeout_s: float,
    on_result: Callable[[int, dict[str, Any]], None] | None = None,
    floor: Staged | None = None,
) -> dict[int, dict[str, Any]]:
    """Count each group of `staged` (indices) in its own child, all at once, child ``i``
    on its own CPU (`CHILD_SLOT_ENV`); the results by index into `staged` (an entry a child
    gave no count for: its child's error), the floor's (counted by the first child) under
    ``len(staged)``. `on_result` gets each result as it arrives, by the same index."""
    results: dict[int, dict[str, Any]] = {}
    lock = threading.Lock()

    def count_group(slot: int, group: list[int], directory: Path) -> None:
        def arrived(local: int, result: dict[str, Any]) -> None:
            index = len(staged) if local == len(group) else group[local]
            with lock:  # the progress lines of several children, one at a time
                if on_result is not None:
                    on_result(index, result)

        try:
            found = run_child(
                directory,
                [staged[index] for index in group],
                timeout_s,
                arrived,
                floor=floor if slot == 0 else None,
                slot=slot,
            )
        except Exception as error:  # in a thread: said on the group's rows, never lost
            found = {-1: {"error": f"the counting child did not run: {error!r}"}}
        stopped = found.get(-1, {}).get("error", "")
        with lock:
            for local, index in enumerate(group):
                results[index] = found.get(local) or {"error": stopped}
            if slot == 0 and len(group) in found:
                results[len(staged)] = found[len(group)]

    with tempfile.TemporaryDirectory(prefix="jaxcompile-instructions-") as scratch:
        threads = []
        for slot, group in enumerate(groups):
            directory = Path(scratch) / str(slot)
            directory.mkdir()
            threads.append(
                threading.Thread(
                    target=count_group, args=(slot, group, directory), name=f"counting-{slot}"
                )
            )
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return results


def module_estimate_s(ops: int | None) -> float:
    """The seconds one module's count takes under valgrind, from its op count (an unknown
    size counts as tiny)."""
    return FLOOR_S + PER_OP_S * (ops or 0)


def estimate_s(op_counts: list[int | None], children: int = 1) -> float:
    """The wall seconds counting modules of these op counts will take in `children`
    children at once (an estimate, from START_S, FLOOR_S and PER_OP_S)."""
    counting = sum(module_estimate_s(ops) for ops in op_counts)
    return START_S + FLOOR_S + counting / max(1, children)


@dataclass
class Progress:
    """The lines said while the counting child runs: what it counts, then each count."""

    staged: list[Staged]
    say: Say | None
    done: int = 0
    floor: int | None = None

    def starting(self, children: int = 1) -> None:
        if self.say is None:
            return
        ops = [staged.record.op_count for staged in self.staged]
        seconds = estimate_s(ops, children)
        about = f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"
        where = f" in {children} children at once, each on its own CPU," if children > 1 else ""
        self.say(
            f"counting instructions of {len(self.staged)} module(s) "
            f"({sum(op or 0 for op in ops):,} ops) under valgrind{where or ','} about {about} "
            "from their sizes (an estimate)"
        )

    def arrived(self, index: int, result: dict[str, Any]) -> None:
        """One entry's result from the child (index len(staged): the floor module)."""
        if index == len(self.staged):
            self.floor = result.get("instructions")
            return
        if self.say is None or not 0 <= index < len(self.staged):
            return
        self.done += 1
        name = self.staged[index].record.name
        if "instructions" in result:
            seconds = result.get("seconds")
            took = "" if seconds is None else f", counted in {seconds:.0f} s"
            what = instructions_text(int(result["instructions"]), self.floor) + took
        else:
            what = f"not counted: {result.get('error', '')}"
        self.say(f"[{self.done}/{len(self.staged)}] {name}: {what}")


def floor_staged() -> Staged | None:
    """A trivial module (one add of two scalars) compiled for the CPU and staged as a row's
    compile is: its count is the compiler's fixed cost, the floor under every count. None
    where it cannot be staged (the rows are counted without a floor)."""
    import jax
    import jax.numpy as jnp

    record = CompileRecord("compiler floor", "compiler floor", "floor", "", "", False, "none", 0.0)
    stager = InstructionStager(timeout_s=0)
    try:
        with jax.default_device(jax.devices("cpu")[0]):
            lowered = jax.jit(lambda x: x + 1.0).lower(jnp.zeros((), jnp.float32))
            with capture() as captured:
                lowered.compile()
    except RuntimeError:  # no CPU backend here: the rows are still counted
        return None
    stager.add(record, captured)
    staged = stager.staged[0]
    return staged if staged.count_note is None and staged.module is not None else None


def _carried(staged: Staged, identity: str, carry: CarriedCount) -> bool:
    """Whether the row takes its pin's count (module, options and instrument unchanged)."""
    record = staged.record
    record.compile_instructions_identity = identity
    pinned = carry(record)
    if pinned is None:
        record.compile_instructions_identity = None
        return False
    record.compile_instructions = pinned
    record.compile_instructions_note = CARRIED
    return True


def module_bytes(module: Any) -> bytes:
    """An MLIR module as bytecode (as JAX's cache key hashes it), else as its text; the
    child's ``ir.Module.parse`` reads both."""
    from jax._src.interpreters import mlir

    if hasattr(mlir, "module_to_bytecode"):
        return bytes(mlir.module_to_bytecode(module))
    return str(module).encode()


def _not_counted(staged: list[Staged], why: str) -> None:
    for item in staged:
        item.record.compile_instructions_note = f"not counted: {why}"


def run_child(
    directory: Path,
    staged: list[Staged],
    timeout_s: float,
    on_result: Callable[[int, dict[str, Any]], None] | None = None,
    settings: tuple[str, ...] = DETERMINISM,
    floor: Staged | None = None,
    slot: int = 0,
) -> dict[int, dict[str, Any]]:
    """Run the counting child; results by entry index (-1: why the child stopped early).
    `on_result` gets each entry's result as it arrives; `settings`: which of SETTINGS
    the child runs with (a benchmark measures them; the plugin uses DETERMINISM); `floor`
    is counted first, its result under index len(staged); `slot`: which of several
    children at once this one is (`run_children`)."""
    stage, out = directory / "stage", directory / "out"
    stage.mkdir()
    out.mkdir()
    entries = []
    for index, item in enumerate([*staged, *([floor] if floor is not None else [])]):
        (stage / f"{index}.mlirbc").write_bytes(item.module or b"")
        (stage / f"{index}.options").write_bytes(item.options or b"")
        entries.append(
            {
                "id": index,
                "module": f"{index}.mlirbc",
                "options": f"{index}.options",
                "devices": item.devices,
            }
        )
    if floor is not None:  # counted first: each row's progress line shows it
        entries.insert(0, entries.pop())
    child.write_manifest(stage, {"entries": entries})
    results = child.run(
        child_command(stage, out, settings),
        stage,
        child_environment(settings, slot),
        timeout_s,
        "the counting child",
        "compile_instructions_timeout",
        on_result,
    )
    if -1 not in results and len(results) < len(entries):
        tail = child.log_tail(stage / child.LOG)
        results[-1] = {"error": f"the counting child gave no count: {tail}"}
    return results
