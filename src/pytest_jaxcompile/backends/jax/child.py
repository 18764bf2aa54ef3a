"""The plugin's child processes (the instruction-counting child, the pairing and profiling
child): how one is staged, started, bounded in time and read back, and what each does first
inside (`warm_up`).

A child gets a stage directory holding ``manifest.json`` and the files it names, writes one
JSON line per entry to ``results.jsonl`` there, and prints only to its log. A child that
fails or runs out of time loses only the entries it had not finished: each result line is
written as soon as its entry is done.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_jaxcompile.backends.jax.reproduce import warm_up

__all__ = ["warm_up"]

MANIFEST = "manifest.json"
RESULTS = "results.jsonl"
LOG = "child.log"
POLL_S = 1.0  # how often a running child's results are read for `on_result`


def write_manifest(stage: Path, manifest: dict[str, Any]) -> None:
    (stage / MANIFEST).write_text(json.dumps(manifest))


def run(
    command: list[str],
    stage: Path,
    environment: dict[str, str],
    timeout_s: float,
    what: str,
    timeout_option: str,
    on_result: Callable[[int, dict[str, Any]], None] | None = None,
) -> dict[int, dict[str, Any]]:
    """Run one child to its end or `timeout_s`; its results by entry id, and under -1 why
    it stopped early (`what` names the child in that message: "the counting child").

    `on_result` is called with each entry's result as the child writes it (read every
    POLL_S while it runs, and once more at its end), in the order written."""
    log = stage / LOG
    failure: str | None = None
    seen: set[int] = set()

    def report() -> None:
        if on_result is None:
            return
        for index, result in read_results(stage).items():
            if index not in seen:
                seen.add(index)
                on_result(index, result)

    with log.open("wb") as stream:
        child = subprocess.Popen(
            command,
            stdout=stream,
            stderr=subprocess.STDOUT,
            env=environment,
            start_new_session=True,  # its own process group: a timeout kills all of it
        )
        deadline = time.monotonic() + timeout_s
        code: int | None = None
        while code is None:
            left = deadline - time.monotonic()
            try:
                code = child.wait(timeout=max(0.0, min(POLL_S, left)))
            except subprocess.TimeoutExpired:
                report()
                if left <= POLL_S:
                    os.killpg(child.pid, signal.SIGKILL)
                    child.wait()
                    failure = f"{what} ran past {timeout_option} ({timeout_s:g} s)"
                    break
        if code is not None and code != 0:
            failure = f"{what} exited with status {code}: {log_tail(log)}"
    report()
    results = read_results(stage)
    if failure is not None:
        results[-1] = {"error": failure}
    return results


def read_results(stage: Path) -> dict[int, dict[str, Any]]:
    """The child's result lines by entry id (a torn last line is left out)."""
    results: dict[int, dict[str, Any]] = {}
    results_file = stage / RESULTS
    if results_file.exists():
        for line in results_file.read_text().splitlines():
            with contextlib.suppress(ValueError, KeyError, TypeError):
                result = json.loads(line)
                results[int(result["id"])] = result
    return results


def append_result(stage: Path, result: dict[str, Any]) -> None:
    """In the child: one entry's result, written at once (a later failure keeps it)."""
    with (stage / RESULTS).open("a") as stream:
        stream.write(json.dumps(result) + "\n")


def log_tail(log: Path) -> str:
    """The last lines a child printed (valgrind's own ``==`` lines left out)."""
    lines = [
        line
        for line in log.read_text(errors="replace").splitlines()
        if line.strip() and not line.startswith("==")
    ]
    return " / ".join(lines[-3:]) or "no output"
