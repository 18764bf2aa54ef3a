"""JUnit XML: a measured row, and its verdict, as test properties (``<property>`` elements).

The plugin appends a row's figures to the test's ``user_properties`` as soon as the row
exists, so a test that fails later keeps them, and pytest-xdist workers carry them to the
controller. Its verdict (`verdict_properties`, from the gate's view of the row) is added to
the test's teardown report, judged in the process that ran the test (not while pinning).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from pytest_jaxcompile.gate.view import RowView
from pytest_jaxcompile.records import VERSION_FIELDS, CompileRecord, transform_label

JUNIT_PROPERTY_PREFIX = "jaxcompile"


def junit_properties(record: CompileRecord) -> list[tuple[str, str]]:
    """A measured row as test properties (JUnit XML ``<property>`` elements).

    Names are ``jaxcompile.<transform>.<field>``; seconds are written in full precision.
    """
    prefix = f"{JUNIT_PROPERTY_PREFIX}.{transform_label(record.transform, record.variant)}"
    values: list[tuple[str, object]] = [
        ("compile_s", record.compile_s),
        ("trace_s", record.trace_s),
        ("lower_s", record.lower_s),
        ("cache_state", record.cache_state),
        ("hardware", record.hardware),
        *([] if record.framework == "jax" else [("framework", record.framework)]),
        (VERSION_FIELDS[record.framework], record.framework_version),
        ("mixed_precision", "true" if record.mixed_precision else "false"),
        ("compiled_temp_bytes", record.compiled_temp_bytes),
        ("flops", record.flops),
        ("compile_rss_peak_mib", record.compile_rss_peak_mib),
        ("compile_rss_growth_mib", record.compile_rss_growth_mib),
    ]
    return [(f"{prefix}.{name}", str(value)) for name, value in values if value is not None]


def verdict_properties(row: RowView) -> list[tuple[str, str]]:
    """``jaxcompile.<transform>.status`` and ``.fails``, with the figures the verdict
    compared (``.metric``, ``.measured``, ``.pinned``, ``.ratio``): the view's row."""
    prefix = f"{JUNIT_PROPERTY_PREFIX}.{transform_label(row.transform, row.variant)}"
    figures = row.figures
    values: list[tuple[str, object]] = [
        ("status", row.status.value),
        ("fails", "true" if row.fails else "false"),
        ("metric", figures.metric.name),
        ("measured", None if figures.measured is None else figures.value(figures.measured)),
        ("pinned", None if figures.pinned is None else figures.value(figures.pinned)),
        ("ratio", figures.ratio),
    ]
    return [(f"{prefix}.{name}", str(value)) for name, value in values if value is not None]
