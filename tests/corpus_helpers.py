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
