"""GC of WAL SSTs: referenced ranges, fences, min_age counted from the dereference (issue 204)."""

from __future__ import annotations

from slate_ops import Db, DbReader
from slate_ops.engine import CheckpointScope
from slate_ops.engine.wal_fence import WAL_FENCE_WINDOW, WINDOW_FENCE
from slate_ops.objstore import MemoryStore
from slate_ops.runtime import ManualRuntime
from tests.support.engine import quiet
from tests.support.gc import MIN_AGE, gc, keys, latest

WAL = "db/wal/{:020d}.sst"
D = WAL_FENCE_WINDOW - 1
"""The shift of a first writer's WAL ids: its window fence is WAL 1, its first WAL SST ``1 + W = 2 + D``."""


def wal_ids(store: MemoryStore) -> list[int]:
    return sorted(int(k.rsplit("/", 1)[-1][:20]) for k in keys(store, "db/wal/"))


def test_referenced_wal_ranges_and_fences_are_kept(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    with Db.open("db", clocked_memory_store, quiet(), clock=clock) as db:  # WAL 1: the writer's fence
        db.put(b"a", b"1")
        db.flush()  # WAL 2 + D
        db.flush_memtable()  # replay_after_wal_id = 2 + D
        db.put(b"b", b"2")
        db.flush()  # WAL 3 + D
        checkpoint = db.create_checkpoint(CheckpointScope.DURABLE)  # replays (2 + D, 3 + D]
        db.put(b"c", b"3")
        db.flush()  # WAL 4 + D
        db.flush_memtable()  # replay_after_wal_id = 4 + D
        db.put(b"d", b"4")
        db.flush()  # WAL 5 + D: not in L0 yet
    assert latest(clocked_memory_store)[1].replay_after_wal_id == 4 + D
    assert wal_ids(clocked_memory_store) == [1, 2 + D, 3 + D, 4 + D, 5 + D]
    clock.advance(10_000)
    report = gc(clocked_memory_store, clock).run_once(dry_run=False)
    wal = report.resource("wal")
    assert wal is not None and {d.key for d in wal.deleted} == {WAL.format(2 + D), WAL.format(4 + D)}
    assert wal.listed == 5 and wal.count == 2 and wal.bytes == sum(d.size for d in wal.deleted)
    assert wal_ids(clocked_memory_store) == [1, 3 + D, 5 + D]  # the fence, the checkpoint's range, the WAL

    with DbReader.open("db", clocked_memory_store, checkpoint.id, clock=clock) as reader:  # replays WAL 3
        assert (reader.get(b"a"), reader.get(b"b"), reader.get(b"c")) == (b"1", b"2", None)
    with Db.open("db", clocked_memory_store, quiet(), clock=clock) as db:  # replays WAL 5
        assert db.get(b"d") == b"4"


def test_fences_are_deleted_only_when_allowed(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    for round_ in range(3):  # each open fences the WAL with a window fence
        with Db.open("db", clocked_memory_store, quiet(), clock=clock) as db:
            db.put(b"k", b"%d" % round_)
            db.flush_memtable()
    fences = [
        k
        for k in keys(clocked_memory_store, "db/wal/")
        if clocked_memory_store.head(k).size == len(WINDOW_FENCE)
    ]
    assert len(fences) == 3
    clock.advance(10_000)
    gc(clocked_memory_store, clock).run_once(dry_run=False)
    assert set(fences) <= keys(clocked_memory_store, "db/wal/")
    report = gc(clocked_memory_store, clock, delete_wal_fences=True).run_once(dry_run=False)
    assert {d.key for d in report.resource("wal").deleted} == set(fences)  # type: ignore[union-attr]


def test_min_age_counts_from_the_dereference_not_the_write(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    """Issue 204: a WAL SST written long ago and dereferenced a moment ago must survive min_age."""
    db = Db.open("db", clocked_memory_store, quiet(), clock=clock)
    db.put(b"k", b"v")
    db.flush()  # WAL 2 + D, written now
    clock.advance(10_000)
    db.flush_memtable()  # replay_after_wal_id moves past WAL 2 + D only now
    db.close()
    report = gc(clocked_memory_store, clock).run_once(dry_run=False)
    assert report.resource("wal").count == 0  # type: ignore[union-attr]
    assert WAL.format(2 + D) in keys(clocked_memory_store)
    clock.advance(MIN_AGE - 1)
    assert gc(clocked_memory_store, clock).run_once(dry_run=False).resource("wal").count == 0  # type: ignore[union-attr]
    clock.advance(1)
    report = gc(clocked_memory_store, clock).run_once(dry_run=False)
    assert {d.key for d in report.resource("wal").deleted} == {WAL.format(2 + D)}  # type: ignore[union-attr]


def test_a_young_wal_sst_is_kept_even_if_unreferenced(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    with Db.open("db", clocked_memory_store, quiet(), clock=clock) as db:
        db.put(b"k", b"v")
        db.flush()
        clock.advance(10_000)  # the manifests are old ...
        db.flush_memtable()
    clock.advance(MIN_AGE)
    clocked_memory_store.put(
        WAL.format(2 + D), clocked_memory_store.get(WAL.format(2 + D)).data
    )  # ... but WAL 2 + D was rewritten just now
    assert gc(clocked_memory_store, clock).run_once(dry_run=False).resource("wal").count == 0  # type: ignore[union-attr]
