"""The one grouping of verdicts every output uses: by the comparability key of what each
verdict judged (`shown_key`), each group most severe first.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Iterable

from pytest_jaxcompile.gate.status import Verdict
from pytest_jaxcompile.records import ComparabilityKey


def shown_key(verdict: Verdict) -> ComparabilityKey:
    """The key a row is shown under: that of the compile its verdict judged, whose cache
    state its pin has. A cache hit judged on its twin (gate/twins.py: its module compiled
    afresh, the cache bypassed) is shown under the twin's cold key, beside the cold pin's
    figure it was compared with, never under the warm key of its hit."""
    return verdict.judged.key


def by_key(verdicts: Iterable[Verdict]) -> list[tuple[ComparabilityKey, list[Verdict]]]:
    """Verdicts grouped by the key they are shown under (`shown_key`; keys sorted), each
    group most severe first.

    The one grouping every output uses: rows are never ranked across keys.
    """
    groups: dict[ComparabilityKey, list[Verdict]] = {}
    for verdict in verdicts:
        groups.setdefault(shown_key(verdict), []).append(verdict)
    return [(key, sorted(groups[key], key=severity_order)) for key in sorted(groups)]


def severity_order(verdict: Verdict) -> tuple[int, str, str, str]:
    return (verdict.status.severity, *verdict.record.row_id)
