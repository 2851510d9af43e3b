"""Regression (found by the chaos soak, issue 8): a WAL write whose outcome stayed unknown.

The put of a WAL SST was applied but its response was lost, and reading it back failed as well
(botocore's retries exhausted in a burst of S3 errors). The flush failed and kept the segment, as it
should; but every retry then created the same WAL id with a new put id, found the object there and
took it for another writer's: "exists but the manifest shows no newer writer" — forever. The writer
stalled and every ``await_durable`` write hung. A retry of a segment now uses the segment's put id,
so finding its own earlier write counts as success.
"""

from __future__ import annotations

import pytest

from slate_ops import Db, DbReader
from slate_ops.engine.wal_fence import WAL_FENCE_WINDOW, WINDOW_FENCE
from slate_ops.engine.wal_store import WalStore
from slate_ops.errors import FencedError, ObjectStoreError
from slate_ops.objstore import FaultInjectingStore, MemoryStore
from tests.support.engine import QUIET_READER, quiet, simulate_crash


def test_a_retried_wal_write_recognises_its_own_earlier_write(memory_store: MemoryStore) -> None:
    store = FaultInjectingStore(memory_store)
    with Db.open("db", store, quiet()) as db:
        db.put(b"a", b"1")
        store.fail_after("put", key_contains="/wal/")  # applied, then the response is lost
        store.fail("head", key_contains="/wal/")  # and the read-back fails too
        with pytest.raises(ObjectStoreError):
            db.flush()
        db.flush()  # the retry finds the segment's own write: durable, not a foreign writer
        db.put(b"b", b"2", await_durable=True)
        assert db.get(b"a") == b"1"
    wal = WalStore(memory_store, "db")
    fence, *ids = wal.list_ids()  # the open's window fence, then the WAL SSTs with no id skipped
    assert wal.size(fence) == len(WINDOW_FENCE)
    assert ids == list(range(fence + WAL_FENCE_WINDOW, fence + WAL_FENCE_WINDOW + len(ids)))
    with DbReader.open("db", memory_store, options=QUIET_READER) as reader:
        assert reader.get(b"a") == b"1" and reader.get(b"b") == b"2"


def test_a_wal_id_taken_by_a_newer_writer_still_fences(memory_store: MemoryStore) -> None:
    old = Db.open("db", memory_store, quiet())
    old.put(b"a", b"1")
    with Db.open("db", memory_store, quiet()) as new:  # fences at the next WAL id
        with pytest.raises(FencedError):
            old.flush()
        new.put(b"b", b"2")
    simulate_crash(old)
