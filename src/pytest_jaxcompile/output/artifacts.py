"""``compile_artifacts_dir``: the lowered module text of every failing row, for diffing.

Each process stages the text of every module the ``jax_compile`` fixture measures in
``DIR/.staged/`` as it measures it (`backends.stage_module`; pytest-xdist workers too: nothing
large travels to the controller); at the end of the session the controller keeps the modules
of the failing rows, named by cell and transform, and removes the rest.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pytest_jaxcompile._io import relative
from pytest_jaxcompile.backends import STAGING, artifact_name
from pytest_jaxcompile.output import outcome_of, summary_section


class ArtifactWriter:
    """Registered only when ``compile_artifacts_dir`` is set, on the controller."""

    def __init__(self, config: pytest.Config, directory: Path) -> None:
        self.config = config
        self.directory = directory
        self.saved: list[Path] = []

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        outcome = outcome_of(self.config)
        staging = self.directory / STAGING
        if outcome is not None and not outcome.pin_update:
            for verdict in outcome.failing():
                record = verdict.record
                staged = staging / artifact_name(record.cell, record.transform)
                if staged.exists():
                    target = self.directory / staged.name
                    staged.replace(target)
                    self.saved.append(target)
        shutil.rmtree(staging, ignore_errors=True)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.saved:
            summary_section(terminalreporter)
            where = relative(self.directory, self.config.rootpath)
            terminalreporter.write_line(
                f"module text of {len(self.saved)} failing row(s) saved in {where}"
            )
