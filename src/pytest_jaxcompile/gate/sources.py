"""Where in the user's code a module grew: its operations by source location, against its
pin's (docs/reproducer.md#where-it-grew).

A row read after the tests (a pin update's, a failing one) holds ``source_ops``, its
StableHLO operations by the innermost frame of the user's code (``model.py:41 (loss)``,
backends/jax/locations.py); a pin keeps them as ``sources``. `source_growth` compares them
by function and file first: a function whose operations did not grow in all did not grow,
wherever its lines moved (a refactor that only moves code names nothing), and a function
that grew is named at its line that grew most.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pytest_jaxcompile.gate.pins import Pin
from pytest_jaxcompile.records import CompileRecord

TOP_SOURCES = 3  # locations a note names: the functions that grew most
_LOCATION = re.compile(r"^(?P<file>.*):(?P<line>\d+) \((?P<function>.*)\)$")

Function = tuple[str, str]  # (file, function)


def _by_function(histogram: Mapping[str, int]) -> dict[Function, dict[str, int]]:
    grouped: dict[Function, dict[str, int]] = {}
    for location, count in histogram.items():
        match = _LOCATION.match(location)
        function = (match.group("file"), match.group("function")) if match else (location, "")
        grouped.setdefault(function, {})[location] = count
    return grouped


def source_growth(record: CompileRecord, pin: Pin) -> list[tuple[str, int]]:
    """(location, ops it grew by) of each function that grew, most first: the function's
    growth named at its line that grew most (else its largest). Nothing where the row or
    its pin has no source histogram."""
    if not record.source_ops or not pin.sources:
        return []
    new, old = _by_function(record.source_ops), _by_function(pin.sources)
    grown = []
    for function, lines in new.items():
        before = old.get(function, {})
        growth = sum(lines.values()) - sum(before.values())
        if growth <= 0:
            continue
        line = max(lines, key=lambda name: (lines[name] - before.get(name, 0), lines[name]))
        grown.append((line, growth))
    return sorted(grown, key=lambda item: (-item[1], item[0]))


def sources_text(growth: list[tuple[str, int]]) -> str | None:
    """``+27,300 ops at profiles/basis.py:88 (gaussians), +180 at model.py:41 (loss)``."""
    if not growth:
        return None
    named = [
        f"+{count:,}{' ops' if index == 0 else ''} at {location}"
        for index, (location, count) in enumerate(growth[:TOP_SOURCES])
    ]
    return ", ".join(named)
