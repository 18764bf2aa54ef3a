"""Generated records corpora and the CLI run in-process, for the corpus tests."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from records_factory import make_record


def row(day: int, hour: int = 10, **overrides: Any) -> dict[str, Any]:
    """A compile record as the plugin writes it, measured on 2026-11-<day> at <hour>:00."""
    overrides.setdefault("timestamp", f"2026-11-{day:02d}T{hour:02d}:00:00+00:00")
    return make_record(**overrides).to_dict()


def write_lines(path: Path, values: Iterable[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(value) + "\n" for value in values))
    return path


def write_list(path: Path, values: Iterable[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(list(values), indent=2) + "\n")
    return path


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``pytest-jaxcompile ARGS`` in `cwd`, in this process (``main``), output captured."""
    from pytest_jaxcompile.cli import main

    out, err = io.StringIO(), io.StringIO()
    previous = Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(list(args))
            except SystemExit as exit_:  # argparse's usage errors
                status = exit_.code if isinstance(exit_.code, int) else 2
    finally:
        os.chdir(previous)
    return subprocess.CompletedProcess(
        ["pytest-jaxcompile", *args], status, out.getvalue(), err.getvalue()
    )


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file below `directory`, by relative path."""
    return {
        str(path.relative_to(directory)): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


# The trend corpus: ten daily sessions, one test creeping, one wandering.
CREEP, FLAT = "tests/test_m.py::test_creep", "tests/test_m.py::test_flat"
# Wanders +-15 % around 1 s, session to session, with no direction.
WANDER = [1.00, 1.12, 0.90, 1.15, 0.86, 1.05, 0.95, 1.13, 0.88, 1.08]


def trend_commit(day: int) -> dict[str, Any]:
    return {
        "sha": f"{day:02d}" * 20,
        "ref": "refs/heads/main",
        "head_ref": None,
        "base_ref": None,
        "dirty": False,
    }


def trend_session(root: Path, day: int) -> Path:
    """Day `day` of the trend corpus (test_trend.py, docs/corpus.md): one session file
    holding both series' rows, CREEP 10 % slower each day, FLAT wandering."""
    return write_lines(
        root / "records" / f"202611{day:02d}T100000Z-1-abcdef.jsonl",
        [
            row(day, cell=CREEP, compile_s=1.0 * 1.1 ** (day - 1), commit=trend_commit(day)),
            row(day, cell=FLAT, compile_s=WANDER[day - 1], commit=trend_commit(day)),
        ],
    )


def old_record(tag: str | None, **fields: Any) -> dict[str, Any]:
    """A compile record written before cache_state existed (and before record_kind)."""
    record: dict[str, Any] = {
        "cell": "census::" + (tag or "untagged"),
        "transform": "vag",
        "hardware": "gpu:A100",
        "jax_version": "0.4.30",
        "compile_s": 12.5,
        "cache_dir": "/scratch/jax_cache",
    }
    if tag is not None:
        record["tag"] = tag
    record.update(fields)
    return record
