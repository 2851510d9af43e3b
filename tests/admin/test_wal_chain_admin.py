"""Every admin reader and fencer of the WAL reads it as a chain (docs/design/engine.md, "Several WAL PUTs
in flight"): a fenced pipelined writer left WAL ``N`` missing and orphans past it, which no operation may
take for acknowledged writes — checkpoints, clones, Spark's WAL table, rescaling's flushed check,
destroy, GC of a destroyed database (its dry-run plan) and rollback."""

from __future__ import annotations

import pytest

from slate_ops import Db, DbReader, admin
from slate_ops.engine.batch import KIND_VALUE
from slate_ops.engine.wal_fence import WAL_FENCE_WINDOW, WINDOW_FENCE
from slate_ops.engine.wal_store import WalStore
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import MemoryStore
from slate_ops.runtime import ManualRuntime
from slate_ops.spark.read import wal_table
from slate_ops.sst import entries_to_table
from tests.support.engine import QUIET, QUIET_READER, simulate_crash

DB = "dbs/source"
W = WAL_FENCE_WINDOW


def crashed_with_orphans(store: MemoryStore, *, flush: bool = False) -> int:
    """A writer acknowledges ``k = acked`` (only in the WAL unless ``flush``), then crashes with its WAL
    ``gap`` missing and ``gap + 1``, ``gap + 2`` landed (``k = orphan``, never acknowledged)."""
    db = Db.open(DB, store, QUIET)
    db.put(b"k", b"acked", await_durable=True)
    if flush:
        db.flush_memtable()
    gap = db.next_wal_id
    simulate_crash(db)
    wal = WalStore(store, DB)
    for wal_id in (gap + 1, gap + 2):
        assert wal.write(wal_id, entries_to_table([(b"k", 10_000 + wal_id, KIND_VALUE, b"orphan")]))
    return gap


def wal_ids(store: MemoryStore, path: str) -> list[int]:
    return WalStore(store, path).list_ids()


def test_a_checkpoint_covers_the_chain_not_the_orphans() -> None:
    store = MemoryStore()
    gap = crashed_with_orphans(store)
    created = admin.create_checkpoint(DB, store)
    pinned = ManifestStore(store, DB).read(created.manifest_id).value
    assert pinned.wal_id_last_seen == gap - 1
    with DbReader.open(DB, store, created.id, options=QUIET_READER) as reader:
        assert reader.get(b"k") == b"acked"


def test_a_clone_copies_the_parents_chain_and_replays_what_it_replays() -> None:
    store = MemoryStore()
    gap = crashed_with_orphans(store)
    admin.create_clone("dbs/clone", DB, store, clock=ManualRuntime(1_000))
    parent_chain = WalStore(store, DB).chain()
    assert wal_ids(store, "dbs/clone") == [1, *(i for i, _ in parent_chain.segments)]  # fence + data
    assert WalStore(store, "dbs/clone").size(1) == len(WINDOW_FENCE)
    assert not {gap + 1, gap + 2} & set(wal_ids(store, "dbs/clone"))
    with Db.open("dbs/clone", store, QUIET) as clone:
        assert clone.get(b"k") == b"acked"


def test_sparks_wal_table_reads_the_chain_up_to_the_bound() -> None:
    store = MemoryStore()
    gap = crashed_with_orphans(store)
    manifest = ManifestStore(store, DB).read_latest_required().value.with_changes(wal_id_last_seen=gap + 2)
    table = wal_table(store, DB, manifest)
    assert table.column("key").to_pylist() == [b"k"] and table.column("value").to_pylist() == [b"acked"]


def test_rescaling_is_not_refused_for_orphans_past_the_chain() -> None:
    store = MemoryStore()
    crashed_with_orphans(store, flush=True)  # every acknowledged write is in L0; only orphans remain
    admin.split(DB, store, [b"m"], ["dbs/s0", "dbs/s1"], clock=ManualRuntime(1_000))
    with DbReader.open("dbs/s0", store, options=QUIET_READER) as shard:
        assert shard.get(b"k") == b"acked"


@pytest.mark.parametrize("dry_run_first", [False, True])
def test_a_hard_destroy_fences_the_chain_end_and_deletes_its_windows_orphans(dry_run_first: bool) -> None:
    store = MemoryStore()
    gap = crashed_with_orphans(store)
    # The crashed writer's checkpoint would refuse the hard destroy: gone, as if it had expired.
    ManifestStore(store, DB).update(lambda current: current.value.with_changes(checkpoints=()))
    clock = ManualRuntime(1_000)
    planned = admin.destroy(DB, store, soft=False, dry_run=True, clock=clock) if dry_run_first else None
    report = admin.destroy(DB, store, soft=False, dry_run=False, clock=clock)
    wal = WalStore(store, DB)
    assert wal.key(gap) in report.kept and wal.size(gap) == len(WINDOW_FENCE)
    assert {wal.key(gap + 1), wal.key(gap + 2)} <= set(report.deleted)
    assert wal_ids(store, DB) == [gap]
    if planned is not None:
        assert planned.kept == report.kept and set(planned.deleted) == set(report.deleted)
    tombstone = ManifestStore(store, DB).read_current()
    assert tombstone is not None and tombstone.value.is_tombstone
    assert tombstone.value.replay_after_wal_id == gap and tombstone.value.next_wal_sst_id == gap + W
    with Db.open(DB, store, QUIET) as fresh:  # a new database at the path reads nothing old
        assert fresh.get(b"k") is None
        assert fresh.next_wal_id == gap + 2 * W


def test_a_rollback_discards_the_chain_after_the_tag_never_an_orphan() -> None:
    store = MemoryStore()
    clock = ManualRuntime(1_000)
    with Db.open(DB, store, QUIET) as db:
        db.put(b"k", b"tagged", await_durable=True)
        admin.create_tag(DB, store, "t", clock=clock)
        db.put(b"k", b"acked", await_durable=True)
    wal = WalStore(store, DB)
    gap = wal.chain(ManifestStore(store, DB).read_latest_required().value.replay_after_wal_id).end
    assert wal.write(gap + 1, entries_to_table([(b"k", 10_000, KIND_VALUE, b"orphan")]))
    planned = admin.rollback_to_tag(DB, store, "t", clock=clock)
    report = admin.rollback_to_tag(DB, store, "t", dry_run=False, clock=clock)
    assert gap + 1 not in [w.wal_id for w in report.discarded_wal]
    assert [w.wal_id for w in planned.discarded_wal] == [w.wal_id for w in report.discarded_wal]
    assert report.fence_wal_id == planned.fence_wal_id == gap
    latest = ManifestStore(store, DB).read_latest_required().value
    assert latest.replay_after_wal_id == gap + W - 1 and latest.next_wal_sst_id == gap + W
    with Db.open(DB, store, QUIET) as db:
        assert db.get(b"k") == b"tagged"
