"""Build CompileRecords for logic tests."""

from __future__ import annotations

from typing import Any

from pytest_jaxcompile.records import CacheDetails, CompileRecord, HostState

HARDWARE = "cpu:cpu @ Test CPU x2"


def make_record(**overrides: Any) -> CompileRecord:
    values: dict[str, Any] = {
        "cell": "tests/test_models.py::test_mlp",
        "transform": "vag",
        "hardware": HARDWARE,
        "jax_version": "0.10.2",
        "jaxlib_version": "0.10.2",
        "mixed_precision": False,
        "cache_state": "cold",
        "compile_s": 1.0,
        "fingerprint": "sha256:abc",
        "timestamp": "2026-11-30T00:00:00+00:00",
        "cache": CacheDetails(dir="/tmp/cache", enabled=True, persisted=True),
        "host_state": HostState(cpu_count=2, load_avg_1m=0.5, process_cpu_s=1.0),
    }
    values.update(overrides)
    return CompileRecord(**values)
