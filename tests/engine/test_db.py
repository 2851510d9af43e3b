from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from slate_ops import Db, DbReader, WriteBatch
from slate_ops.engine import CheckpointScope
from slate_ops.engine.wal_chain import is_data
from slate_ops.errors import (
    BackpressureTimeoutError,
    DbClosedError,
    DbDestroyedError,
    FencedError,
    InvalidArgumentError,
)
from slate_ops.manifest.model import Manifest, SortedRun, WriterCheckpoint
from slate_ops.manifest.store import COMPACTOR_EPOCH, ManifestStore
from slate_ops.objstore import MemoryStore
from slate_ops.objstore.base import ObjectStore
from tests.support.engine import QUIET, QUIET_READER, quiet, simulate_crash


def writer_checkpoints(manifest: Manifest) -> list[tuple[object, int, int]]:
    return [
        (c.id, c.manifest_id, c.metadata.epoch)
        for c in manifest.checkpoints
        if isinstance(c.metadata, WriterCheckpoint)
    ]


def test_put_get_delete_and_overwrite(engine_store: ObjectStore) -> None:
    with Db.open("db", engine_store, QUIET) as db:
        db.put(b"a", b"1")
        db.put(b"b", b"2")
        db.put(b"a", b"3")
        db.delete(b"b")
        assert db.get(b"a") == b"3" and db.get(b"b") is None and db.get(b"zzz") is None
        db.put(b"empty", b"")
        assert db.get(b"empty") == b""


def test_scan_ranges_and_prefixes_across_memtable_and_l0(memory_store: MemoryStore) -> None:
    with Db.open("db", memory_store, QUIET) as db:
        for i in range(0, 100, 2):
            db.put(b"k%03d" % i, b"old%d" % i)
        db.flush_memtable()
        for i in range(0, 100, 3):
            db.put(b"k%03d" % i, b"new%d" % i)
        db.delete(b"k010")
        expected = {
            b"k%03d" % i: (b"new%d" % i if i % 3 == 0 else b"old%d" % i)
            for i in range(100)
            if i % 2 == 0 or i % 3 == 0
        }
        del expected[b"k010"]
        assert dict(db.scan()) == expected
        assert [k for k, _ in db.scan()] == sorted(expected)
        window = list(db.scan(b"k020", b"k031"))
        assert [k for k, _ in window] == sorted(k for k in expected if b"k020" <= k < b"k031")
        assert list(db.scan(b"k050", b"k050")) == []
        assert [k for k, _ in db.scan_prefix(b"k09")] == sorted(k for k in expected if k.startswith(b"k09"))
        db.put(b"\xff\xff", b"x")
        db.put(b"\xff\xff\x00", b"y")
        assert list(db.scan_prefix(b"\xff\xff")) == [(b"\xff\xff", b"x"), (b"\xff\xff\x00", b"y")]


def test_write_batch_is_atomic_and_last_op_wins(memory_store: MemoryStore) -> None:
    with Db.open("db", memory_store, QUIET) as db:
        db.put(b"gone", b"x")
        batch = WriteBatch().put(b"a", b"1").put(b"a", b"2").delete(b"gone").put(b"c", b"3")
        db.write(batch)
        assert dict(db.scan()) == {b"a": b"2", b"c": b"3"}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda db: db.put("text", b"v"), "keys must be bytes, got str"),
        (lambda db: db.put(b"k", 5), "values must be bytes, got int"),
        (lambda db: db.put(b"", b"v"), "keys must not be empty"),
        (lambda db: db.get(None), "keys must be bytes, got NoneType"),
        (lambda db: WriteBatch().delete(b""), "keys must not be empty"),
    ],
)
def test_bad_arguments_get_clear_errors(memory_store: MemoryStore, call: object, message: str) -> None:
    with Db.open("db", memory_store, QUIET) as db, pytest.raises(InvalidArgumentError, match=message):
        call(db)  # type: ignore[operator]


def test_closed_db_refuses_use(memory_store: MemoryStore) -> None:
    db = Db.open("db", memory_store, QUIET)
    db.close()
    db.close()  # idempotent
    with pytest.raises(DbClosedError):
        db.put(b"a", b"1")
    with pytest.raises(DbClosedError):
        db.get(b"a")


def test_flushed_writes_survive_a_crash_and_replay_stops_at_l0(engine_store: ObjectStore) -> None:
    db = Db.open("db", engine_store, QUIET)
    db.put(b"in-l0", b"1")
    db.flush_memtable()
    db.put(b"in-wal", b"2")
    db.put(b"durable", b"3", await_durable=True)
    simulate_crash(db)
    reopened = Db.open("db", engine_store, QUIET)
    assert (
        reopened.get(b"in-l0") == b"1"
        and reopened.get(b"in-wal") == b"2"
        and reopened.get(b"durable") == b"3"
    )
    manifest = reopened.manifest
    assert manifest.replay_after_wal_id >= 1 and len(manifest.l0) == 1
    reopened.close()


def test_flush_memtable_empties_the_wal(memory_store: MemoryStore) -> None:
    with Db.open("db", memory_store, QUIET) as db:
        for i in range(50):
            db.put(b"k%d" % i, b"v%d" % i)
        db.flush_memtable()
        manifest = db.manifest
    wal_ids = sorted(int(m.key.rsplit("/", 1)[-1][:20]) for m in memory_store.list("db/wal/"))
    assert manifest.replay_after_wal_id == max(
        i for i in wal_ids if memory_store.head(f"db/wal/{i:020d}.sst").size
    )
    for i in wal_ids:  # the WAL is not needed any more: L0 has everything
        memory_store.delete(f"db/wal/{i:020d}.sst")
    with Db.open("db", memory_store, QUIET) as db:
        assert dict(db.scan()) == {b"k%d" % i: b"v%d" % i for i in range(50)}


def test_memtables_freeze_at_the_size_limit(memory_store: MemoryStore) -> None:
    with Db.open("db", memory_store, quiet(l0_sst_size_bytes=4096, l0_max_ssts=1000)) as db:
        for i in range(400):
            db.put(b"key%05d" % i, b"v" * 40)
        db.flush_memtable()
        assert len(db.manifest.l0) >= 5
        assert db.get(b"key00000") == b"v" * 40 and db.get(b"key00399") == b"v" * 40
        assert sum(1 for _ in db.scan()) == 400


def test_writer_checkpoint_is_kept_current_and_released(memory_store: MemoryStore) -> None:
    db = Db.open("db", memory_store, QUIET)
    (first,) = writer_checkpoints(db.manifest)
    current = ManifestStore(memory_store, "db").read_latest_required()
    assert first[1] == current.id and first[2] == db.writer_epoch == 1
    db.put(b"a", b"1")
    db.flush_memtable()
    (second,) = writer_checkpoints(ManifestStore(memory_store, "db").read_latest_required().value)
    assert second[0] != first[0] and second[1] > first[1]
    db.close()
    assert writer_checkpoints(ManifestStore(memory_store, "db").read_latest_required().value) == []


def test_second_writer_fences_the_first_and_keeps_its_durable_writes(engine_store: ObjectStore) -> None:
    first = Db.open("db", engine_store, QUIET)
    first.put(b"a", b"1")
    first.flush()
    first.put(b"b", b"2", await_durable=True)
    second = Db.open("db", engine_store, QUIET)
    assert second.writer_epoch == first.writer_epoch + 1
    assert second.get(b"a") == b"1" and second.get(b"b") == b"2"
    first.put(b"lost", b"x")  # accepted in memory, but never durable
    with pytest.raises(FencedError, match="fenced"):
        first.flush()
    with pytest.raises(FencedError):
        first.put(b"c", b"3")
    with pytest.raises(FencedError):
        first.close()
    second.put(b"c", b"4")
    second.flush_memtable()
    assert second.get(b"lost") is None and second.get(b"c") == b"4"
    (checkpoint,) = writer_checkpoints(second.manifest)
    assert checkpoint[2] == second.writer_epoch  # the fenced writer's checkpoint was removed
    second.close()


def test_fenced_writer_detects_it_on_memtable_flush(memory_store: MemoryStore) -> None:
    first = Db.open("db", memory_store, QUIET)
    first.put(b"a", b"1")
    simulate_crash(Db.open("db", memory_store, QUIET))
    with pytest.raises(FencedError):
        first.flush_memtable()
    assert first.manifest.l0 == ()


def test_l0_backpressure_waits_then_fails_clearly(memory_store: MemoryStore) -> None:
    options = quiet(
        l0_max_ssts=2,
        backpressure_timeout=timedelta(milliseconds=300),
        manifest_poll_interval=timedelta(milliseconds=50),
    )
    with Db.open("db", memory_store, options) as db:
        for i in range(2):
            db.put(b"k%d" % i, b"v")
            db.flush_memtable()
        db.put(b"k2", b"v")
        with pytest.raises(BackpressureTimeoutError, match="l0_max_ssts=2"):
            db.flush_memtable()
        assert db.get(b"k2") == b"v"  # still readable from the frozen memtable


def test_blocked_flush_continues_when_l0_shrinks(memory_store: MemoryStore) -> None:
    options = quiet(
        l0_max_ssts=2,
        backpressure_timeout=timedelta(seconds=20),
        manifest_poll_interval=timedelta(milliseconds=20),
    )
    with Db.open("db", memory_store, options) as db:
        for i in range(2):
            db.put(b"k%d" % i, b"v%d" % i)
            db.flush_memtable()
        db.put(b"k2", b"v2")
        done = threading.Event()
        worker = threading.Thread(target=lambda: (db.flush_memtable(), done.set()))
        worker.start()
        assert not done.wait(0.3)  # blocked on L0
        # a stand-in compactor: the oldest L0 SST becomes a sorted run (keeps every key readable)
        compactor, _ = ManifestStore(memory_store, "db").claim(COMPACTOR_EPOCH)
        compactor.update(
            lambda v: v.value.with_changes(
                l0=v.value.l0[:-1], compacted=(SortedRun(0, (v.value.l0[-1],)), *v.value.compacted)
            )
        )
        assert done.wait(5)
        worker.join()
        assert dict(db.scan()) == {b"k0": b"v0", b"k1": b"v1", b"k2": b"v2"}


def test_checkpoint_scopes(memory_store: MemoryStore) -> None:
    with Db.open("db", memory_store, QUIET) as db:
        db.put(b"durable", b"1")
        db.flush()
        db.put(b"buffered", b"2")
        durable = db.create_checkpoint(CheckpointScope.DURABLE)
        everything = db.create_checkpoint(CheckpointScope.ALL)
        db.put(b"later", b"3")
        db.flush_memtable()
    with DbReader.open("db", memory_store, durable.id, QUIET_READER) as reader:
        assert dict(reader.scan()) == {b"durable": b"1"}
    with DbReader.open("db", memory_store, everything.id, QUIET_READER) as reader:
        assert dict(reader.scan()) == {b"durable": b"1", b"buffered": b"2"}


def test_destroyed_database_cannot_be_opened(memory_store: MemoryStore) -> None:
    ManifestStore(memory_store, "db").create_initial(Manifest(destroyed_at_s=10))
    with pytest.raises(DbDestroyedError):
        Db.open("db", memory_store, QUIET)


def test_background_flusher_makes_writes_durable(memory_store: MemoryStore) -> None:
    with Db.open("db", memory_store, quiet(wal_flush_interval=timedelta(milliseconds=20))) as db:
        db.put(b"a", b"1")
        deadline = threading.Event()
        for _ in range(100):
            if any(is_data(m.size) for m in memory_store.list("db/wal/")):
                break
            deadline.wait(0.02)
        assert any(is_data(m.size) for m in memory_store.list("db/wal/"))  # a WAL SST, not the fence
        simulate_crash(db)
    with Db.open("db", memory_store, QUIET) as db:
        assert db.get(b"a") == b"1"
