"""The pin store: TOML layout, determinism, errors, atomic and concurrent writes."""

from __future__ import annotations

import multiprocessing
import os
import stat
from pathlib import Path

import pytest
from records_factory import make_record

from pytest_jaxcompile._io import atomic_write_text
from pytest_jaxcompile.gate.pins import PinFileError, PinStore, pin_file_name, read_pin_file
from pytest_jaxcompile.records import ComparabilityKey, CompileRecord


def test_update_writes_one_file_per_key_with_the_key_verbatim(tmp_path: Path) -> None:
    store = PinStore.load(tmp_path)
    written = store.update([make_record(), make_record(cache_state="warm", compile_s=0.01)])
    assert len(written) == 2
    cold = make_record().key
    text = store.path_for(cold).read_text()
    assert 'hardware = "cpu:cpu @ Test CPU x2"' in text
    assert 'cache_state = "cold"' in text
    assert '[pins."tests/test_models.py::test_mlp".vag]' in text
    reloaded = PinStore.load(tmp_path)
    pin = reloaded.get(cold, "tests/test_models.py::test_mlp", "vag")
    assert pin is not None and pin.compile_s == 1.0 and pin.fingerprint == "sha256:abc"


def test_unknown_and_memory_rows_are_never_pinned(tmp_path: Path) -> None:
    store = PinStore.load(tmp_path)
    unpinnable = [make_record(cache_state="unknown"), make_record(cache_state="memory")]
    assert store.update(unpinnable) == []
    assert list(tmp_path.iterdir()) == []


def test_repinning_unchanged_figures_gives_identical_bytes(tmp_path: Path) -> None:
    records = [
        make_record(cell=f"tests/test_m.py::test_{name}", transform=transform, compile_s=0.123456)
        for name in ("b", "a", "c")
        for transform in ("vag", "jit")
    ]
    PinStore.load(tmp_path).update(records)
    first = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    assert PinStore.load(tmp_path).update(list(reversed(records))) == []  # nothing rewritten
    second = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    assert first == second
    text = next(iter(first.values())).decode()
    assert text.index("test_a") < text.index("test_b") < text.index("test_c")
    assert "compile_s = 0.1235" in text


def test_update_leaves_other_pins_and_keeps_a_hand_set_tolerance(tmp_path: Path) -> None:
    store = PinStore.load(tmp_path)
    store.update([make_record(transform="vag"), make_record(transform="jit")])
    path = store.path_for(make_record().key)
    text = path.read_text().replace(
        '[pins."tests/test_models.py::test_mlp".vag]\n',
        '[pins."tests/test_models.py::test_mlp".vag]\ntolerance = 0.9\n',
    )
    path.write_text(text)
    PinStore.load(tmp_path).update([make_record(transform="vag", compile_s=2.0)])
    store = PinStore.load(tmp_path)
    key = make_record().key
    vag = store.get(key, "tests/test_models.py::test_mlp", "vag")
    jit = store.get(key, "tests/test_models.py::test_mlp", "jit")
    assert vag is not None and (vag.compile_s, vag.tolerance) == (2.0, 0.9)
    assert jit is not None and jit.compile_s == 1.0


@pytest.mark.parametrize(
    ("corruption", "line", "fragment"),
    [
        (
            lambda text: text.replace('cache_state = "cold"', 'cache_state = "cold'),
            8,
            "not valid TOML",
        ),
        (
            lambda text: text.replace("compile_s = 1.0", 'compile_s = "fast"'),
            11,
            "'compile_s' must be a finite number >= 0",
        ),
        (
            lambda text: text.replace('jax_version = "0.10.2"', "jax_version = 10"),
            6,
            "'jax_version' must be a str",
        ),
        (
            lambda text: text.replace('cache_state = "cold"', 'cache_state = "memory"'),
            8,
            "cannot be pinned",
        ),
        (
            lambda text: text.replace("compile_s = 1.0", "compile_s = 1.0\nspeed = 3"),
            12,
            "unknown field(s) speed",
        ),
    ],
)
def test_a_broken_pin_file_names_file_and_line_and_is_left_untouched(
    tmp_path: Path, corruption: object, line: int, fragment: str
) -> None:
    store = PinStore.load(tmp_path)
    (path,) = store.update([make_record()])
    broken = corruption(path.read_text())  # type: ignore[operator]
    path.write_text(broken)
    with pytest.raises(PinFileError) as error:
        PinStore.load(tmp_path)
    assert error.value.path == path
    assert error.value.line == line
    assert f"{path}:{line}: " in str(error.value)
    assert fragment in str(error.value)
    assert path.read_text() == broken


def test_a_broken_pin_file_is_not_overwritten_by_an_update(tmp_path: Path) -> None:
    (path,) = PinStore.load(tmp_path).update([make_record()])
    store = PinStore.load(tmp_path)
    path.write_text("[key\n")
    with pytest.raises(PinFileError):
        store.update([make_record(compile_s=3.0)])
    assert path.read_text() == "[key\n"


def test_two_files_with_the_same_key_are_an_error(tmp_path: Path) -> None:
    (path,) = PinStore.load(tmp_path).update([make_record()])
    (tmp_path / "copy.toml").write_text(path.read_text())
    with pytest.raises(PinFileError, match="same \\[key\\]"):
        PinStore.load(tmp_path)


def test_file_names_are_distinct_per_key_even_when_slugs_collide() -> None:
    a = ComparabilityKey("cpu:cpu @ X/Y x2", "0.10.2", False, "cold")
    b = ComparabilityKey("cpu:cpu @ X Y x2", "0.10.2", False, "cold")
    assert pin_file_name(a) != pin_file_name(b)
    assert pin_file_name(a).endswith(".toml")


def test_keys_pinning_lists_every_key_of_a_row(tmp_path: Path) -> None:
    store = PinStore.load(tmp_path)
    store.update([make_record(jax_version="0.9.0"), make_record(cache_state="warm")])
    keys = store.keys_pinning("tests/test_models.py::test_mlp", "vag")
    assert [(key.framework_version, key.cache_state) for key in keys] == [
        ("0.10.2", "warm"),
        ("0.9.0", "cold"),
    ]


def _pin_many(directory: str, worker: int) -> None:
    records: list[CompileRecord] = [
        make_record(cell=f"tests/test_w{worker}.py::test_{index}", compile_s=float(index))
        for index in range(25)
    ]
    for record in records:  # one update per record: many interleaved read-modify-writes
        PinStore.load(Path(directory)).update([record])


@pytest.mark.integration
def test_concurrent_updates_from_two_processes_lose_nothing(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_pin_many, args=(str(tmp_path), n)) for n in (1, 2)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(120)
        assert process.exitcode == 0
    store = PinStore.load(tmp_path)
    key = make_record().key
    for worker in (1, 2):
        for index in range(25):
            pin = store.get(key, f"tests/test_w{worker}.py::test_{index}", "vag")
            assert pin is not None and pin.compile_s == float(index)
    assert [path.name for path in tmp_path.iterdir()] == [pin_file_name(key)]


@pytest.mark.skipif(not hasattr(os, "fchmod"), reason="no POSIX file modes")
def test_atomic_writes_keep_the_files_mode_and_new_files_follow_the_umask(
    tmp_path: Path,
) -> None:
    new = tmp_path / "new.txt"
    atomic_write_text(new, "a\n")
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(new.stat().st_mode) == 0o666 & ~umask  # not mkstemp's 0600

    existing = tmp_path / "existing.txt"
    existing.write_text("a\n")
    existing.chmod(0o640)
    assert atomic_write_text(existing, "b\n")
    assert existing.read_text() == "b\n"
    assert stat.S_IMODE(existing.stat().st_mode) == 0o640


OLD_LAYOUT = """
[key]
hardware = "cpu:cpu @ Test CPU x2"
jax_version = "0.10.2"
mixed_precision = false
cache_state = "cold"

[pins."tests/t.py::test_a".vag]
compile_s = 1.0
fingerprint = "sha256:abc"
key_flags = [
    "--xla_cpu_x=1",
]

[pins."tests/t.py::test_a".vag.ops]
"stablehlo.add" = 3
"stablehlo.dot_general" = 2

[pins."tests/t.py::test_a".vag.key_parts]
computation = "c1"
flags = "f1"
"""


def test_a_pin_is_a_dozen_lines_with_ops_and_key_parts_inline_and_old_files_read(
    tmp_path: Path,
) -> None:
    ops = {f"stablehlo.op_{index}": index + 1 for index in range(30)}
    parts = {f"part_{index}": "0" * 64 for index in range(8)}
    record = make_record(
        cell="tests/t.py::test_a",
        op_histogram=ops,
        cache_key_parts=parts,
        cache_key_flags=["--xla_cpu_x=1", 'a "quoted" flag'],
        compile_cpu_s=0.2,
    )
    (path,) = PinStore(tmp_path / "new").update([record])
    text = path.read_text()
    body = text[text.index("[pins.") :].rstrip("\n").split("\n")
    assert len(body) <= 12, text  # 30 ops and 8 key parts: one line each, not 40
    (pin,) = read_pin_file(path).pins.values()
    assert (pin.ops, pin.key_parts, pin.key_flags) == (
        ops,
        parts,
        ["--xla_cpu_x=1", 'a "quoted" flag'],
    )
    assert PinStore.load(tmp_path / "new").update([record]) == []  # same bytes again

    old = tmp_path / "old" / "old.toml"
    old.parent.mkdir()
    old.write_text(OLD_LAYOUT)
    (pin,) = read_pin_file(old).pins.values()
    assert pin.ops == {"stablehlo.add": 3, "stablehlo.dot_general": 2}
    assert (pin.key_parts, pin.key_flags) == (
        {"computation": "c1", "flags": "f1"},
        ["--xla_cpu_x=1"],
    )


def test_a_census_pin_without_xla_flags_is_ten_lines_and_reads_back_as_no_flags(
    tmp_path: Path,
) -> None:
    # What a census row of a real suite pins: no op histogram, key parts, no XLA flags.
    record = make_record(
        cell="tests/t.py::test_a",
        source="census",
        cache_key_parts={f"part_{index}": "0" * 64 for index in range(8)},
        cache_key_flags=[],
        compile_cpu_s=0.2,
    )
    (path,) = PinStore(tmp_path).update([record])
    text = path.read_text()
    body = text[text.index("[pins.") :].rstrip("\n").split("\n")
    assert len(body) <= 10, text
    assert "key_flags" not in text
    (pin,) = read_pin_file(path).pins.values()
    assert pin.key_flags == []  # "no flags", which notes compare, not "unknown"


def test_census_compile_counts_are_a_line_per_test_and_the_old_tables_still_read(
    tmp_path: Path,
) -> None:
    cells = ["tests/t.py::test_a", 'tests/t.py::test_b[x"y]']
    records = [make_record(cell=cell, source="census") for cell in cells]
    (path,) = PinStore(tmp_path / "new").update(records, compiles={cells[0]: 3, cells[1]: 1})
    text = path.read_text()
    tests = text[text.index("[tests]") :].splitlines()
    assert tests == [
        "[tests]",
        '"tests/t.py::test_a" = { compiles = 3 }',
        '"tests/t.py::test_b[x\\"y]" = { compiles = 1 }',
    ]
    assert read_pin_file(path).compiles == {cells[0]: 3, cells[1]: 1}
    assert (
        PinStore.load(tmp_path / "new").update(records, compiles={cells[0]: 3, cells[1]: 1}) == []
    )  # same bytes again

    old = tmp_path / "old.toml"
    old.write_text(
        text[: text.index("[tests]")]
        + '[tests."tests/t.py::test_a"]\ncompiles = 3\n\n[tests."tests/t.py::test_b[x\\"y]"]\n'
        + "compiles = 1\n"
    )
    assert read_pin_file(old).compiles == {cells[0]: 3, cells[1]: 1}


def _census_rows(count: int) -> list[CompileRecord]:
    """Census rows as a suite pins them: shared provenance and key parts, each its own
    computation (and every third its own compile options)."""
    shared = {f"part_{index}": f"{index}" * 64 for index in range(6)}
    return [
        make_record(
            cell=f"tests/t.py::test_{index}",
            transform="jit(f)",
            source="census",
            compile_s=0.01 * (index + 1),
            compile_cpu_s=0.012 * (index + 1),
            fingerprint=f"computation:{index:064x}",
            platform_version="cpu",
            cache_key_parts={
                **shared,
                "computation": f"{index:064x}",
                "compile_options": "b" * 64 if index % 3 else "c" * 64,
            },
            cache_key_flags=[],
        )
        for index in range(count)
    ]


def test_what_pins_share_is_written_once_under_common_and_read_back_into_every_pin(
    tmp_path: Path,
) -> None:
    records = _census_rows(30)
    (path,) = PinStore(tmp_path).update(records)
    text = path.read_text()
    lines = len(text.splitlines())
    assert lines / len(records) <= 7, text  # the issue asked for ~10 a row; 12 before
    common = text[text.index("[common]") : text.index("[pins.")]
    for shared in ("pinned_at", "load_avg_1m", "source", "jaxlib_version", "platform_version"):
        assert f"\n{shared} = " in common
        assert f"\n{shared} = " not in text[text.index("[pins.") :]
    assert "c" * 64 not in common  # the less common compile options stay each pin's own
    for (_, _, _), pin in read_pin_file(path).all_pins():
        assert pin.key_parts is not None and len(pin.key_parts) == 8  # whole again
        assert (pin.source, pin.jaxlib_version, pin.platform_version) == (
            "census",
            "0.10.2",
            "cpu",
        )
        assert pin.pinned_at == "2026-11-30T00:00:00+00:00" and pin.key_flags == []
    by_row = {cell: pin for (cell, _, _), pin in read_pin_file(path).all_pins()}
    for record in records:
        pin = by_row[record.cell]
        assert pin.key_parts == record.cache_key_parts
        assert (pin.compile_s, pin.fingerprint) == (
            round(record.compile_s or 0, 4),
            record.fingerprint,
        )
    assert PinStore.load(tmp_path).update(records) == []  # same bytes again


def test_a_pin_that_differs_from_common_keeps_its_own_value(tmp_path: Path) -> None:
    records = _census_rows(4)
    PinStore(tmp_path).update(records)
    later = make_record(
        **{
            **records[1].to_dict(),
            "timestamp": "2026-12-24T00:00:00+00:00",
            "jaxlib_version": "0.10.3",
            "cache": records[1].cache,
            "host_state": records[1].host_state,
        }
    )
    (path,) = PinStore.load(tmp_path).update([later])
    text = path.read_text()
    assert text.count('pinned_at = "2026-11-30T00:00:00+00:00"') == 1  # in [common]
    assert text.count('pinned_at = "2026-12-24T00:00:00+00:00"') == 1  # its own
    pins = {cell: pin for (cell, _, _), pin in read_pin_file(path).all_pins()}
    assert pins[later.cell].pinned_at == "2026-12-24T00:00:00+00:00"
    assert pins[later.cell].jaxlib_version == "0.10.3"
    assert {pin.jaxlib_version for cell, pin in pins.items() if cell != later.cell} == {"0.10.2"}


def test_nothing_is_common_where_a_pin_lacks_the_field(tmp_path: Path) -> None:
    """A pin without key parts (no persistent cache) must not read back with [common]'s."""
    records = [*_census_rows(3), make_record(cell="tests/t.py::test_off", source="census")]
    (path,) = PinStore(tmp_path).update(records)
    text = path.read_text()
    assert "key_parts" not in text[text.index("[common]") : text.index("[pins.")]
    off = read_pin_file(path).get("tests/t.py::test_off", "vag")
    assert off is not None and off.key_parts is None and off.platform_version is None


@pytest.mark.parametrize(
    ("common", "fragment"),
    [
        ("tolerance = 0.5", "[common] holds only pinned_at"),
        ("load_avg_1m = nan", "[common] 'load_avg_1m' must be a finite number >= 0"),
        ("key_parts = { computation = 3 }", "[common] 'key_parts' must be a table of strings"),
        ("source = 1", "[common] 'source' must be a string"),
    ],
)
def test_a_broken_common_table_names_its_line(tmp_path: Path, common: str, fragment: str) -> None:
    (path,) = PinStore(tmp_path).update(_census_rows(3))
    lines = path.read_text().splitlines()
    start = lines.index("[common]") + 1
    field = common.split(" = ")[0]
    own = next((at for at in range(start, start + 8) if lines[at].startswith(field)), None)
    if own is None:
        lines.insert(start, common)
    else:  # the field's own line, changed
        lines[own] = common
    broken = "\n".join(lines) + "\n"
    path.write_text(broken)
    with pytest.raises(PinFileError) as error:
        PinStore.load(tmp_path)
    assert fragment in str(error.value)
    assert error.value.line == (start if own is None else own) + 1
    assert path.read_text() == broken
