"""GC of compacted SSTs: references, checkpoints, running compactions, issue 204."""

from __future__ import annotations

from datetime import timedelta

from ulid import ULID

from slate_ops import DbReader, admin
from slate_ops.compaction import CompactionRecord, CompactionsStore, Compactor, CompactorOptions
from slate_ops.config import CheckpointOptions
from slate_ops.layout import sst_key
from slate_ops.manifest.store import COMPACTOR_EPOCH, ManifestStore
from slate_ops.objstore import MemoryStore
from slate_ops.runtime import ManualRuntime
from tests.support.gc import MIN_AGE, gc, keys, latest, write_rounds

FAST_CHECKPOINT = CompactorOptions(min_sources=2, compaction_checkpoint_lifetime=timedelta(seconds=1))


def ssts(store: MemoryStore) -> set[str]:
    return keys(store, "db/compacted/")


def referenced(store: MemoryStore) -> set[str]:
    return {sst_key("db", s.id) for s in latest(store)[1].ssts}


def compact(store: MemoryStore, clock: ManualRuntime, options: CompactorOptions = FAST_CHECKPOINT) -> None:
    compactor = Compactor("db", store, options, clock=clock)
    try:
        assert compactor.run_once() is not None
    finally:
        compactor.close()


def test_sst_written_long_ago_and_dereferenced_now_survives_min_age(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    """Issue 204: SlateDB would delete these inputs at once, because they were written long ago."""
    write_rounds(clocked_memory_store, clock, 4)
    inputs = ssts(clocked_memory_store)
    clock.advance(10_000)
    compact(
        clocked_memory_store, clock
    )  # dereferences all 4 inputs at T; its checkpoint pins them until T + 1
    clock.advance(2)
    report = gc(clocked_memory_store, clock).run_once(dry_run=False)
    assert report.resource("compacted").count == 0  # type: ignore[union-attr]
    assert inputs <= ssts(clocked_memory_store)
    clock.advance(MIN_AGE - 2)  # T + min_age: the last reference ended only min_age - 1 s ago
    assert gc(clocked_memory_store, clock).run_once(dry_run=False).resource("compacted").count == 0  # type: ignore[union-attr]
    clock.advance(1)
    report = gc(clocked_memory_store, clock).run_once(dry_run=False)
    assert {d.key for d in report.resource("compacted").deleted} == inputs  # type: ignore[union-attr]
    assert ssts(clocked_memory_store) == referenced(clocked_memory_store)


def test_checkpointed_ssts_are_kept_until_the_checkpoint_goes(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    model = write_rounds(clocked_memory_store, clock, 4)
    checkpoint = admin.create_checkpoint(
        "db", clocked_memory_store, CheckpointOptions(name="keep"), clock=clock
    )
    inputs = ssts(clocked_memory_store)
    compact(clocked_memory_store, clock)
    clock.advance(10_000)
    gc(clocked_memory_store, clock).run_once(dry_run=False)
    assert inputs <= ssts(clocked_memory_store)
    with DbReader.open("db", clocked_memory_store, checkpoint.id, clock=clock) as reader:
        assert dict(reader.scan()) == model
    admin.delete_checkpoint("db", clocked_memory_store, checkpoint.id, dry_run=False)
    assert gc(clocked_memory_store, clock).run_once(dry_run=False).resource("compacted").count == 0  # type: ignore[union-attr]
    clock.advance(MIN_AGE)  # min_age counts from the checkpoint's removal
    report = gc(clocked_memory_store, clock).run_once(dry_run=False)
    assert {d.key for d in report.resource("compacted").deleted} == inputs  # type: ignore[union-attr]


def put_orphan(store: MemoryStore) -> str:
    key = sst_key("db", ULID())
    store.put(key, b"an output nobody committed")
    return key


def test_orphans_are_deleted_once_old_but_outputs_of_a_running_compaction_are_kept(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    write_rounds(clocked_memory_store, clock, 1)
    fenced, _ = ManifestStore(clocked_memory_store, "db").claim(COMPACTOR_EPOCH)  # a compactor at epoch 1 ...
    state = CompactionsStore(clocked_memory_store, "db")
    state.claim(fenced.epoch, clock.now())
    old_orphan = put_orphan(clocked_memory_store)
    clock.advance(1000)
    running = CompactionRecord("c1", fenced.epoch, "l0", "running", (), started_at_s=clock.now())
    state.record(running)  # ... starts a compaction that runs for an hour
    clock.advance(60)
    output = put_orphan(clocked_memory_store)
    clock.advance(3600)
    report = gc(clocked_memory_store, clock).run_once(dry_run=False)
    assert {d.key for d in report.resource("compacted").deleted} == {old_orphan}  # type: ignore[union-attr]
    assert output in ssts(clocked_memory_store)

    state.record(CompactionRecord("c1", fenced.epoch, "l0", "failed", (), started_at_s=running.started_at_s))
    report = gc(clocked_memory_store, clock).run_once(dry_run=False)
    assert {d.key for d in report.resource("compacted").deleted} == {output}  # type: ignore[union-attr]


def test_a_running_record_of_a_fenced_compactor_protects_nothing(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    write_rounds(clocked_memory_store, clock, 1)
    fenced, _ = ManifestStore(clocked_memory_store, "db").claim(COMPACTOR_EPOCH)
    state = CompactionsStore(clocked_memory_store, "db")
    state.claim(fenced.epoch, clock.now())
    state.record(CompactionRecord("c1", fenced.epoch, "l0", "running", (), started_at_s=clock.now()))
    output = put_orphan(clocked_memory_store)
    ManifestStore(clocked_memory_store, "db").claim(
        COMPACTOR_EPOCH
    )  # a newer compactor fenced it (state not yet claimed)
    clock.advance(10_000)
    report = gc(clocked_memory_store, clock).run_once(dry_run=False)
    assert {d.key for d in report.resource("compacted").deleted} == {output}  # type: ignore[union-attr]


def test_referenced_ssts_are_never_deleted(clocked_memory_store: MemoryStore, clock: ManualRuntime) -> None:
    write_rounds(clocked_memory_store, clock, 5)
    compact(clocked_memory_store, clock)
    clock.advance(100_000)
    gc(clocked_memory_store, clock).run_once(dry_run=False)
    assert ssts(clocked_memory_store) == referenced(clocked_memory_store) and referenced(clocked_memory_store)
