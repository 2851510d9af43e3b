from __future__ import annotations

import threading

import pytest

from slate_ops.errors import CommitRetriesExhaustedError, SequenceConflictError
from slate_ops.objstore import CountingStore, FaultInjectingStore, MemoryStore, PutMode
from slate_ops.runtime import ManualRuntime
from tests.support.txn import counter_store, increment


def nonzero(counts: dict[str, int]) -> dict[str, int]:
    return {kind: n for kind, n in counts.items() if n}


def test_update_creates_consecutive_ids_and_latest_is_highest(memory_store: MemoryStore) -> None:
    seq = counter_store(memory_store)
    assert seq.read_latest() is None
    for expected in (1, 2, 3):
        committed = seq.update(increment)
        assert committed is not None and (committed.id, committed.value) == (expected, expected)
    keys = [m.key for m in memory_store.list("db/manifest/")]
    assert keys == [f"db/manifest/{i:020d}.manifest" for i in (1, 2, 3)]
    fresh = counter_store(memory_store).read_latest()
    assert fresh is not None and (fresh.id, fresh.value) == (3, 3)


def test_foreign_files_in_the_directory_are_ignored(memory_store: MemoryStore) -> None:
    seq = counter_store(memory_store)
    seq.update(increment)
    memory_store.put("db/manifest/notes.txt", b"x")
    memory_store.put("db/manifest/00000000000000000009.manifest.tmp", b"x")
    memory_store.put("db/manifest/9.manifest", b"x")
    assert [f.id for f in counter_store(memory_store).list()] == [1]


def test_change_returning_none_commits_nothing(memory_store: MemoryStore) -> None:
    seq = counter_store(memory_store)
    seq.update(increment)
    assert seq.update(lambda current: None) is not None
    assert [f.id for f in seq.list()] == [1]


def test_lost_race_reapplies_change_on_latest(memory_store: MemoryStore) -> None:
    a, b = counter_store(memory_store), counter_store(memory_store)
    a.update(increment)
    b.read_latest()
    a.update(increment)  # b's cache (id 1) is now stale
    committed = b.update(increment)
    assert committed is not None and (committed.id, committed.value) == (3, 3)


def test_concurrent_updates_lose_no_increment(memory_store: MemoryStore) -> None:
    threads, per_thread = 6, 15
    barrier = threading.Barrier(threads)

    def work() -> None:
        seq = counter_store(memory_store)
        barrier.wait()
        for _ in range(per_thread):
            seq.update(increment)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    latest = counter_store(memory_store).read_latest()
    assert latest is not None and latest.value == latest.id == threads * per_thread


def test_create_conflict_is_typed(memory_store: MemoryStore) -> None:
    seq = counter_store(memory_store)
    seq.create(1, 1)
    with pytest.raises(SequenceConflictError, match=r"00000000000000000001\.manifest"):
        seq.create(1, 99)
    assert seq.read(1).value == 1


def test_retries_are_bounded(memory_store: MemoryStore) -> None:
    seq = counter_store(memory_store, max_attempts=3)
    seq.update(increment)

    def steal(current: object) -> int:
        # Another process commits the id we are about to write, every time.
        assert current is not None
        memory_store.put(seq.key(current.id + 1), b"0", PutMode.create())  # type: ignore[attr-defined]
        return 0

    with pytest.raises(CommitRetriesExhaustedError, match="3 conflicting attempts"):
        seq.update(steal)


def test_update_without_conflict_costs_create_and_boundary_check(counting: CountingStore) -> None:
    seq = counter_store(counting)
    seq.update(increment)
    counting.reset()
    seq.update(increment)
    assert nonzero(counting.counts) == {"put": 1, "get": 1}  # create + boundary check


def test_reading_latest_with_current_cache_is_one_request(counting: CountingStore) -> None:
    seq = counter_store(counting)
    seq.update(increment)
    counting.reset()
    latest = seq.read_latest()
    assert latest is not None and latest.id == 1
    assert nonzero(counting.counts) == {"get": 1}  # probe of id 2 misses


def test_cold_read_lists_then_gets(counting: CountingStore) -> None:
    counter_store(counting).update(increment)
    counting.reset()
    assert counter_store(counting).read_latest() is not None
    assert nonzero(counting.counts) == {"list": 1, "get": 1}


def test_probing_falls_back_to_list_when_far_behind(counting: CountingStore) -> None:
    behind, ahead = counter_store(counting), counter_store(counting)
    behind.update(increment)
    ahead.read_latest()
    for _ in range(9):
        ahead.update(increment)
    counting.reset()
    latest = behind.read_latest()
    assert latest is not None and (latest.id, latest.value) == (10, 10)
    # four probes of ids 2..5 hit, then one LIST and a GET of the highest id
    assert nonzero(counting.counts) == {"get": 5, "list": 1}


def test_stale_cache_is_confirmed_by_list_not_trusted(memory_store: MemoryStore) -> None:
    clock = ManualRuntime(0.0)
    reader, writer = counter_store(memory_store, clock=clock), counter_store(memory_store)
    writer.update(increment)
    reader.read_latest()  # caches id 1
    for _ in range(4):
        writer.update(increment)
    memory_store.delete(reader.key(2))  # GC removed id 2, so probing id 2 misses
    clock.advance(61)  # past the 60 s cache TTL
    latest = reader.read_latest()
    assert latest is not None and latest.id == 5


def test_ambiguous_create_is_resolved_by_put_id(memory_store: MemoryStore) -> None:
    faulty = FaultInjectingStore(memory_store, seed=7)
    seq = counter_store(faulty)
    seq.update(increment)
    faulty.fail_after("put", key_contains="00000000000000000002")
    committed = seq.update(increment)
    assert committed is not None and committed.id == 2
    assert [f.id for f in seq.list()] == [1, 2]  # applied exactly once, no id 3
