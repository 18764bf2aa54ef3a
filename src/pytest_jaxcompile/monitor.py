"""Listen to JAX's own compile events and cache diagnostics, per thread.

`jax.monitoring` listeners are process-global, so every event is tagged with the
thread it fired on and only handed to a capture opened on that same thread.
JAX explains why it did not write a cache entry only in its loggers (at DEBUG unless
`jax_explain_cache_misses` is on); while a capture is open those loggers are lowered
to DEBUG and a logger filter takes the records, letting through to the user's
handlers exactly what would have reached them anyway.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pytest_jaxcompile.classify import SkipReason, skip_reason_from_log

EVENT_TRACE = "/jax/core/compile/jaxpr_trace_duration"
EVENT_LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
EVENT_BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"
EVENT_CACHE_REQUEST = "/jax/compilation_cache/compile_requests_use_cache"
EVENT_CACHE_HIT = "/jax/compilation_cache/cache_hits"
EVENT_CACHE_WRITE = "/jax/compilation_cache/cache_misses"  # fires only when an entry is written
EVENT_CACHE_RETRIEVAL = "/jax/compilation_cache/cache_retrieval_time_sec"

JAX_CACHE_LOGGERS = ("jax._src.compiler", "jax._src.compilation_cache")


@dataclass(frozen=True)
class JaxEvent:
    name: str
    duration_s: float | None = None
    fun_name: str | None = None
    skip_reason: SkipReason | None = None  # set for JAX's "not writing" log records


@dataclass
class ModuleCompile:
    """One backend compile as JAX reported it, with the cache events inside it."""

    fun_name: str
    backend_compile_s: float
    cache_requests: int = 0
    cache_hits: int = 0
    cache_writes: int = 0
    cache_retrieval_s: float | None = None
    skip_reasons: list[SkipReason] = field(default_factory=list)


@dataclass
class EventLog:
    """The events of one capture, in the order they fired on its thread."""

    events: list[JaxEvent] = field(default_factory=list)

    def count(self, name: str) -> int:
        return sum(1 for event in self.events if event.name == name)

    def total(self, name: str) -> float | None:
        durations = [e.duration_s for e in self.events if e.name == name and e.duration_s]
        return sum(durations) if durations else None

    def skip_reasons(self) -> tuple[SkipReason, ...]:
        return tuple(e.skip_reason for e in self.events if e.skip_reason is not None)

    def module_compiles(self) -> list[ModuleCompile]:
        """Group the stream into backend compiles.

        JAX fires the cache events (and logs) inside the backend-compile timer, whose
        duration event comes last, so everything since the previous compile belongs to
        the one that closes with the next duration event.
        """
        compiles: list[ModuleCompile] = []
        pending = ModuleCompile(fun_name="", backend_compile_s=0.0)
        for event in self.events:
            if event.name == EVENT_CACHE_REQUEST:
                pending.cache_requests += 1
            elif event.name == EVENT_CACHE_HIT:
                pending.cache_hits += 1
            elif event.name == EVENT_CACHE_WRITE:
                pending.cache_writes += 1
            elif event.name == EVENT_CACHE_RETRIEVAL:
                pending.cache_retrieval_s = event.duration_s
            elif event.skip_reason is not None:
                pending.skip_reasons.append(event.skip_reason)
            elif event.name == EVENT_BACKEND_COMPILE:
                pending.fun_name = event.fun_name or "<unnamed>"
                pending.backend_compile_s = event.duration_s or 0.0
                compiles.append(pending)
                pending = ModuleCompile(fun_name="", backend_compile_s=0.0)
        return compiles


class _CacheLogFilter(logging.Filter):
    """Hands JAX's cache log records to the capture of the thread that emitted them."""

    def __init__(self, monitor: CompileMonitor, passes_at: int) -> None:
        super().__init__()
        self._monitor = monitor
        self._passes_at = passes_at

    def filter(self, record: logging.LogRecord) -> bool:
        reason = skip_reason_from_log(str(record.msg), _log_args(record))
        if reason is not None:
            self._monitor.deliver(record.thread, JaxEvent("log", skip_reason=reason))
        return record.levelno >= self._passes_at


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
        self._log_users = 0
        self._saved_levels: dict[str, int] = {}
        self._filters: dict[str, _CacheLogFilter] = {}

    def install(self) -> None:
        """Register the listeners; imports jax, so call it only once JAX is needed."""
        if self._installed:
            return
        from jax import monitoring

        monitoring.register_event_listener(self._on_event)
        monitoring.register_event_duration_secs_listener(self._on_duration)
        self._installed = True

    def uninstall(self) -> None:
        if not self._installed:
            return
        from jax import monitoring

        for name, callback in (
            ("unregister_event_listener", self._on_event),
            ("unregister_event_duration_listener", self._on_duration),
        ):
            unregister = getattr(monitoring, name, None)
            if unregister is not None:
                with contextlib.suppress(AssertionError, ValueError):  # already gone
                    unregister(callback)
        self._installed = False

    @contextmanager
    def capture(self) -> Iterator[EventLog]:
        """Collect the events JAX fires on the current thread until the block exits."""
        self.install()
        log = EventLog()
        thread = threading.get_ident()
        with self._lock:
            self._captures.setdefault(thread, []).append(log)
            self._open_loggers()
        try:
            yield log
        finally:
            with self._lock:
                stack = self._captures.get(thread, [])
                if log in stack:
                    stack.remove(log)
                if not stack:
                    self._captures.pop(thread, None)
                self._close_loggers()

    # Listener callbacks: keep them cheap, they run inside every JAX compile.
    def _on_event(self, event: str, **kwargs: Any) -> None:
        self.deliver(threading.get_ident(), JaxEvent(event, fun_name=_fun_name(kwargs)))

    def _on_duration(self, event: str, duration_secs: float, **kwargs: Any) -> None:
        self.deliver(
            threading.get_ident(), JaxEvent(event, float(duration_secs), _fun_name(kwargs))
        )

    def deliver(self, thread: int | None, event: JaxEvent) -> None:
        stack = self._captures.get(thread) if thread is not None else None
        if stack:
            # Nested captures (a fixture measurement inside a census) all see the event.
            for log in stack:
                log.events.append(event)

    def _open_loggers(self) -> None:
        self._log_users += 1
        if self._log_users > 1:
            return
        for name in JAX_CACHE_LOGGERS:
            logger = logging.getLogger(name)
            self._saved_levels[name] = logger.level
            passes_at = logger.getEffectiveLevel()
            log_filter = _CacheLogFilter(self, passes_at)
            self._filters[name] = log_filter
            logger.addFilter(log_filter)
            logger.setLevel(min(logging.DEBUG, passes_at))

    def _close_loggers(self) -> None:
        self._log_users -= 1
        if self._log_users > 0:
            return
        for name in JAX_CACHE_LOGGERS:
            logger = logging.getLogger(name)
            logger.removeFilter(self._filters.pop(name))
            logger.setLevel(self._saved_levels.pop(name))


def _fun_name(kwargs: dict[str, Any]) -> str | None:
    value = kwargs.get("fun_name")
    return None if value is None else str(value)
