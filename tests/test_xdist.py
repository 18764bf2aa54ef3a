"""pytest-xdist for real: the same verdicts, summary, report and pins as a serial session."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import (
    EXPECTED,
    JaxProject,
    compile_summary,
    make_pinned_suite,
    mask_figures,
    report_shape,
)

from pytest_jaxcompile.gate.pins import PinStore
from pytest_jaxcompile.records import CompileRecord


def test_xdist_gives_the_verdicts_summary_and_report_of_a_serial_session(
    project: JaxProject,
) -> None:
    make_pinned_suite(project)
    outputs = {}
    for workers in ("0", "2"):
        result = project.run("-n", workers, "-v", "--compile-floor", "0")
        result.assert_outcomes(passed=6)
        assert result.ret == pytest.ExitCode.TESTS_FAILED  # the DRIFT row
        assert project.verdicts() == EXPECTED
        outputs[workers] = (mask_figures(compile_summary(result)), report_shape(project.report()))
        spend = compile_summary(result)[0]
        if workers == "2":  # worker seconds add up past the wall: never a share of it
            assert re.match(
                r"compile time: \S+ s summed over 2 workers, session \S+ s wall, ", spend
            ), spend
            assert project.report()["workers"] == 2
        else:
            assert re.match(r"compile time: \S+ s of the session's \S+ s \(\d+%\), ", spend)
    serial, parallel = outputs["0"], outputs["2"]
    assert parallel[0] == serial[0]
    assert parallel[1] == serial[1]
    assert [s["transform"] for s in serial[1]["stale"]] == ["gone"]  # type: ignore[index]
    summary = "\n".join(serial[0])
    for fragment in (
        "DRIFT      test_models.py::test_drift [jit]",
        "stale pins: 1 ",
        "compile rows: 1 DRIFT, 1 improved, 1 unpinned, 1 not judged, 4 ok",
    ):
        assert fragment in summary


SPY_CONFTEST = """
    import json, os
    from pytest_jaxcompile.gate import pins

    _update = pins.PinStore.repin

    def _spy(self, records, *args, **kwargs):
        records = list(records)
        with open({log!r}, "a") as log:
            log.write(json.dumps({{"worker": os.environ.get("PYTEST_XDIST_WORKER"),
                                  "rows": len(records)}}) + "\\n")
        return _update(self, records, *args, **kwargs)

    pins.PinStore.repin = _spy
"""

HEADER = """
    import jax
    from jaxmodels import mlp_example_args, mlp_loss
"""
MANY_TESTS = "".join(
    f"""
    def test_{index}(jax_compile):
        args = mlp_example_args()
        jax_compile(jax.jit(mlp_loss), *args, transform="jit")
        jax_compile(jax.value_and_grad(mlp_loss), *args, transform="vag")
"""
    for index in range(8)
)


def _masked_pin_files(directory: Path) -> dict[str, list[str]]:
    measured = (
        "compile_s = ",
        "compile_cpu_s = ",
        "pinned_at = ",
        "load_avg_1m = ",
        "trace_s = ",
        "lower_s = ",
        "compile_rss_growth_mib = ",
    )
    # Dropped, not masked: whether a measured field is one line under [common] or a line per
    # pin depends on the values measured (pins of one second share their `pinned_at`).
    return {
        path.name: [line for line in path.read_text().splitlines() if not line.startswith(measured)]
        for path in sorted(directory.glob("*.toml"))
    }


def test_pin_update_under_four_workers_writes_every_pin_once_as_a_serial_update(
    project: JaxProject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    log = project.path / "updates.jsonl"
    project.pytester.makeconftest(SPY_CONFTEST.format(log=str(log)))
    project.tests(HEADER + MANY_TESTS)
    runs = {}
    for workers in ("0", "4"):
        log.unlink(missing_ok=True)
        pins = project.path / f"pins-{workers}"
        result = project.run(
            "-n", workers, "--compile-pin-update", "-o", f"compile_pins_dir={pins}"
        )
        result.assert_outcomes(passed=8)
        # One update, by the process that judges (never a worker), with every row.
        calls = [json.loads(line) for line in log.read_text().splitlines()]
        assert calls == [{"worker": None, "rows": 16}]
        runs[workers] = (pins, project.report())

    serial_dir, serial_report = runs["0"]
    xdist_dir, xdist_report = runs["4"]
    # The same files, the same pins, in the same order: only measured figures differ.
    assert _masked_pin_files(xdist_dir) == _masked_pin_files(serial_dir)
    (group,) = PinStore.load(xdist_dir).groups()
    measured = {(r["cell"], r["transform"]) for r in xdist_report["records"]}
    assert set(group.pins) == measured and len(measured) == 16
    assert {(r["cell"], r["transform"]) for r in serial_report["records"]} == measured
    # Byte for byte what a serial update of the same records writes.
    replay = tmp_path_factory.mktemp("replay")
    records = [CompileRecord.from_dict(data) for data in xdist_report["records"]]
    PinStore.load(replay).update(records)
    assert {p.name: p.read_bytes() for p in replay.glob("*.toml")} == {
        p.name: p.read_bytes() for p in xdist_dir.glob("*.toml")
    }
    assert xdist_report["records"] == sorted(
        xdist_report["records"], key=lambda r: (r["cell"], r["transform"])
    )


NO_XDIST_SUITE = """
    import os, sys
    import jax
    from jaxmodels import mlp_example_args, mlp_loss

    def test_mlp(jax_compile, request):
        jax_compile(jax.jit(mlp_loss), *mlp_example_args(), transform="jit")
        assert not request.config.pluginmanager.hasplugin("xdist")
        if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD") == "1":
            assert "xdist" not in sys.modules
"""


def test_runs_with_xdist_disabled_and_without_xdist_loaded(
    project: JaxProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.conftest(cache=False)
    project.tests(NO_XDIST_SUITE)
    result = project.run("-p", "no:xdist")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*jax compile times*", "*unpinned   1 row(s) (-v lists them): test_models.py 1*"]
    )
    assert project.verdicts() == {("test_mlp", "jit"): "unpinned"}

    # As if pytest-xdist were not installed: no plugin autoload, only this plugin.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = project.run("-p", "pytest_jaxcompile.plugin")
    result.assert_outcomes(passed=1)
    assert project.verdicts() == {("test_mlp", "jit"): "unpinned"}


@pytest.mark.integration
def test_plugin_module_does_not_import_xdist() -> None:
    code = "import sys, pytest_jaxcompile.plugin; print('xdist' in sys.modules)"
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert output.strip() == "False"


def test_a_crashed_worker_is_named_and_its_rows_are_not_silently_dropped(
    project: JaxProject,
) -> None:
    project.conftest(cache=False)
    project.tests(
        """
        import os
        import jax
        from jaxmodels import mlp_example_args, mlp_loss

        def test_measures(jax_compile):
            jax_compile(jax.jit(mlp_loss), *mlp_example_args(), transform="jit")

        def test_crashes(jax_compile):
            jax_compile(jax.jit(mlp_loss), *mlp_example_args(), transform="jit")
            os._exit(3)
        """
    )
    result = project.run("-n", "2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["*compile rows missing: pytest-xdist worker gw* went down (*) before it sent its*"]
    )
    report = project.report()
    assert len(report["lost"]) == 1
    assert set(project.verdicts()) == {("test_measures", "jit")}


CONCURRENT_CONFTEST = """
    import pytest
    from rendezvous import meet

    @pytest.hookimpl(tryfirst=True)  # before the plugin writes its pins
    def pytest_sessionfinish(session):
        meet({barrier!r}, "session", parties=2)
"""


def test_two_sessions_repinning_one_pins_dir_at_once_lose_nothing(
    project: JaxProject,
) -> None:
    project.rendezvous()
    project.pytester.makeconftest(CONCURRENT_CONFTEST.format(barrier=str(project.path / "barrier")))
    for name in ("a", "b"):
        project.tests(
            HEADER
            + "".join(
                f"""
    def test_{name}{index}(jax_compile):
        jax_compile(jax.jit(mlp_loss), *mlp_example_args(), transform="jit")
"""
                for index in range(3)
            ),
            name=f"test_{name}",
        )
    sessions = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                "-q",
                "--compile-pin-update",
                f"test_{name}.py",
            ],
            cwd=project.path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONPATH": str(project.path)},
        )
        for name in ("a", "b")
    ]
    outputs = [session.communicate(timeout=300)[0] for session in sessions]
    assert [session.returncode for session in sessions] == [0, 0], outputs
    assert len(list((project.path / "barrier").iterdir())) == 2  # they met: writes overlapped
    (group,) = PinStore.load(project.pins_dir).groups()
    assert sorted(cell for cell, _ in group.pins) == [
        f"test_{name}.py::test_{name}{index}" for name in ("a", "b") for index in range(3)
    ]


def test_a_worker_reported_down_twice_is_merged_once(pytestconfig: pytest.Config) -> None:
    # xdist reports a worker stopped by Ctrl-C twice: finished (with its output), then down.
    from records_factory import make_record

    from pytest_jaxcompile.resolved import Settings
    from pytest_jaxcompile.session import WORKER_OUTPUT_KEY, SessionCollector

    plugin = SessionCollector(pytestconfig, Settings.from_config(pytestconfig))
    output = {
        WORKER_OUTPUT_KEY: {
            "records": [make_record().to_dict()],
            "ran_cells": ["tests/test_models.py::test_mlp"],
            "identities": [["cpu:cpu @ Test CPU x2", "0.10.2"]],
        }
    }
    plugin.merge_worker_output("gw0", output)
    plugin.merge_worker_output("gw0", output)
    plugin.worker_lost("gw0", "keyboard-interrupt")
    assert len(plugin.rows.records) == 1
    assert plugin.workers.lost == []
    assert plugin.workers.identities == {("cpu:cpu @ Test CPU x2", "0.10.2")}
    plugin.worker_lost("gw1", "Not properly terminated")
    assert len(plugin.workers.lost) == 1 and "gw1" in plugin.workers.lost[0]
