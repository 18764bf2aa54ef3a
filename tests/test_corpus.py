"""Reading and writing the results corpus: formats, other kinds, latest rows, errors."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from corpus_helpers import row, write_lines, write_list
from records_factory import make_record

from pytest_jaxcompile.corpus.store import (
    Corpus,
    CorpusError,
    corpus_files,
    latest_rows,
    parse_timestamp,
    write_session_records,
)

OTHER_KIND = {"record_kind": "torch_compile", "cell": "x", "compile_s": 3.0, "tag": "a-warm"}


def test_session_files_are_new_each_time_and_never_rewrite_history(tmp_path: Path) -> None:
    first = write_session_records(tmp_path, [make_record(compile_s=1.0)])
    assert first is not None
    before = first.read_bytes()
    second = write_session_records(tmp_path, [make_record(compile_s=2.0), make_record()])
    assert second is not None and second != first
    assert first.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([first.name, second.name])
    assert first.name.endswith(".jsonl") and first.name[:8].isdigit()
    lines = second.read_text().splitlines()
    assert [json.loads(line)["compile_s"] for line in lines] == [2.0, 1.0]
    assert all(json.loads(line)["record_kind"] == "compile_probe" for line in lines)
    assert write_session_records(tmp_path, []) is None  # no records, no file
    assert len(list(tmp_path.iterdir())) == 2


@pytest.mark.skipif(not hasattr(os, "fchmod"), reason="no POSIX file modes")
def test_session_files_are_readable_by_others_like_any_new_file(tmp_path: Path) -> None:
    path = write_session_records(tmp_path / "results", [make_record()])
    assert path is not None
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask


def test_reads_json_lines_lists_and_reports_and_passes_over_other_kinds(
    tmp_path: Path,
) -> None:
    write_lines(tmp_path / "tree" / "a.jsonl", [row(1), OTHER_KIND, row(2, transform="jit")])
    write_list(tmp_path / "tree" / "sub" / "b.json", [row(3, cell="t.py::test_b"), OTHER_KIND])
    report = {"report_kind": "jaxcompile_report", "records": [row(4, cell="t.py::test_c")]}
    (tmp_path / "tree" / "report.json").write_text(json.dumps(report, indent=2))
    (tmp_path / "tree" / "notes.txt").write_text("not records")
    (tmp_path / "tree" / ".a.jsonl.x1.tmp").write_text("{half a rec")  # a write in progress
    (tmp_path / "tree" / ".hidden").mkdir()
    write_lines(tmp_path / "tree" / ".hidden" / "c.jsonl", [row(5)])

    corpus = Corpus([tmp_path / "tree"])
    rows = list(corpus.rows())
    assert [(r.cell.split("::")[-1], r.transform) for r in rows] == [
        ("test_mlp", "vag"),
        ("test_mlp", "jit"),
        ("test_c", "vag"),
        ("test_b", "vag"),
    ]
    assert (corpus.stats.files, corpus.stats.compile_records, corpus.stats.other_records) == (
        3,
        4,
        2,
    )
    assert "2 record(s) of other kinds passed over" in corpus.describe()


def test_json_lines_in_a_json_file_are_read_too(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "legacy.json", [row(1), row(2)])
    assert len(list(Corpus([path]).rows())) == 2


def test_records_without_a_kind_are_ours_only_with_a_compile_timing(tmp_path: Path) -> None:
    legacy = row(1)
    del legacy["record_kind"]
    path = write_lines(tmp_path / "a.jsonl", [legacy, {"cell": "x", "note": "no timing"}])
    corpus = Corpus([path])
    assert len(list(corpus.rows())) == 1
    assert corpus.stats.other_records == 1


def test_the_latest_row_per_cell_transform_and_key_wins_by_timestamp(tmp_path: Path) -> None:
    # Files are read in name order; the newest row is in the first file.
    write_lines(tmp_path / "1.jsonl", [row(9, compile_s=9.0), row(1, compile_s=1.0)])
    write_lines(
        tmp_path / "2.jsonl",
        [
            row(5, compile_s=5.0),
            row(2, compile_s=2.0, cache_state="warm"),  # another key: its own latest
            row(3, 23, compile_s=3.0, jax_version="0.11.0"),
            row(3, 1, compile_s=3.5, jax_version="0.11.0"),
        ],
    )
    latest = latest_rows(Corpus([tmp_path]))
    figures = {
        (r.key.cache_state, r.key.framework_version): r.compile_s for r in latest.sorted_rows()
    }
    assert figures == {("cold", "0.10.2"): 9.0, ("warm", "0.10.2"): 2.0, ("cold", "0.11.0"): 3.0}


def test_equal_timestamps_the_row_read_last_wins(tmp_path: Path) -> None:
    write_lines(tmp_path / "a.jsonl", [row(1, compile_s=1.0)])
    write_lines(tmp_path / "b.jsonl", [row(1, compile_s=2.0)])
    (record,) = latest_rows(Corpus([tmp_path])).records()
    assert record.compile_s == 2.0


def test_timestamps_with_offsets_and_z_are_compared_as_times() -> None:
    assert parse_timestamp("2026-11-30T01:00:00Z") == parse_timestamp("2026-11-30T02:00:00+01:00")
    assert parse_timestamp("2026-11-30T01:00:00") == parse_timestamp("2026-11-30T01:00:00+00:00")


def test_cell_fields_build_the_cell_from_descriptive_fields(tmp_path: Path) -> None:
    old = {
        "compile_s": 1.5,
        "cache_state": "cold",
        "transform": "vag",
        "hardware": "h",
        "jax_version": "0.4.30",
        "model": "mb_homo",
        "dataset": {"name": "hst"},
        "backend": "gpu",
    }
    new = row(1)
    path = write_lines(tmp_path / "a.jsonl", [old, new])
    cells = [r.cell for r in Corpus([path], ("model", "dataset.name", "backend")).rows()]
    assert cells == ["mb_homo::hst::gpu", new["cell"]]  # a record lacking them keeps its cell


def test_records_missing_a_cell_field_and_a_cell_are_an_error(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "a.jsonl",
        [
            {
                "compile_s": 1.0,
                "cache_state": "cold",
                "transform": "t",
                "hardware": "h",
                "jax_version": "1",
                "model": "m",
            }
        ],
    )
    with pytest.raises(CorpusError, match=r"a\.jsonl:1: .*'backend' \(from --cell-fields\)"):
        list(Corpus([path], ("model", "backend")).rows())


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"record_kind": "other"}\n{"oops"\n', r"b\.jsonl:2: not valid JSON"),
        (
            json.dumps(row(1) | {"cache_state": None}) + "\n",
            r"b\.jsonl:1: compile record has no cache_state .*backfill",
        ),
        (json.dumps(row(1) | {"cache_state": "hot"}) + "\n", r"b\.jsonl:1: cache_state 'hot'"),
        (json.dumps(row(1) | {"compile_s": "fast"}) + "\n", r"b\.jsonl:1: 'compile_s' must be"),
        (json.dumps(row(1) | {"timestamp": "yesterday"}) + "\n", r"b\.jsonl:1: 'timestamp'"),
        (
            json.dumps({k: v for k, v in row(1).items() if k != "hardware"}) + "\n",
            r"b\.jsonl:1: compile record has no 'hardware'",
        ),
    ],
)
def test_bad_records_are_errors_naming_file_and_line(
    tmp_path: Path, content: str, message: str
) -> None:
    write_lines(tmp_path / "a.jsonl", [row(1)])
    (tmp_path / "b.jsonl").write_text(content)
    with pytest.raises(CorpusError, match=message):
        list(Corpus([tmp_path]).rows())


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ({"op_count": "70"}, r"'op_count' must be a whole number >= 0 or null, got '70'"),
        (
            {"host_state": {"load_per_core": "high"}},
            r"'host_state\.load_per_core' must be a finite number >= 0",
        ),
        ({"compile_cpu_s": -1}, r"'compile_cpu_s' must be a finite number >= 0"),
    ],
)
def test_optional_fields_of_the_rows_used_are_type_checked(
    tmp_path: Path, field: dict[str, object], message: str
) -> None:
    path = write_lines(tmp_path / "b.jsonl", [row(1) | field, row(2)])
    # The bad row is superseded by a later one: it is never used, so it is not an error.
    assert len(latest_rows(Corpus([path])).records()) == 1
    path = write_lines(tmp_path / "b.jsonl", [row(2), row(1, transform="jit") | field])
    with pytest.raises(CorpusError, match=r"b\.jsonl:2: " + message):
        latest_rows(Corpus([path])).records()


def test_a_bad_item_of_a_json_list_names_the_item(tmp_path: Path) -> None:
    path = write_list(tmp_path / "a.json", [row(1), row(2) | {"transform": 7}])
    with pytest.raises(CorpusError, match=r"a\.json:item 2: 'transform' must be"):
        list(Corpus([path]).rows())


def test_a_missing_path_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="no such file or directory"):
        corpus_files([tmp_path / "nope"])


def test_rows_become_the_records_the_plugin_wrote(tmp_path: Path) -> None:
    original = make_record(tolerance=0.8, location=("t.py", 3), outcome="passed")
    path = write_lines(tmp_path / "a.jsonl", [original.to_dict()])
    (record,) = latest_rows(Corpus([path])).records()
    assert record == original


def test_since_leaves_out_older_and_untimed_rows(tmp_path: Path) -> None:
    untimed = row(1)
    del untimed["timestamp"]
    path = write_lines(tmp_path / "a.jsonl", [row(1), row(3), row(5, 23), untimed])
    corpus = Corpus([path], since=parse_timestamp("2026-11-03"))
    assert [r.data["timestamp"][:10] for r in corpus.rows()] == ["2026-11-03", "2026-11-05"]
    assert corpus.stats.before_since == 2
    assert "(2 measured before --since left out)" in corpus.describe()
