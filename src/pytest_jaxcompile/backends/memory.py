"""The process's resident memory while something runs: its peak and its growth.

`RssSampler` is a context manager: a daemon thread reads the process's resident set size
every `interval_s` while the block runs, and the block's start and end are read too. The
kernel's own high-water mark (Linux's ``VmHWM``; ``ru_maxrss`` elsewhere) is read before
and after: when it rose during the block, the new mark was reached inside the block and is
its exact peak, whatever the sampling missed; when it did not, the peak is the highest
sample (a spike shorter than the interval can be missed; docs/memory.md says how close).

Framework-neutral: JAX fixture rows sample one ``compile()``, census rows a whole test call,
torch rows ``torch.compile``'s first call. Nothing here imports jax or torch.
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
TEST_INTERVAL_S = 0.005  # a census'd test call: sampled more coarsely, for its whole length
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


class RssSampler:
    """``with RssSampler(0.001) as sampler: ...``, then ``sampler.result``."""

    def __init__(self, interval_s: float = COMPILE_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.result: RssPeak | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._reader: _RssReader | None = None
        self._peak = 0
        self._samples = 0
        self._before = 0
        self._mark_before: int | None = None
        self._thread_cpu_s = 0.0

    def _sample(self) -> None:
        assert self._reader is not None
        rss = self._reader.read()
        self._samples += 1
        if rss > self._peak:
            self._peak = rss

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()
        self._thread_cpu_s = time.thread_time()

    def __enter__(self) -> RssSampler:
        self._reader = _RssReader()
        self._mark_before = high_water_mark()
        self._before = self._reader.read()
        self._peak, self._samples = self._before, 1
        self._thread = threading.Thread(target=self._run, name="jaxcompile-rss", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> RssPeak:
        """Stop sampling (once) and return the result; leaving the block stops it too."""
        if self.result is not None:
            return self.result
        self._stop.set()
        assert self._thread is not None and self._reader is not None, "not started"
        self._thread.join()
        self._sample()
        self._reader.close()
        mark_after = high_water_mark()
        exact = (
            self._mark_before is not None
            and mark_after is not None
            and mark_after > self._mark_before
        )
        peak = max(self._peak, mark_after) if exact and mark_after is not None else self._peak
        self.result = RssPeak(
            self._before, peak, self._samples, exact, self._thread_cpu_s, self._peak
        )
        return self.result

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
