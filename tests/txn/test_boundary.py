from __future__ import annotations

import threading

import pytest

from slate_ops.errors import BoundaryMissingError, BoundaryViolationError, CorruptObjectError
from slate_ops.objstore import FaultInjectingStore, MemoryStore
from slate_ops.txn import BoundaryObject
from tests.support.txn import counter_store, increment


def test_missing_boundary_reads_as_zero_and_first_advance_creates_it(memory_store: MemoryStore) -> None:
    boundary = BoundaryObject(memory_store, "db", "manifest")
    assert boundary.read() == (0, None)
    assert boundary.advance(4) == 4
    assert memory_store.get("db/gc/manifest.boundary").data == b"4"


def test_advance_is_monotonic(memory_store: MemoryStore) -> None:
    boundary = BoundaryObject(memory_store, "db", "compactions")
    boundary.advance(10)
    assert boundary.advance(3) == 10
    assert boundary.read()[0] == 10
    assert memory_store.get("db/gc/compactions.boundary").data == b"10"


def test_concurrent_advances_end_at_the_maximum(memory_store: MemoryStore) -> None:
    targets = list(range(1, 41))
    barrier = threading.Barrier(len(targets))

    def advance(target: int) -> None:
        barrier.wait()
        BoundaryObject(memory_store, "db", "manifest").advance(target)

    threads = [threading.Thread(target=advance, args=(t,)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert BoundaryObject(memory_store, "db", "manifest").read()[0] == max(targets)


def test_boundary_seen_then_missing_is_an_error_not_zero(memory_store: MemoryStore) -> None:
    boundary = BoundaryObject(memory_store, "db", "manifest")
    boundary.advance(2)
    memory_store.delete(boundary.key)
    with pytest.raises(BoundaryMissingError, match=r"db/gc/manifest\.boundary"):
        boundary.check(5, "db/manifest/5")


def test_garbage_boundary_is_corrupt(memory_store: MemoryStore) -> None:
    memory_store.put("db/gc/manifest.boundary", b"12abc")
    with pytest.raises(CorruptObjectError, match=r"manifest\.boundary"):
        BoundaryObject(memory_store, "db", "manifest").read()


def test_create_at_or_behind_boundary_is_not_a_commit(memory_store: MemoryStore) -> None:
    seq = counter_store(memory_store)
    seq.update(increment)
    seq.advance_boundary(2)
    with pytest.raises(BoundaryViolationError) as raised:
        seq.create(2, 42)
    assert (raised.value.object_id, raised.value.boundary) == (2, 2)
    assert seq.cached() is not None and seq.cached().id == 1  # type: ignore[union-attr]


def test_stalled_writer_cannot_resurrect_a_deleted_id(memory_store: MemoryStore) -> None:
    """The data-loss sequence of SlateDB's GC boundary-file design "Motivation", replayed step by step."""
    faulty = FaultInjectingStore(memory_store)
    stalled, other = counter_store(faulty), counter_store(memory_store)
    other.update(increment)  # N = 1
    stalled.read_latest()
    gate = faulty.gate("put", key_contains="00000000000000000002.manifest")
    outcome: dict[str, object] = {}

    def stalled_writer() -> None:
        outcome["committed"] = stalled.update(lambda current: 1000)  # prepares N+1 = 2, then stalls

    thread = threading.Thread(target=stalled_writer)
    thread.start()
    assert gate.wait_until_reached(5)
    for _ in range(3):  # others commit 2, 3, 4
        other.update(increment)
    other.advance_boundary(3)  # GC: boundary first, then delete 1..3
    for object_id in (1, 2, 3):
        memory_store.delete(other.key(object_id))
    gate.release()  # the stalled create of id 2 now succeeds at the object store...
    thread.join(5)
    # ...but it is behind the boundary, so the writer re-read and re-applied on the latest (4).
    committed = outcome["committed"]
    assert committed is not None and committed.id == 5  # type: ignore[attr-defined]
    latest = counter_store(memory_store).read_latest()
    assert latest is not None and (latest.id, latest.value) == (5, 1000)


def test_writer_behind_gc_recovers_with_one_stale_create(memory_store: MemoryStore) -> None:
    stale, other = counter_store(memory_store), counter_store(memory_store)
    stale.update(increment)  # caches id 1
    for _ in range(20):
        other.update(increment)  # ids 2..21
    other.advance_boundary(20)
    for object_id in range(1, 21):
        memory_store.delete(other.key(object_id))
    committed = stale.update(increment)
    assert committed is not None and (committed.id, committed.value) == (22, 22)
    # exactly one stale create (id 2, behind the boundary, withdrawn at once), then a LIST found id 21
    assert [f.id for f in other.list()] == [21, 22]
