"""What a pin update would drop: a kind of figure the pins had that the new pins would not.

A pin with an instruction count, re-pinned by a session that did not count, would lose its
count (a changed module cannot carry the old one); a row paired against a pin whose module
is stored, re-pinned by a session that stores no modules, would leave a pin that the next
``--compile-paired`` session cannot pair with. The pin update refuses both, and names the
option that would keep the figure.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pytest_jaxcompile.gate.modules import ModuleStore
from pytest_jaxcompile.gate.paired import PairingTarget, pairing_target
from pytest_jaxcompile.gate.pins import PinStore
from pytest_jaxcompile.records import CompileRecord

COUNT_OPTION = "--compile-instructions"
STORE_OPTION = "--compile-paired"
NAMED_ROWS = 3  # rows a refusal names; the rest are counted


@dataclass(frozen=True)
class Dropped:
    """Rows whose new pins would lack a kind of figure their pins had."""

    figure: str  # "instruction count", "stored module"
    option: str  # the option under which the update keeps it
    names: tuple[str, ...]  # the rows, ``cell [transform]``
    cells: tuple[str, ...]

    def text(self) -> str:
        """``2 row(s) would lose their pin's instruction count (a [jit], b [jit]); re-pin
        with --compile-instructions``."""
        named = ", ".join(self.names[:NAMED_ROWS])
        if len(self.names) > NAMED_ROWS:
            named += f" and {len(self.names) - NAMED_ROWS} more"
        return (
            f"{len(self.names)} row(s) would lose their pin's {self.figure} ({named}); "
            f"re-pin with {self.option}"
        )


def dropped_figures(
    rows: Iterable[CompileRecord],
    store: PinStore,
    *,
    modules: ModuleStore | None,
) -> list[Dropped]:
    """The kinds of figure re-pinning `rows` would drop. `modules`: the store of pinned
    modules when the update stores none (None: it stores them, or none are kept)."""
    uncounted: list[CompileRecord] = []
    unstored: list[CompileRecord] = []
    stored = modules.stored() if modules is not None else {}
    for record in rows:
        pin = store.get(record.key, record.cell, record.transform, record.variant)
        if (
            pin is not None
            and pin.compile_instructions is not None
            and record.compile_instructions is None
            and (record.fingerprint is None or record.fingerprint != pin.fingerprint)
        ):
            uncounted.append(record)
        if stored and record.fingerprint not in stored:  # a stored module drops nothing
            target = pairing_target(record, store)
            if isinstance(target, PairingTarget) and target.pin.fingerprint in stored:
                unstored.append(record)
    return [
        Dropped(
            figure,
            option,
            # a row and its twin (pinned in another cache state) are one row
            tuple(dict.fromkeys(record.name for record in records)),
            tuple(dict.fromkeys(record.cell for record in records)),
        )
        for figure, option, records in (
            ("instruction count", COUNT_OPTION, uncounted),
            ("stored module", STORE_OPTION, unstored),
        )
        if records
    ]


def kept_options(dropped: Iterable[Dropped]) -> dict[str, tuple[str, ...]]:
    """Per test: the options a re-pin of it must be given so that it drops nothing (each
    `Dropped`'s option, for its tests). `conclude` gives them to every printed re-pin, so
    that the command, run as printed, is never the refused update."""
    keeps: dict[str, dict[str, None]] = {}
    for each in dropped:
        for cell in each.cells:
            keeps.setdefault(cell, {})[each.option] = None
    return {cell: tuple(options) for cell, options in sorted(keeps.items())}
