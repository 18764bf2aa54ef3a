"""Real suites: the plugin on test files that ship with real JAX projects (optax, chex, and
flax and numpyro, whose source distributions ship their tests), and on a model-heavy suite of
our own over a library from PyPI (``lensing``: benchmarks/suites/lensing_test.py, a
strong-lensing likelihood built with herculens).

    python benchmarks/real_suites.py [--rounds 3] [--reruns 3] [--suite optax --suite chex]
                                     [--way census --way loaded]
                                     [--select 'optax=-k test_explicit_dtype'] [--venv DIR]

Installs pinned versions of the projects (and pytest, pytest-xdist, this plugin as an
editable install) into a scratch venv -- nothing here touches the plugin's own install --,
copies the selected test files out of the installed packages (or out of the project's source
distribution, ``pip download --no-binary :all: --no-deps``) into a scratch directory (a
rootdir of their own, so pins land there), and measures:

1. Overhead. After one untimed run that fills the persistent cache, each round runs the
   suite five ways in fresh pytest processes, interleaved so drifting load hits all ways
   (each round starting one way later):
   plugin disabled (``-p no:jaxcompile``), loaded but unused, ``--compile-census``, the census
   clearing JAX's caches before every test (``-o compile_clear_caches=always``), and
   ``--compile-census -n 2``. Pass/fail counts must equal
   the disabled run's; ratios to the disabled run of the same round are reported as medians
   with their range, for wall time and for CPU time (user + system of pytest and its
   workers: what the plugin adds, less exposed to other tenants of a shared machine).
2. What the census says: the summary's first lines and the rows per test (``--compile-report``).
3. Gate quality. On a fresh cache and pins directory: ``--compile-census --compile-pin-update``
   twice (pins cold, then warm), then K unchanged reruns serial and with ``-n 2``: the
   failing rows (``DRIFT``/``MISS``/``GREW``, all false alarms here) and whether ``-n 2``
   gives every row the verdict the serial rerun gave it (``ok``, ``noisy`` and ``improved``
   pass alike: ``noisy`` is the host's load, which two workers on two cores raise).

The persistent cache is JAX's own, switched on by environment alone
(``JAX_COMPILATION_CACHE_DIR``, ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0``), no conftest.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# The versions measured (docs/benchmarks.md); the test-only deps are what the files import.
PINNED = ["jax==0.10.2", "jaxlib==0.10.2", "pytest==9.2.0", "pytest-xdist==3.8.0"]


@dataclass(frozen=True)
class Suite:
    name: str
    requirements: tuple[str, ...]
    files: tuple[str, ...]  # paths inside site-packages, or inside the sdist
    default_args: tuple[str, ...]
    sdist: str | None = None  # "NAME==VERSION": the files come from its source distribution
    local: bool = False  # the files are this repository's, under benchmarks/suites/


SUITES = {
    "optax": Suite(
        "optax",
        ("optax==0.2.8", "scipy==1.17.1", "scikit-learn==1.9.1"),
        ("optax/_src/alias_test.py",),
        ("-k", "test_optimization or test_explicit_dtype"),
    ),
    "chex": Suite(
        "chex",
        ("chex==0.1.92", "cloudpickle==3.1.3"),
        ("chex/_src/variants_test.py", "chex/_src/dataclass_test.py"),
        (),
    ),
    # Wrapper-style jit: flax.nnx.jit wraps jax.jit around its own function and keeps the
    # user's function in its own cache; numpyro's MCMC and SVI keep jitted kernels in theirs.
    "flax": Suite(
        "flax",
        ("flax==0.12.8",),
        ("tests/nnx/transforms_test.py",),
        (),
        sdist="flax==0.12.8",
    ),
    "numpyro": Suite(
        "numpyro",
        ("numpyro==0.22.0",),
        ("test/test_compile.py", "test/test_handlers.py", "test/test_util.py"),
        (),
        sdist="numpyro==0.22.0",
    ),
    # Model-heavy: two tests, each tracing a large likelihood for seconds and compiling a few
    # big modules (herculens imports objax, which needs six, and matplotlib).
    "lensing": Suite(
        "lensing",
        ("herculens==0.3.0", "objax==1.8.0", "six==1.17.0", "matplotlib==3.11.2"),
        ("lensing_test.py",),
        (),
        local=True,
    ),
}
SUITES_DIR = REPO / "benchmarks" / "suites"

WAYS = {
    "disabled": ["-p", "no:jaxcompile"],
    "loaded": [],
    "census": ["--compile-census"],
    "census, always clear": ["--compile-census", "-o", "compile_clear_caches=always"],
    "census -n 2": ["--compile-census", "-n", "2"],
}
# Statuses that pass the gate alike: `noisy` is `ok` judged on CPU seconds because the host
# was loaded (two workers on two cores are), so ok <-> noisy is the load, not the verdict.
PASSING_ALIKE = {"ok", "noisy", "improved"}
_COUNT = re.compile(
    r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected"
    r"|subtests passed|subtests failed|subtests skipped)"
)


def venv_python(venv: Path, suites: list[Suite]) -> Path:
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    requirements = [*PINNED, *(r for suite in suites for r in suite.requirements)]
    # pip takes minutes to find everything installed already: skip it while neither the
    # requirements nor the plugin's own metadata changed since the last install.
    stamp = venv / "real-suites-installed.txt"
    wanted = "\n".join([*sorted(requirements), (REPO / "pyproject.toml").read_text()])
    if not stamp.exists() or stamp.read_text() != wanted:
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", *requirements, "-e", str(REPO)],
            check=True,
        )
        stamp.write_text(wanted)
    return python


def site_packages(python: Path) -> Path:
    code = "import sysconfig; print(sysconfig.get_path('purelib'))"
    out = subprocess.run(
        [str(python), "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()
    return Path(out)


def sdist_root(python: Path, requirement: str, workdir: Path) -> Path:
    """The unpacked source distribution of `requirement` (downloaded once per workdir)."""
    target = workdir / "sdists" / requirement.replace("==", "-")
    if not target.exists():
        download = workdir / "sdists" / "download"
        pip = [str(python), "-m", "pip", "download", "-q", "--no-binary", ":all:"]
        subprocess.run([*pip, "--no-deps", "-d", str(download), requirement], check=True)
        (archive,) = [
            path
            for path in download.iterdir()
            if path.name.lower().replace("_", "-").startswith(target.name.lower())
        ]
        shutil.unpack_archive(archive, target)
    (root,) = [path for path in target.iterdir() if path.is_dir()]
    return root


def prepare(directory: Path, suite: Suite, source: Path) -> list[str]:
    """A fresh rootdir holding copies of the suite's test files; returns their names."""
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    (directory / "pytest.ini").write_text("[pytest]\n")
    names = []
    for file in suite.files:
        name = file.replace("/", "_")
        shutil.copy(source / file, directory / name)
        names.append(name)
    return names


@dataclass
class Run:
    seconds: float
    cpu_seconds: float  # user + system of the pytest process and its workers
    counts: dict[str, int]
    stdout: str
    returncode: int


def run_pytest(python: Path, directory: Path, args: list[str]) -> Run:
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "JAX_COMPILATION_CACHE_DIR": str(directory / "jax-cache"),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
    }
    env.pop("PYTHONPATH", None)
    # Bytecode is written, as in a user's venv (pip compiles what it installs): with the
    # caller's PYTHONDONTWRITEBYTECODE every census run would recompile the plugin's modules
    # (pytest rewrites a plugin's asserts first), about 0.1 s a session that the disabled run,
    # which never imports the plugin, does not pay. The warm-up run writes it.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    cpu_before = _children_cpu_s()
    start = time.perf_counter()
    proc = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    cpu_seconds = _children_cpu_s() - cpu_before
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    counts = {kind: int(n) for n, kind in _COUNT.findall(last)}
    return Run(seconds, cpu_seconds, counts, proc.stdout, proc.returncode)


def _children_cpu_s() -> float:
    """CPU seconds of every finished child (and the children they waited for)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def census_head(stdout: str, lines: int = 4) -> list[str]:
    text = stdout.splitlines()
    for index, line in enumerate(text):
        if "jax compile times" in line:
            return text[index + 1 : index + 1 + lines]
    return ["(no census section)"]


def verdicts(report: Path) -> dict[tuple[str, str], str]:
    """Each row's status, upper-cased where the gate says the row fails the session (the
    report's own ``fails``: the statuses that fail under the session's settings)."""
    data = json.loads(report.read_text())
    out: dict[tuple[str, str], str] = {}
    for verdict in data["verdicts"]:
        status = verdict["status"]
        out[(verdict["cell"], verdict["transform"])] = (
            f"{status.upper()} (fails)" if verdict.get("fails") else status
        )
    return out


def failing(statuses: dict[tuple[str, str], str]) -> Counter[str]:
    return Counter(status for status in statuses.values() if status.endswith("(fails)"))


def spread(values: list[float]) -> str:
    return f"x{statistics.median(values):.3f} (range {min(values):.3f}-{max(values):.3f})"


def overhead(
    python: Path,
    suite: Suite,
    selection: list[str],
    files: list[str],
    directory: Path,
    rounds: int,
    names: list[str],
) -> bool:
    """Prints the overhead figures of the ways `names` (the disabled run always among them);
    False when a way's pass/fail counts differ."""
    args = [*files, *selection]
    warmup = run_pytest(python, directory, [*WAYS["disabled"], *args])
    print(f"  warm-up (fills the cache): {warmup.seconds:.1f} s, {warmup.counts}")
    seconds: dict[str, list[float]] = {way: [] for way in names}
    cpu_seconds: dict[str, list[float]] = {way: [] for way in names}
    counts: dict[str, set[str]] = {way: set() for way in names}
    last_census = None
    for index in range(rounds):
        # Each round starts one way later: no way always runs first, after the warm-up or
        # right after the two-worker run.
        for way in names[index % len(names) :] + names[: index % len(names)]:
            extra = WAYS[way]
            report = directory / "report.json"
            more = ["--compile-report", str(report)] if way == "census" else []
            run = run_pytest(python, directory, [*extra, *more, *args])
            seconds[way].append(run.seconds)
            cpu_seconds[way].append(run.cpu_seconds)
            tests = {k: v for k, v in run.counts.items() if k != "deselected"}
            counts[way].add(json.dumps(tests, sort_keys=True))
            if way == "census":
                last_census = run
    same_counts = True
    for way in names:
        ratios = [s / b for s, b in zip(seconds[way], seconds["disabled"], strict=True)]
        cpu_ratios = [s / b for s, b in zip(cpu_seconds[way], cpu_seconds["disabled"], strict=True)]
        same_counts &= counts[way] == counts["disabled"]
        same = "same counts" if counts[way] == counts["disabled"] else "COUNTS DIFFER"
        print(
            f"  {way:<12} wall median {statistics.median(seconds[way]):6.1f} s  "
            f"{spread(ratios)}; cpu median {statistics.median(cpu_seconds[way]):6.1f} s  "
            f"{spread(cpu_ratios)}  {same}: {sorted(counts[way])}"
        )
        print(f"    wall per round: {' '.join(f'{s:.1f}' for s in seconds[way])}")
    if last_census is not None:
        print("  census summary, first lines:")
        for line in census_head(last_census.stdout):
            print(f"    {line}")
        data = json.loads((directory / "report.json").read_text())
        per_test = Counter(record["cell"] for record in data["records"])
        ran = len(data["ran_cells"])
        print(
            f"  rows: {sum(per_test.values())} over {len(per_test)} test(s) with rows, "
            f"{ran} test(s) ran; rows per test median "
            f"{statistics.median(per_test.values()) if per_test else 0}, "
            f"max {max(per_test.values()) if per_test else 0}"
        )
        cleared = Counter(
            _reason_kind(ledger["caches_cleared_because"])
            for ledger in data["ledgers"]
            if ledger.get("caches_cleared_because")
        )
        eager = sum(ledger.get("eager_compiles") or 0 for ledger in data["ledgers"])
        print(
            f"  started with the program's work forgotten: {sum(cleared.values())} of "
            f"{len(data['ledgers'])} census'd test(s); eager compiles {eager}"
        )
        for reason, count in cleared.most_common(6):
            print(f"    {count:4d}  {reason}")
    return same_counts


def _reason_kind(reason: str) -> str:
    """A clearing's reason without the object it names when that object is the test's own
    (``TestJIT.test_x.<locals>.f (tests_mod) is still in memory``), so reasons group."""
    named, _, rest = reason.partition(" (")
    enclosing = named.split(".<locals>.")[0].rsplit(".", 1)[-1]
    if ".<locals>." in named and enclosing.startswith("test") and rest.endswith("in memory"):
        return f"a function defined in a test ({rest}"
    return reason


def gate(
    python: Path, suite: Suite, selection: list[str], files: list[str], directory: Path, reruns: int
) -> bool:
    """Prints the gate figures; False on a failing row, a verdict -n 2 or the reversed order
    changes, or an alarm of `check` over the sessions' records."""
    args = [*files, *selection]
    records = ["--compile-record-dir", str(directory / "records")]
    for label in ("cold", "warm"):
        run = run_pytest(
            python, directory, ["--compile-census", "--compile-pin-update", *records, *args]
        )
        print(f"  pin {label}: {run.seconds:.1f} s, exit {run.returncode}, {run.counts}")
    pins = list((directory / "pins").glob("*.toml"))
    pin_lines = sum(len(path.read_text().splitlines()) for path in pins)
    pinned_rows = sum(  # one table header per pinned row
        line.startswith(("[pins.", "[variants."))
        for path in pins
        for line in path.read_text().splitlines()
    )
    print(
        f"  pins: {len(pins)} file(s), {pin_lines} TOML lines for {pinned_rows} row(s) "
        f"({pin_lines / max(pinned_rows, 1):.1f} lines per row)"
    )
    false_alarms = 0
    disagreements = 0
    for index in range(reruns):
        serial = directory / f"serial-{index}.json"
        parallel = directory / f"xdist-{index}.json"
        run_s = run_pytest(
            python,
            directory,
            ["--compile-census", "--compile-report", str(serial), *records, *args],
        )
        run_p = run_pytest(
            python,
            directory,
            ["--compile-census", "-n", "2", "--compile-report", str(parallel), *args],
        )
        v_s, v_p = verdicts(serial), verdicts(parallel)
        failing_s, failing_p = failing(v_s), failing(v_p)
        both = v_s.keys() & v_p.keys()
        differ = sorted(
            row
            for row in both
            if v_s[row] != v_p[row] and not {v_s[row], v_p[row]} <= PASSING_ALIKE
        )
        load_only = sum(1 for row in both if v_s[row] != v_p[row]) - len(differ)
        only = sorted(v_s.keys() ^ v_p.keys())
        false_alarms += sum(failing_s.values()) + sum(failing_p.values())
        disagreements += len(differ)
        print(
            f"  rerun {index + 1}: serial exit {run_s.returncode} {dict(Counter(v_s.values()))} "
            f"failing {dict(failing_s)}; -n 2 exit {run_p.returncode} "
            f"{dict(Counter(v_p.values()))} failing {dict(failing_p)}"
        )
        print(
            f"    rows in both: {len(both)}, another verdict under -n 2: {len(differ)} "
            f"(and {load_only} ok <-> noisy: the load); "
            f"rows in one run only (another test of that worker paid the compile): {len(only)}"
        )
        for row in [*differ, *only][:5]:
            print(f"    {row[0]} [{row[1]}]: serial {v_s.get(row)}, -n 2 {v_p.get(row)}")
    print(
        f"  total over {reruns} rerun(s): {false_alarms} failing row(s) (false alarms), "
        f"{disagreements} row(s) judged differently by -n 2"
    )
    reversed_ok = reversed_rerun(python, directory, args)
    history_ok = check_history(python, directory)
    loaded_rerun(python, directory, args)
    return false_alarms == 0 and disagreements == 0 and reversed_ok and history_ok


def reversed_rerun(python: Path, directory: Path, args: list[str]) -> bool:
    """A rerun with the tests in the reverse of their collection order (ids passed in that
    order): every row's verdict must pass alike, and the rows must be the same."""
    # run_pytest already passes -q; a second -q would print per-file counts, not test ids.
    collected = run_pytest(python, directory, ["--collect-only", *args])
    ids = [line for line in collected.stdout.splitlines() if "::" in line]
    if not ids:  # no ids would run every test in the directory
        print(f"  reversed order: no test ids collected (exit {collected.returncode})")
        return False
    report = directory / "reversed.json"
    run = run_pytest(
        python,
        directory,
        ["--compile-census", "-p", "no:randomly", "--compile-report", str(report), *ids[::-1]],
    )
    serial = verdicts(directory / "serial-0.json") if (directory / "serial-0.json").exists() else {}
    found = verdicts(report)
    differ = [
        row
        for row in found.keys() & serial.keys()
        if found[row] != serial[row] and not {found[row], serial[row]} <= PASSING_ALIKE
    ]
    only = found.keys() ^ serial.keys()
    print(
        f"  reversed order ({len(ids)} tests): exit {run.returncode}, "
        f"failing {dict(failing(found))}, {len(differ)} row(s) judged differently from the "
        f"first serial rerun, {len(only)} row(s) in one of the two only"
    )
    for row in sorted(only)[:5]:
        print(f"    {row[0]} [{row[1]}]: serial {serial.get(row)}, reversed {found.get(row)}")
    return not failing(found) and not differ and not only


def check_history(python: Path, directory: Path) -> bool:
    """`check` over the records of the sessions above (pin cold, pin warm, the serial
    reruns), as the plugin would judge the last session: its failing rows and warnings."""
    report = directory / "check.json"
    command = [str(python), "-m", "pytest_jaxcompile", "check", "--pins-dir", "pins"]
    done = subprocess.run(
        [*command, "--json", str(report), "records"],
        cwd=directory,
        capture_output=True,
        text=True,
    )
    sessions = len(list((directory / "records").glob("*.jsonl")))
    rows = json.loads(report.read_text())["verdicts"] if report.exists() else []
    failing_rows = [row for row in rows if row.get("fails")]
    lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    warnings = [line for line in lines if "warning" in line.lower()]
    print(
        f"  check over {sessions} session(s) of records: exit {done.returncode}, "
        f"{len(rows)} row(s) judged, {len(failing_rows)} failing, {len(warnings)} warning(s)"
    )
    for line in [*warnings, *lines[:1]][:3]:
        print(f"    {line}")
    return done.returncode == 0 and not failing_rows and not warnings


def loaded_rerun(python: Path, directory: Path, args: list[str]) -> None:
    """A serial rerun with every core kept busy by spinning processes: the lines its
    compile summary takes at default verbosity."""
    spinners = [
        subprocess.Popen([str(python), "-c", "while True: pass"])
        for _ in range(os.cpu_count() or 2)
    ]
    try:
        run = run_pytest(python, directory, ["--compile-census", *args])
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    text = run.stdout.splitlines()
    start = next((i for i, line in enumerate(text) if "jax compile times" in line), None)
    end = next(
        (
            i
            for i in range(len(text) - 1, -1, -1)
            if text[i].startswith("=") and start is not None and i > start
        ),
        len(text),
    )
    section = text[start + 1 : end] if start is not None else []
    print(
        f"  loaded rerun (every core busy): exit {run.returncode}, "
        f"compile summary {len(section)} line(s):"
    )
    for line in section[:12]:
        print(f"    {line}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--way",
        action="append",
        choices=sorted(WAYS),
        default=[],
        help="time only these ways (repeatable; the disabled run always)",
    )
    parser.add_argument(
        "--reruns",
        type=int,
        default=3,
        help="unchanged reruns after pinning (0: skip the gate figures)",
    )
    parser.add_argument(
        "--suite",
        action="append",
        choices=sorted(SUITES),
        help="a suite to run (repeatable; default all)",
    )
    parser.add_argument(
        "--select",
        action="append",
        default=[],
        metavar="NAME=ARGS",
        help="pytest arguments replacing a suite's default selection, "
        "e.g. 'optax=-k test_explicit_dtype'",
    )
    parser.add_argument(
        "--venv",
        type=Path,
        default=Path(tempfile.gettempdir()) / "jaxcompile-real-suites-venv",
        help="scratch venv (created if missing, reused otherwise)",
    )
    parser.add_argument("--workdir", type=Path, default=None, help="scratch directory")
    args = parser.parse_args()
    suites = [SUITES[name] for name in (args.suite or sorted(SUITES))]
    selections = {suite.name: list(suite.default_args) for suite in suites}
    for item in args.select:
        name, _, rest = item.partition("=")
        if name not in selections:
            parser.error(f"--select {item!r}: no suite {name!r} (choose from {sorted(selections)})")
        selections[name] = shlex.split(rest)
    python = venv_python(args.venv, suites)
    packages = site_packages(python)
    versions = subprocess.run(
        [
            str(python),
            "-c",
            "import sys, importlib.metadata as m; print(sys.version.split()[0], "
            + ", ".join(
                f"m.version({p!r})"
                for p in [
                    "jax",
                    "jaxlib",
                    "pytest",
                    "pytest-xdist",
                    *(r.split("==")[0] for s in suites for r in s.requirements),
                ]
            )
            + ")",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    load = os.getloadavg()
    print(f"versions (python, jax, jaxlib, pytest, xdist, suites' packages): {versions}")
    print(f"machine: {os.cpu_count()} CPUs, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    good = True
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="jaxcompile-real-suites-"))
    for suite in suites:
        selection = selections[suite.name]
        source = (
            SUITES_DIR
            if suite.local
            else packages
            if suite.sdist is None
            else sdist_root(python, suite.sdist, workdir)
        )
        print(f"\n{suite.name}: {' '.join(suite.files)} {shlex.join(selection)}")
        files = prepare(workdir / f"{suite.name}-overhead", suite, source)
        ways = [way for way in WAYS if way == "disabled" or not args.way or way in args.way]
        good &= overhead(
            python, suite, selection, files, workdir / f"{suite.name}-overhead", args.rounds, ways
        )
        files = prepare(workdir / f"{suite.name}-gate", suite, source)
        if args.reruns > 0:  # --reruns 0: the overhead figures only
            good &= gate(
                python, suite, selection, files, workdir / f"{suite.name}-gate", args.reruns
            )
    load = os.getloadavg()
    print(
        f"\nload average at the end {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; scratch in {workdir}"
    )
    if not good:
        print(
            "FAILED: pass/fail counts differ from the plugin-disabled run, a false alarm, "
            "or a verdict -n 2 changes (above)"
        )
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
