"""Hardware identity: the accelerator, and the host cores XLA compiles on."""

from __future__ import annotations

import os
import platform
import subprocess
from dataclasses import dataclass
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


def host_cpu_model() -> str:
    """The host CPU's marketing name, best effort per OS."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.startswith(("model name", "Hardware", "cpu model")):
                    return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    if platform.system() == "Darwin":
        try:
            return subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"],
                capture_output=True, text=True, check=True, timeout=5,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine() or "unknown-cpu"


def usable_cpu_count() -> int:
    """Cores this process may run on (its affinity mask), which is what XLA compiles on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    import psutil  # only when measuring: plugin start-up does not pay for it

    return psutil.cpu_count(logical=True) or os.cpu_count() or 1


def hardware_name(platform_name: str, device_kind: str, cpu_model: str, cpu_count: int) -> str:
    """E.g. ``gpu:NVIDIA H200 @ AMD EPYC 9654 x16`` (device kind, then host CPU and cores)."""
    return f"{platform_name}:{device_kind} @ {cpu_model} x{cpu_count}"


def detect_hardware(override: str | None) -> Hardware:
    """Ask JAX for its default backend's devices; imports jax."""
    import jax

    devices = jax.devices()
    platform_name = jax.default_backend()
    device_kind = str(getattr(devices[0], "device_kind", platform_name)) if devices else "none"
    cpu_model = host_cpu_model()
    cpu_count = usable_cpu_count()
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
