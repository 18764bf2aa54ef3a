"""One persistent cache dir shared by pytest-xdist workers: classification and races."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from conftest import JaxProject

from pytest_jaxcompile.backends.jax.measure import CacheEntries, count_cache_entries

FOUR_MODULES = """
    import jax
    from jaxmodels import attention_example_args, attention_loss, mlp_example_args, mlp_loss

    def test_mlp_jit(jax_compile):
        jax_compile(jax.jit(mlp_loss), *mlp_example_args(), transform="jit")

    def test_mlp_vag(jax_compile):
        jax_compile(jax.value_and_grad(mlp_loss), *mlp_example_args(), transform="vag")

    def test_attention_jit(jax_compile):
        jax_compile(jax.jit(attention_loss), *attention_example_args(), transform="jit")

    def test_attention_vag(jax_compile):
        jax_compile(jax.value_and_grad(attention_loss), *attention_example_args(),
                    transform="vag")
"""


def test_two_workers_on_one_cache_dir_are_cold_then_warm(project: JaxProject) -> None:
    project.conftest()
    project.tests(FOUR_MODULES)
    project.run("-n", "2").assert_outcomes(passed=4)
    cold = project.rows()
    assert {row["cache_state"] for row in cold.values()} == {"cold"}
    assert all(row["cache"]["persisted"] for row in cold.values())

    project.run("-n", "2").assert_outcomes(passed=4)
    warm = project.rows()
    assert set(warm) == set(cold)
    assert {row["cache_state"] for row in warm.values()} == {"warm"}
    assert {row["cache"]["dir"] for row in warm.values()} == {str(project.cache_dir)}


PREFILL = """
    import jax
    from jaxmodels import mlp_example_args, mlp_loss

    def test_prefill():
        jax.jit(mlp_loss).lower(*mlp_example_args()).compile()
"""

# Two workers at once: one keeps writing new entries, the other keeps hitting one entry
# until a write landed inside one of its measurements.
WRITER = """
    import jax, jax.numpy as jnp
    from pathlib import Path
    from rendezvous import meet

    def test_writer():
        meet({barrier!r}, "writer")
        done, written = Path({done!r}), 0
        while not done.exists() and written < 1000:
            written += 1
            jax.jit(lambda x, k=written: x * k + 1.0).lower(jnp.ones(8)).compile()
        assert written > 0
"""
HITS = """
    import jax
    from pathlib import Path
    from jaxmodels import mlp_example_args, mlp_loss
    from rendezvous import meet

    def test_hits(jax_compile):
        meet({barrier!r}, "hits")
        lowered = jax.jit(mlp_loss).lower(*mlp_example_args())
        try:
            for index in range(300):
                jax_compile(lowered, transform=f"hit{{index:03d}}")
                cache = jax_compile.records[-1].cache
                if cache.entries_after > cache.entries_before:
                    break
        finally:
            Path({done!r}).touch()
"""


def test_a_neighbours_write_during_a_hit_does_not_make_it_cold(project: JaxProject) -> None:
    project.conftest()
    project.rendezvous()
    barrier, done = str(project.path / "barrier"), str(project.path / "done")
    project.tests(PREFILL, name="test_prefill")
    project.run("test_prefill.py").assert_outcomes(passed=1)
    project.tests(WRITER.format(barrier=barrier, done=done), name="test_writer")
    project.tests(HITS.format(barrier=barrier, done=done), name="test_hits")

    project.run("-n", "2", "test_hits.py", "test_writer.py").assert_outcomes(passed=2)
    rows = list(project.rows().values())
    assert rows and {row["cache_state"] for row in rows} == {"warm"}
    # The scenario really happened: entries appeared while a hit was being measured.
    grown = [row for row in rows if row["cache"]["entries_after"] > row["cache"]["entries_before"]]
    assert grown, "no write by the neighbour landed inside a measured hit"
    assert all(row["cache"]["notes"] == [] for row in grown)


def test_counting_entries_while_they_appear_and_vanish_never_fails(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    stop = threading.Event()
    problems: list[BaseException] = []

    def churn() -> None:
        index = 0
        try:
            while not stop.is_set():
                index += 1
                entry = cache / f"key{index % 50}-cache"
                entry.write_bytes(b"x")
                (cache / f"key{index % 50}-atime").write_bytes(b"t")
                if index % 3 == 0:
                    entry.unlink(missing_ok=True)
                if index % 997 == 0:  # the whole directory goes and comes back
                    for path in list(cache.iterdir()):
                        path.unlink(missing_ok=True)
                    os.rmdir(cache)
                    cache.mkdir()
        except BaseException as error:  # pragma: no cover - reported below
            problems.append(error)

    thread = threading.Thread(target=churn)
    thread.start()
    try:
        counts = [count_cache_entries(str(cache)) for _ in range(3000)]
    finally:
        stop.set()
        thread.join()
    assert not problems
    assert all(isinstance(count, int) and 0 <= count <= 50 for count in counts)
    assert count_cache_entries(str(tmp_path / "missing")) == 0
    (tmp_path / "a-file").write_text("")
    assert count_cache_entries(str(tmp_path / "a-file")) is None
    assert count_cache_entries("gs://bucket/cache") is None


def test_a_cache_dir_is_scanned_again_only_once_it_changed(tmp_path: Path) -> None:
    """`CacheEntries` keeps a count while the directory's mtime is the one it counted under
    and was settled then (older than a timestamp tick); a new or removed entry changes the
    mtime, and a recently changed directory is counted every time."""
    cache = tmp_path / "cache"
    cache.mkdir()
    for index in range(3):
        (cache / f"key{index}-cache").write_bytes(b"x")
        (cache / f"key{index}-atime").write_bytes(b"t")
    settled = os.stat(cache).st_mtime_ns - 10 * CacheEntries.SETTLED_NS
    os.utime(cache, ns=(settled, settled))
    entries = CacheEntries()
    assert entries.count(str(cache)) == 3
    # an entry removed behind the directory's unchanged mtime: the kept count is used
    (cache / "key0-cache").unlink()
    os.utime(cache, ns=(settled, settled))
    assert entries.count(str(cache)) == 3
    assert count_cache_entries(str(cache)) == 2
    (cache / "key0-atime").write_bytes(b"u")  # a hit's atime rewritten in place: unchanged
    assert os.stat(cache).st_mtime_ns == settled
    # a new entry changes the mtime (now: recent, so not kept) and every count reads it
    (cache / "key9-cache").write_bytes(b"x")
    assert entries.count(str(cache)) == 3
    (cache / "key8-cache").write_bytes(b"x")
    assert entries.count(str(cache)) == 4
    assert entries.count(str(tmp_path / "missing")) == 0
    assert entries.count("gs://bucket/cache") is None
