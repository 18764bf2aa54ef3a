"""The process's resident memory while something runs: its peak and its growth.

`RssWatch` owns a daemon thread that reads the process's resident set size every
`interval_s` while a block (`RssBlock`) runs, and each block's start and end are read too;
one watch samples many blocks in turn (a census'd session's test calls: a thread per test
cost about 0.5 ms a test), and `RssSampler` is one block with a watch of its own (a
fixture's compile). The kernel's own high-water mark (Linux's ``VmHWM``; ``ru_maxrss``
elsewhere) is read before and after: when it rose during the block, the new mark was
reached inside the block and is its exact peak, whatever the sampling missed; when it did
not, the peak is the highest sample (a spike shorter than the interval can be missed;
docs/memory.md says how close).

Framework-neutral: JAX fixture rows sample one ``compile()``, census rows a whole test call,
torch rows ``torch.compile``'s first call. Nothing here imports jax or torch.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

MIB = 1024 * 1024
COMPILE_INTERVAL_S = 0.001  # the jax_compile fixture: one compile, sampled finely
# A census'd test call: sampled coarsely, for its whole length. Census rows' RSS is shown,
# never judged, and a new process-wide peak is exact whatever the interval (VmHWM); the
# thread takes the GIL for each sample (docs/benchmarks.md: on optax, up to ~2 % in run 7's
# A/B, none measurable under a busy core in run 8's).
TEST_INTERVAL_S = 0.025
RSS_DIGITS = 1  # MiB are recorded to 0.1


def _page_size() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        return 4096


class _RssReader:
    """The current RSS in bytes: /proc/self/statm where there is one (a few microseconds),
    psutil elsewhere."""

    def __init__(self) -> None:
        self._page = _page_size()
        self._fd: int | None = None
        try:
            self._fd = os.open("/proc/self/statm", os.O_RDONLY)
        except OSError:
            import psutil

            self._process: Any = psutil.Process()

    def read(self) -> int:
        if self._fd is not None:
            return int(os.pread(self._fd, 128, 0).split()[1]) * self._page
        return int(self._process.memory_info().rss)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def high_water_mark() -> int | None:
    """The process's own peak RSS so far, in bytes; None where unknown.

    Linux's ``VmHWM`` (/proc/self/status), not ``ru_maxrss``: Linux keeps ``ru_maxrss``
    across ``exec``, so a process started by a larger one (a pytest-xdist worker, a pytest
    subprocess) would begin with its parent's peak and never see its own rise.
    ``ru_maxrss`` elsewhere (bytes on macOS, KiB on other systems).
    """
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024


@dataclass(frozen=True)
class RssPeak:
    """Resident memory around a block: before it, its peak, and whether the peak is exact."""

    before_bytes: int
    peak_bytes: int
    samples: int
    exact: bool  # the kernel's high-water mark rose inside the block: the true peak
    sampler_cpu_s: float = 0.0  # CPU seconds the sampling thread spent (process CPU has it)
    sampled_bytes: int = 0  # the highest sample alone (benchmarks/compile_memory.py)

    @property
    def peak_mib(self) -> float:
        return round(self.peak_bytes / MIB, RSS_DIGITS)

    @property
    def growth_mib(self) -> float:
        return round(max(self.peak_bytes - self.before_bytes, 0) / MIB, RSS_DIGITS)

    def figures(self, scope: str) -> dict[str, Any]:
        """The record fields: ``compile_rss_peak_mib``, ``compile_rss_growth_mib`` and the
        scope they cover."""
        return {
            "compile_rss_peak_mib": self.peak_mib,
            "compile_rss_growth_mib": self.growth_mib,
            "compile_rss_scope": scope,
        }


def _peak_of(
    before: int,
    sampled: int,
    samples: int,
    mark_before: int | None,
    sampler_cpu_s: float = 0.0,
) -> RssPeak:
    """A block's figures from its samples and the kernel's high-water mark around it."""
    mark_after = high_water_mark()
    exact = mark_before is not None and mark_after is not None and mark_after > mark_before
    peak = max(sampled, mark_after) if exact and mark_after is not None else sampled
    return RssPeak(before, peak, samples, exact, sampler_cpu_s, sampled)


class RssWatch:
    """One sampling thread for many blocks in turn, each measured as above:
    ``with watch.block() as block: ...``, then ``block.stop()``; `close` ends the thread.

    The thread starts with the first block and sleeps between blocks. A sample that was
    being read when its block ended is dropped (`_generation`), never given to the next.
    """

    def __init__(self, interval_s: float = TEST_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._sampling = threading.Event()
        self._closing = threading.Event()  # wakes the thread from its interval at once
        self._thread: threading.Thread | None = None
        self._reader: _RssReader | None = None
        self._generation = 0
        self._peak = 0
        self._samples = 0
        self.thread_cpu_s = 0.0  # CPU seconds the thread spent, once closed

    def _run(self, reader: _RssReader) -> None:
        while True:
            self._sampling.wait()
            generation = self._generation
            if self._closing.wait(self.interval_s):
                self.thread_cpu_s = time.thread_time()
                return
            rss = reader.read()
            with self._lock:
                if generation == self._generation and self._sampling.is_set():
                    self._samples += 1
                    self._peak = max(self._peak, rss)

    @property
    def samples_taken(self) -> int:
        """Samples of the current block so far, its start read included."""
        with self._lock:
            return self._samples

    def begin(self) -> int:
        """Start sampling a block; the RSS at its start."""
        if self._closing.is_set():
            raise RuntimeError("RssWatch is closed")
        if self._reader is None:
            self._reader = _RssReader()
            self._thread = threading.Thread(
                target=self._run, args=(self._reader,), name="jaxcompile-rss", daemon=True
            )
            self._thread.start()
        before = self._reader.read()
        with self._lock:
            self._generation += 1
            self._peak, self._samples = before, 1
        self._sampling.set()
        return before

    def end(self) -> tuple[int, int]:
        """Stop sampling the block: its highest sample (the end read too) and their count."""
        assert self._reader is not None, "no block began"
        self._sampling.clear()
        end = self._reader.read()
        with self._lock:
            self._generation += 1
            return max(self._peak, end), self._samples + 1

    def block(self) -> RssBlock:
        return RssBlock(self)

    def close(self) -> None:
        """End the thread (once); a watch that never sampled has none."""
        self._closing.set()
        self._sampling.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._reader is not None:
            self._reader.close()
            self._reader = None


class RssBlock:
    """One block an `RssWatch` samples: ``with watch.block() as block: ...``, then
    ``block.stop()`` (or ``block.result``). A block that owns its watch closes it when it
    stops, and its result carries the thread's CPU seconds (`RssSampler`)."""

    def __init__(self, watch: RssWatch, *, owns_watch: bool = False) -> None:
        self._watch = watch
        self._owns_watch = owns_watch
        self.result: RssPeak | None = None
        self._before = 0
        self._mark_before: int | None = None

    def __enter__(self) -> RssBlock:
        self._mark_before = high_water_mark()
        self._before = self._watch.begin()
        return self

    @property
    def samples_taken(self) -> int:
        """Samples of this block so far (while it runs)."""
        return self._watch.samples_taken

    def stop(self) -> RssPeak:
        """Stop sampling (once) and return the result; leaving the block stops it too."""
        if self.result is None:
            peak, samples = self._watch.end()
            if self._owns_watch:
                self._watch.close()
            cpu_s = self._watch.thread_cpu_s if self._owns_watch else 0.0
            self.result = _peak_of(self._before, peak, samples, self._mark_before, cpu_s)
        return self.result

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


class RssSampler(RssBlock):
    """``with RssSampler(0.001) as sampler: ...``, then ``sampler.result``: one block with a
    sampling thread of its own (a fixture's compile; its CPU seconds are in the result)."""

    def __init__(self, interval_s: float = COMPILE_INTERVAL_S) -> None:
        super().__init__(RssWatch(interval_s), owns_watch=True)
