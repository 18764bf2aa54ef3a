"""The one grouping of verdicts every output uses: by comparability key, each group
most severe first.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Iterable

from pytest_jaxcompile.gate.status import Verdict
from pytest_jaxcompile.records import ComparabilityKey


def by_key(verdicts: Iterable[Verdict]) -> list[tuple[ComparabilityKey, list[Verdict]]]:
    """Verdicts grouped by comparability key (keys sorted), each group most severe first.

    The one grouping every output uses: rows are never ranked across keys.
    """
    groups: dict[ComparabilityKey, list[Verdict]] = {}
    for verdict in verdicts:
        groups.setdefault(verdict.record.key, []).append(verdict)
    return [(key, sorted(groups[key], key=severity_order)) for key in sorted(groups)]


def severity_order(verdict: Verdict) -> tuple[int, str, str, str]:
    return (verdict.status.severity, *verdict.record.row_id)
