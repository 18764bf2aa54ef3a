"""Hardware identity: the CPU name and usable core count in every comparability key.

Each case writes the files a real machine has (``/proc/cpuinfo``, ``/proc/self/cgroup``,
``/proc/self/mountinfo``, the cgroup's quota files) under a directory and reads them as
the plugin reads this machine's, and asserts the exact name.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from pytest_jaxcompile.backends import host_state
from pytest_jaxcompile.backends.hardware import (
    Host,
    detect_hardware,
    host_cpu_model,
    usable_cpu_count,
)

DOC = Path(__file__).resolve().parent.parent / "docs" / "comparability-key.md"


def cpuinfo(*cores: str, trailer: str = "") -> str:
    return (
        "\n".join(f"processor\t: {index}\n{core.strip()}\n" for index, core in enumerate(cores))
        + trailer
    )


INTEL = """
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 106
model name\t: Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz
stepping\t: 6
cpu MHz\t\t: 2899.970
cpu cores\t: 2
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep avx512f
"""
AMD = """
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC 7B13
stepping\t: 0
cpu MHz\t\t: 2449.998
"""
VM_WITHOUT_NAME = """
vendor_id\t: GenuineIntel
cpu family\t: 6
model name\t:
"""


def arm(part: str, variant: str = "0x3") -> str:
    return (
        "BogoMIPS\t: 243.75\n"
        "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid\n"
        "CPU implementer\t: 0x41\nCPU architecture: 8\n"
        f"CPU variant\t: {variant}\nCPU part\t: {part}\nCPU revision\t: 1\n"
    )


PI4_TRAILER = (
    "\nHardware\t: BCM2835\nRevision\t: c03114\nSerial\t\t: 10000000a1b2c3d4\n"
    "Model\t\t: Raspberry Pi 4 Model B Rev 1.4\n"
)
PI4_32BIT = (
    "model name\t: ARMv7 Processor rev 3 (v7l)\nBogoMIPS\t: 108.00\n"
    "CPU implementer\t: 0x41\nCPU architecture: 7\nCPU variant\t: 0x0\n"
    "CPU part\t: 0xd08\nCPU revision\t: 3\n"
)
AMPERE_ONE = (
    "CPU implementer\t: 0xc0\nCPU architecture: 8\nCPU variant\t: 0x0\n"
    "CPU part\t: 0xac3\nCPU revision\t: 0\n"
)
UNKNOWN_ARM = (
    "CPU implementer\t: 0x6d\nCPU architecture: 8\nCPU variant\t: 0x0\n"
    "CPU part\t: 0xd99\nCPU revision\t: 0\n"
)

CPU_MODELS = {
    "intel": (cpuinfo(INTEL, INTEL), "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz"),
    "amd": (cpuinfo(AMD, AMD), "AMD EPYC 7B13"),
    "graviton2": (cpuinfo(arm("0xd0c"), arm("0xd0c")), "ARM Neoverse-N1"),
    "graviton3": (cpuinfo(arm("0xd40", "0x1")), "ARM Neoverse-V1"),
    "grace": (cpuinfo(arm("0xd4f", "0x0")), "ARM Neoverse-V2"),
    "raspberry-pi-4": (cpuinfo(*[arm("0xd08", "0x0")] * 4, trailer=PI4_TRAILER), "ARM Cortex-A72"),
    "raspberry-pi-4-32bit": (cpuinfo(PI4_32BIT, PI4_32BIT), "ARM Cortex-A72"),
    "big-little": (
        cpuinfo(*[arm("0xd03", "0x0")] * 4, arm("0xd08", "0x0"), arm("0xd08")),
        "ARM Cortex-A53 + ARM Cortex-A72",
    ),
    "ampere-one": (cpuinfo(AMPERE_ONE), "Ampere Ampere-1"),
    "unknown-arm": (cpuinfo(UNKNOWN_ARM), "implementer 0x6d part 0xd99"),
}


def machine(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


@pytest.mark.parametrize("case", sorted(CPU_MODELS))
def test_linux_cpu_model_from_proc_cpuinfo(tmp_path: Path, case: str) -> None:
    text, expected = CPU_MODELS[case]
    root = machine(tmp_path, {"/proc/cpuinfo": text})
    assert host_cpu_model(Host(root=root, system="Linux", machine="unused")) == expected


def test_a_cpuinfo_naming_no_cpu_falls_back_to_the_machine_never_an_empty_name(
    tmp_path: Path,
) -> None:
    root = machine(tmp_path, {"/proc/cpuinfo": cpuinfo(VM_WITHOUT_NAME)})
    assert host_cpu_model(Host(root=root, system="Linux", machine="x86_64")) == "x86_64"
    assert host_cpu_model(Host(root=root, system="Linux", machine="")) == "unknown-cpu"


@pytest.mark.parametrize(
    ("brand", "expected"),
    [
        ("Apple M2 Pro", "Apple M2 Pro"),
        ("Intel(R) Core(TM) i9-9880H CPU @ 2.30GHz\n", "Intel(R) Core(TM) i9-9880H CPU @ 2.30GHz"),
    ],
)
def test_macos_cpu_model_from_sysctl_brand_string(
    tmp_path: Path, brand: str, expected: str
) -> None:
    asked: list[str] = []

    def sysctl(key: str) -> str:
        asked.append(key)
        return brand

    host = Host(root=tmp_path, system="Darwin", sysctl=sysctl, machine="arm64")
    assert host_cpu_model(host) == expected
    assert asked == ["machdep.cpu.brand_string"]


def test_macos_without_a_brand_string_falls_back_to_the_machine(tmp_path: Path) -> None:
    host = Host(root=tmp_path, system="Darwin", sysctl=lambda key: None, machine="arm64")
    assert host_cpu_model(host) == "arm64"


# /proc/self/mountinfo and /proc/self/cgroup as real machines write them.
V2_MOUNT = (
    "28 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n"
)
V1_MOUNTS = (
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:9 - "
    "cgroup cgroup rw,cpu,cpuacct\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:12 - cgroup cgroup rw,memory\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:5 - cgroup2 cgroup2 rw\n"
)
DOCKER_V1_MOUNT = (
    "1203 1198 0:30 /docker/3f2a9c /sys/fs/cgroup/cpu,cpuacct ro,nosuid,nodev,noexec,relatime "
    "master:11 - cgroup cgroup rw,cpu,cpuacct\n"
)
V1_CGROUP = "12:cpu,cpuacct:{path}\n11:memory:{path}\n1:name=systemd:{path}\n0::{path}\n"


def v2_container(tmp_path: Path, cpu_max: str) -> Path:
    return machine(
        tmp_path,
        {
            "/proc/self/mountinfo": V2_MOUNT,
            "/proc/self/cgroup": "0::/\n",
            "/sys/fs/cgroup/cpu.max": cpu_max,
        },
    )


@pytest.mark.parametrize(
    ("cpu_max", "expected"),
    [
        ("200000 100000\n", 2),
        ("150000 100000\n", 2),  # 1.5 cores of quota: rounded up
        ("50000 100000\n", 1),  # half a core is one core, never zero
        ("max 100000\n", 64),  # no quota: the affinity mask
        ("6400000 100000\n", 64),  # a quota over the mask: the mask
    ],
)
def test_cgroup_v2_cpu_max_caps_the_cores(tmp_path: Path, cpu_max: str, expected: int) -> None:
    host = Host(root=v2_container(tmp_path, cpu_max), affinity=range(64))
    assert usable_cpu_count(host) == expected


def test_cgroup_v2_quota_on_an_ancestor_applies(tmp_path: Path) -> None:
    scope = "/user.slice/user-1000.slice/session-3.scope"
    root = machine(
        tmp_path,
        {
            "/proc/self/mountinfo": V2_MOUNT,
            "/proc/self/cgroup": f"0::{scope}\n",
            f"/sys/fs/cgroup{scope}/cpu.max": "max 100000\n",
            "/sys/fs/cgroup/user.slice/user-1000.slice/cpu.max": "400000 100000\n",
            "/sys/fs/cgroup/user.slice/cpu.max": "800000 100000\n",
        },
    )
    assert usable_cpu_count(Host(root=root, affinity=range(32))) == 4


@pytest.mark.parametrize(("quota", "expected"), [("300000", 3), ("-1", 16), ("25000", 1)])
def test_cgroup_v1_cfs_quota_caps_the_cores(tmp_path: Path, quota: str, expected: int) -> None:
    path = "/kubepods/burstable/pod8e1c/4b7d"
    root = machine(
        tmp_path,
        {
            "/proc/self/mountinfo": V1_MOUNTS,
            "/proc/self/cgroup": V1_CGROUP.format(path=path),
            f"/sys/fs/cgroup/cpu,cpuacct{path}/cpu.cfs_quota_us": f"{quota}\n",
            f"/sys/fs/cgroup/cpu,cpuacct{path}/cpu.cfs_period_us": "100000\n",
            "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
            "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
        },
    )
    assert usable_cpu_count(Host(root=root, affinity=range(16))) == expected


def test_cgroup_v1_docker_without_a_cgroup_namespace(tmp_path: Path) -> None:
    """Docker mounts the container's own cgroup at the mount point: /proc/self/cgroup
    names /docker/ID, which is the mount's root."""
    root = machine(
        tmp_path,
        {
            "/proc/self/mountinfo": DOCKER_V1_MOUNT,
            "/proc/self/cgroup": V1_CGROUP.format(path="/docker/3f2a9c"),
            "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "200000\n",
            "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
        },
    )
    assert usable_cpu_count(Host(root=root, affinity=range(8))) == 2


def test_the_affinity_mask_counts_without_a_quota(tmp_path: Path) -> None:
    """A process pinned to 4 of a machine's cores (taskset, a cpuset) compiles on 4."""
    assert usable_cpu_count(Host(root=tmp_path, affinity={2, 3, 6, 7})) == 4
    mounts = machine(
        tmp_path / "v1",
        {
            "/proc/self/mountinfo": V1_MOUNTS,
            "/proc/self/cgroup": V1_CGROUP.format(path="/"),
            "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "800000\n",
            "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
        },
    )
    assert usable_cpu_count(Host(root=mounts, affinity={2, 3, 6, 7})) == 4


def test_this_machine_counts_its_own_mask() -> None:
    import os

    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    count = usable_cpu_count()
    assert count >= 1
    if expected is not None:
        assert count <= expected


@pytest.mark.parametrize(
    ("case", "cores", "cpu_max", "expected"),
    [
        ("intel", 4, "max 100000", "cpu:cpu @ Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz x4"),
        ("amd", 64, "800000 100000", "cpu:cpu @ AMD EPYC 7B13 x8"),
        ("graviton3", 16, "max 100000", "cpu:cpu @ ARM Neoverse-V1 x16"),
        ("big-little", 6, "max 100000", "cpu:cpu @ ARM Cortex-A53 + ARM Cortex-A72 x6"),
    ],
)
def test_detect_hardware_names_the_key_from_jax_and_the_host(
    tmp_path: Path, case: str, cores: int, cpu_max: str, expected: str
) -> None:
    root = v2_container(tmp_path, cpu_max)
    (root / "proc" / "cpuinfo").write_text(CPU_MODELS[case][0])
    hardware = detect_hardware(None, Host(root=root, system="Linux", affinity=range(cores)))
    assert hardware.name == expected
    assert (hardware.platform, hardware.device_kind, hardware.overridden) == ("cpu", "cpu", False)
    assert hardware.cpu_model == CPU_MODELS[case][1]
    assert expected in DOC.read_text()


def test_detect_hardware_override_replaces_the_name_and_keeps_the_detail(
    tmp_path: Path,
) -> None:
    root = machine(tmp_path, {"/proc/cpuinfo": CPU_MODELS["amd"][0]})
    hardware = detect_hardware("ci-pool-a", Host(root=root, system="Linux", affinity=range(2)))
    assert (hardware.name, hardware.overridden) == ("ci-pool-a", True)
    assert (hardware.cpu_model, hardware.cpu_count) == ("AMD EPYC 7B13", 2)


def test_the_documented_cpu_names_are_what_the_code_gives() -> None:
    doc = DOC.read_text()
    for _, expected in CPU_MODELS.values():
        assert f"`{expected}`" in doc


def test_load_per_core_is_over_the_usable_cpus_a_quota_allows(tmp_path: Path) -> None:
    """A 2-core cgroup quota on a 64-core affinity mask: the load is shared by 2 cores."""
    quota = Host(root=v2_container(tmp_path, "200000 100000\n"), affinity=range(64))
    state = host_state(1.25, host=quota, load_avg=lambda: 6.0)
    assert state.cpu_count == 2
    assert state.load_avg_1m == 6.0
    assert state.load_per_core == 3.0
    assert state.process_cpu_s == 1.25
    unlimited = Host(root=v2_container(tmp_path / "free", "max 100000\n"), affinity=range(8))
    assert host_state(host=unlimited, load_avg=lambda: 6.0).load_per_core == 0.75
    # the hardware's count, where the caller knows it, is what the load is shared by
    assert host_state(cpu_count=4, load_avg=lambda: 6.0).load_per_core == 1.5


def test_the_recorded_load_is_the_1_minute_average_of_the_three(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The default reader takes the 1-minute load of the (1, 5, 15)-minute averages the
    system gives (the OS's own, as a session reads it, without importing psutil): three
    distinct figures, so reading the 5- or 15-minute one is caught."""
    monkeypatch.setattr(os, "getloadavg", lambda: (0.5, 3.0, 7.0))
    state = host_state(cpu_count=2)
    assert (state.load_avg_1m, state.load_per_core) == (0.5, 0.25)


def test_the_load_is_read_without_importing_psutil(monkeypatch: pytest.MonkeyPatch) -> None:
    """A measuring session reads the load for every row: psutil's import (about 35 ms) is
    not paid for it where the OS gives the load itself."""
    monkeypatch.delitem(sys.modules, "psutil", raising=False)
    assert host_state(cpu_count=2).load_avg_1m is not None
    assert "psutil" not in sys.modules


def test_load_per_core_is_none_without_a_load_average(tmp_path: Path) -> None:
    def no_load() -> float:
        raise OSError("no load average here")

    state = host_state(cpu_count=2, load_avg=no_load)
    assert state.load_avg_1m is None and state.load_per_core is None and state.cpu_count == 2


def test_load_override_replaces_the_measured_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAXCOMPILE_LOAD_PER_CORE", "3.5")
    assert host_state(cpu_count=2, load_avg=lambda: 0.1).load_per_core == 3.5
    monkeypatch.setenv("JAXCOMPILE_LOAD_PER_CORE", "nan")
    with pytest.raises(ValueError, match="JAXCOMPILE_LOAD_PER_CORE='nan'"):
        host_state(cpu_count=2, load_avg=lambda: 0.1)
