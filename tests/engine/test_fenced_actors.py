"""A fenced actor on every commit path: each path refuses on its own (issue 19, "blind spots").

The writer's L0 flush is the held-out mutation's blind spot: a fenced writer whose WAL write already went
through must not commit its L0 (readers would see the value the new writer overwrote). Each other commit
path — checkpoints, close, ingest, the compactor's manifest and ``.compactions`` commits, an admin
update from a stale cache — gets its own test, so dropping the epoch check on any one of them fails a test
that exercises only that path.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

import pytest
from ulid import ULID

from slate_ops import Db
from slate_ops.compaction import CompactorOptions
from slate_ops.compaction.compactor import Compactor
from slate_ops.compaction.state import CompactionsStore
from slate_ops.engine import CheckpointScope, DbReader
from slate_ops.errors import FencedError, SlateOpsError
from slate_ops.layout import sst_key
from slate_ops.manifest.model import CompactedSst
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import FaultInjectingStore, MemoryStore
from slate_ops.sst import encode_sst, entries_to_table
from tests.support.engine import QUIET, QUIET_READER


def latest_id(memory: MemoryStore) -> int:
    return ManifestStore(memory, "db").read_latest_required().id


def read_with_a_reader(memory: MemoryStore, key: bytes) -> bytes | None:
    with DbReader.open("db", memory, options=QUIET_READER) as reader:
        return reader.get(key)


# --- the writer ---------------------------------------------------------------------------------


def test_a_fenced_writer_whose_wal_write_succeeded_cannot_commit_its_l0(memory_store: MemoryStore) -> None:
    a = Db.open("db", memory_store, QUIET)
    a.put(b"k", b"old", await_durable=True)  # A's WAL write went through
    b = Db.open("db", memory_store, QUIET)  # replays A's WAL, fences A
    b.put(b"k", b"new", await_durable=True)
    b.flush_memtable()
    committed = latest_id(memory_store)
    with pytest.raises(FencedError):
        a.flush_memtable()  # A's memtable (k=old) must not reach L0 above B's
    assert latest_id(memory_store) == committed
    assert read_with_a_reader(memory_store, b"k") == b"new"
    with pytest.raises(FencedError):
        a.put(b"x", b"y")
    b.close()
    with Db.open("db", memory_store, QUIET) as reopened:
        assert reopened.get(b"k") == b"new"


@pytest.mark.parametrize("scope", [CheckpointScope.ALL, CheckpointScope.DURABLE])
def test_a_fenced_writer_cannot_create_a_checkpoint(
    memory_store: MemoryStore, scope: CheckpointScope
) -> None:
    a = Db.open("db", memory_store, QUIET)
    a.put(b"k", b"old", await_durable=True)
    b = Db.open("db", memory_store, QUIET)
    committed = latest_id(memory_store)
    with pytest.raises(FencedError):
        a.create_checkpoint(scope)
    assert latest_id(memory_store) == committed
    manifest = ManifestStore(memory_store, "db").read_latest_required().value
    assert [c.id for c in manifest.checkpoints if c.id == a.writer_checkpoint_id] == []
    b.close()
    with contextlib.suppress(FencedError):
        a.close()  # stops its flusher; fenced, it cannot release its checkpoint


def test_a_fenced_writer_cannot_release_its_checkpoint_on_close(memory_store: MemoryStore) -> None:
    a = Db.open("db", memory_store, QUIET)
    b = Db.open("db", memory_store, QUIET)
    committed = latest_id(memory_store)
    with pytest.raises(FencedError):
        a.close()
    assert latest_id(memory_store) == committed
    b.put(b"k", b"v", await_durable=True)
    b.close()


def test_a_fenced_writer_cannot_ingest_l0(memory_store: MemoryStore) -> None:
    a = Db.open("db", memory_store, QUIET)
    a.put(b"k", b"old", await_durable=True)
    seq = a.reserve_ingest_seq()  # flushes to L0 and reserves the number
    sst_id = ULID()
    data, info = encode_sst(entries_to_table([(b"k", seq, 0, b"ingested")]))
    memory_store.put(sst_key("db", sst_id), data)
    b = Db.open("db", memory_store, QUIET)
    committed = latest_id(memory_store)
    with pytest.raises(FencedError):
        a.ingest_l0([CompactedSst(sst_id, info)], seq)
    assert latest_id(memory_store) == committed
    manifest = ManifestStore(memory_store, "db").read_latest_required().value
    assert sst_id not in {s.id for s in manifest.ssts}
    assert b.get(b"k") == b"old"
    b.close()
    with contextlib.suppress(FencedError):
        a.close()  # stops its flusher; fenced, it cannot release its checkpoint


# --- the compactor ------------------------------------------------------------------------------


def a_database_with_l0(memory: MemoryStore) -> None:
    with Db.open("db", memory, QUIET) as db:
        for round_ in range(3):
            for i in range(50):
                db.put(b"k%03d" % i, b"r%d" % round_)
            db.flush_memtable()


def run_in_thread(call: Callable[[], object]) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


def test_a_fenced_compactor_cannot_commit_its_result_to_the_manifest(memory_store: MemoryStore) -> None:
    a_database_with_l0(memory_store)
    gated = FaultInjectingStore(memory_store)
    first = Compactor("db", gated, CompactorOptions())
    outputs = gated.gate("put", key_contains="db/compacted/")  # the first compactor's output SSTs
    running, errors = run_in_thread(lambda: first.run_once(full=True))
    assert outputs.wait_until_reached(20)
    second = Compactor("db", memory_store, CompactorOptions())  # bumps the compactor epoch
    before = ManifestStore(memory_store, "db").read_latest_required()
    outputs.release()
    running.join(20)
    assert not running.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], FencedError)
    after = ManifestStore(memory_store, "db").read_latest_required()
    assert after.id == before.id and after.value.compacted == before.value.compacted
    state = CompactionsStore(memory_store, "db").read()
    assert all(r.status != "completed" for r in state.compactions if r.epoch == first.epoch)
    assert second.run_once(full=True) is not None  # the newer compactor works on
    second.close()
    assert read_with_a_reader(memory_store, b"k001") == b"r2"


def test_a_fenced_compactor_cannot_commit_to_compactions(memory_store: MemoryStore) -> None:
    a_database_with_l0(memory_store)
    gated = FaultInjectingStore(memory_store)
    first = Compactor("db", gated, CompactorOptions())
    records = gated.gate("put", key_contains="db/compactions/")  # recording "running"
    running, errors = run_in_thread(lambda: first.run_once(full=True))
    assert records.wait_until_reached(20)
    Compactor("db", memory_store, CompactorOptions())
    compactions_before = [f.id for f in CompactionsStore(memory_store, "db").sequence.list()]
    records.release()
    running.join(20)
    assert not running.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], FencedError)
    assert [f.id for f in CompactionsStore(memory_store, "db").sequence.list()] == compactions_before
    assert all(r.epoch != first.epoch for r in CompactionsStore(memory_store, "db").read().compactions)


# --- an admin process ----------------------------------------------------------------------------


def test_an_admin_update_from_a_stale_cache_applies_to_the_latest(memory_store: MemoryStore) -> None:
    """The admin's cached manifest is older than a writer's commits: its change is re-applied to the
    latest version, so nothing the writer committed (its checkpoint, its L0) is lost."""
    Db.open("db", memory_store, QUIET).close()
    admin = ManifestStore(memory_store, "db")
    stale = admin.read_latest_required()
    with Db.open("db", memory_store, QUIET) as db:
        db.put(b"k", b"v")
        db.flush_memtable()
        writer_state = ManifestStore(memory_store, "db").read_latest_required()
        assert writer_state.id > stale.id
        committed = admin.update(lambda current: current.value.with_changes(wal_id_last_seen=99))
        assert committed.id == writer_state.id + 1
        assert committed.value.l0 == writer_state.value.l0
        assert committed.value.checkpoints == writer_state.value.checkpoints
        assert committed.value.writer_epoch == writer_state.value.writer_epoch
        db.put(b"k2", b"v2", await_durable=True)  # the writer is not fenced by an admin commit
    assert read_with_a_reader(memory_store, b"k") == b"v"


def test_an_admin_update_from_a_stale_cache_cannot_recreate_a_deleted_database(
    memory_store: MemoryStore,
) -> None:
    with Db.open("db", memory_store, QUIET) as db:
        db.put(b"k", b"v", await_durable=True)
    admin = ManifestStore(memory_store, "db")
    admin.read_latest_required()
    from slate_ops.admin.destroy import destroy

    destroy("db", memory_store, soft=True, dry_run=False)
    destroy("db", memory_store, soft=False, dry_run=False)
    tombstone = ManifestStore(memory_store, "db").list()[-1].id
    with pytest.raises(SlateOpsError):
        admin.update(lambda current: current.value.with_changes(wal_id_last_seen=99))
    # Its create below the tombstone is a stale write the boundary rejected (withdrawn by the admin
    # process itself); nothing follows the tombstone and the path still reads as "no database".
    assert ManifestStore(memory_store, "db").list()[-1].id == tombstone
    assert ManifestStore(memory_store, "db").read_latest() is None
    with Db.open("db", memory_store, QUIET) as fresh:
        assert fresh.get(b"k") is None
