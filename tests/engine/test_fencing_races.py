"""Fencing under races and across deletion (docs/design/coordination.md, "Fencing under races").

1. Two writers opening at once: A claims epoch e, B claims e + 1 and fences the WAL, then A's fence lands
   at or above B's. A's listing shows B's window fence in the chain, so A confirms its epoch before it
   fences: B's epoch, so A's open fails with nothing written — not even a fence at B's first WAL id —
   and B's durable put returns (docs/design/engine.md, "Opening, fencing, recovery"). A that listed
   the WAL before B's fence finds it by a HEAD where it wanted its own, and confirms before jumping it.
2. Data at the writer's next WAL id while the manifest still shows its epoch is another process with the
   same epoch: the writer fails with EpochCollisionError (recorded, raised by every later call) instead of
   retrying for ever.
3. A paused writer across soft + hard destroy: its durable put is not acknowledged (the confirmation sees
   its manifest gone), and ``close`` commits no manifest.

Every scenario is deterministic: a gate on the store holds one call back, and a thread joined with a
timeout turns "never returns" into a failure instead of a hung suite.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

import pytest

from slate_ops import Db
from slate_ops.engine import CheckpointScope, DbReader
from slate_ops.engine.wal_chain import is_data
from slate_ops.engine.wal_fence import WAL_FENCE_WINDOW, WINDOW_FENCE
from slate_ops.engine.wal_store import WalStore
from slate_ops.errors import DbDeletedError, EpochCollisionError, FencedError, SlateOpsError
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import FaultInjectingStore, MemoryStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.sst import entries_to_table
from tests.support.engine import QUIET, QUIET_READER

TIMEOUT_S = 20


def in_thread(call: Callable[[], object]) -> tuple[threading.Thread, list[BaseException], list[object]]:
    errors: list[BaseException] = []
    results: list[object] = []

    def run() -> None:
        try:
            results.append(call())
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors, results


def finished(thread: threading.Thread) -> bool:
    thread.join(TIMEOUT_S)
    return not thread.is_alive()


def test_two_writers_opening_at_once_only_the_newer_acknowledges(memory_store: MemoryStore) -> None:
    Db.open("db", memory_store, QUIET).close()
    racing = FaultInjectingStore(memory_store)
    held = racing.gate("list", key_contains="db/wal/")  # A's WAL listing, after A's claim
    opening, open_errors, opened = in_thread(lambda: Db.open("db", racing, QUIET))
    assert held.wait_until_reached(TIMEOUT_S)
    b = Db.open("db", memory_store, QUIET)  # claims e + 1 and fences the WAL while A's listing is held
    wal = WalStore(memory_store, "db")
    before = wal.list_ids()
    assert wal.size(b.next_wal_id - WAL_FENCE_WINDOW) == len(WINDOW_FENCE)  # B's window fence
    held.release()  # A now lists the WAL: B's fence is in the chain it walks
    assert finished(opening)
    assert opened == [] and len(open_errors) == 1 and isinstance(open_errors[0], FencedError)
    assert wal.list_ids() == before  # A created no fence, least of all at B's first WAL id

    b_first = b.next_wal_id
    putting, put_errors, _ = in_thread(lambda: b.put(b"k", b"from-b", await_durable=True))
    assert finished(putting), "B's durable put never returned"
    assert put_errors == []
    assert b.next_wal_id == b_first + 1  # B's WAL SST at its first id
    b.close()
    with Db.open("db", memory_store, QUIET) as reopened:
        assert reopened.get(b"k") == b"from-b"


def test_an_opener_that_listed_before_the_newer_fence_stops_at_it(memory_store: MemoryStore) -> None:
    """A lists the WAL before B fences it; A's create at the same id then fails, its HEAD finds B's
    window fence and A confirms its epoch before jumping it: B's epoch, so A opens nothing and creates
    no fence at B's first WAL id; B's acknowledged write survives."""
    Db.open("db", memory_store, QUIET).close()
    racing = FaultInjectingStore(memory_store)
    held = racing.gate("put", key_contains="db/wal/")  # A's window fence, after A's LIST
    opening, open_errors, opened = in_thread(lambda: Db.open("db", racing, QUIET))
    assert held.wait_until_reached(TIMEOUT_S)
    b = Db.open("db", memory_store, QUIET)
    b_fence = b.next_wal_id - WAL_FENCE_WINDOW
    held.release()
    assert finished(opening)
    assert opened == [] and len(open_errors) == 1 and isinstance(open_errors[0], FencedError)
    assert ("head", f"db/wal/{b_fence:020d}.sst") in racing.calls  # A found B's fence where it wanted its own
    assert WalStore(memory_store, "db").size(b.next_wal_id) is None  # and fenced nothing past it
    b.put(b"k", b"from-b", await_durable=True)
    b.close()
    with Db.open("db", memory_store, QUIET) as reopened:
        assert reopened.get(b"k") == b"from-b"


def test_a_lower_epoch_opener_whose_fence_lands_first_is_fenced_at_its_first_write(
    memory_store: MemoryStore,
) -> None:
    """The other order: A's fence and post-fence check pass before B claims; A's first WAL write then
    finds B's fence (or its confirmation B's epoch) and nothing A writes is acknowledged."""
    a = Db.open("db", memory_store, QUIET)
    b = Db.open("db", memory_store, QUIET)
    with pytest.raises(FencedError):
        a.put(b"k", b"from-a", await_durable=True)
    b.put(b"k", b"from-b", await_durable=True)
    b.close()
    with Db.open("db", memory_store, QUIET) as reopened:
        assert reopened.get(b"k") == b"from-b"


def test_data_at_the_next_wal_id_at_our_epoch_fails_the_writer(memory_store: MemoryStore) -> None:
    db = Db.open("db", memory_store, QUIET)
    db.put(b"a", b"1", await_durable=True)
    intruder = entries_to_table([(b"x", 999, 0, b"intruder")])
    assert WalStore(memory_store, "db").write(db.next_wal_id, intruder)  # same epoch: no manifest change

    putting, errors, _ = in_thread(lambda: db.put(b"b", b"2", await_durable=True))
    assert finished(putting), "the durable put was retried for ever"
    assert len(errors) == 1 and isinstance(errors[0], EpochCollisionError)
    assert "same epoch" in str(errors[0])
    for call in (lambda: db.put(b"c", b"3"), db.flush, lambda: db.get(b"a"), db.close):
        with pytest.raises(EpochCollisionError):
            call()


def test_many_lower_epoch_fences_are_skipped_up_to_the_bound(memory_store: MemoryStore) -> None:
    db = Db.open("db", memory_store, QUIET)
    wal = WalStore(memory_store, "db")
    first = db.next_wal_id
    for offset in range(3):  # three failed openers' fences in a row
        assert wal.create(first + offset, b"")
    db.put(b"k", b"v", await_durable=True)
    assert wal.size(first + 3) not in (None, 0)
    db.close()
    with Db.open("db", memory_store, QUIET) as reopened:
        assert reopened.get(b"k") == b"v"


# --- a paused writer across destroy ----------------------------------------------------------------


def delete_everything_under(store: ObjectStore, path: str) -> None:
    """What a hard destroy deletes today (every object under the path); H2's tombstone keeps more."""
    for meta in list(store.list(path + "/")):
        store.delete(meta.key)


def soft_then_hard_destroy(store: ObjectStore, path: str) -> None:
    from slate_ops.admin.destroy import destroy

    destroy(path, store, soft=True, dry_run=False)
    try:
        destroy(path, store, soft=False, dry_run=False)
    except SlateOpsError:
        delete_everything_under(store, path)  # a hard destroy refused here: delete as it would


@pytest.mark.parametrize("deletion", ["soft+hard", "objects deleted"])
def test_a_paused_writer_cannot_acknowledge_or_commit_into_a_destroyed_database(
    memory_store: MemoryStore, deletion: str
) -> None:
    db = Db.open("db", memory_store, QUIET)
    db.put(b"before", b"1", await_durable=True)
    db.flush_memtable()
    if deletion == "soft+hard":
        soft_then_hard_destroy(memory_store, "db")
    else:
        delete_everything_under(memory_store, "db")
    manifests_after_deletion = [f.meta.key for f in ManifestStore(memory_store, "db").list()]

    putting, errors, _ = in_thread(lambda: db.put(b"after", b"2", await_durable=True))
    assert finished(putting)
    assert len(errors) == 1 and isinstance(errors[0], FencedError)
    with pytest.raises(FencedError):
        db.close()
    assert [f.meta.key for f in ManifestStore(memory_store, "db").list()] == manifests_after_deletion
    # The refused write's WAL SST was withdrawn: no WAL data is left (fence objects may stay).
    assert [m.key for m in memory_store.list("db/wal/") if is_data(m.size)] == []


def test_a_paused_idle_writer_closing_after_deletion_commits_no_manifest(memory_store: MemoryStore) -> None:
    """No write pending: close's own confirmation finds the database gone before releasing its checkpoint."""
    db = Db.open("db", memory_store, QUIET)
    db.put(b"before", b"1", await_durable=True)
    delete_everything_under(memory_store, "db")
    with pytest.raises(DbDeletedError, match="destroyed or deleted"):
        db.close()
    assert ManifestStore(memory_store, "db").list() == []
    with Db.open("db", memory_store, QUIET) as fresh:  # the path is reusable and holds nothing old
        assert fresh.get(b"before") is None


def test_a_paused_writer_flushing_after_deletion_raises(memory_store: MemoryStore) -> None:
    db = Db.open("db", memory_store, QUIET)
    db.put(b"before", b"1", await_durable=True)
    delete_everything_under(memory_store, "db")
    db.put(b"after", b"2")
    with pytest.raises(DbDeletedError):
        db.flush()
    with pytest.raises(DbDeletedError):
        db.put(b"later", b"3")
    assert ManifestStore(memory_store, "db").list() == []
    # The WAL SST of the refused write was withdrawn: a database created here later cannot replay it.
    assert list(memory_store.list("db/wal/")) == []
    with Db.open("db", memory_store, QUIET) as fresh:
        assert fresh.get(b"after") is None and fresh.get(b"before") is None
    with contextlib.suppress(DbDeletedError):
        db.close()  # stops its flusher


def test_a_reader_of_the_newer_writer_sees_its_value(memory_store: MemoryStore) -> None:
    Db.open("db", memory_store, QUIET).close()
    racing = FaultInjectingStore(memory_store)
    held = racing.gate("list", key_contains="db/wal/")
    opening, open_errors, _ = in_thread(lambda: Db.open("db", racing, QUIET))
    assert held.wait_until_reached(TIMEOUT_S)
    with Db.open("db", memory_store, QUIET) as b:
        held.release()
        assert finished(opening) and open_errors and isinstance(open_errors[0], FencedError)
        b.put(b"k", b"b", await_durable=True)
        b.flush_memtable()
    with DbReader.open("db", memory_store, options=QUIET_READER) as reader:
        assert reader.get(b"k") == b"b"


def test_a_paused_writer_of_a_path_removed_by_hand_and_created_again_is_fenced(
    memory_store: MemoryStore,
) -> None:
    """The new database's epochs start again below the stale writer's: never read as corruption and
    retried for ever — the stale writer is fenced (DbDeletedError) and its durable put returns."""
    for _ in range(3):
        Db.open("db", memory_store, QUIET).close()
    stale = Db.open("db", memory_store, QUIET)  # writer epoch 4
    stale.put(b"old", b"1", await_durable=True)
    delete_everything_under(memory_store, "db")
    with Db.open("db", memory_store, QUIET) as fresh:  # writer epoch 1, more versions than the stale one saw
        fresh.put(b"new", b"2", await_durable=True)
        for _ in range(8):
            fresh.create_checkpoint(CheckpointScope.DURABLE)
    assert ManifestStore(memory_store, "db").read_latest_required().value.writer_epoch < stale.writer_epoch

    putting, errors, _ = in_thread(lambda: stale.put(b"b", b"refused", await_durable=True))
    assert finished(putting), "the stale writer's durable put never returned"
    assert len(errors) == 1 and isinstance(errors[0], DbDeletedError)
    assert "created again" in str(errors[0])
    with pytest.raises(DbDeletedError):
        stale.close()


def test_an_opener_whose_wal_replay_is_deleted_under_it_is_told_the_database_was_destroyed(
    memory_store: MemoryStore,
) -> None:
    """The interleaving explorer's schedule: W claims and fences, a soft + hard destroy runs while W's
    replay has listed the WAL but not fetched it; the missing WAL SST is reported as the fence it is
    (FencedError / DbDeletedError), never as ObjectNotFoundError."""
    with Db.open("db", memory_store, QUIET) as db:
        db.put(b"k", b"in the WAL", await_durable=True)  # not in L0: the next open replays it
    racing = FaultInjectingStore(memory_store)
    held = racing.gate("get", key_contains="db/wal/")  # W's replay fetch, after its listing
    opening, errors, opened = in_thread(lambda: Db.open("db", racing, QUIET))
    assert held.wait_until_reached(TIMEOUT_S)
    soft_then_hard_destroy(memory_store, "db")
    held.release()
    assert finished(opening)
    assert opened == [] and len(errors) == 1 and isinstance(errors[0], FencedError), errors
