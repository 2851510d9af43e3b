"""Regression: flush_memtable left writes already in L0 to be written to the WAL again.

An L0 flush could run before the last WAL segment of its memtable was written (the memtable was
frozen — by ``flush_memtable`` or by a write filling it — while the flusher wrote the WAL). The
manifest's ``replay_after_wal_id`` then stopped short of that segment's WAL SST, which was written
afterwards (at the latest by ``close``): a fully flushed database looked unflushed, and reopening
replayed writes that were already in L0.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from slate_ops import Db
from slate_ops.engine.wal import WalStore
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import FaultInjectingStore, MemoryStore
from slate_ops.objstore.base import ObjectStore
from tests.engine.conftest import QUIET, quiet

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


def test_a_memtable_frozen_during_a_wal_flush_goes_to_l0_after_its_wal(memory: MemoryStore) -> None:
    """Deterministic: a writer fills (and so freezes) the memtable while the flusher writes the WAL."""
    store = FaultInjectingStore(memory)
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

    manifest = ManifestStore(memory, "db").read_latest_required().value
    assert 20_000 < manifest.last_l0_seq < 25_000  # both frozen memtables are in L0
    after_replay_point = wal_entries_after_replay_point(memory)
    # Only the writes after the second freeze may be there; none that L0 already holds.
    assert [found for found in after_replay_point if found[2] <= manifest.last_l0_seq] == []
    with Db.open("db", memory, QUIET) as reopened:
        assert reopened.get(b"k000000") == VALUE and reopened.get(b"k024999") == VALUE
        reopened.flush_memtable()
    assert wal_entries_after_replay_point(memory) == []


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"l0_sst_size_bytes": 400_000},  # memtables freeze while the writes go on
        {"wal_buffer_bytes": 10_000},  # the flusher writes the WAL many times meanwhile
    ],
)
def test_flush_memtable_then_close_leaves_nothing_to_replay(
    memory: MemoryStore, changes: dict[str, int]
) -> None:
    """The issue's scenario with a busy background flusher (1 ms): 20,000 keys, flush_memtable, close."""
    options = QUIET.model_copy(update={"wal_flush_interval": timedelta(milliseconds=1), **changes})
    db = Db.open("db", memory, options)
    for i in range(20_000):
        db.put(b"k%06d" % i, VALUE)
    db.flush_memtable()
    db.close()

    manifest = ManifestStore(memory, "db").read_latest_required().value
    assert manifest.last_l0_seq == 20_000
    # Every WAL SST after the replay point would be replayed: none may hold anything.
    assert wal_entries_after_replay_point(memory) == []


def test_an_empty_close_writes_no_wal_sst(memory: MemoryStore) -> None:
    with Db.open("db", memory, QUIET) as db:
        db.put(b"a", b"1")
        db.flush_memtable()
        ids_after_flush = WalStore(memory, "db").list_ids()
    assert WalStore(memory, "db").list_ids() == ids_after_flush
    with Db.open("db", memory, QUIET):
        pass
    wal = WalStore(memory, "db")
    assert all(not list(wal.read(i)) for i in wal.list_ids(ids_after_flush[-1]))  # only the new fence
