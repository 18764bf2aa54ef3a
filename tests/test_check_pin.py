"""`check` and `pin` on generated corpora: the plugin's rules, offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from corpus_helpers import cli, row, snapshot, write_lines, write_list
from records_factory import make_record

from pytest_jaxcompile.corpus.check import check_corpus
from pytest_jaxcompile.corpus.store import Corpus
from pytest_jaxcompile.gate.judging import judge_all
from pytest_jaxcompile.gate.limits import Thresholds
from pytest_jaxcompile.gate.pins import Pin, PinStore
from pytest_jaxcompile.gate.status import Status
from pytest_jaxcompile.records import HostState

THRESHOLDS = Thresholds()
A, B = "tests/test_m.py::test_a", "tests/test_m.py::test_b"


@pytest.fixture
def pinned(tmp_path: Path) -> Path:
    """Pins: A and B at 1.0 s cold, A at 0.1 s warm, all under jax 0.10.2, pinned before
    the rows the tests write (rows older than their pin are not judged)."""
    before = "2026-10-31T00:00:00+00:00"
    PinStore(tmp_path / "pins").update(
        [
            make_record(cell=A, compile_s=1.0, timestamp=before),
            make_record(cell=B, compile_s=1.0, timestamp=before),
            make_record(cell=A, compile_s=0.1, cache_state="warm", timestamp=before),
        ]
    )
    return tmp_path


def test_check_judges_the_latest_rows_exactly_as_judge_does(pinned: Path) -> None:
    rows = [
        row(1, cell=A, compile_s=9.0),  # DRIFT once, superseded by the next row
        row(2, cell=A, compile_s=1.2),
        row(2, cell=B, compile_s=3.0),
        row(2, cell=A, compile_s=0.1, cache_state="warm"),
        row(2, cell=A, compile_s=5.0, cache_state="unknown"),
        row(2, cell=B, compile_s=0.3, cache_state="warm"),  # pinned only cold
    ]
    write_lines(pinned / "records" / "a.jsonl", rows)
    store = PinStore.load(pinned / "pins")
    outcome = check_corpus(Corpus([pinned / "records"]), store, THRESHOLDS, False)
    got = {(v.record.cell, v.record.cache_state): v.status for v in outcome.verdicts}
    assert got == {
        (A, "cold"): Status.OK,
        (B, "cold"): Status.DRIFT,
        (A, "warm"): Status.OK,
        (A, "unknown"): Status.NOT_JUDGED,
        (B, "warm"): Status.UNPINNED,
    }
    latest = [
        make_record(
            **{k: v for k, v in r.items() if k in ("cell", "compile_s", "cache_state", "timestamp")}
        )
        for r in rows[1:]
    ]
    expected = judge_all(latest, store, THRESHOLDS)
    assert sorted((v.record.cell, v.record.cache_state, v.status, v.note) for v in expected) == (
        sorted((v.record.cell, v.record.cache_state, v.status, v.note) for v in outcome.verdicts)
    )
    assert outcome.failed


def test_check_cli_exits_1_on_drift_and_lists_it(pinned: Path) -> None:
    write_lines(
        pinned / "records" / "a.jsonl",
        [row(1, cell=A, compile_s=1.1), row(1, cell=B, compile_s=3.0)],
    )
    result = cli(pinned, "check", "records")
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert (
        "  DRIFT      tests/test_m.py::test_b [vag] 3.000 s, pin 1.000 s (3.00x, "
        "tolerance 75%)" in lines
    )
    assert "  ok         1 row(s) within tolerance (-v lists them)" in lines
    assert "compile rows: 1 DRIFT, 1 ok" in lines

    looser = cli(pinned, "check", "records", "--tolerance", "3")
    assert looser.returncode == 0, looser.stdout


@pytest.mark.parametrize("command", ["check", "report"])
def test_a_subcommand_warns_of_a_percentage_given_as_the_tolerance(
    pinned: Path, command: str
) -> None:
    """Accepted, as pytest accepts it, and said on stderr naming the subcommand's flag."""
    write_lines(pinned / "records" / "a.jsonl", [row(1, cell=A, compile_s=1.1)])
    result = cli(pinned, command, "records", "--tolerance", "50")
    assert result.returncode == 0, result.stderr
    assert (
        "pytest-jaxcompile: warning: --tolerance = 50 allows +5000% over the pin: a row is "
        "DRIFT only when 51x slower" in result.stderr
    )
    quiet = cli(pinned, command, "records", "--tolerance", "10")
    assert "warning" not in quiet.stderr


def test_check_cli_a_jax_bump_is_an_expected_recompile_not_drift(pinned: Path) -> None:
    write_lines(
        pinned / "records" / "a.jsonl",
        [
            row(1, cell=A, compile_s=1.0),
            row(5, cell=A, compile_s=30.0, jax_version="0.11.0"),  # 30x, under a new version
            row(5, cell=B, compile_s=30.0, jax_version="0.11.0"),
        ],
    )
    result = cli(pinned, "check", "records", "--json", "out.json")
    assert result.returncode == 0, result.stdout
    assert (
        "jax upgrade 0.10.2 -> 0.11.0 on cpu:cpu @ Test CPU x2: 2 row(s) compared with "
        "their 0.10.2 pins, median 30.00x" in result.stdout
    )
    verdicts = json.loads((pinned / "out.json").read_text())["verdicts"]
    assert sorted(
        (v["key"]["jax_version"], v["status"], (v["nearest"] or {}).get("relation") == "upgrade")
        for v in verdicts
    ) == [("0.10.2", "ok", False), ("0.11.0", "unpinned", True), ("0.11.0", "unpinned", True)]


def test_check_cli_since_judges_only_recent_rows(pinned: Path) -> None:
    write_lines(
        pinned / "records" / "a.jsonl",
        [
            row(1, cell=B, compile_s=9.0),  # the last row under 0.10.2 drifted
            row(5, cell=B, compile_s=9.0, jax_version="0.11.0"),
        ],
    )
    assert cli(pinned, "check", "records").returncode == 1
    recent = cli(pinned, "check", "records", "--since", "2026-11-02")
    assert recent.returncode == 0, recent.stdout
    assert "(1 measured before --since left out)" in recent.stdout
    bad = cli(pinned, "check", "records", "--since", "last week")
    assert bad.returncode == 2 and "--since: 'last week' is not an ISO 8601" in bad.stderr


def test_check_applies_the_plugins_other_verdict_settings(tmp_path: Path) -> None:
    before = "2026-10-31T00:00:00+00:00"  # pinned before the rows were measured
    PinStore(tmp_path / "pins").update(
        [
            make_record(cell=A, compile_s=1.0, compile_cpu_s=1.0, op_count=100, timestamp=before),
            make_record(
                cell=B,
                compile_s=0.1,
                cache_state="warm",
                fingerprint="sha256:same",
                timestamp=before,
            ),
        ]
    )
    write_lines(
        tmp_path / "r.jsonl",
        [
            row(
                1,
                cell=A,
                compile_s=1.0,
                compile_cpu_s=3.0,
                op_count=150,
                host_state=HostState(load_avg_1m=8.0, load_per_core=4.0),
            ),
            row(1, cell=B, compile_s=2.0, cache_state="cold", fingerprint="sha256:same"),
        ],
    )

    def statuses(*options: str) -> dict[str, str]:
        result = cli(tmp_path, "check", "r.jsonl", "--json", "v.json", *options)
        assert result.returncode in (0, 1), result.stderr
        verdicts = json.loads((tmp_path / "v.json").read_text())["verdicts"]
        return {v["cell"].rsplit("_", 1)[-1]: v["status"] for v in verdicts}

    # Load 4.0 per core > 1.0: judged on CPU seconds, which tripled.
    assert statuses() == {"a": "DRIFT", "b": "unpinned"}
    assert statuses("--strict") == {"a": "ok", "b": "unpinned"}
    assert statuses("--strict", "--metric", "cpu") == {"a": "DRIFT", "b": "unpinned"}
    assert statuses("--strict", "--max-ops-growth", "0.2") == {"a": "GREW", "b": "unpinned"}
    assert statuses("--expect-warm")["b"] == "MISS"  # cold, unchanged since its warm pin
    assert cli(tmp_path, "check", "r.jsonl", "--expect-warm").returncode == 1
    advisory = cli(tmp_path, "check", "r.jsonl", "--strict", "--metric", "cpu", "--time-advisory")
    assert advisory.returncode == 0
    assert "reported only (time advisory)" in advisory.stdout


def test_check_cli_improvement_fails_only_when_asked(pinned: Path) -> None:
    write_lines(pinned / "r.jsonl", [row(1, cell=A, compile_s=0.2)])
    assert cli(pinned, "check", "r.jsonl").returncode == 0
    assert cli(pinned, "check", "r.jsonl", "--fail-on-improvement").returncode == 1


def test_check_cli_bad_input_is_exit_2_naming_the_file_and_line(pinned: Path) -> None:
    (pinned / "bad.jsonl").write_text(json.dumps(row(1)) + "\n{not json\n")
    result = cli(pinned, "check", "bad.jsonl")
    assert result.returncode == 2
    assert "bad.jsonl:2: not valid JSON" in result.stderr

    write_lines(pinned / "r.jsonl", [row(1)])
    no_pins = cli(pinned, "check", "r.jsonl", "--pins-dir", "pinz")
    assert no_pins.returncode == 2
    assert "no pin files in pinz" in no_pins.stderr

    write_lines(pinned / "others.jsonl", [{"record_kind": "other", "compile_s": 1.0}])
    empty = cli(pinned, "check", "others.jsonl")
    assert empty.returncode == 2
    assert "no compile records to check" in empty.stderr
    assert "1 record(s) of other kinds passed over" in empty.stderr


def test_pin_derives_pins_from_the_latest_rows_and_never_from_unknown(tmp_path: Path) -> None:
    write_lines(
        tmp_path / "records" / "2.jsonl",
        [
            row(1, cell=A, compile_s=5.0),
            row(3, cell=A, compile_s=0.5, cache_state="unknown"),
            row(3, cell=A, compile_s=0.0, cache_state="memory"),
        ],
    )
    write_list(
        tmp_path / "records" / "1.json",
        [
            row(2, cell=A, compile_s=2.0, fingerprint="sha256:new"),  # newer, in an older file
            row(2, cell=B, compile_s=0.2, cache_state="warm"),
        ],
    )
    dry = cli(tmp_path, "pin", "records", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "2 row(s) to pin" in dry.stdout and "2 unknown/memory row(s) never pin" in dry.stdout
    assert not (tmp_path / "pins").exists()

    result = cli(tmp_path, "pin", "records")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(".toml") == 2
    store = PinStore.load(tmp_path / "pins")
    pins = {
        (group.key.cache_state, cell): pin
        for group in store.groups()
        for (cell, _), pin in group.pins.items()
    }
    assert set(pins) == {("cold", A), ("warm", B)}
    assert pins[("cold", A)].compile_s == 2.0
    assert pins[("cold", A)].fingerprint == "sha256:new"
    assert pins[("cold", A)].pinned_at == "2026-11-02T10:00:00+00:00"

    before = snapshot(tmp_path / "pins")
    again = cli(tmp_path, "pin", "records")
    assert "pins updated: nothing changed" in again.stdout
    assert snapshot(tmp_path / "pins") == before


def only_pin(directory: Path) -> Pin:
    (group,) = PinStore.load(directory / "pins").groups()
    (pin,) = group.pins.values()
    return pin


def test_pin_keeps_an_unchanged_modules_figures_within_a_third_of_their_tolerance(
    tmp_path: Path,
) -> None:
    """As a session's pin update does: re-pinning a corpus whose unchanged module moved by
    10 % (within a third of the 75 % tolerance) changes no file; 50 % moved is re-pinned;
    --exact rewrites every figure."""
    fingerprint = {"fingerprint": "sha256:same"}
    write_lines(tmp_path / "records" / "1.jsonl", [row(1, cell=A, compile_s=2.0, **fingerprint)])
    assert cli(tmp_path, "pin", "records").returncode == 0
    before = snapshot(tmp_path / "pins")
    write_lines(tmp_path / "records" / "2.jsonl", [row(2, cell=A, compile_s=2.2, **fingerprint)])
    kept = cli(tmp_path, "pin", "records")
    assert kept.returncode == 0, kept.stderr
    assert "pins updated: nothing changed (1 pin(s) kept as they were" in kept.stdout
    assert snapshot(tmp_path / "pins") == before
    tighter = cli(tmp_path, "pin", "records", "--tolerance", "0.1")  # a third of it: 3.3 %
    assert "pins updated: pins/" in tighter.stdout
    assert only_pin(tmp_path).compile_s == 2.2

    write_lines(tmp_path / "records" / "3.jsonl", [row(3, cell=A, compile_s=2.3, **fingerprint)])
    exact = cli(tmp_path, "pin", "records", "--exact")
    assert "pins updated: pins/" in exact.stdout and "kept" not in exact.stdout
    assert only_pin(tmp_path).compile_s == 2.3


def test_pin_and_check_map_descriptive_fields_to_the_cell(tmp_path: Path) -> None:
    old = {
        "compile_s": 40.0,
        "cache_state": "cold",
        "transform": "vag",
        "hardware": "h",
        "jax_version": "0.4.30",
        "model": "mb_homo",
        "band": "multi",
        "tag": "x-cold",
        "timestamp": "2025-01-01T00:00:00",
    }
    write_lines(tmp_path / "old.jsonl", [old])
    assert cli(tmp_path, "pin", "old.jsonl", "--cell-fields", "model,band").returncode == 0
    (group,) = PinStore.load(tmp_path / "pins").groups()
    assert list(group.pins) == [("mb_homo::multi", "vag")]
    write_lines(
        tmp_path / "new.jsonl", [old | {"compile_s": 100.0, "timestamp": "2025-02-01T00:00:00"}]
    )
    result = cli(tmp_path, "check", "new.jsonl", "--cell-fields", "model,band")
    assert result.returncode == 1
    assert "DRIFT      mb_homo::multi [vag] 100.000 s, pin 40.000 s" in result.stdout
    assert cli(tmp_path, "check", "new.jsonl").returncode == 2  # no 'cell' without the option
