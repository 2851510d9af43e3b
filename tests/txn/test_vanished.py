"""A cached version that vanished is never "still the latest" (docs/design/coordination.md, "Fencing under
races"): the LIST starts at the cached id itself, and the confirmation behind a durable acknowledgement
(one LIST from the cached version: one state of the directory) sees a deletion, a re-creation, a newer
version at our epoch and a newer epoch."""

from __future__ import annotations

import pytest

from slate_ops.errors import DbDeletedError, FencedError, NamespaceDeletedError
from slate_ops.objstore import CountingStore, MemoryStore
from slate_ops.runtime import ManualRuntime
from slate_ops.txn import EpochField, FenceableStore
from tests.support.txn import counter_store, increment


def nonzero(counts: dict[str, int]) -> dict[str, int]:
    return {kind: n for kind, n in counts.items() if n}


def delete_namespace(memory: MemoryStore) -> None:
    for meta in list(memory.list("db/manifest/")):
        memory.delete(meta.key)


def test_a_stale_cache_whose_version_vanished_raises_instead_of_reading_it_as_latest(
    memory_store: MemoryStore,
) -> None:
    clock = ManualRuntime(0.0)
    seq = counter_store(memory_store, clock=clock)
    seq.update(increment)
    seq.update(increment)
    delete_namespace(memory_store)
    clock.set(3600.0)  # the cache is re-confirmed by LIST
    with pytest.raises(NamespaceDeletedError, match="db/manifest: version 2"):
        seq.read_latest()


def test_a_vanished_floor_with_newer_versions_is_gc_not_deletion(memory_store: MemoryStore) -> None:
    clock = ManualRuntime(0.0)
    seq = counter_store(memory_store, clock=clock)
    seq.update(increment)
    other = counter_store(memory_store)
    other.update(increment)
    other.update(increment)
    memory_store.delete(seq.key(1))  # GC deleted the old version once newer ones existed
    clock.set(3600.0)
    latest = seq.read_latest()
    assert latest is not None and latest.id == 3


def test_the_list_includes_the_floor_and_costs_what_it_did(counting: CountingStore) -> None:
    clock = ManualRuntime(0.0)
    seq = counter_store(counting, clock=clock)
    seq.update(increment)
    clock.set(3600.0)
    counting.reset()
    latest = seq.read_latest()
    assert latest is not None and latest.id == 1
    assert nonzero(counting.counts) == {"list": 1}  # the floor listed, nothing newer: no GET


def test_confirm_is_one_round_trip_when_nothing_changed(counting: CountingStore) -> None:
    seq = counter_store(counting)
    seq.update(increment)
    counting.reset()
    confirmed = seq.confirm_latest()
    assert confirmed is not None and confirmed.id == 1
    assert nonzero(counting.counts) == {"list": 1}  # one state of the directory, no GET


def test_confirm_sees_the_cached_version_deleted(memory_store: MemoryStore) -> None:
    seq = counter_store(memory_store)
    seq.update(increment)  # a fresh cache: read_latest's probe alone would not notice
    delete_namespace(memory_store)
    with pytest.raises(NamespaceDeletedError):
        seq.confirm_latest()


def test_confirm_sees_the_namespace_re_created(memory_store: MemoryStore) -> None:
    seq = counter_store(memory_store)
    seq.update(increment)
    delete_namespace(memory_store)
    counter_store(memory_store).update(increment)  # a new namespace at the same path: id 1 again
    with pytest.raises(NamespaceDeletedError):
        seq.confirm_latest()


def test_confirm_follows_newer_versions(memory_store: MemoryStore) -> None:
    seq = counter_store(memory_store)
    seq.update(increment)
    other = counter_store(memory_store)
    for _ in range(6):  # more than the probe limit
        other.update(increment)
    confirmed = seq.confirm_latest()
    assert confirmed is not None and (confirmed.id, confirmed.value) == (7, 7)


FIELD: EpochField[int] = EpochField("writer", lambda v: v // 1000, lambda v, e: e * 1000 + v % 1000)


def test_fenceable_confirm_raises_fenced_for_a_newer_epoch_and_deleted_for_a_deletion(
    memory_store: MemoryStore,
) -> None:
    counter_store(memory_store).update(lambda current: 0)
    ours, _ = FenceableStore.claim(counter_store(memory_store), FIELD)
    assert ours.confirm().value == 1000
    same_epoch = counter_store(memory_store)
    same_epoch.update(increment)  # a compactor-like commit at our epoch: still ours
    assert ours.confirm().value == 1001
    newer, _ = FenceableStore.claim(counter_store(memory_store), FIELD)
    with pytest.raises(FencedError) as fenced:
        ours.confirm()
    assert not isinstance(fenced.value, DbDeletedError)
    delete_namespace(memory_store)
    with pytest.raises(DbDeletedError, match="destroyed or deleted"):
        newer.confirm()
