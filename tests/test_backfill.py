"""`backfill`: the exact split, other kinds byte-identical, --check writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from corpus_helpers import cli, old_record, snapshot

from pytest_jaxcompile.corpus.backfill import Rules, decide, plan_file, tag_state

# tag -> the cache_state backfill gives it (with a non-empty recorded cache dir)
TAGS = {
    "census-warm": "warm",
    "census-warm2": "warm",
    "prodigy-census-warm-retry": "warm",
    "cache-warm": "warm",
    "mb_homo_cold": "cold",
    "mb_homo_cold_laxmap_gpu": "unknown",  # "cold" mid-tag does not count
    "idle-check": "unknown",
    "smoke": "unknown",
}


@pytest.mark.parametrize(
    ("tag", "state"),
    [
        *TAGS.items(),
        ("warm", "warm"),
        ("run_COLD", "cold"),
        ("census-warm ", "warm"),
        ("rewarm", "unknown"),
        ("warm-up", "unknown"),
        ("cold-start", "unknown"),
        ("census-warm-retry2", "warm"),
    ],
)
def test_only_a_tag_that_ends_in_the_marker_decides(tag: str, state: str) -> None:
    assert (tag_state(tag) or "unknown") == state
    assert decide(old_record(tag)).outcome == state


def test_an_empty_recorded_cache_dir_is_none_whatever_the_tag_says() -> None:
    assert decide(old_record("census-warm", cache_dir="")).outcome == "none"
    assert decide(old_record("smoke", cache_dir=None)).outcome == "none"
    nested = old_record("census-warm", cache={"dir": "", "entries_before": 0})
    del nested["cache_dir"]
    assert decide(nested).outcome == "none"
    # A configured dir that held no entries is not `none`: the cold run is the one filling it.
    filled = old_record(None, cache={"dir": "/c", "entries_before": 0})
    del filled["cache_dir"]
    assert decide(filled).outcome == "unknown"
    # No cache-dir field at all: nothing was recorded, so nothing proves there was no cache.
    unrecorded = old_record(None)
    del unrecorded["cache_dir"]
    assert decide(unrecorded).outcome == "unknown"
    assert decide(unrecorded, Rules(cache_dir_fields=("workdir",))).outcome == "unknown"
    assert (
        decide(old_record("x", scratch=""), Rules(cache_dir_fields=("scratch",))).outcome == "none"
    )


def test_records_that_are_not_candidates_are_left_alone() -> None:
    assert (
        decide(old_record("census-warm", cache_state="cold")).outcome == "already has cache_state"
    )
    assert decide({k: v for k, v in old_record("a-warm").items() if k != "compile_s"}).outcome == (
        "no compile_s"
    )
    assert decide(old_record("a-warm", compile_s=None)).outcome == "no compile_s"
    assert decide(old_record("a-warm", record_kind="torch_compile")).outcome == "other kinds"
    assert decide(old_record("a-warm", record_kind="compile_probe")).outcome == "warm"
    assert decide([1, 2]).outcome == "other kinds"


def _corpus(root: Path) -> dict[str, str]:
    """A JSON lines and a JSON list file; returns the expected state per cell."""
    lines = [old_record(tag) for tag in TAGS]
    lines.append(old_record("census-warm", cache_dir="", cell="empty-dir"))
    lines.append(old_record(None, cell="no-tag"))
    lines.append(
        {
            "record_kind": "torch_compile",
            "cell": "t",
            "compile_s": 3.25,
            "tag": "census-warm",
            "cache_dir": "",
        }
    )  # another instrument's
    lines.append(old_record("census-warm", cell="done", cache_state="cold"))
    lines.append({"cell": "untimed", "tag": "census-warm", "note": "no timing"})
    (root / "census.jsonl").write_text(
        "".join(json.dumps(value, separators=(",", ":")) + "\n" for value in lines)
    )
    listed = [
        {"record_kind": "gpu_probe", "compile_s": 1.0, "tag": "cache-warm", "u": "é"},
        old_record("cache-warm", cell="listed-warm"),
        old_record("mb_homo_cold", cell="listed-empty", cache={"dir": ""}),
    ]
    del listed[2]["cache_dir"]
    (root / "legacy.json").write_text(json.dumps(listed, indent=4, ensure_ascii=False) + "\n")
    expected = {"census::" + tag: state for tag, state in TAGS.items()}
    expected.update(
        {
            "empty-dir": "none",
            "no-tag": "unknown",
            "done": "cold",
            "listed-warm": "warm",
            "listed-empty": "none",
        }
    )
    return expected


def test_backfill_cli_gives_the_exact_split_and_check_writes_nothing(tmp_path: Path) -> None:
    expected = _corpus(tmp_path)
    before = snapshot(tmp_path)
    result = cli(tmp_path, "backfill", ".", "--check")
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert (
        "census.jsonl: 10 to migrate (1 none, 1 cold, 4 warm, 4 unknown); untouched: "
        "1 already has cache_state, 1 no compile_s, 1 other kinds" in lines
    )
    assert "legacy.json: 2 to migrate (1 none, 1 warm); untouched: 1 other kinds" in lines
    assert (
        "total: 16 record(s) in 2 file(s): 12 to migrate (2 none, 1 cold, 5 warm, "
        "4 unknown); untouched: 1 already has cache_state, 1 no compile_s, "
        "2 other kinds" in lines
    )
    assert (
        "unknown (no evidence), by tag: (no tag) (1), idle-check (1), "
        "mb_homo_cold_laxmap_gpu (1), smoke (1)" in lines
    )
    assert snapshot(tmp_path) == before

    result = cli(tmp_path, "backfill", ".", "--write")
    assert result.returncode == 0, result.stderr
    assert "written: census.jsonl, legacy.json" in result.stdout

    new_lines = (tmp_path / "census.jsonl").read_text().splitlines(keepends=True)
    old_lines = before["census.jsonl"].decode().splitlines(keepends=True)
    assert len(new_lines) == len(old_lines)
    states = {}
    for old_line, new_line in zip(old_lines, new_lines, strict=True):
        value = json.loads(new_line)
        if (
            value.get("record_kind") == "torch_compile"
            or "compile_s" not in value
            or value["cell"] == "done"
        ):
            assert new_line == old_line  # byte-identical
            continue
        states[value["cell"]] = value["cache_state"]
        assert value["cache_state_source"].startswith("backfill:")
        assert {k: v for k, v in value.items() if not k.startswith("cache_state")} == (
            json.loads(old_line)
        )
    listed_text = (tmp_path / "legacy.json").read_text()
    old_item = json.dumps(
        json.loads(before["legacy.json"].decode())[0], indent=4, ensure_ascii=False
    ).replace("\n", "\n    ")
    assert old_item in listed_text and old_item in before["legacy.json"].decode()
    for value in json.loads(listed_text)[1:]:
        states[value["cell"]] = value["cache_state"]
    assert states == {cell: state for cell, state in expected.items() if cell != "done"}

    again = cli(tmp_path, "backfill", ".", "--check")
    assert again.returncode == 0
    assert "total: 16 record(s) in 2 file(s): 0 to migrate" in again.stdout
    # The migrated corpus now reads as compile records everywhere.
    assert cli(tmp_path, "report", ".").returncode == 0


def test_a_broken_file_stops_the_backfill_before_anything_is_written(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text(json.dumps(old_record("census-warm")) + "\n")
    (tmp_path / "b.json").write_text('[{"compile_s": 1.0}, oops]')
    before = snapshot(tmp_path)
    result = cli(tmp_path, "backfill", ".", "--write")
    assert result.returncode == 2
    assert "b.json:1: not valid JSON" in result.stderr and "Nothing was written" in result.stderr
    assert snapshot(tmp_path) == before


def test_plan_keeps_the_layout_of_the_rest_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"x": 1}\r\n\r\n{"compile_s": 2, "tag": "a_cold"}\r\n')
    plan = plan_file(path)
    assert plan.new_text == (
        '{"x": 1}\r\n\r\n{"compile_s": 2, "cache_state": "cold", '
        '"cache_state_source": "backfill:tag", "tag": "a_cold"}\r\n'
    )
