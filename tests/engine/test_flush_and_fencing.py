"""Regressions: flush_memtable left flushed writes to the WAL; a fenced writer kept working.

1. An L0 flush could run before the last WAL segment of its memtable was written (the memtable was
   frozen — by ``flush_memtable`` or by a write filling it — while the flusher wrote the WAL). The
   manifest's ``replay_after_wal_id`` then stopped short of that segment's WAL SST, which was
   written afterwards (at the latest by ``close``): a fully flushed database looked unflushed, and
   reopening replayed writes that were already in L0.
2. Once a writer knows it is fenced, nothing it does succeeds: a ``FencedError`` from any path
   (including ``create_checkpoint``'s manifest commit) fails the writer, and every later write,
   read, flush or close raises it. Writes lost to a fence are only non-durable ones accepted before
   the fence was observed; a write acknowledged as durable is always seen by the new writer.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest

from slate_ops import Db, WriteBatch
from slate_ops.engine import CheckpointScope
from slate_ops.engine.wal_store import WalStore
from slate_ops.errors import FencedError
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import FaultInjectingStore, MemoryStore
from slate_ops.objstore.base import ObjectStore
from tests.support.engine import QUIET, quiet

VALUE = b"v" * 20


def wal_entries_after_replay_point(store: ObjectStore, path: str = "db") -> list[tuple[int, int, int, int]]:
    """(wal id, entries, min seq, max seq) of every non-empty WAL SST after ``replay_after_wal_id``."""
    manifest = ManifestStore(store, path).read_latest_required().value
    wal = WalStore(store, path)
    found = []
    for wal_id in wal.list_ids(manifest.replay_after_wal_id):
        seqs = [seq for _, seq, _, _ in wal.read(wal_id)]
        if seqs:
            found.append((wal_id, len(seqs), min(seqs), max(seqs)))
    return found


# --- flush_memtable -----------------------------------------------------------------------------


def test_a_memtable_frozen_during_a_wal_flush_goes_to_l0_after_its_wal(memory_store: MemoryStore) -> None:
    """Deterministic: a writer fills (and so freezes) the memtable while the flusher writes the WAL."""
    store = FaultInjectingStore(memory_store)
    db = Db.open("db", store, quiet(l0_sst_size_bytes=1_000_000))
    for i in range(10_000):  # ~750 kB of memtable: below the freeze size
        db.put(b"k%06d" % i, VALUE)
    gate = store.gate("put", key_contains="/wal/")
    flushing = threading.Thread(target=db.flush_memtable)
    flushing.start()
    assert gate.wait_until_reached(10)  # flush_memtable froze keys 0..9999 and writes their WAL SST
    for i in range(10_000, 25_000):  # meanwhile the next memtable fills up and freezes
        db.put(b"k%06d" % i, VALUE)
    gate.release()
    flushing.join(10)
    assert not flushing.is_alive()
    db.close()  # writes the WAL of the writes after the second freeze, and nothing else

    manifest = ManifestStore(memory_store, "db").read_latest_required().value
    assert 20_000 < manifest.last_l0_seq < 25_000  # both frozen memtables are in L0
    after_replay_point = wal_entries_after_replay_point(memory_store)
    # Only the writes after the second freeze may be there; none that L0 already holds.
    assert [found for found in after_replay_point if found[2] <= manifest.last_l0_seq] == []
    with Db.open("db", memory_store, QUIET) as reopened:
        assert reopened.get(b"k000000") == VALUE and reopened.get(b"k024999") == VALUE
        reopened.flush_memtable()
    assert wal_entries_after_replay_point(memory_store) == []


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"l0_sst_size_bytes": 1_300_000},  # memtables freeze while the writes go on (4 of them)
        {"wal_buffer_bytes": 10_000},  # the flusher writes the WAL many times meanwhile
    ],
)
def test_flush_memtable_then_close_leaves_nothing_to_replay(
    memory_store: MemoryStore, changes: dict[str, int]
) -> None:
    """The issue's scenario with a busy background flusher (1 ms): 20,000 keys, flush_memtable, close."""
    options = QUIET.model_copy(update={"wal_flush_interval": timedelta(milliseconds=1), **changes})
    db = Db.open("db", memory_store, options)
    for i in range(20_000):
        db.put(b"k%06d" % i, VALUE)
    db.flush_memtable()
    db.close()

    manifest = ManifestStore(memory_store, "db").read_latest_required().value
    assert manifest.last_l0_seq == 20_000
    # Every WAL SST after the replay point would be replayed: none may hold anything.
    assert wal_entries_after_replay_point(memory_store) == []


def test_an_empty_close_writes_no_wal_sst(memory_store: MemoryStore) -> None:
    with Db.open("db", memory_store, QUIET) as db:
        db.put(b"a", b"1")
        db.flush_memtable()
        ids_after_flush = WalStore(memory_store, "db").list_ids()
    assert WalStore(memory_store, "db").list_ids() == ids_after_flush
    with Db.open("db", memory_store, QUIET):
        pass
    wal = WalStore(memory_store, "db")
    assert all(not list(wal.read(i)) for i in wal.list_ids(ids_after_flush[-1]))  # only the new fence


# --- fencing --------------------------------------------------------------------------------------


def test_after_a_fenced_flush_every_call_raises_fenced_error(memory_store: MemoryStore) -> None:
    first = Db.open("db", memory_store, QUIET)
    first.put(b"durable", b"1", await_durable=True)
    second = Db.open("db", memory_store, QUIET)  # fences the first
    first.put(b"lost", b"x")  # accepted: the first writer cannot know yet
    with pytest.raises(FencedError):
        first.flush()
    accepted = 0
    for i in range(1_000):
        try:
            first.put(b"after%04d" % i, b"x")
            accepted += 1
        except FencedError:
            pass
    assert accepted == 0
    for call in (
        lambda: first.put(b"k", b"v", await_durable=True),
        lambda: first.delete(b"k"),
        lambda: first.write(WriteBatch().put(b"k", b"v")),
        lambda: first.get(b"durable"),  # would show writes that are lost
        lambda: first.scan(),
        lambda: first.flush(),
        lambda: first.flush_memtable(),
        lambda: first.create_checkpoint(),
        lambda: first.close(),
    ):
        with pytest.raises(FencedError):
            call()
    assert second.get(b"durable") == b"1" and second.get(b"lost") is None
    second.close()


def test_a_fenced_checkpoint_commit_fails_the_writer(memory_store: MemoryStore) -> None:
    """create_checkpoint(DURABLE) writes no WAL: its manifest commit is where the fence shows."""
    first = Db.open("db", memory_store, QUIET)
    first.put(b"a", b"1", await_durable=True)
    second = Db.open("db", memory_store, QUIET)
    with pytest.raises(FencedError):
        first.create_checkpoint(CheckpointScope.DURABLE)
    with pytest.raises(FencedError):
        first.put(b"b", b"2")
    with pytest.raises(FencedError):
        first.close()
    assert second.get(b"a") == b"1"
    second.close()


def test_the_background_flusher_observes_the_fence_and_no_put_is_accepted_afterwards(
    memory_store: MemoryStore,
) -> None:
    """Writers hammer the old writer while a new one opens: every durable acknowledgement survives,
    and no put that starts after the fence was observed (any call raised FencedError) is accepted."""
    options = QUIET.model_copy(update={"wal_flush_interval": timedelta(milliseconds=2)})
    first = Db.open("db", memory_store, options)
    observed = threading.Event()
    durable: list[bytes] = []
    accepted_after: list[bytes] = []
    started = threading.Barrier(5)

    def write(thread: int, await_durable: bool) -> None:
        started.wait()
        for i in range(1_000_000):
            key = b"t%d-%07d" % (thread, i)
            known = observed.is_set()
            try:
                first.put(key, b"x", await_durable=await_durable)
            except FencedError:
                observed.set()
                return
            if known:
                accepted_after.append(key)
            if await_durable:
                durable.append(key)

    threads = [threading.Thread(target=write, args=(t, t < 2)) for t in range(4)]
    for thread in threads:
        thread.start()
    started.wait()
    deadline = time.monotonic() + 30
    while len(durable) < 50 and time.monotonic() < deadline:
        time.sleep(0.001)
    second = Db.open("db", memory_store, QUIET)
    for thread in threads:
        thread.join(30)
        assert not thread.is_alive()
    assert observed.is_set() and accepted_after == []
    missing = [key for key in durable if second.get(key) != b"x"]
    assert missing == []
    with pytest.raises(FencedError):
        first.put(b"late", b"x")
    with pytest.raises(FencedError):
        first.close()
    second.close()
