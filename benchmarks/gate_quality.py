"""Gate quality: false alarms, detection, fidelity, overhead, and the naive alternative.

    python benchmarks/gate_quality.py [--sessions 8] [--depth 512] [--quick]

One run prints every section, side by side, as ratios where it compares:

false alarms
    The embedded example suite (examples/ with conftest_example.py as its conftest) is
    copied into a scratch project with its own pytest.ini. Pins are made fresh at the
    start, on the machine as it is: cold on an empty persistent cache, then warm on the
    cache that run filled (a copy of that cache is kept: "the main branch's cache").
    Then a busy-loop process keeps one core busy, and K sessions run with the plugin's
    defaults for each cache state, interleaved: cold (cache dir emptied before each
    session) and warm (the cache kept). A second copy pinned at JAXMODELS_DEPTH layers
    adds cold sessions of modules big enough that the floor does not shield them (not
    with --quick). Every DRIFT verdict there is a false alarm.
detection
    K sessions per scenario, the busy core still busy: a real regression (the example
    MLP at JAXMODELS_DEPTH layers instead of 2) on the restored main cache and on an
    empty cache; a cache that was not restored (empty dir, code unchanged) and a cache
    that is disabled (JAX_ENABLE_COMPILATION_CACHE=false), each with the defaults and
    with the flags meant for them (--compile-expect-warm, compile_require_cache).
    A scenario is caught in a session when that session exits non-zero.
fidelity
    The plugin's compile_s against JAX's own backend_compile_duration event, which
    every record carries, for the same compile (all records of the sessions above).
overhead
    pytest start-up on a generated suite of 200 trivial non-JAX tests with and without
    the plugin (-p no:jaxcompile), best of interleaved rounds; one of the tests asserts
    that jax was never imported. And the fixture's own cost per measurement (the
    jax_compile call's wall minus trace_s, lower_s and compile_s) with and without
    10,000 entry files in the cache dir, next to the cost of counting them.
naive alternative
    Timing lowered.compile() with pytest-benchmark (its default mode and pedantic
    rounds) against the plugin's compile_s for the same compile.

Verdicts are also re-judged offline from each session's JSON report with the plugin's
own judge (``--compile-strict``, and the CPU metric), to show what the load gate and the
metric choice change on the same measurements. The run is bounded (--max-minutes, and a
timeout per pytest process), always stops its busy process, and removes its scratch
directory unless --keep is given.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from pytest_jaxcompile._constants import DEFAULT_FLOOR_S, DEFAULT_MAX_LOAD, DEFAULT_TOLERANCE
from pytest_jaxcompile.backends.jax.measure import count_cache_entries
from pytest_jaxcompile.gate.judging import judge_all
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.pins import PinStore
from pytest_jaxcompile.gate.status import Status, session_failed
from pytest_jaxcompile.records import CompileRecord

REPO = Path(__file__).resolve().parent.parent
HEADINGS = {
    "machine": "== machine",
    "false_alarms": "== false alarms",
    "detection": "== detection",
    "fidelity": "== fidelity",
    "overhead": "== overhead",
    "naive": "== naive alternative",
    "defaults": "== defaults",
}
SESSION_TIMEOUT_S = 300.0
BUSY_LIFETIME_S = 3600.0  # the busy loop ends by itself even if this script is killed
DUMMY_ENTRIES = 10_000
CPU_MIN_S = 0.001  # CPU ratios of pins under a millisecond mean nothing
TICK_S = 0.01  # the 10 ms tick that psutil's cpu_times() counts in
NOT_RESTORED = "cache not restored, defaults"  # code unchanged: counts as a false-alarm row


# ---------------------------------------------------------------------------------------
# Plumbing: a deadline, the busy core, scratch projects, pytest sessions


class Deadline:
    def __init__(self, minutes: float) -> None:
        self.end = time.monotonic() + minutes * 60

    def left(self) -> float:
        return self.end - time.monotonic()

    def timeout(self, cap: float = SESSION_TIMEOUT_S) -> float:
        left = self.left()
        if left <= 5:
            raise TimeoutError("the benchmark ran out of its --max-minutes")
        return min(cap, left)


@contextlib.contextmanager
def busy_core(lifetime_s: float = BUSY_LIFETIME_S) -> Iterator[subprocess.Popen[bytes]]:
    """A process that keeps one core busy; stopped on the way out, whatever happens."""
    loop = (
        "import time\n"
        f"end = time.monotonic() + {lifetime_s}\n"
        "while time.monotonic() < end:\n"
        "    sum(range(10000))\n"
    )
    process = subprocess.Popen([sys.executable, "-c", loop])
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@dataclass
class Session:
    """One pytest process: its exit code, its JSON report, its wall time."""

    label: str
    exit_code: int | None  # None: timed out or skipped
    wall_s: float
    report: dict[str, Any] | None
    output_tail: str = ""
    store: PinStore | None = None  # the pins the session was judged against

    @property
    def verdicts(self) -> list[dict[str, Any]]:
        return [] if self.report is None else list(self.report["verdicts"])

    @property
    def records(self) -> list[dict[str, Any]]:
        return [] if self.report is None else list(self.report["records"])


class Project:
    """A scratch copy of the embedded example suite, as scripts/demo.sh makes it."""

    def __init__(self, root: Path, deadline: Deadline, env: dict[str, str] | None = None) -> None:
        self.root = root
        self.deadline = deadline
        self.env = env or {}
        self.cache_dir = root / ".jax_cache"
        self.main_cache = root.parent / f"{root.name}-main-cache"
        root.mkdir(parents=True)
        shutil.copy(REPO / "examples" / "jaxmodels.py", root)
        shutil.copy(REPO / "examples" / "test_models.py", root)
        shutil.copy(REPO / "conftest_example.py", root / "conftest.py")
        (root / "pytest.ini").write_text("[pytest]\n")
        self.reports = root.parent / f"{root.name}-reports"
        self.reports.mkdir()
        self.store: PinStore | None = None
        self._count = 0

    def make_pins(self) -> list[Session]:
        """Pin cold on an empty cache, keep that cache as main's, then pin warm on it."""
        self.clear_cache()
        cold = self.run("pin cold", "--compile-pin-update")
        self.snapshot_cache()
        warm = self.run("pin warm", "--compile-pin-update")
        for session in (cold, warm):
            if session.exit_code != 0:
                raise RuntimeError(f"{session.label} failed:\n{session.output_tail}")
        self.store = PinStore.load(self.root / "pins")
        return [cold, warm]

    def clear_cache(self) -> None:
        shutil.rmtree(self.cache_dir, ignore_errors=True)
        self.cache_dir.mkdir()

    def snapshot_cache(self) -> None:
        shutil.rmtree(self.main_cache, ignore_errors=True)
        shutil.copytree(self.cache_dir, self.main_cache)

    def restore_cache(self) -> None:
        shutil.rmtree(self.cache_dir, ignore_errors=True)
        shutil.copytree(self.main_cache, self.cache_dir)

    def run(self, label: str, *args: str, env: dict[str, str] | None = None) -> Session:
        self._count += 1
        report = self.reports / f"{self._count:03d}.json"
        environment = {key: value for key, value in os.environ.items() if key != "JAXMODELS_DEPTH"}
        environment.update(JAX_PLATFORMS="cpu", JAX_COMPILATION_CACHE_DIR=str(self.cache_dir))
        environment.update(self.env)
        environment.update(env or {})
        session = run_pytest(
            label,
            self.root,
            ["--compile-report", str(report), *args],
            environment,
            report,
            self.deadline,
        )
        session.store = self.store
        return session


def run_pytest(
    label: str,
    cwd: Path,
    args: Sequence[str],
    env: dict[str, str],
    report: Path | None,
    deadline: Deadline,
) -> Session:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    start = time.perf_counter()
    try:
        done = subprocess.run(
            command,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=deadline.timeout(),
        )
    except subprocess.TimeoutExpired as expired:
        tail = expired.stdout if isinstance(expired.stdout, str) else ""
        return Session(label, None, time.perf_counter() - start, None, tail[-2000:])
    wall = time.perf_counter() - start
    data = None
    if report is not None and report.is_file():
        data = json.loads(report.read_text())
    return Session(label, done.returncode, wall, data, (done.stdout + done.stderr)[-2000:])


# ---------------------------------------------------------------------------------------
# Judging: what a session did, and what it would have done with other settings


def thresholds_of(session: Session, **overrides: Any) -> Thresholds:
    assert session.report is not None
    values = dict(session.report["thresholds"])
    values.update(overrides)
    return Thresholds(**values)


def rejudge(session: Session, **overrides: Any) -> tuple[bool, Counter[str]]:
    """The plugin's own verdicts and gate decision for this session's rows, re-judged."""
    assert session.store is not None
    records = [CompileRecord.from_dict(data) for data in session.records]
    thresholds = thresholds_of(session, **overrides)
    verdicts = judge_all(records, session.store, thresholds)
    failed = session_failed(verdicts, thresholds)
    return failed, Counter(verdict.status.value for verdict in verdicts)


@dataclass
class Margin:
    """How close a row came to the DRIFT rule: its ratio and excess over its pin."""

    ratio: float
    excess_s: float
    row: str

    def describe(self) -> str:
        return f"{self.ratio:.2f}x, {self.excess_s:+.3f} s ({self.row})"


def margins(session: Session, changed: bool, metric: str = "wall") -> list[Margin]:
    """Rows with a pin under their key whose module changed (or not) since pinning."""
    store = session.store
    assert store is not None
    found = []
    for data in session.records:
        record = CompileRecord.from_dict(data)
        if not record.state.judged:
            continue
        pin = store.get(record.key, record.cell, record.transform)
        if pin is None or (pin.fingerprint != record.fingerprint) is not changed:
            continue
        if metric == "cpu":
            if record.compile_cpu_s is None or (pin.compile_cpu_s or 0) < CPU_MIN_S:
                continue
            measured, pinned = record.compile_cpu_s, pin.compile_cpu_s
        else:
            measured, pinned = record.compile_s, pin.compile_s
        if not pinned or pinned <= 0:
            continue
        name = f"{record.cell.split('::')[-1]}[{record.transform}] {record.cache_state}"
        found.append(Margin(measured / pinned, measured - pinned, name))
    return found


@dataclass
class Scenario:
    name: str
    sessions: list[Session] = field(default_factory=list)
    expect_caught: bool = False

    def loads(self) -> list[float]:
        return [
            data["host_state"]["load_per_core"]
            for session in self.sessions
            for data in session.records
            if data["host_state"].get("load_per_core") is not None
        ]


def scenario_rows(scenarios: list[Scenario]) -> list[list[str]]:
    rows = []
    for scenario in scenarios:
        ran = [s for s in scenario.sessions if s.exit_code is not None]
        caught = sum(1 for s in ran if s.exit_code != 0)
        errors = sum(1 for s in ran if s.exit_code not in (0, 1))
        statuses: Counter[str] = Counter()
        states: Counter[str] = Counter()
        strict_failed = cpu_failed = 0
        strict_drift = cpu_drift = 0
        for session in ran:
            statuses.update(v["status"] for v in session.verdicts)
            states.update(r["cache_state"] for r in session.records)
            if session.report is None:
                continue
            failed, counts = rejudge(session, strict=True)
            strict_failed += failed
            strict_drift += counts[Status.DRIFT.value]
            failed, counts = rejudge(session, strict=True, metric="cpu")
            cpu_failed += failed
            cpu_drift += counts[Status.DRIFT.value]
        loads = scenario.loads()
        load = f"{min(loads):.2f}-{max(loads):.2f}" if loads else "-"
        verdicts = ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())) or "-"
        cache = ", ".join(f"{n} {s}" for s, n in sorted(states.items())) or "-"
        skipped = len(scenario.sessions) - len(ran)
        failed_text = f"{caught}/{len(ran)}" + (f" ({errors} errors)" if errors else "")
        if skipped:
            failed_text += f" ({skipped} timed out)"
        rows.append(
            [
                scenario.name,
                failed_text,
                verdicts,
                cache,
                load,
                f"{strict_failed}/{len(ran)}, {strict_drift} DRIFT",
                f"{cpu_failed}/{len(ran)}, {cpu_drift} DRIFT",
            ]
        )
    return rows


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    line = "  ".join(f"{{:<{width}}}" for width in widths)
    return [line.format(*headers), line.format(*("-" * w for w in widths))] + [
        line.format(*row) for row in rows
    ]


def print_lines(lines: Sequence[str]) -> None:
    for text in lines:
        print(f"  {text}".rstrip())
    sys.stdout.flush()


# ---------------------------------------------------------------------------------------
# Sections


def section_machine(args: argparse.Namespace) -> None:
    print(HEADINGS["machine"])
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for text in Path("/proc/cpuinfo").read_text().splitlines():
            if text.startswith("model name"):
                model = text.split(":", 1)[1].strip()
                break
    import jax

    load = os.getloadavg()
    memory = psutil.virtual_memory().total / 2**30
    print_lines(
        [
            f"{model}, {os.cpu_count()} logical CPUs, {memory:.0f} GiB, {platform.system()} "
            f"{platform.release()}",
            f"Python {platform.python_version()}, jax {jax.__version__}, backend "
            f"{jax.default_backend()}",
            f"load average at start (before the busy core): {load[0]:.2f} "
            f"({load[0] / (os.cpu_count() or 1):.2f} per core)",
            f"defaults under test: tolerance {DEFAULT_TOLERANCE}, floor {DEFAULT_FLOOR_S} s, "
            f"compile_max_load {DEFAULT_MAX_LOAD} per core",
            f"K = {args.sessions} sessions per row, regression depths {args.depth} and "
            f"{args.small_depth} (pinned at 2)" + (" (--quick)" if args.quick else ""),
        ]
    )


def section_false_alarms(
    project: Project, deep: Project | None, sessions: int, pins: list[Session]
) -> list[Scenario]:
    print(HEADINGS["false_alarms"])
    cold, warm = Scenario("no change, cold cache"), Scenario("no change, warm cache")
    scenarios = [cold, warm]
    deep_cold = None
    if deep is not None:
        depth = deep.env["JAXMODELS_DEPTH"]
        deep_cold = Scenario(f"no change, cold cache, depth {depth} pinned")
        scenarios.append(deep_cold)
    for index in range(sessions):  # interleaved, so drifting load hits every scenario
        project.clear_cache()
        cold.sessions.append(project.run(f"cold {index}"))
        warm.sessions.append(project.run(f"warm {index}"))  # the cold session refilled it
        if deep is not None and deep_cold is not None:
            deep.clear_cache()
            deep_cold.sessions.append(deep.run(f"deep cold {index}"))
    pin_loads = [
        r["host_state"]["load_per_core"]
        for s in pins
        for r in s.records
        if r["host_state"].get("load_per_core") is not None
    ]
    print_lines(
        [
            "pins made before the busy core started, at load per core "
            + (f"{min(pin_loads):.2f}-{max(pin_loads):.2f}" if pin_loads else "-")
            + "; every session below ran with one more core kept busy",
            "a session 'fails' when pytest exits non-zero; every DRIFT here is a false alarm",
            "",
            *scenario_table(scenarios),
            "",
            "closest to the DRIFT rule (ratio and excess over the pin; DRIFT needs both "
            f"> {1 + DEFAULT_TOLERANCE:g}x and > {DEFAULT_FLOOR_S} s), in wall and in CPU seconds:",
        ]
    )
    for scenario in scenarios:
        for metric in ("wall", "cpu"):
            found = [m for s in scenario.sessions for m in margins(s, False, metric)]
            if not found:
                continue
            worst_ratio = max(found, key=lambda m: m.ratio)
            worst_excess = max(found, key=lambda m: m.excess_s)
            ratios = [m.ratio for m in found]
            print_lines(
                [
                    f"  {scenario.name}, {metric}: {len(found)} rows; ratio to pin median "
                    f"{statistics.median(ratios):.2f}x, max {worst_ratio.describe()}; largest "
                    f"excess {worst_excess.describe()}",
                ]
            )
    return scenarios


def scenario_table(scenarios: list[Scenario]) -> list[str]:
    return table(
        [
            "scenario",
            "sessions failed",
            "verdicts (as run)",
            "cache_state",
            "load/core",
            "if --compile-strict",
            "if strict + cpu metric",
        ],
        scenario_rows(scenarios),
    )


def section_detection(
    project: Project, sessions: int, depths: tuple[int, int], quick: bool
) -> list[Scenario]:
    print(HEADINGS["detection"])
    depth, small = depths
    deeper = {"JAXMODELS_DEPTH": str(depth)}
    no_cache = {"JAX_ENABLE_COMPILATION_CACHE": "false"}
    plans: list[tuple[str, str, list[str], dict[str, str]]] = [
        (f"regression (depth {depth}), main cache restored", "restore", [], deeper),
        (f"regression (depth {depth}), empty cache", "clear", [], deeper),
        (
            f"small regression (depth {small}), main cache restored",
            "restore",
            [],
            {"JAXMODELS_DEPTH": str(small)},
        ),
        (NOT_RESTORED, "clear", [], {}),
        ("cache not restored, --compile-expect-warm", "clear", ["--compile-expect-warm"], {}),
        ("cache disabled, defaults", "restore", [], no_cache),
        ("cache disabled, --compile-expect-warm", "restore", ["--compile-expect-warm"], no_cache),
        (
            "cache disabled, compile_require_cache",
            "restore",
            ["-o", "compile_require_cache=true"],
            no_cache,
        ),
    ]
    if quick:
        plans = [plans[0], plans[6]]
    scenarios = [Scenario(name) for name, *_ in plans]
    for index in range(sessions):  # interleaved, so drifting load hits every scenario
        for scenario, (_, cache, flags, env) in zip(scenarios, plans, strict=True):
            if cache == "restore":
                project.restore_cache()
            else:
                project.clear_cache()
            scenario.sessions.append(project.run(f"{scenario.name} {index}", *flags, env=env))
    print_lines(
        [
            "each session starts from the cache a CI job would have: main's cache restored, "
            "or an empty dir",
            "caught = the session failed (pytest exit status 1); the busy core is still busy",
            "",
            *scenario_table(scenarios),
            "",
            "regressed rows (module changed since pinning), smallest margin over the DRIFT rule:",
        ]
    )
    for scenario in scenarios:
        if "regression" not in scenario.name:
            continue
        for metric in ("wall", "cpu"):
            found = [m for s in scenario.sessions for m in margins(s, True, metric)]
            if found:
                weakest = min(found, key=lambda m: m.ratio)
                ratios = [m.ratio for m in found]
                print_lines(
                    [
                        f"  {scenario.name}, {metric}: {len(found)} rows; ratio min "
                        f"{weakest.describe()}, median {statistics.median(ratios):.2f}x, max "
                        f"{max(ratios):.2f}x",
                    ]
                )
    return scenarios


def section_fidelity(sessions: list[Session]) -> None:
    print(HEADINGS["fidelity"])
    groups: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for session in sessions:
        for data in session.records:
            backend = data.get("backend_compile_s")
            if not backend or not data["compile_s"] or data["compile_samples_s"] is not None:
                continue
            size = "compile_s >= 1 s" if data["compile_s"] >= 1 else "compile_s < 1 s"
            groups.setdefault((data["cache_state"], size), []).append((data["compile_s"], backend))
    rows = []
    for (state, size), pairs in sorted(groups.items()):
        ratios = sorted(compile_s / backend for compile_s, backend in pairs)
        gaps = sorted((compile_s - backend) * 1000 for compile_s, backend in pairs)
        rows.append(
            [
                state,
                size,
                str(len(pairs)),
                f"{statistics.median(c for c, _ in pairs):.4f} s",
                f"{ratios[0]:.3f} / {statistics.median(ratios):.3f} / {ratios[-1]:.3f}",
                f"{gaps[0]:.2f} / {statistics.median(gaps):.2f} / {gaps[-1]:.2f}",
            ]
        )
    print_lines(
        [
            "compile_s (the plugin's wall clock around lowered.compile()) against "
            "backend_compile_s (JAX's /jax/core/compile/backend_compile_duration event) of "
            "the same compile, every record of every session above",
            "",
            *table(
                [
                    "cache_state",
                    "size",
                    "rows",
                    "median compile_s",
                    "compile_s / backend min / median / max",
                    "compile_s - backend ms min / median / max",
                ],
                rows,
            ),
            "the event wraps JAX's compile_or_get_cached (backend compile, cache read and "
            "write); compile_s also holds the rest of lowered.compile() (JAX's set-up of the "
            "executable), which grows with the module",
            "",
            *cpu_resolution(sessions),
        ]
    )


def cpu_resolution(sessions: list[Session]) -> list[str]:
    """How finely the records' CPU seconds resolve: off the 10 ms tick grid, zeros."""
    groups: dict[str, list[float]] = {}
    for session in sessions:
        for data in session.records:
            if data.get("compile_cpu_s") is not None:
                groups.setdefault(data["cache_state"], []).append(data["compile_cpu_s"])
    rows = []
    for state, figures in sorted(groups.items()):
        off = sum(1 for f in figures if abs(f / TICK_S - round(f / TICK_S)) > 1e-3)
        rows.append(
            [
                state,
                str(len(figures)),
                f"{off}/{len(figures)}",
                str(sum(1 for f in figures if f == 0)),
                f"{min(figures) * 1000:.2f} / {statistics.median(figures) * 1000:.2f} / "
                f"{max(figures) * 1000:.1f}",
            ]
        )
    return [
        "compile_cpu_s (process CPU clock, every thread) of the same records: how many are "
        "off the 10 ms tick grid that psutil's cpu_times() counts in, how many read zero",
        "",
        *table(
            [
                "cache_state",
                "rows",
                "off the 10 ms grid",
                "zero",
                "compile_cpu_s ms min / median / max",
            ],
            rows,
        ),
    ]


STARTUP_TEST = """
import sys


def test_jax_stays_unimported():
    assert "jax" not in sys.modules, "jax was imported"
"""

FIXTURE_COST_CONFTEST = """
import os

import jax


def pytest_configure(config):
    jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
"""

FIXTURE_COST_TEST = """
import json
import os
import time
from pathlib import Path

import jax.numpy as jnp
import pytest

X = jnp.arange(8.0)
MEASUREMENTS = int(os.environ["GATE_QUALITY_MEASUREMENTS"])
OUT = Path(os.environ["GATE_QUALITY_OUT"])


def _measure(jax_compile, label, offset):
    costs = []
    for index in range(MEASUREMENTS):
        scale = float(offset + index + 1)
        start = time.perf_counter()
        jax_compile(lambda x: jnp.tanh(x * scale) + scale, X, transform=f"f{index}")
        wall = time.perf_counter() - start
        record = jax_compile.records[-1]
        phases = (record.trace_s or 0) + (record.lower_s or 0) + record.compile_s
        costs.append({"wall": wall, "phases": phases, "compile_s": record.compile_s,
                      "cache_state": record.cache_state,
                      "entries": record.cache.entries_before})
    with OUT.open("a") as out:
        out.write(json.dumps({"label": label, "costs": costs}) + "\\n")


def test_a_warmup(jax_compile):
    _measure(jax_compile, "warm-up", 1000)


def test_b_plain_cache_dir(jax_compile):
    _measure(jax_compile, "plain", 2000)


def test_c_with_10k_entries(jax_compile):
    cache = Path(os.environ["JAX_COMPILATION_CACHE_DIR"])
    for index in range(int(os.environ["GATE_QUALITY_DUMMIES"])):
        (cache / f"dummy{index:05d}-cache").touch()
    _measure(jax_compile, "10k", 3000)
"""


def section_overhead(
    root: Path, deadline: Deadline, tests: int, rounds: int, measurements: int
) -> None:
    print(HEADINGS["overhead"])
    suite = root / "startup"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\n")
    body = "\n".join(
        f"def test_trivial_{i}():\n    assert {i} + 1 == {i + 1}\n" for i in range(tests - 1)
    )
    (suite / "test_generated.py").write_text(body)
    (suite / "test_no_jax.py").write_text(STARTUP_TEST)
    env = dict(os.environ)
    ways = {"plugin": [], "-p no:jaxcompile": ["-p", "no:jaxcompile"]}
    best = dict.fromkeys(ways, float("inf"))
    codes: dict[str, set[int | None]] = {way: set() for way in ways}
    for _ in range(rounds):
        for way, extra in ways.items():  # interleaved, so drifting load hits both
            session = run_pytest(way, suite, extra, env, None, deadline)
            codes[way].add(session.exit_code)
            best[way] = min(best[way], session.wall_s)
    base = best["-p no:jaxcompile"]
    unimported = codes["plugin"] == {0}
    print_lines(
        [
            f"pytest start-up: {tests} trivial non-JAX tests, whole process wall, best of "
            f"{rounds} interleaved rounds",
            *table(
                ["way", "wall", "vs -p no:jaxcompile"],
                [[way, f"{best[way]:.3f} s", f"x{best[way] / base:.3f}"] for way in ways],
            ),
            f"plugin adds {(best['plugin'] - base) * 1000:+.0f} ms; jax stays unimported with "
            f"the plugin: {'yes' if unimported else 'NO'} "
            f"(exit codes {sorted(codes['plugin'], key=str)})",
            "",
        ]
    )

    project = root / "fixture-cost"
    project.mkdir()
    (project / "pytest.ini").write_text("[pytest]\n")
    (project / "conftest.py").write_text(FIXTURE_COST_CONFTEST)
    (project / "test_fixture_cost.py").write_text(FIXTURE_COST_TEST)
    cache = project / "cache"
    out = project / "costs.jsonl"
    env = dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        JAX_COMPILATION_CACHE_DIR=str(cache),
        GATE_QUALITY_MEASUREMENTS=str(measurements),
        GATE_QUALITY_OUT=str(out),
        GATE_QUALITY_DUMMIES=str(DUMMY_ENTRIES),
    )
    session = run_pytest("fixture cost", project, [], env, None, deadline)
    if session.exit_code != 0 or not out.is_file():
        print_lines(
            [
                f"fixture cost: the session failed ({session.exit_code}):",
                *session.output_tail.splitlines()[-10:],
            ]
        )
        return
    results = {}
    for text in out.read_text().splitlines():
        data = json.loads(text)
        results[data["label"]] = data["costs"]
    rows = []
    for label, name in (
        ("plain", "cache dir, its own entries"),
        ("10k", f"+ {DUMMY_ENTRIES:,} entry files"),
    ):
        costs = results[label]
        own = [(c["wall"] - c["phases"]) * 1000 for c in costs]
        entries = costs[0]["entries"]
        rows.append(
            [
                name,
                str(entries),
                str(len(costs)),
                f"{statistics.median(c['compile_s'] for c in costs) * 1000:.1f} ms",
                f"{statistics.median(own):.2f} ms",
                f"{max(own):.2f} ms",
            ]
        )
    plain = statistics.median((c["wall"] - c["phases"]) for c in results["plain"])
    tenk = statistics.median((c["wall"] - c["phases"]) for c in results["10k"])
    count_s = time_count(cache)
    print_lines(
        [
            "the fixture's own cost per measurement: the jax_compile call's wall minus its "
            "trace_s, lower_s and compile_s (clearing JAX's caches, module text, fingerprint, "
            "op count, entry counts, classification, the record)",
            *table(
                [
                    "cache dir",
                    "entries",
                    "measurements",
                    "median compile_s",
                    "median own cost",
                    "max own cost",
                ],
                rows,
            ),
            f"with {DUMMY_ENTRIES:,} entries vs without: x{tenk / plain:.2f} "
            f"({(tenk - plain) * 1000:+.2f} ms per measurement); counting "
            f"{count_cache_entries(str(cache)):,} entries once takes {count_s * 1000:.2f} ms "
            "(median of 20; the fixture counts twice per measurement)",
        ]
    )


def time_count(cache: Path) -> float:
    samples = []
    for _ in range(20):
        start = time.perf_counter()
        count_cache_entries(str(cache))
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


NAIVE_TEST = '''
import json
import os
import time
from pathlib import Path

import jax
from jaxmodels import mlp_example_args, mlp_loss

ARGS = mlp_example_args()
ROUNDS = int(os.environ["GATE_QUALITY_ROUNDS"])
OUT = Path(os.environ["GATE_QUALITY_OUT"])


def _lowered():
    jax.clear_caches()
    return jax.jit(jax.value_and_grad(mlp_loss)).lower(*ARGS)


def test_1_by_hand():
    """Rounds timed by hand, as pytest-benchmark's pedantic mode times them."""
    lowered = _lowered()
    rounds = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        lowered.compile()
        rounds.append(time.perf_counter() - start)
    with OUT.open("a") as out:
        out.write(json.dumps({"label": "by hand", "rounds": rounds}) + "\\n")


def test_4_plugin(jax_compile):
    jax_compile(jax.value_and_grad(mlp_loss), *ARGS, transform="vag")
'''

NAIVE_BENCHMARK_TESTS = """

def test_2_benchmark_default(benchmark):
    benchmark(_lowered().compile)


def test_3_benchmark_pedantic(benchmark):
    benchmark.pedantic(_lowered().compile, rounds=ROUNDS, iterations=1)
"""


def section_naive(root: Path, deadline: Deadline, rounds: int) -> None:
    print(HEADINGS["naive"])
    project = root / "naive"
    project.mkdir()
    shutil.copy(REPO / "examples" / "jaxmodels.py", project)
    (project / "pytest.ini").write_text("[pytest]\n")
    has_benchmark = importlib.util.find_spec("pytest_benchmark") is not None
    source = NAIVE_TEST + (NAIVE_BENCHMARK_TESTS if has_benchmark else "")
    (project / "test_naive.py").write_text(source)
    out = project / "rounds.jsonl"
    report = project / "report.json"
    bench = project / "benchmark.json"
    args = ["--compile-report", str(report)]
    if has_benchmark:
        args += [f"--benchmark-json={bench}", "--benchmark-disable-gc"]
    # No persistent cache: every side times a real XLA compile of the same module.
    env = dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        JAX_ENABLE_COMPILATION_CACHE="false",
        GATE_QUALITY_ROUNDS=str(rounds),
        GATE_QUALITY_OUT=str(out),
    )
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    session = run_pytest("naive", project, args, env, report, deadline)
    if session.exit_code != 0 or session.report is None:
        print_lines(
            [f"the session failed ({session.exit_code}):", *session.output_tail.splitlines()[-10:]]
        )
        return
    (record,) = session.records
    plugin = record["compile_s"]
    rows = [["plugin jax_compile (compile_s)", f"{plugin * 1000:.1f} ms", "-", "-", "1", "x1"]]
    hand = json.loads(out.read_text().splitlines()[0])["rounds"]
    rows.append(naive_row("by hand: round 1", [hand[0]], plugin))
    rows.append(naive_row(f"by hand: rounds 2..{len(hand)}", hand[1:], plugin))
    if has_benchmark:
        data = json.loads(bench.read_text())
        for entry in data["benchmarks"]:
            stats = entry["stats"]
            name = "pytest-benchmark " + (
                "default" if "default" in entry["name"] else f"pedantic(rounds={rounds})"
            )
            rows.append(
                [
                    name,
                    fmt_s(stats["median"]),
                    fmt_s(stats["min"]),
                    fmt_s(stats["max"]),
                    str(stats["rounds"]),
                    f"x{stats['median'] / plugin:.6f}",
                ]
            )
    else:
        rows.append(["pytest-benchmark", "not installed: see the rounds by hand", "", "", "", ""])
    print_lines(
        [
            "value_and_grad of the example MLP, no persistent cache; the plugin's row is "
            f"'{record['cache_state']}' (backend_compile_s {record['backend_compile_s']:.4f} s)",
            *table(["timing", "median", "min", "max", "rounds", "median / plugin"], rows),
            "rounds after the first are JAX's in-memory hits (the Lowered keeps its "
            "executable); pytest-benchmark's default mode spends the real compile in its "
            "calibration and reports only hits",
        ]
    )


def naive_row(name: str, samples: list[float], plugin: float) -> list[str]:
    median = statistics.median(samples)
    return [
        name,
        fmt_s(median),
        fmt_s(min(samples)),
        fmt_s(max(samples)),
        str(len(samples)),
        f"x{median / plugin:.6f}",
    ]


def fmt_s(seconds: float) -> str:
    if seconds >= 0.1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} us"


def section_defaults(false_alarms: list[Scenario], detection: list[Scenario]) -> None:
    print(HEADINGS["defaults"])
    unchanged = [*false_alarms, *(s for s in detection if s.name == NOT_RESTORED)]
    quiet = [s for scenario in unchanged for s in scenario.sessions if s.report]
    big = [
        s
        for scenario in detection
        if scenario.name.startswith("regression")
        for s in scenario.sessions
        if s.report
    ]
    small = [
        s
        for scenario in detection
        if scenario.name.startswith("small regression")
        for s in scenario.sessions
        if s.report
    ]
    print_lines(
        [
            "the same measurements re-judged with the plugin's judge under other thresholds "
            "(time verdicts only; 'false alarms': sessions without a code change, incl. "
            "'cache not restored, defaults', that would fail; 'caught': regression sessions "
            "that would fail)",
            "",
            *table(
                [
                    "thresholds",
                    "false alarms",
                    "DRIFT rows (no change)",
                    "regression caught",
                    "small regression caught",
                    "noisy rows",
                ],
                [
                    grid_row(label, overrides, quiet, big, small)
                    for label, overrides in THRESHOLD_GRID
                ],
            ),
            "",
            "unchanged modules by load per core at measurement (every judged row whose module "
            "matches its pin, all sessions): wall and CPU seconds against the pin",
            "",
            *table(
                [
                    "load/core",
                    "state",
                    "rows",
                    "wall ratio median / max",
                    "cpu ratio median / max",
                    "largest wall excess",
                ],
                load_rows(
                    [s for scenario in [*false_alarms, *detection] for s in scenario.sessions]
                ),
            ),
        ]
    )


DEFAULTS = {
    "tolerance": DEFAULT_TOLERANCE,
    "floor_s": DEFAULT_FLOOR_S,
    "max_load": DEFAULT_MAX_LOAD,
    "strict": False,
    "metric": "wall",
}
THRESHOLD_GRID: list[tuple[str, dict[str, Any]]] = [
    (
        f"defaults (tolerance {DEFAULT_TOLERANCE:g}, floor {DEFAULT_FLOOR_S:g} s, max load "
        f"{DEFAULT_MAX_LOAD:g})",
        DEFAULTS,
    ),
    ("--compile-strict (wall seconds, whatever the load)", {**DEFAULTS, "strict": True}),
    ("--compile-strict, metric cpu", {**DEFAULTS, "strict": True, "metric": "cpu"}),
    *((f"max load {value:g}", {**DEFAULTS, "max_load": value}) for value in (0.75, 1.5, 2.0)),
    *((f"tolerance {value:g}", {**DEFAULTS, "tolerance": value}) for value in (0.5, 1.0)),
    *((f"floor {value:g} s", {**DEFAULTS, "floor_s": value}) for value in (0.0, 0.1, 0.5)),
    (
        "strict, tolerance 0.5, floor 0.1 s",
        {**DEFAULTS, "strict": True, "tolerance": 0.5, "floor_s": 0.1},
    ),
]


def grid_row(
    label: str,
    overrides: dict[str, Any],
    quiet: list[Session],
    big: list[Session],
    small: list[Session],
) -> list[str]:
    alarms = drift_rows = noisy = 0
    for session in quiet:
        failed, counts = rejudge(session, **overrides)
        alarms += failed
        drift_rows += counts[Status.DRIFT.value]
        noisy += counts[Status.NOISY.value]
    caught = {}
    for name, sessions in (("big", big), ("small", small)):
        hits = 0
        for session in sessions:
            failed, counts = rejudge(session, **overrides)
            hits += failed
            noisy += counts[Status.NOISY.value]
        caught[name] = f"{hits}/{len(sessions)}" if sessions else "-"
    return [
        label,
        f"{alarms}/{len(quiet)}",
        str(drift_rows),
        caught["big"],
        caught["small"],
        str(noisy),
    ]


LOAD_BUCKETS = [(0.0, 1.0), (1.0, 1.5), (1.5, 2.0), (2.0, 3.0), (3.0, float("inf"))]


def load_rows(sessions: list[Session]) -> list[list[str]]:
    found: dict[tuple[int, str], list[tuple[float, float | None, float]]] = {}
    for session in sessions:
        store = session.store
        if store is None:
            continue
        for data in session.records:
            record = CompileRecord.from_dict(data)
            load = record.host_state.load_per_core
            pin = store.get(record.key, record.cell, record.transform)
            if load is None or pin is None or pin.fingerprint != record.fingerprint:
                continue
            if not record.state.judged or pin.compile_s <= 0:
                continue
            bucket = next(i for i, (low, high) in enumerate(LOAD_BUCKETS) if low <= load < high)
            cpu = None
            if record.compile_cpu_s is not None and (pin.compile_cpu_s or 0) >= CPU_MIN_S:
                cpu = record.compile_cpu_s / pin.compile_cpu_s
            found.setdefault((bucket, record.cache_state), []).append(
                (record.compile_s / pin.compile_s, cpu, record.compile_s - pin.compile_s)
            )
    rows = []
    for (bucket, state), items in sorted(found.items()):
        low, high = LOAD_BUCKETS[bucket]
        walls = [wall for wall, _, _ in items]
        cpus = [cpu for _, cpu, _ in items if cpu is not None]
        rows.append(
            [
                f"{low:g}-{high:g}" if high != float("inf") else f">= {low:g}",
                state,
                str(len(items)),
                f"{statistics.median(walls):.2f}x / {max(walls):.2f}x",
                f"{statistics.median(cpus):.2f}x / {max(cpus):.2f}x" if cpus else "-",
                f"{max(excess for _, _, excess in items):+.3f} s",
            ]
        )
    return rows


# ---------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=8, help="K sessions per row")
    parser.add_argument(
        "--depth",
        type=int,
        default=512,
        help="JAXMODELS_DEPTH of the injected regression (default 512)",
    )
    parser.add_argument(
        "--small-depth",
        type=int,
        default=128,
        help="JAXMODELS_DEPTH of a regression near the floor (default 128)",
    )
    parser.add_argument("--startup-tests", type=int, default=200)
    parser.add_argument(
        "--rounds", type=int, default=5, help="interleaved start-up rounds; naive timing rounds"
    )
    parser.add_argument(
        "--measurements", type=int, default=20, help="fixture measurements per cache dir"
    )
    parser.add_argument("--max-minutes", type=float, default=45.0)
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="work in this (new) directory and keep it, for inspection",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke settings: 1 session, 2 detection scenarios, small suite",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.sessions, args.depth = 1, min(args.depth, 128)
        args.startup_tests, args.rounds, args.measurements = 20, 2, 3
    if args.sessions < 1:
        parser.error("--sessions must be at least 1")
    deadline = Deadline(args.max_minutes)
    section_machine(args)
    with contextlib.ExitStack() as stack:
        if args.keep is not None:
            args.keep.mkdir(parents=True)
            root = args.keep.resolve()
        else:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gateq-")))
        project = Project(root / "example", deadline)
        pins = project.make_pins()
        deep = None
        if not args.quick:  # an unchanged module big enough that the floor does not shield it
            deep = Project(
                root / "example-deep", deadline, env={"JAXMODELS_DEPTH": str(args.depth)}
            )
            pins += deep.make_pins()
        with busy_core() as busy:
            false_alarms = section_false_alarms(project, deep, args.sessions, pins)
            detection = section_detection(
                project, args.sessions, (args.depth, args.small_depth), args.quick
            )
        print(
            f"  busy process {busy.pid} stopped (exit status {busy.returncode}); "
            f"load average at the end: {os.getloadavg()[0]:.2f}"
        )
        section_fidelity(
            [*pins, *(s for scenario in [*false_alarms, *detection] for s in scenario.sessions)]
        )
        section_overhead(root, deadline, args.startup_tests, args.rounds, args.measurements)
        section_naive(root, deadline, args.rounds)
        section_defaults(false_alarms, detection)
    return 0


if __name__ == "__main__":
    sys.exit(main())
