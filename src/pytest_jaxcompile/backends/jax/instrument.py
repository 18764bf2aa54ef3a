"""The instrument of the instruction gate: valgrind's callgrind, found and checked, the
identity a count is compared under (`instrument_identity`: valgrind, jaxlib, the CPU
valgrind simulates, libc, Python, XLA_FLAGS) and the counting child's command line and
environment, with the settings that keep its counts from varying between runs.
`instructions.py` stages the modules and runs the child with these.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

from pytest_jaxcompile.backends.jax.backendstart import XLA_FLAGS_ENV
from pytest_jaxcompile.backends.jax.instructions_child import CHILD_SLOT_ENV

VALGRIND = "valgrind"
CONTROL = "callgrind_control"  # valgrind's own script: turns instrumentation on
INSTALL_HINT = "install it (Debian/Ubuntu: apt-get install valgrind)"
CHILD_MODULE = "pytest_jaxcompile.backends.jax.instructions_child"
# The environment the child compiles in: what would otherwise make counts vary.
CHILD_ENVIRONMENT = {
    "GLIBC_TUNABLES": "glibc.malloc.arena_max=1",  # one heap for every compile thread
    "JAX_ENABLE_COMPILATION_CACHE": "false",  # always a real compile
    "JAX_PLATFORMS": "cpu",
    "TF_CPP_MIN_LOG_LEVEL": "3",
}
# ISA features that decide what valgrind's simulated CPU reports to XLA: on x86-64 its CPUID
# answers one of a few fixed CPUs, chosen by the host's highest level, with F16C, RDRAND and
# RDSEED passed through (valgrind 3.19's VEX); the identity names them.
_ISA_LEVELS = (("avx2", ("avx2",)), ("avx", ("avx",)), ("sse4.2", ("sse4_2",)))
_ISA_EXTRAS = ("f16c", "rdrand", "rdseed")
# The settings CodSpeed's valgrind runs use against run-to-run variation, each one the
# counting child can have (`child_command`, `child_environment`); the child gets
# DETERMINISM, those that narrowed the spread of repeated counts (all three together: 0.33 %
# -> 0.20 % over five fresh children each; docs/benchmarks.md).
NO_ASLR = "no-aslr"  # address space randomisation off (setarch -R: ADDR_NO_RANDOMIZE)
HASH_SEED = "hashseed"  # PYTHONHASHSEED=0: Python's str hashes, dict and set layouts
SYSTEM_MALLOC = "malloc"  # PYTHONMALLOC=malloc: every Python allocation through libc
SETTINGS = (NO_ASLR, HASH_SEED, SYSTEM_MALLOC)
DETERMINISM = SETTINGS


class InstrumentError(Exception):
    """valgrind is missing or cannot run here; the message says what to do."""


def _valgrind_path() -> str:
    path = shutil.which(VALGRIND)
    missing = [name for name in (VALGRIND, CONTROL) if shutil.which(name) is None]
    if path is None or missing:
        raise InstrumentError(
            f"--compile-instructions needs valgrind (with {CONTROL}); not on PATH: "
            f"{', '.join(missing)}: " + INSTALL_HINT
        )
    return path


def installed_valgrind() -> str:
    """``valgrind-3.19.0`` as ``valgrind --version`` says (no program run under it), or
    InstrumentError naming how to install it: enough for the instrument's identity."""
    path = _valgrind_path()
    try:
        version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise InstrumentError(f"valgrind cannot run on this platform: {error}") from None
    return version.stdout.strip() or "valgrind (unknown version)"


def valgrind_version() -> str:
    """``valgrind-3.19.0`` once a program ran under callgrind here, or InstrumentError
    naming how to install it or why it cannot run."""
    path = _valgrind_path()
    try:
        done = subprocess.run(
            [path, "--tool=callgrind", "--callgrind-out-file=/dev/null", "true"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise InstrumentError(f"valgrind cannot run on this platform: {error}") from None
    if done.returncode != 0:
        tail = " ".join(done.stderr.strip().splitlines()[-3:])
        raise InstrumentError(
            f"valgrind cannot run on this platform ({platform.machine()}): {tail}"
        )
    return installed_valgrind()


def simulated_cpu() -> str:
    """What valgrind's CPU tells XLA, from the host's features (valgrind picks its CPUID
    answers from them): ``x86_64 avx2+f16c+rdrand``, or the machine name elsewhere."""
    machine = platform.machine()
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return machine
    flags: set[str] = set()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            flags = set(line.partition(":")[2].split())
            break
    level = (
        next(
            (name for name, needs in _ISA_LEVELS if all(flag in flags for flag in needs)),
            "baseline",
        )
        if machine in ("x86_64", "AMD64")
        else ""
    )
    extras = [flag for flag in _ISA_EXTRAS if flag in flags] if level else []
    return " ".join(part for part in (machine, "+".join([level, *extras]) if level else "") if part)


def instrument_identity(valgrind: str, jaxlib_version: str) -> str:
    """Everything besides the module and its options that changes a count: counts are
    compared only under an equal identity."""
    flags = os.environ.get(XLA_FLAGS_ENV, "").strip()
    libc = " ".join(platform.libc_ver()).strip() or "libc unknown"
    parts = [
        valgrind.replace("valgrind-", "callgrind "),
        f"jaxlib {jaxlib_version}",
        simulated_cpu(),
        libc,
        f"python {platform.python_version()}",
        f"XLA_FLAGS {_digest(flags.encode())}" if flags else "no XLA_FLAGS",
    ]
    return ", ".join(parts)


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()[:12]


def options_digest(options: bytes) -> str:
    """The digest of a compile's serialized options, pinned beside its count."""
    return _digest(options)


def child_command(stage: Path, out: Path, settings: tuple[str, ...] = DETERMINISM) -> list[str]:
    return [
        *(no_randomization() if NO_ASLR in settings else []),
        VALGRIND,
        "--tool=callgrind",
        "--instr-atstart=no",
        "--dump-before=getppid",
        "--dump-instr=no",
        "--dump-line=no",
        f"--callgrind-out-file={out}/callgrind.out",
        sys.executable,
        "-m",
        CHILD_MODULE,
        str(stage),
        str(out),
    ]


def no_randomization() -> list[str]:
    """``setarch <machine> -R``, which starts a program with address space randomisation
    off (ADDR_NO_RANDOMIZE), where setarch is installed and the kernel allows it; else
    nothing (the child runs as it is)."""
    path = shutil.which("setarch")
    if path is None:
        return []
    prefix = [path, platform.machine(), "-R"]
    try:
        done = subprocess.run([*prefix, "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return prefix if done.returncode == 0 else []


def child_environment(settings: tuple[str, ...] = DETERMINISM, slot: int = 0) -> dict[str, str]:
    """The counting child's environment: this process's, with CHILD_ENVIRONMENT, the
    `settings` that are environment variables (`HASH_SEED`, `SYSTEM_MALLOC`) and which of
    this process's children at once it is (`CHILD_SLOT_ENV`: which CPU it keeps to)."""
    environment = {**os.environ, **CHILD_ENVIRONMENT, CHILD_SLOT_ENV: str(slot)}
    environment["PYTHONHASHSEED"] = "0" if HASH_SEED in settings else "random"
    if SYSTEM_MALLOC in settings:
        environment["PYTHONMALLOC"] = "malloc"
    else:
        environment.pop("PYTHONMALLOC", None)
    return environment
