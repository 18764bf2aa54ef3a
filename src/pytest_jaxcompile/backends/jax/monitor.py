"""Listen to JAX's own compile events and cache diagnostics, per thread.

`jax.monitoring` listeners are process-global, so every event is tagged with the
thread it fired on and only handed to a capture opened on that same thread.
JAX explains why it did not write a cache entry only in its loggers (at DEBUG unless
`jax_explain_cache_misses` is on); while a capture is open those loggers are lowered
to DEBUG and a logger filter takes the records, letting through to the user's
handlers exactly what would have reached them anyway. The dispatch logger is read the
same way for the name of each backend compile, which jax 0.4.30 does not pass with the
compile's duration event (later versions do). A capture opened with ``explain=True`` also
reads JAX's explanations of tracing-cache misses (see `explain`).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from pytest_jaxcompile.backends.jax.classify import SkipReason, skip_reason_from_log
from pytest_jaxcompile.backends.jax.eager import dispatch_of
from pytest_jaxcompile.backends.jax.explain import (
    EXPLAIN_RAISED_PREFIXES,
    RETRACE_HEADER,
    RETRACE_LOGGERS,
    Retrace,
    explaining,
    parse_explanation,
)
from pytest_jaxcompile.backends.jax.keyparts import LOGGER as KEY_PARTS_LOGGER
from pytest_jaxcompile.backends.jax.keyparts import (
    ComputationHashedOnce,
    KeyParts,
    is_key_record,
)
from pytest_jaxcompile.backends.jax.residue import ProgramResidue

EVENT_TRACE = "/jax/core/compile/jaxpr_trace_duration"
EVENT_LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
EVENT_BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"
EVENT_CACHE_REQUEST = "/jax/compilation_cache/compile_requests_use_cache"
EVENT_CACHE_HIT = "/jax/compilation_cache/cache_hits"
EVENT_CACHE_WRITE = "/jax/compilation_cache/cache_misses"  # fires only when an entry is written
EVENT_CACHE_RETRIEVAL = "/jax/compilation_cache/cache_retrieval_time_sec"
# On a hit: the compile time the entry saved, as JAX computes it (stored compile time minus
# the retrieval); fired by jax/_src/compiler.py, not by every version.
EVENT_CACHE_SAVED = "/jax/compilation_cache/compile_time_saved_sec"
COMPILE_PHASES = (EVENT_TRACE, EVENT_LOWER, EVENT_BACKEND_COMPILE)

# Pseudo-events this module adds to the stream.
LOG_SKIP_REASON = "log:skip_reason"
LOG_CACHE_KEY = "log:cache_key"
LOG_COMPILE_NAME = "log:compile_name"  # "Finished XLA compilation of <name> in ... sec"
LOG_RETRACE = "log:retrace"  # JAX's explanation of a tracing-cache miss
LOG_KEY_RECORD = "log:key_record"  # a record of JAX's cache_key logger (see keyparts)
NESTED_BEGIN = "capture:nested_begin"  # a fixture measurement opened inside this capture
NESTED_END = "capture:nested_end"
# A nested capture whose compiles the test did not ask for: the fixture's repeats of a
# measured compile (compile_repeat), whose number is a setting's, not the test's.
REPEAT_BEGIN = "capture:repeat_begin"
REPEAT_END = "capture:repeat_end"

JAX_CACHE_LOGGERS = ("jax._src.compiler", "jax._src.compilation_cache", "jax._src.dispatch")
_COMPILE_FINISHED = "Finished XLA compilation of "
_COMPILE_NAME = re.compile(r"Finished XLA compilation of (.+) in \S+ sec")


@dataclass(frozen=True)
class JaxEvent:
    name: str
    duration_s: float | None = None
    fun_name: str | None = None
    skip_reason: SkipReason | None = None  # for JAX's "not writing" log records
    cache_key: str | None = None  # for JAX's cache hit/miss log records
    eager: bool = False  # a backend compile of JAX's eager dispatch (see eager.py)
    retrace: Retrace | None = None  # for JAX's tracing-cache miss explanations
    key_record: tuple[str, tuple[Any, ...]] | None = None  # a cache_key (template, args)
    cpu_s: float | None = None  # the process's CPU clock when a compile phase's event fired
    signature: str | None = None  # a lowering's input types (`input_signature`)


@dataclass(frozen=True)
class TimeSpan:
    name: str
    start: float
    end: float


@dataclass
class ModuleCompile:
    """One backend compile as JAX reported it, with what led up to it."""

    fun_name: str
    backend_compile_s: float
    # Process CPU seconds from its lowering's end to its backend compile's end (the cache
    # lookup and the compile, as the fixture's clock brackets `compile()`); None when its
    # lowering was not seen (lowered before the capture).
    backend_compile_cpu_s: float | None = None
    trace_s: float = 0.0
    lower_s: float = 0.0
    module_name: str | None = None
    cache_key: str | None = None
    cache_requests: int = 0
    cache_hits: int = 0
    cache_writes: int = 0
    cache_retrieval_s: float | None = None
    skip_reasons: list[SkipReason] = field(default_factory=list)
    retraces: list[Retrace] = field(default_factory=list)  # JAX's, while explaining
    key: KeyParts = field(default_factory=KeyParts)  # its cache key's parts, when read
    nested: bool = False  # measured by a fixture call inside the capture
    repeat: bool = False  # a fixture's repeat of a measured compile (nested too)
    eager: bool = False  # JAX's eager dispatch of an operation outside jit (see eager.py)
    signature: str | None = None  # its input types, from its lowering (`input_signature`)

    @property
    def seconds(self) -> float:
        """Trace, lowering and backend compile of this module, summed."""
        return self.trace_s + self.lower_s + self.backend_compile_s


@dataclass
class EventLog:
    """The events of one capture, in the order they fired on its thread."""

    events: list[JaxEvent] = field(default_factory=list)
    spans: list[TimeSpan] = field(default_factory=list)
    explained: bool = False  # JAX explained its tracing-cache misses meanwhile
    # module_compiles() of the events so far (a census reads it several times per test)
    _grouped: tuple[int, list[ModuleCompile]] | None = field(
        default=None, repr=False, compare=False
    )

    def count(self, name: str) -> int:
        return sum(1 for event in self.events if event.name == name)

    def total(self, name: str) -> float | None:
        durations = [e.duration_s for e in self.events if e.name == name and e.duration_s]
        return sum(durations) if durations else None

    def skip_reasons(self) -> tuple[SkipReason, ...]:
        return tuple(e.skip_reason for e in self.events if e.skip_reason is not None)

    def key_parts(self) -> KeyParts:
        """The cache-key parts of the capture's compiles (a capture with ``key_parts``):
        each part's first hash, and every XLA flag logged."""
        key = KeyParts()
        for event in self.events:
            if event.key_record is not None:
                key.take(*event.key_record)
        return key

    def covered_s(self, *names: str) -> float:
        """Seconds covered by the time spans of these events, overlaps counted once.

        Nested jits trace inside their caller's trace: summing durations would count
        that time twice.
        """
        intervals = sorted((s.start, s.end) for s in self.spans if s.name in names)
        total = 0.0
        current_start = current_end = None
        for start, end in intervals:
            if current_end is None or start > current_end:
                if current_end is not None and current_start is not None:
                    total += current_end - current_start
                current_start, current_end = start, end
            else:
                current_end = max(current_end, end)
        if current_end is not None and current_start is not None:
            total += current_end - current_start
        return total

    def module_compiles(self) -> list[ModuleCompile]:
        """Group the stream into backend compiles (grouped again only when events came in
        since the last call; callers read the compiles, never change them).

        JAX fires the cache events (and logs) inside the backend-compile timer, whose
        duration event comes last, and traces and lowers before it, so everything since
        the previous compile belongs to the one that closes with the next duration event.
        """
        if self._grouped is None or self._grouped[0] != len(self.events):
            self._grouped = (len(self.events), self._group())
        return list(self._grouped[1])

    def _group(self) -> list[ModuleCompile]:
        compiles: list[ModuleCompile] = []
        pending = ModuleCompile(fun_name="", backend_compile_s=0.0)
        logged_name: str | None = None  # from the dispatch log, for jax 0.4.30
        lowered_cpu: float | None = None  # the CPU clock when this module's lowering ended
        depth = repeats = 0
        for event in self.events:
            name = event.name
            if name == NESTED_BEGIN:
                depth += 1
            elif name == NESTED_END:
                depth -= 1
            elif name == REPEAT_BEGIN:
                depth, repeats = depth + 1, repeats + 1
            elif name == REPEAT_END:
                depth, repeats = depth - 1, repeats - 1
            elif name == EVENT_TRACE:
                pending.trace_s += event.duration_s or 0.0
            elif name == EVENT_LOWER:
                pending.lower_s += event.duration_s or 0.0
                lowered_cpu = event.cpu_s
                pending.signature = event.signature or pending.signature
            elif name == EVENT_CACHE_REQUEST:
                pending.cache_requests += 1
            elif name == EVENT_CACHE_HIT:
                pending.cache_hits += 1
            elif name == EVENT_CACHE_WRITE:
                pending.cache_writes += 1
            elif name == EVENT_CACHE_RETRIEVAL:
                pending.cache_retrieval_s = event.duration_s
            elif name == LOG_CACHE_KEY:
                pending.module_name, pending.cache_key = event.fun_name, event.cache_key
            elif name == LOG_COMPILE_NAME:
                logged_name = event.fun_name
            elif event.skip_reason is not None:
                pending.skip_reasons.append(event.skip_reason)
            elif event.retrace is not None:
                pending.retraces.append(event.retrace)
            elif event.key_record is not None:
                pending.key.take(*event.key_record)
            elif name == EVENT_BACKEND_COMPILE:
                pending.fun_name = event.fun_name or logged_name or "<unnamed>"
                pending.backend_compile_s = event.duration_s or 0.0
                pending.nested = depth > 0
                pending.repeat = repeats > 0
                pending.eager = event.eager
                if lowered_cpu is not None and event.cpu_s is not None:
                    pending.backend_compile_cpu_s = max(event.cpu_s - lowered_cpu, 0.0)
                compiles.append(pending)
                pending = ModuleCompile(fun_name="", backend_compile_s=0.0)
                logged_name = lowered_cpu = None
        return compiles

    def own_compiles(self) -> list[ModuleCompile]:
        """The test's own compiles: not a fixture's measurement, not JAX's eager dispatch."""
        return [m for m in self.module_compiles() if not m.nested and not m.eager]

    def measured_compiles(self) -> list[ModuleCompile]:
        """The compiles the test asked a fixture to measure (``jax_compile``), one per
        measurement: not the fixture's repeats (`REPEAT_BEGIN`)."""
        return [m for m in self.module_compiles() if m.nested and not m.repeat and not m.eager]

    def counted_compiles(self) -> list[ModuleCompile]:
        """Every compile the test triggered, in order: its own and its fixture
        measurements; what its compile count and ``max_compiles`` count."""
        return [m for m in self.module_compiles() if not m.repeat and not m.eager]

    def eager_compiles(self) -> list[ModuleCompile]:
        """JAX's eager dispatch of operations outside jit (not a fixture's measurement)."""
        return [m for m in self.module_compiles() if not m.nested and m.eager]


class _CacheLogFilter(logging.Filter):
    """Hands JAX's log records to the capture of the thread that emitted them.

    A record passes on to the user's handlers only at the level it would have had without
    the plugin: its logger's own level, and DEBUG for what JAX raises to WARNING only
    because the plugin turned the explanation of cache misses on for that thread; an
    explanation the plugin asked for never passes.
    """

    def __init__(self, monitor: CompileMonitor, passes_at: int) -> None:
        super().__init__()
        self._monitor = monitor
        self.passes_at = passes_at

    def filter(self, record: logging.LogRecord) -> bool:
        template = str(record.msg)
        event = _event_from_log(template, _log_args(record))
        if event is not None:
            self._monitor.deliver(record.thread, event)
        level = record.levelno
        if record.thread in self._monitor.explaining_threads:
            if template.startswith(RETRACE_HEADER):
                return False  # JAX writes it only because the plugin asked
            if template.startswith(EXPLAIN_RAISED_PREFIXES):
                level = logging.DEBUG
        return level >= self.passes_at


def _event_from_log(template: str, args: tuple[Any, ...]) -> JaxEvent | None:
    if is_key_record(template, args):
        return JaxEvent(LOG_KEY_RECORD, key_record=(template, args))
    if template.startswith(RETRACE_HEADER):  # JAX formats it before logging
        retrace = parse_explanation(template)
        return None if retrace is None else JaxEvent(LOG_RETRACE, retrace=retrace)
    if template.startswith(_COMPILE_FINISHED):  # JAX formats it before logging
        try:
            message = template % args if args else template
        except (TypeError, ValueError):  # a filter must never break the user's compile
            return None
        match = _COMPILE_NAME.fullmatch(message)
        return None if match is None else JaxEvent(LOG_COMPILE_NAME, fun_name=match[1])
    if (
        template.startswith(
            ("PERSISTENT COMPILATION CACHE MISS for", "Persistent compilation cache hit for")
        )
        and args
    ):
        # jax 0.4.30 logs only hits, and names the module without its key.
        key = str(args[1]) if len(args) >= 2 else None
        return JaxEvent(LOG_CACHE_KEY, fun_name=str(args[0]), cache_key=key)
    reason = skip_reason_from_log(template, args)
    return None if reason is None else JaxEvent(LOG_SKIP_REASON, skip_reason=reason)


def _log_args(record: logging.LogRecord) -> tuple[Any, ...]:
    args = record.args
    if isinstance(args, tuple):
        return args
    return () if args is None else (args,)


class CompileMonitor:
    """Owns the (process-global) JAX listeners for one pytest session."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._captures: dict[int, list[EventLog]] = {}
        self._installed = False
        self._log_users: dict[str, int] = {}
        self._saved_levels: dict[str, int] = {}
        self._filters: dict[str, _CacheLogFilter] = {}
        # Open captures that read cache-key parts, by thread, and whether the key logger is
        # held at its own level for an eager compile (see `_on_duration`).
        self._key_readers: dict[int, int] = {}
        self._key_logger_quiet = False
        self._computation_hashed_once = ComputationHashedOnce()  # while key parts are read
        # Threads on which the plugin (not the user) turned jax_explain_cache_misses on.
        self.explaining_threads: set[int] = set()
        # What the program's traces and compiles left in JAX's in-process caches.
        self.residue = ProgramResidue()

    def _listeners(self) -> tuple[tuple[str, str, Any], ...]:
        return (
            ("register_event_listener", "unregister_event_listener", self._on_event),
            (
                "register_event_duration_secs_listener",
                "unregister_event_duration_listener",
                self._on_duration,
            ),
            (
                "register_event_time_span_listener",
                "unregister_event_time_span_listener",
                self._on_time_span,
            ),
        )

    def install(self) -> None:
        """Register the listeners; imports jax, so call it only once JAX is needed."""
        if self._installed:
            return
        from jax import monitoring

        for register, _, callback in self._listeners():
            if hasattr(monitoring, register):  # time spans are newer than the rest
                getattr(monitoring, register)(callback)
        self._installed = True

    def uninstall(self) -> None:
        if not self._installed:
            return
        from jax import monitoring

        for _, unregister, callback in self._listeners():
            if hasattr(monitoring, unregister):
                with contextlib.suppress(AssertionError, ValueError):  # already gone
                    getattr(monitoring, unregister)(callback)
        self._installed = False

    @contextlib.contextmanager
    def capture(
        self, *, explain: bool = False, key_parts: bool = False, repeat: bool = False
    ) -> Iterator[EventLog]:
        """Collect the events JAX fires on the current thread until the block exits.

        Captures nest (a fixture measurement inside a census of the whole test): the
        outer ones see every event, bracketed by NESTED_BEGIN/NESTED_END markers. With
        `explain`, JAX explains each tracing-cache miss on this thread meanwhile, and
        each compile carries the explanations since the previous one (`retraces`); with
        `key_parts`, each compile carries its persistent-cache key's parts (`key`). A
        `repeat` capture (the fixture's repeats) is bracketed as one in the outer captures:
        its compiles count as no test's.
        """
        begin, end = (REPEAT_BEGIN, REPEAT_END) if repeat else (NESTED_BEGIN, NESTED_END)
        self.install()
        log = EventLog(explained=explain)
        thread = threading.get_ident()
        loggers = (
            JAX_CACHE_LOGGERS
            + (RETRACE_LOGGERS if explain else ())
            + ((KEY_PARTS_LOGGER,) if key_parts else ())
        )
        with contextlib.ExitStack() as stack_of_contexts:
            if explain:
                ours = stack_of_contexts.enter_context(explaining())
                if ours and thread not in self.explaining_threads:
                    self.explaining_threads.add(thread)
                    stack_of_contexts.callback(self.explaining_threads.discard, thread)
            with self._lock:
                stack = self._captures.setdefault(thread, [])
                for outer in stack:
                    outer.events.append(JaxEvent(begin))
                stack.append(log)
                self._open_loggers(loggers)
                if key_parts:
                    self._key_readers[thread] = self._key_readers.get(thread, 0) + 1
                    if len(self._key_readers) > 1:  # another thread may be mid eager compile
                        self._set_key_logger_quiet(False)
            try:
                yield log
            finally:
                with self._lock:
                    stack = self._captures.get(thread, [])
                    if log in stack:
                        stack.remove(log)
                    for outer in stack:
                        outer.events.append(JaxEvent(end))
                    if not stack:
                        self._captures.pop(thread, None)
                    if key_parts:
                        self._key_readers[thread] -= 1
                        if not self._key_readers[thread]:
                            del self._key_readers[thread]
                    self._close_loggers(loggers)

    # Listener callbacks: keep them cheap, they run inside every JAX compile.
    def _on_event(self, event: str, **kwargs: Any) -> None:
        self.deliver(threading.get_ident(), JaxEvent(event, fun_name=_fun_name(kwargs)))

    def _on_duration(self, event: str, duration_secs: float, **kwargs: Any) -> None:
        thread = threading.get_ident()
        eager = False
        if event in COMPILE_PHASES:
            # The work runs below this call on this thread: its stack says whose it is and
            # what JAX keeps it under, whether or not a capture is open (see residue).
            dispatch = dispatch_of(sys._getframe(1))
            self.residue.note(dispatch)
            eager = event == EVENT_BACKEND_COMPILE and dispatch.eager
            if thread in self._key_readers and event in (EVENT_LOWER, EVENT_BACKEND_COMPILE):
                # JAX computes the cache key between a module's lowering and its backend
                # compile, and at DEBUG hashes every part a second time to log it: worth it
                # for the program's compiles (rows keep their key parts), not for eager
                # dispatch's, whose keys nothing reads.
                with self._lock:
                    self._set_key_logger_quiet(
                        event == EVENT_LOWER and dispatch.eager and len(self._key_readers) == 1
                    )
        if thread in self._captures:
            cpu = time.process_time() if event in COMPILE_PHASES else None
            signature = input_signature(sys._getframe(1)) if event == EVENT_LOWER else None
            self.deliver(
                thread,
                JaxEvent(
                    event,
                    float(duration_secs),
                    _fun_name(kwargs),
                    eager=eager,
                    cpu_s=cpu,
                    signature=signature,
                ),
            )

    def _on_time_span(self, event: str, start_time: float, end_time: float, **_: Any) -> None:
        if event in COMPILE_PHASES:
            stack = self._captures.get(threading.get_ident())
            for log in stack or ():
                log.spans.append(TimeSpan(event, start_time, end_time))

    def deliver(self, thread: int | None, event: JaxEvent) -> None:
        stack = self._captures.get(thread) if thread is not None else None
        for log in stack or ():
            log.events.append(event)

    def _open_loggers(self, names: tuple[str, ...]) -> None:
        """Lower JAX's loggers so that their records are created, and read them."""
        for name in names:
            self._log_users[name] = self._log_users.get(name, 0) + 1
            if self._log_users[name] > 1:
                continue
            logger = logging.getLogger(name)
            self._saved_levels[name] = logger.level
            passes_at = logger.getEffectiveLevel()
            log_filter = _CacheLogFilter(self, passes_at)
            self._filters[name] = log_filter
            logger.addFilter(log_filter)
            # Explanations are logged at WARNING: no need for the retrace loggers' DEBUG.
            lowest = logging.WARNING if name in RETRACE_LOGGERS else logging.DEBUG
            logger.setLevel(min(lowest, passes_at))
            if name == KEY_PARTS_LOGGER:
                self._computation_hashed_once.install()

    def _close_loggers(self, names: tuple[str, ...]) -> None:
        for name in names:
            self._log_users[name] -= 1
            if self._log_users[name] > 0:
                continue
            del self._log_users[name]
            logger = logging.getLogger(name)
            logger.removeFilter(self._filters.pop(name))
            logger.setLevel(self._saved_levels.pop(name))
            if name == KEY_PARTS_LOGGER:
                self._key_logger_quiet = False
                self._computation_hashed_once.uninstall()

    def _set_key_logger_quiet(self, quiet: bool) -> None:
        """Hold the cache-key logger at the level it had without the plugin (`quiet`), or
        at DEBUG again, while a capture reads key parts; quiet only for an eager compile on
        the one thread reading key parts (the level is process-wide). Called with the lock
        held."""
        if quiet == self._key_logger_quiet or KEY_PARTS_LOGGER not in self._log_users:
            return
        self._key_logger_quiet = quiet
        logger = logging.getLogger(KEY_PARTS_LOGGER)
        saved = self._saved_levels[KEY_PARTS_LOGGER]
        logger.setLevel(
            saved if quiet else min(logging.DEBUG, self._filters[KEY_PARTS_LOGGER].passes_at)
        )


SIGNATURE_FRAMES = 12  # the lowering's jaxpr is a few frames above JAX's lowering event
_JAXPR_LOCALS = ("closed_jaxpr", "jaxpr")


def input_signature(frame: FrameType | None) -> str | None:
    """The input types of the module being lowered (``f32[8,64],i32[]``), from the
    ClosedJaxpr JAX's lowering frames hold; None where none is found."""
    for _ in range(SIGNATURE_FRAMES):
        if frame is None:
            return None
        for name in _JAXPR_LOCALS:
            avals = getattr(frame.f_locals.get(name), "in_avals", None)
            if avals is not None:
                return ",".join(_short(aval) for aval in avals)
        frame = frame.f_back
    return None


def _short(aval: Any) -> str:
    try:
        return str(aval.str_short(short_dtypes=True))
    except (AttributeError, TypeError):
        return str(aval)


def _fun_name(kwargs: dict[str, Any]) -> str | None:
    value = kwargs.get("fun_name")
    return None if value is None else str(value)
