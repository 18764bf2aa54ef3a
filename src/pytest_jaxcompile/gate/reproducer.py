"""Reproducer bundles: which rows get one, and the texts each holds (docs/reproducer.md).

A bundle is a folder per row, under ``compile_reproducer_dir``, that an XLA engineer can
run with jax alone::

    test_models.py_test_model--grad/
        README.md          what it is, how to run it, what to attach upstream
        verdict.txt        the verdict and its figures: pairs and interval where paired
        environment.txt    jax.print_environment_info(), XLA_FLAGS, the CPU
        bundle.json        each module's devices, the platform, the comparability key
        row.mlir           the module the row compiled, and its compile options
        row.options.pb
        pinned.mlir        its pin's module, where the module store holds it
        pinned.options.pb
        reproduce.py       compiles both alternately: each median, the ratio; --dump DIR

`bundle_rows` says which rows (``compile_reproducer``: the failing rows and the slowest rows
of a failing upgrade block, or every row); the texts here are pure; the session writes
them (session/reproducer.py) with the framework's script and environment
(`BackendSession.reproducer_files`) and the modules.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from pytest_jaxcompile._constants import REPRODUCER_ALWAYS, REPRODUCER_NEVER
from pytest_jaxcompile._io import relative
from pytest_jaxcompile.backends import StagedModule, fingerprint_of
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.outcome import Outcome
from pytest_jaxcompile.gate.paired import SEQUENTIAL_CONFIDENCE, PairedComparison
from pytest_jaxcompile.gate.pins import Pin
from pytest_jaxcompile.gate.status import Verdict
from pytest_jaxcompile.gate.upgrades import UpgradeReport
from pytest_jaxcompile.gate.view.figures import figures
from pytest_jaxcompile.gate.view.meaning import meaning
from pytest_jaxcompile.records import CompileRecord

FORMAT = 1
ROW, PINNED = "row", "pinned"  # the two modules' file stems, as reproduce.py reads them
README, VERDICT, MANIFEST = "README.md", "verdict.txt", "bundle.json"
SCRIPT = "reproduce.py"
DEFAULT_PAIRS = 10  # reproduce.py's default; the README's command says it


@dataclass(frozen=True)
class BundleRow:
    """A row to bundle, and the upgrade block it is one of the slowest rows of."""

    verdict: Verdict
    upgrade: UpgradeReport | None = None

    @property
    def record(self) -> CompileRecord:
        return self.verdict.record

    def pins(self) -> list[Pin]:
        """The pins whose module the bundle may hold, nearest first: the verdict's, else
        (an unpinned row, an upgrade) its nearest pin under another key."""
        found = [self.verdict.pin] if self.verdict.pin is not None else []
        nearest = self.verdict.nearest
        if nearest is not None:
            found.append(nearest.pin)
        return [pin for pin in found if pin.fingerprint is not None]


def bundle_rows(outcome: Outcome, mode: str) -> list[BundleRow]:
    """The rows a session bundles: none in a pin update or under ``never``; each failing
    row and the slowest rows of each failing upgrade block (``failing``); every row
    (``always``), each once."""
    if mode == REPRODUCER_NEVER or outcome.pin_update:
        return []
    thresholds = outcome.thresholds
    upgrades = {
        id(verdict): upgrade
        for upgrade in outcome.upgrades
        for verdict in (
            upgrade.verdicts
            if mode == REPRODUCER_ALWAYS
            else upgrade.worst()
            if upgrade.fails(thresholds)
            else ()
        )
    }
    return [
        BundleRow(verdict, upgrades.get(id(verdict)))
        for verdict in outcome.verdicts
        if mode == REPRODUCER_ALWAYS or verdict.fails(thresholds) or id(verdict) in upgrades
    ]


def folder_name(record: CompileRecord) -> str:
    """A row's bundle folder: its cell, transform and settings variant, readable and safe
    on every filesystem (``test_models.py_test_model--grad``)."""
    parts = [record.cell, record.transform] + ([record.variant] if record.variant else [])
    return re.sub(r"[^A-Za-z0-9._-]+", "_", "--".join(parts)).strip("_")[:200]


def manifest(row: BundleRow, module: StagedModule, pinned: StagedModule | None) -> str:
    """``bundle.json``: what reproduce.py reads (each module's devices, the platform) and
    what the row is (its key, fingerprints)."""
    devices = {ROW: module.devices} | ({PINNED: pinned.devices} if pinned is not None else {})
    data = {
        "format": FORMAT,
        "platform": module.platform,
        "devices": devices,
        "row": row.record.name,
        "status": row.verdict.status.value,
        "key": row.record.key.to_dict(),
        "fingerprint": row.record.fingerprint,
        "pinned_fingerprint": _pinned_fingerprint(row, pinned),
    }
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def _pinned_fingerprint(row: BundleRow, pinned: StagedModule | None) -> str | None:
    return None if pinned is None else fingerprint_of(pinned.text)


def verdict_text(row: BundleRow, thresholds: Thresholds, rootdir: Path) -> str:
    """``verdict.txt``: the verdict as the session judged it, with its figures."""
    verdict, record = row.verdict, row.record
    compared = figures(verdict, thresholds)
    lines = [
        f"{record.name}: {verdict.status.value}",
        meaning(verdict.status, [verdict], thresholds, plural=False),
        f"key: {record.key.describe()}",
        f"figures: {compared.text()}",
    ]
    comparison = PairedComparison.of(verdict.judged, thresholds)
    if comparison is not None:
        lines.append(
            f"pairs: {comparison.pairs} ({comparison.made} made), {comparison.metric} seconds "
            f"{comparison.base_s:.3f} s -> {comparison.new_s:.3f} s (medians); pairs' ratio "
            f"{comparison.ratio:.2f}x, {SEQUENTIAL_CONFIDENCE:.0%} sequential interval "
            f"{comparison.low:.2f}x-{comparison.high:.2f}x; paired with {comparison.against}"
        )
    if verdict.pin_file is not None and verdict.pin_file.exists():  # not a key's file to be
        lines.append(f"pin file: {relative(verdict.pin_file, rootdir)}")
    if record.fingerprint is not None:
        lines.append(f"row's module: {record.fingerprint}")
    if verdict.note:
        lines += ["", "note:", verdict.note]
    if row.upgrade is not None:
        lines += ["", *upgrade_lines(row)]
    return "\n".join(lines) + "\n"


def upgrade_lines(row: BundleRow) -> list[str]:
    """The old version's pinned figures beside the row's, for an upgrade's row."""
    upgrade, nearest = row.upgrade, row.verdict.nearest
    assert upgrade is not None
    lines = [
        f"{upgrade.framework} upgrade {upgrade.old} -> {upgrade.new} on {upgrade.hardware}: "
        f"median {_ratio(upgrade.median_ratio)} over {len(upgrade.verdicts)} row(s)"
    ]
    if nearest is not None:
        pin = nearest.pin
        lines.append(
            f"pinned under {upgrade.framework} {upgrade.old}: compile {pin.compile_s:.3f} s"
            + (f", {pin.op_count} ops" if pin.op_count is not None else "")
            + (f", module {pin.fingerprint}" if pin.fingerprint else "")
        )
    record = row.record
    lines.append(
        f"this row under {upgrade.framework} {upgrade.new}: compile {record.compile_s:.3f} s"
        + (f", {record.op_count} ops" if record.op_count is not None else "")
        + (f" ({_ratio(nearest.ratio)})" if nearest is not None else "")
    )
    return lines


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def readme_text(row: BundleRow, pinned: bool, pinned_missing: str | None) -> str:
    """``README.md``: what the bundle is, how to run it, what to attach upstream."""
    record, verdict = row.record, row.verdict
    framework = record.key.framework
    lines = [
        f"# Compile-time reproducer: {record.name}",
        "",
        f"pytest-jaxcompile judged this row {verdict.status.value} "
        f"({record.key.describe()}); `verdict.txt` has the figures.",
        "",
        f"`{SCRIPT}` needs only {framework} and {framework}lib (no pytest, no plugin, no "
        "project code). It compiles "
        + (
            f"`{ROW}.mlir` (this run's module) and `{PINNED}.mlir` (the pinned one) "
            "alternately, with the persistent cache off, and prints each median and their "
            "ratio:"
            if pinned
            else f"`{ROW}.mlir` (this run's module) again and prints its median:"
        ),
        "",
        "```",
        f"python {SCRIPT}                # {DEFAULT_PAIRS} compiles of each",
        f"python {SCRIPT} --dump dumps   # and XLA's dumps (--xla_dump_to) of each module",
        "```",
        "",
    ]
    if not pinned:
        lines += [f"The pinned module is not in this bundle: {pinned_missing}.", ""]
    if row.upgrade is not None:
        upgrade = row.upgrade
        lines += [
            f"The cause is the {framework} upgrade {upgrade.old} -> {upgrade.new}: "
            "`verdict.txt` holds the old version's pinned figures. Run the same script "
            "under each version, in two fresh environments:",
            "",
            "```",
            f"pip install {framework}=={upgrade.old} {framework}lib=={upgrade.old} && "
            f"python {SCRIPT}",
            f"pip install {framework}=={upgrade.new} {framework}lib=={upgrade.new} && "
            f"python {SCRIPT}",
            "```",
            "",
        ]
    lines += [
        "To report it upstream, attach this folder (or: `environment.txt`, the script's "
        "output, both `.mlir` files with their `.options.pb`, and the `--dump` folder).",
        "",
    ]
    return "\n".join(lines)


def bundle_texts(
    row: BundleRow,
    module: StagedModule,
    pinned: StagedModule | None,
    pinned_missing: str | None,
    thresholds: Thresholds,
    rootdir: Path,
) -> dict[str, str]:
    """Every text file of a row's bundle but the framework's (script, environment)."""
    return {
        README: readme_text(row, pinned is not None, pinned_missing),
        VERDICT: verdict_text(row, thresholds, rootdir),
        MANIFEST: manifest(row, module, pinned),
    }


def module_files(module: StagedModule, pinned: StagedModule | None) -> dict[str, bytes]:
    """The modules' texts and options under the names reproduce.py reads."""
    files = {f"{ROW}.mlir": module.text.encode(), f"{ROW}.options.pb": module.options}
    if pinned is not None:
        files |= {f"{PINNED}.mlir": pinned.text.encode(), f"{PINNED}.options.pb": pinned.options}
    return files
