from __future__ import annotations

from datetime import timedelta

import pytest

from slate_ops import Db, DbReader, ReaderOptions
from slate_ops.config import CheckpointOptions
from slate_ops.errors import CheckpointExpiredError, CheckpointNotFoundError
from slate_ops.manifest.model import WriterCheckpoint
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import MemoryStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import ManualRuntime
from tests.support.engine import QUIET, QUIET_READER


def reader_checkpoints(store: ObjectStore) -> list[object]:
    manifest = ManifestStore(store, "db").read_latest_required().value
    return [c.id for c in manifest.checkpoints if not isinstance(c.metadata, WriterCheckpoint)]


def manifest_count(store: ObjectStore) -> int:
    return len(ManifestStore(store, "db").list())


def test_reader_with_checkpoint_sees_a_fixed_state(engine_store: ObjectStore) -> None:
    with Db.open("db", engine_store, QUIET) as db:
        db.put(b"a", b"1")
        db.flush_memtable()
        db.put(b"b", b"2")
        checkpoint = db.create_checkpoint()
        db.put(b"a", b"changed")
        db.delete(b"b")
        db.put(b"c", b"3")
        db.flush_memtable()
        with DbReader.open("db", engine_store, checkpoint.id, QUIET_READER) as reader:
            assert dict(reader.scan()) == {b"a": b"1", b"b": b"2"}
            assert reader.get(b"c") is None
            assert reader.checkpoint_id == checkpoint.id and not reader.manages_checkpoint
        assert dict(db.scan()) == {b"a": b"changed", b"c": b"3"}
    assert checkpoint.id in reader_checkpoints(engine_store)  # a given checkpoint is left alone


def test_reader_refuses_missing_or_expired_checkpoints(memory_store: MemoryStore) -> None:
    clock = ManualRuntime(1_000.0)
    with Db.open("db", memory_store, QUIET, clock=clock) as db:
        short = db.create_checkpoint(options=CheckpointOptions(lifetime="10s"))
    import uuid

    with pytest.raises(CheckpointNotFoundError):
        DbReader.open("db", memory_store, uuid.uuid4(), QUIET_READER, clock=clock)
    clock.advance(11)
    with pytest.raises(CheckpointExpiredError):
        DbReader.open("db", memory_store, short.id, QUIET_READER, clock=clock)


def test_reader_lifetime_must_exceed_two_polls() -> None:
    with pytest.raises(ValueError, match="twice"):
        ReaderOptions(manifest_poll_interval=timedelta(seconds=10), checkpoint_lifetime=timedelta(seconds=20))


def test_managed_reader_follows_the_writer_without_fencing_it(engine_store: ObjectStore) -> None:
    db = Db.open("db", engine_store, QUIET)
    db.put(b"a", b"1")
    db.flush()
    reader = DbReader.open("db", engine_store, options=QUIET_READER)
    assert reader.manages_checkpoint and reader_checkpoints(engine_store) == [reader.checkpoint_id]
    assert reader.get(b"a") == b"1"  # replayed from the WAL
    db.put(b"b", b"2")
    db.flush()
    reader.poll()
    assert dict(reader.scan()) == {b"a": b"1", b"b": b"2"}  # tailed the new WAL SST
    db.flush_memtable()
    old = reader.checkpoint_id
    reader.poll()  # L0 changed: the checkpoint is re-established, the old one removed
    assert reader.checkpoint_id != old and reader_checkpoints(engine_store) == [reader.checkpoint_id]
    assert dict(reader.scan()) == {b"a": b"1", b"b": b"2"}
    db.put(b"c", b"3")
    db.flush()  # the writer still works: the reader never fenced it
    reader.close()
    assert reader_checkpoints(engine_store) == []
    db.close()


def test_polls_without_change_do_not_write_the_manifest(memory_store: MemoryStore) -> None:
    clock = ManualRuntime(10_000.0)
    options = ReaderOptions(
        manifest_poll_interval=timedelta(minutes=1), checkpoint_lifetime=timedelta(minutes=10)
    )
    with Db.open("db", memory_store, QUIET, clock=clock) as db:
        db.put(b"a", b"1")
        db.flush_memtable()
        reader = DbReader.open("db", memory_store, options=options, clock=clock)
        before = manifest_count(memory_store)
        for _ in range(20):
            clock.advance(10)
            reader.poll()
        assert manifest_count(memory_store) == before  # issue 1750: no rewrite per poll
        expire_before = (
            ManifestStore(memory_store, "db").read_latest_required().value.checkpoint(reader.checkpoint_id)
        )
        assert expire_before is not None and expire_before.expire_time_s is not None
        clock.advance(200)  # now past half of the 10 min lifetime
        reader.poll()
        refreshed = (
            ManifestStore(memory_store, "db").read_latest_required().value.checkpoint(reader.checkpoint_id)
        )
        assert refreshed is not None and refreshed.expire_time_s == expire_before.expire_time_s + 400
        assert manifest_count(memory_store) == before + 1
        reader.close()


def test_replaced_checkpoints_do_not_pile_up(memory_store: MemoryStore) -> None:
    with Db.open("db", memory_store, QUIET) as db:
        reader = DbReader.open("db", memory_store, options=QUIET_READER)
        for i in range(5):
            db.put(b"k%d" % i, b"v")
            db.flush_memtable()
            reader.poll()
            assert len(reader_checkpoints(memory_store)) == 1
        assert len(dict(reader.scan())) == 5
        reader.close()


def test_a_running_scan_pins_its_checkpoint(memory_store: MemoryStore) -> None:
    with Db.open("db", memory_store, QUIET) as db:
        for i in range(10):
            db.put(b"k%d" % i, b"v")
        db.flush_memtable()
        reader = DbReader.open("db", memory_store, options=QUIET_READER)
        scan = reader.scan()
        assert next(scan) == (b"k0", b"v")
        pinned = reader.checkpoint_id
        db.put(b"new", b"v")
        db.flush_memtable()
        reader.poll()  # re-established, but the scan still reads the old state
        assert pinned in reader_checkpoints(memory_store)
        assert len(list(scan)) == 9
        db.put(b"newer", b"v")
        db.flush_memtable()
        reader.poll()
        assert pinned not in reader_checkpoints(memory_store)
        assert reader_checkpoints(memory_store) == [reader.checkpoint_id]
        reader.close()


def test_writer_scan_pins_the_writer_checkpoint(memory_store: MemoryStore) -> None:
    with Db.open("db", memory_store, QUIET) as db:
        db.put(b"a", b"1")
        db.put(b"b", b"2")
        db.flush_memtable()
        scan = db.scan()
        next(scan)
        manifest = ManifestStore(memory_store, "db")
        pinned = [c.id for c in manifest.read_latest_required().value.checkpoints]
        db.put(b"c", b"3")
        db.flush_memtable()
        ids = {c.id for c in manifest.read_latest_required().value.checkpoints}
        assert set(pinned) <= ids and len(ids) == 2
        assert list(scan) == [(b"b", b"2")]
        db.put(b"d", b"4")
        db.flush_memtable()
        assert len(manifest.read_latest_required().value.checkpoints) == 1


def test_an_expired_reader_checkpoint_is_replaced_not_revived(memory_store: MemoryStore) -> None:
    clock = ManualRuntime(50_000.0)
    options = ReaderOptions(
        manifest_poll_interval=timedelta(minutes=1), checkpoint_lifetime=timedelta(minutes=10)
    )
    with Db.open("db", memory_store, QUIET, clock=clock) as db:
        db.put(b"a", b"1")
        db.flush_memtable()
        reader = DbReader.open("db", memory_store, options=options, clock=clock)
        stale = reader.checkpoint_id
        clock.advance(601)  # the reader stalled past its checkpoint's expiry
        reader.poll()
        assert reader.checkpoint_id != stale and reader_checkpoints(memory_store) == [reader.checkpoint_id]
        assert reader.get(b"a") == b"1"
        reader.close()
