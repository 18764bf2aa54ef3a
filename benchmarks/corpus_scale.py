"""Time and memory of `report` and `check` over large records corpora.

Run with ``python benchmarks/corpus_scale.py`` (add ``--records 100000 --cells 200`` etc. to
change the sizes). It writes generated corpora into a temporary directory, shaped like a
``--compile-record-dir`` tree (one JSON lines file per session of 100 rows, each row a full
record as the plugin writes it), pins them with ``pytest-jaxcompile pin``, and then runs each
command as its own process (``python -m pytest_jaxcompile ...``), measuring

- wall time (``time.perf_counter`` around the process), and
- peak resident memory of that process (``ru_maxrss`` from ``os.wait4``), next to the peak
  of a process that only starts the CLI (``--version``), so the difference is what reading
  the corpus costs.

It also measures, in this process, the peak Python heap (``tracemalloc``) of streaming a
corpus into the latest-rows table, the data structure that ``report`` and ``check`` keep.

The cases are chosen to show that memory follows the number of cells, not of records:
10,000 and 100,000 records over the same cells, and 100,000 records over ten times the cells.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

from pytest_jaxcompile.corpus.store import Corpus, latest_rows
from pytest_jaxcompile.records import CacheDetails, CompileRecord, HostState

ROWS_PER_FILE = 100
TRANSFORMS = ("vag", "jit")
STATES = ("cold", "warm")


@dataclass(frozen=True)
class Case:
    records: int
    cells: int  # tests; each has 2 transforms x 2 cache states x 2 jax versions

    @property
    def name(self) -> str:
        return f"{self.records:,} records, {self.cells:,} tests"


def record(index: int, case: Case) -> dict[str, object]:
    """The index-th row of a corpus: cycles through cells, transforms and states in time.

    The last fifth of the corpus runs under a newer jax (a version bump).
    """
    cells = case.cells
    cell = index % cells
    transform = TRANSFORMS[(index // cells) % len(TRANSFORMS)]
    state = STATES[(index // (cells * len(TRANSFORMS))) % len(STATES)]
    seconds = 1_780_000_000 + index * 60  # one row a minute
    version = "0.10.2" if index < case.records * 0.8 else "0.11.0"
    compile_s = (2.0 if state == "cold" else 0.05) * (1 + (index % 7) / 20)
    return CompileRecord(
        cell=f"tests/test_models_{cell // 50}.py::test_model[{cell}]",
        transform=transform,
        hardware="cpu:cpu @ AMD EPYC 7B13 x16",
        jax_version=version,
        jaxlib_version=version,
        mixed_precision=False,
        cache_state=state,
        compile_s=compile_s,
        compile_cpu_s=compile_s * 1.1,
        cache=CacheDetails(
            dir="/home/ci/.jax_cache",
            enabled=True,
            entries_before=120,
            entries_after=121,
            persisted=state == "cold",
            reason_detail="compiled and written to the cache",
        ),
        host_state=HostState(
            cpu_count=16, load_avg_1m=1.25, load_per_core=0.08, process_cpu_s=compile_s * 1.1
        ),
        hardware_detail={
            "platform": "cpu",
            "device_kind": "cpu",
            "device_count": 1,
            "cpu_model": "AMD EPYC 7B13",
            "cpu_count": 16,
            "machine": "x86_64",
        },
        trace_s=0.12,
        lower_s=0.05,
        backend_compile_s=compile_s * 0.98,
        module_name="jit_model",
        fingerprint="sha256:" + f"{cell:064x}",
        op_count=400,
        location=(f"tests/test_models_{cell // 50}.py", 10 + cell),
        timestamp=time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(seconds)),
        outcome="passed",
    ).to_dict()


def generate(directory: Path, case: Case) -> int:
    """Write the corpus as session files; returns its size in bytes."""
    directory.mkdir(parents=True)
    size = 0
    for start in range(0, case.records, ROWS_PER_FILE):
        stop = min(start + ROWS_PER_FILE, case.records)
        text = "".join(
            json.dumps(record(index, case), sort_keys=True) + "\n" for index in range(start, stop)
        )
        path = directory / f"{start // ROWS_PER_FILE:08d}.jsonl"
        path.write_text(text)
        size += len(text)
    # Another instrument's records share the tree and are passed over.
    (directory / "other.jsonl").write_text(
        json.dumps({"record_kind": "energy_probe", "joules": 3.0}) + "\n"
    )
    return size


def run_cli(args: list[str], cwd: Path) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MiB, exit status) of one CLI process."""
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_jaxcompile", *args],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode not in (0, 1):
        assert process.stderr is not None
        raise SystemExit(f"{args}: exit {process.returncode}: {process.stderr.read().decode()}")
    rss_kib = usage.ru_maxrss if sys.platform != "darwin" else usage.ru_maxrss / 1024
    return wall, rss_kib / 1024, process.returncode


def heap_peak(directory: Path) -> tuple[float, int]:
    """(peak MiB of the Python heap, rows kept) while streaming into the latest-rows table."""
    tracemalloc.start()
    latest = latest_rows(Corpus([directory]))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20, len(latest.rows)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            cpu = next(
                line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")
            )
    except (OSError, StopIteration):
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (
        f"{cpu}, {cores} usable cores, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--cells", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3, help="runs per command (best kept)")
    args = parser.parse_args()
    cases = [
        Case(args.records // 10, args.cells),
        Case(args.records, args.cells),
        Case(args.records, args.cells * 10),
    ]
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory(prefix="jaxcompile-bench-") as temp:
        root = Path(temp)
        _, baseline_rss, _ = run_cli(["--version"], root)
        print(f"CLI start-up only (--version): peak RSS {baseline_rss:.1f} MiB")
        print()
        print(
            f"| corpus | on disk | command | wall (best of {args.repeat}) | peak RSS "
            "| over start-up |"
        )
        print("|---|---:|---|---:|---:|---:|")
        heaps = []
        pages = []
        for number, case in enumerate(cases):
            directory = root / f"corpus{number}"
            size = generate(directory, case)
            pins = root / f"pins{number}"
            run_cli(["pin", str(directory), "--pins-dir", str(pins)], root)
            for label, command in (
                ("report", ["report", str(directory), "--pins-dir", str(pins)]),
                (
                    "report --html",
                    [
                        "report",
                        str(directory),
                        "--pins-dir",
                        str(pins),
                        "--html",
                        str(root / f"page{number}.html"),
                    ],
                ),
                ("check", ["check", str(directory), "--pins-dir", str(pins)]),
                ("check --trend", ["check", str(directory), "--pins-dir", str(pins), "--trend"]),
            ):
                runs = [run_cli(command, root) for _ in range(args.repeat)]
                wall = min(run[0] for run in runs)
                rss = max(run[1] for run in runs)
                print(
                    f"| {case.name} | {size / 2**20:.0f} MiB | `{label}` | {wall:.2f} s "
                    f"| {rss:.1f} MiB | {rss - baseline_rss:+.1f} MiB |"
                )
            page = root / f"page{number}.html"
            pages.append((case, page.stat().st_size, page.read_text().count("<svg")))
            heaps.append((case, *heap_peak(directory)))
        print()
        print(
            "| corpus | rows kept (latest per cell, transform, key) | peak Python heap "
            "while streaming |"
        )
        print("|---|---:|---:|")
        for case, peak, kept in heaps:
            print(f"| {case.name} | {kept:,} | {peak:.1f} MiB |")
        print()
        print("| corpus | HTML page | charts |")
        print("|---|---:|---:|")
        for case, size, charts in pages:
            print(f"| {case.name} | {size / 2**20:.1f} MiB | {charts:,} |")


if __name__ == "__main__":
    main()
