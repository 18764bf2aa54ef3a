"""Hardware identity: the accelerator, and the host cores XLA compiles on.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Hardware:
    """Where a compile ran. `name` is what keys pins; the rest is kept in records."""

    name: str
    platform: str
    device_kind: str
    device_count: int
    cpu_model: str
    cpu_count: int
    overridden: bool = False

    def detail(self) -> dict[str, Any]:
        return {
            "platform": self.platform,
            "device_kind": self.device_kind,
            "device_count": self.device_count,
            "cpu_model": self.cpu_model,
            "cpu_count": self.cpu_count,
            "machine": platform.machine(),
        }


@dataclass(frozen=True)
class Host:
    """Where the host facts are read from. The defaults read this machine and process;
    tests pass a directory holding ``proc/`` and ``sys/`` files, and the rest as data."""

    root: Path = Path("/")
    system: str | None = None  # platform.system() when None
    affinity: Collection[int] | None = None  # this process's mask when None
    sysctl: Callable[[str], str | None] | None = None  # `sysctl -n KEY` when None
    machine: str | None = None  # platform.processor() or platform.machine() when None

    def read(self, path: str) -> str | None:
        try:
            return (self.root / path.lstrip("/")).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    def sysctl_value(self, key: str) -> str | None:
        return (self.sysctl or run_sysctl)(key)

    def os_name(self) -> str:
        return self.system if self.system is not None else platform.system()

    def cores(self) -> int:
        if self.affinity is not None:
            return len(self.affinity)
        if hasattr(os, "sched_getaffinity"):
            return len(os.sched_getaffinity(0))
        import psutil  # only when measuring: plugin start-up does not pay for it

        return psutil.cpu_count(logical=True) or os.cpu_count() or 1

    def fallback_name(self) -> str:
        if self.machine is not None:
            return self.machine
        return platform.processor() or platform.machine()


def run_sysctl(key: str) -> str | None:
    """``sysctl -n KEY`` (macOS), or None where there is no such command or key."""
    try:
        return subprocess.run(
            ["sysctl", "-n", key],
            capture_output=True,
            text=True,
            check=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


# ARM's `CPU implementer` and `CPU part` ids, named as lscpu names them (the common
# server, laptop and board cores); an id not here is named by its hex value.
ARM_IMPLEMENTERS = {
    0x41: "ARM",
    0x42: "Broadcom",
    0x43: "Cavium",
    0x46: "Fujitsu",
    0x48: "HiSilicon",
    0x4E: "NVIDIA",
    0x50: "APM",
    0x51: "Qualcomm",
    0x61: "Apple",
    0xC0: "Ampere",
}
ARM_PARTS = {
    (0x41, 0xD03): "Cortex-A53",
    (0x41, 0xD04): "Cortex-A35",
    (0x41, 0xD05): "Cortex-A55",
    (0x41, 0xD07): "Cortex-A57",
    (0x41, 0xD08): "Cortex-A72",
    (0x41, 0xD09): "Cortex-A73",
    (0x41, 0xD0A): "Cortex-A75",
    (0x41, 0xD0B): "Cortex-A76",
    (0x41, 0xD0C): "Neoverse-N1",
    (0x41, 0xD0D): "Cortex-A77",
    (0x41, 0xD40): "Neoverse-V1",
    (0x41, 0xD41): "Cortex-A78",
    (0x41, 0xD44): "Cortex-X1",
    (0x41, 0xD46): "Cortex-A510",
    (0x41, 0xD47): "Cortex-A710",
    (0x41, 0xD48): "Cortex-X2",
    (0x41, 0xD49): "Neoverse-N2",
    (0x41, 0xD4F): "Neoverse-V2",
    (0x41, 0xD80): "Cortex-A520",
    (0x41, 0xD81): "Cortex-A720",
    (0x41, 0xD82): "Cortex-X4",
    (0x41, 0xD84): "Neoverse-V3",
    (0x41, 0xD8E): "Neoverse-N3",
    (0x46, 0x001): "A64FX",
    (0x48, 0xD01): "TaiShan-v110",
    (0x4E, 0x004): "Carmel",
    (0xC0, 0xAC3): "Ampere-1",
    (0xC0, 0xAC4): "Ampere-1a",
}


def _cpuinfo_fields(cpuinfo: str) -> list[tuple[str, str]]:
    fields = []
    for line in cpuinfo.splitlines():
        key, colon, value = line.partition(":")
        if colon:
            fields.append((key.strip(), " ".join(value.split())))
    return fields


def _hex(value: str) -> int | None:
    try:
        return int(value, 0)
    except ValueError:
        return None


def arm_core_name(implementer: int, part: int) -> str:
    """E.g. ``ARM Neoverse-N1``; an unknown id is named by its hex value."""
    vendor = ARM_IMPLEMENTERS.get(implementer, f"implementer 0x{implementer:02x}")
    return f"{vendor} {ARM_PARTS.get((implementer, part), f'part 0x{part:03x}')}"


def cpu_model_from_cpuinfo(cpuinfo: str) -> str | None:
    """The CPU's name in a Linux ``/proc/cpuinfo``, or None when it names none.

    ARM kernels give no marketing name (aarch64 has no ``model name``; a 32-bit kernel's
    names only the architecture), but give each core's ``CPU implementer`` and ``CPU part``:
    those name the core design, as lscpu does, and a big.LITTLE chip is its distinct
    designs joined by `` + ``. Otherwise the first non-empty ``model name`` (x86),
    ``cpu`` (POWER), ``cpu model`` (MIPS) or ``Hardware`` (old ARM boards) line.
    """
    fields = _cpuinfo_fields(cpuinfo)
    cores: list[str] = []
    implementer: int | None = None
    for key, value in fields:
        if key == "CPU implementer":
            implementer = _hex(value)
        elif key == "CPU part" and implementer is not None:
            part = _hex(value)
            if part is not None and (name := arm_core_name(implementer, part)) not in cores:
                cores.append(name)
    if cores:
        return " + ".join(cores)
    for wanted in ("model name", "cpu", "cpu model", "Hardware"):
        for key, value in fields:
            if key == wanted and value:
                return value
    return None


def host_cpu_model(host: Host | None = None) -> str:
    """The host CPU's name: ``/proc/cpuinfo`` (Linux), else ``sysctl
    machdep.cpu.brand_string`` (macOS), else Python's processor or machine name."""
    host = host or Host()
    cpuinfo = host.read("/proc/cpuinfo")
    name = cpu_model_from_cpuinfo(cpuinfo) if cpuinfo is not None else None
    if not name and host.os_name() == "Darwin":
        name = " ".join((host.sysctl_value("machdep.cpu.brand_string") or "").split())
    return name or host.fallback_name() or "unknown-cpu"


def _mount_dirs(mountinfo: str, cgroups: str) -> list[tuple[str, str, str]]:
    """(version, mount point, the process's cgroup directory) of each cgroup hierarchy
    with the cpu controller, from ``/proc/self/mountinfo`` and ``/proc/self/cgroup``."""
    paths_v1: dict[str, str] = {}
    path_v2: str | None = None
    for line in cgroups.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and not controllers:
            path_v2 = path
        for controller in controllers.split(","):
            paths_v1[controller] = path
    found = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if "-" not in fields or len(fields) < 5:
            continue
        tail = fields[fields.index("-") + 1 :]
        if len(tail) < 3:
            continue
        fs_root = fields[3]
        mount = re.sub(r"\\([0-7]{3})", lambda octal: chr(int(octal[1], 8)), fields[4])
        if tail[0] == "cgroup2" and path_v2 is not None:
            version, path = "v2", path_v2
        elif tail[0] == "cgroup" and "cpu" in tail[2].split(",") and "cpu" in paths_v1:
            version, path = "v1", paths_v1["cpu"]
        else:
            continue
        if fs_root != "/" and not (path + "/").startswith(fs_root.rstrip("/") + "/"):
            continue  # the process's cgroup is outside what is mounted here
        relative = path[len(fs_root.rstrip("/")) :] if fs_root != "/" else path
        mount = mount.rstrip("/")
        found.append((version, mount, mount + relative.rstrip("/")))
    return found


def _quota_cores(quota: str, period: str) -> int | None:
    """Cores a CFS quota allows, rounded up (a 0.5-core quota is one core), or None."""
    try:
        quota_us, period_us = int(quota), int(period)
    except ValueError:
        return None  # "max": no quota
    if quota_us <= 0 or period_us <= 0:
        return None  # v1's -1: no quota
    return max(-(-quota_us // period_us), 1)


def _cgroup_quota(host: Host, version: str, directory: str) -> int | None:
    if version == "v2":
        text = host.read(f"{directory}/cpu.max")  # "max 100000" or "150000 100000"
        quota, _, period = (text or "").strip().partition(" ")
        return _quota_cores(quota, period) if text else None
    quota_us = host.read(f"{directory}/cpu.cfs_quota_us")  # -1: none
    period_us = host.read(f"{directory}/cpu.cfs_period_us")
    return _quota_cores(quota_us.strip(), period_us.strip()) if quota_us and period_us else None


def cgroup_cpu_quota(host: Host | None = None) -> int | None:
    """Cores the process's cgroup CPU quota allows (v1 ``cpu.cfs_quota_us`` over
    ``cpu.cfs_period_us``, v2 ``cpu.max``), the tightest of its cgroup and the cgroups
    above it, rounded up; None without a quota."""
    host = host or Host()
    mountinfo, cgroups = host.read("/proc/self/mountinfo"), host.read("/proc/self/cgroup")
    if mountinfo is None or cgroups is None:
        return None
    limits = []
    for version, mount, directory in _mount_dirs(mountinfo, cgroups):
        while True:
            quota = _cgroup_quota(host, version, directory)
            if quota is not None:
                limits.append(quota)
            if not directory.startswith(mount + "/"):
                break  # the mount point: nothing above it is visible
            directory = directory.rsplit("/", 1)[0]
    return min(limits) if limits else None


def usable_cpu_count(host: Host | None = None) -> int:
    """Cores XLA compiles on: those the process may run on (its affinity mask, where the
    OS has one, else the logical count), capped by its cgroup CPU quota; at least 1."""
    host = host or Host()
    cores = host.cores() or 1
    quota = cgroup_cpu_quota(host)
    return min(cores, quota) if quota is not None else cores


def hardware_name(platform_name: str, device_kind: str, cpu_model: str, cpu_count: int) -> str:
    """E.g. ``gpu:NVIDIA H200 @ AMD EPYC 9654 x16`` (device kind, then host CPU and cores)."""
    return f"{platform_name}:{device_kind} @ {cpu_model} x{cpu_count}"


def detect_hardware(override: str | None, host: Host | None = None) -> Hardware:
    """Ask JAX for its default backend's devices; imports jax. `host` is where the CPU
    facts are read (this machine by default)."""
    import jax

    devices = jax.devices()
    platform_name = jax.default_backend()
    device_kind = str(getattr(devices[0], "device_kind", platform_name)) if devices else "none"
    cpu_model = host_cpu_model(host)
    cpu_count = usable_cpu_count(host)
    name = override or hardware_name(platform_name, device_kind, cpu_model, cpu_count)
    return Hardware(
        name=name,
        platform=platform_name,
        device_kind=device_kind,
        device_count=len(devices),
        cpu_model=cpu_model,
        cpu_count=cpu_count,
        overridden=override is not None,
    )
