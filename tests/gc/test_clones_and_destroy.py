"""GC with clones and destroyed databases (SlateDB's Checkpoints and Clones design, "Garbage
Collector", "Deleting a Database")."""

from __future__ import annotations

import contextlib
import threading
from datetime import UTC, datetime, timedelta

import pytest

from slate_ops import Db, DbReader
from slate_ops.admin import create_clone, destroy, list_checkpoints
from slate_ops.compaction import Compactor, CompactorOptions
from slate_ops.engine.wal_store import WalStore
from slate_ops.errors import DbNotFoundError, GcFailedError, SlateOpsError
from slate_ops.gc import GarbageCollector, GcOptions
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import FaultInjectingStore, MemoryStore
from slate_ops.objstore.wrappers import SimulatedCrash
from slate_ops.runtime import ManualRuntime
from slate_ops.sst import entries_to_table
from tests.support.engine import quiet
from tests.support.gc import MIN_AGE, gc, keys, latest, write_rounds
from tests.support.stores import snapshot

FULL = CompactorOptions(compaction_checkpoint_lifetime=timedelta(seconds=1))


def full_compaction(store: MemoryStore, path: str, clock: ManualRuntime) -> None:
    compactor = Compactor(path, store, FULL, clock=clock)
    try:
        assert compactor.run_once(full=True) is not None
    finally:
        compactor.close()


def test_clone_is_detached_once_its_compaction_rewrote_every_parent_sst(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    model = write_rounds(clocked_memory_store, clock, 3, path="parent")
    create_clone("clone", "parent", clocked_memory_store, clock=clock)
    (external,) = latest(clocked_memory_store, "clone")[1].external_dbs
    assert external.sst_ids and external.final_checkpoint_id in {
        c.id for c in list_checkpoints("parent", clocked_memory_store)
    }
    with Db.open("clone", clocked_memory_store, quiet(), clock=clock) as db:
        db.put(b"clone-only", b"x")
        db.flush_memtable()
    clock.advance(10_000)
    assert (
        gc(clocked_memory_store, clock, path="clone").run_once(dry_run=False).clones_detached == ()
    )  # still reads parent SSTs

    full_compaction(
        clocked_memory_store, "clone", clock
    )  # rewrites every parent SST into the clone's own run
    assert latest(clocked_memory_store, "clone")[1].external_dbs[0].sst_ids == ()
    clock.advance(2)  # the compaction checkpoint (which still references parent SSTs) expires
    dry = gc(clocked_memory_store, clock, path="clone").run_once(dry_run=True)
    assert dry.clones_detached == ("parent",)
    assert external.final_checkpoint_id in {c.id for c in list_checkpoints("parent", clocked_memory_store)}
    report = gc(clocked_memory_store, clock, path="clone").run_once(dry_run=False)
    assert report.clones_detached == ("parent",)
    assert latest(clocked_memory_store, "clone")[1].external_dbs == ()
    assert external.final_checkpoint_id not in {
        c.id for c in list_checkpoints("parent", clocked_memory_store)
    }

    parent_ssts = keys(clocked_memory_store, "parent/compacted/")
    full_compaction(clocked_memory_store, "parent", clock)  # now nothing pins the parent's old SSTs ...
    clock.advance(MIN_AGE + 2)
    gc(clocked_memory_store, clock, path="parent").run_once(dry_run=False)
    assert not parent_ssts & keys(
        clocked_memory_store, "parent/compacted/"
    )  # ... and the parent's GC reclaims them
    with DbReader.open("clone", clocked_memory_store, clock=clock) as reader:
        assert dict(reader.scan()) == {**model, b"clone-only": b"x"}


def test_soft_destroyed_database_is_deleted_after_the_grace_period(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    write_rounds(clocked_memory_store, clock, 2)
    write_rounds(clocked_memory_store, clock, 1, path="neighbour")
    neighbour = snapshot(clocked_memory_store, "neighbour/")
    destroy("db", clocked_memory_store, soft=True, clock=clock, dry_run=False)
    options = GcOptions(db_delete_grace=timedelta(hours=1))
    clock.advance(3599)
    early = GarbageCollector("db", clocked_memory_store, options, clock=clock).run_once(dry_run=False)
    assert not early.destroyed and any("destroyed at" in note for note in early.notes)
    assert any(k.startswith("db/manifest/") for k in keys(clocked_memory_store))

    clock.advance(1)
    everything = keys(clocked_memory_store)
    dry = GarbageCollector("db", clocked_memory_store, options, clock=clock).run_once(dry_run=True)
    assert dry.destroyed and keys(clocked_memory_store) == everything
    report = GarbageCollector("db", clocked_memory_store, options, clock=clock).run_once(dry_run=False)
    assert report.destroyed and report.resources == ()
    kept = keys(
        clocked_memory_store
    )  # the tombstone, the WAL fence, the .compactions file, the gc/ boundaries
    assert report.deleted_keys() == dry.deleted_keys() == everything - kept
    assert {k.split("/")[1] for k in kept} == {"manifest", "wal", "compactions", "gc"}
    assert len([k for k in kept if not k.startswith("db/gc/")]) == 3
    assert any(f"tombstone {k} kept" in note for note in report.notes for k in kept)
    assert ManifestStore(clocked_memory_store, "db").read_latest() is None  # no database for readers
    assert snapshot(clocked_memory_store, "neighbour/") == neighbour


def test_destroyed_database_with_a_live_checkpoint_waits(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    write_rounds(clocked_memory_store, clock, 1)
    create_clone("clone", "db", clocked_memory_store, clock=clock)  # holds a final checkpoint on db
    destroy("db", clocked_memory_store, soft=True, clock=clock, dry_run=False)
    clock.advance(10 * 86_400)
    report = GarbageCollector(
        "db", clocked_memory_store, GcOptions(db_delete_grace=timedelta(days=1)), clock=clock
    ).run_once(dry_run=False)
    assert not report.destroyed
    assert keys(clocked_memory_store, "db/")
    with DbReader.open("clone", clocked_memory_store, clock=clock) as reader:
        assert reader.get(b"k0000") is not None


def test_destroyed_clone_releases_its_parent_checkpoint_first_and_the_loop_ends(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    write_rounds(clocked_memory_store, clock, 1, path="parent")
    create_clone("clone", "parent", clocked_memory_store, clock=clock)
    (external,) = latest(clocked_memory_store, "clone")[1].external_dbs
    destroy("clone", clocked_memory_store, soft=True, clock=clock, dry_run=False)
    clock.advance(2 * 86_400)
    collector = GarbageCollector(
        "clone", clocked_memory_store, GcOptions(interval=timedelta(hours=1)), clock=clock
    )
    done = threading.Event()
    report = collector.run(done)  # returns after deleting the database: its GC is done
    assert report is not None and report.destroyed
    assert any(f"parent: {external.final_checkpoint_id}" in note for note in report.notes)
    assert external.final_checkpoint_id not in {
        c.id for c in list_checkpoints("parent", clocked_memory_store)
    }
    assert ManifestStore(clocked_memory_store, "clone").read_latest() is None
    assert {k.split("/")[1] for k in keys(clocked_memory_store, "clone/")} == {
        "manifest",
        "wal",
        "compactions",
        "gc",
    }
    assert latest(clocked_memory_store, "parent")[0] >= 1


def test_options_grace_default_is_a_day() -> None:
    assert GcOptions().db_delete_grace == timedelta(days=1)


def test_gc_of_a_new_database_after_a_deletion_cleans_what_stale_processes_left(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    write_rounds(clocked_memory_store, clock, 2)
    stale_writer = Db.open("db", clocked_memory_store, quiet(), clock=clock)  # paused: it does not poll
    stale_writer.put(b"acked", b"1", await_durable=True)
    stale_admin = ManifestStore(clocked_memory_store, "db")
    stale_admin.read_latest_required()
    destroy("db", clocked_memory_store, soft=True, clock=clock, dry_run=False)
    clock.advance(86_400)
    assert gc(clocked_memory_store, clock).run_once(dry_run=False).destroyed
    tombstone = ManifestStore(clocked_memory_store, "db").read_current()
    assert tombstone is not None and tombstone.value.is_tombstone
    kept = keys(clocked_memory_store)
    with pytest.raises(SlateOpsError):
        stale_writer.put(b"late", b"2", await_durable=True)  # its WAL SST may land below the fence
    with contextlib.suppress(SlateOpsError):
        stale_writer.close()
    with pytest.raises(DbNotFoundError):
        stale_admin.update(lambda v: v.value.with_changes(last_l0_seq=99))  # lands below the boundary
    # Both stale processes withdrew what they wrote (the writer its unacknowledged WAL SST, the admin its
    # create the boundary rejected); one that crashed before withdrawing leaves them behind:
    assert keys(clocked_memory_store) == kept
    sequence = ManifestStore(clocked_memory_store, "db").sequence
    clocked_memory_store.put(
        sequence.key(1), clocked_memory_store.get(sequence.key(tombstone.id)).data
    )  # below the boundary
    WalStore(clocked_memory_store, "db").write(
        1, entries_to_table([(b"late", 99, 0, b"2")])
    )  # below replay_after
    orphans = keys(clocked_memory_store) - kept
    assert orphans and all(k.startswith(("db/manifest/", "db/wal/")) for k in orphans)
    assert ManifestStore(clocked_memory_store, "db").read_current() == tombstone  # still the latest

    with Db.open("db", clocked_memory_store, quiet(), clock=clock) as db:
        assert list(db.scan()) == []  # nothing of the deleted database, nothing a stale process wrote
        db.put(b"new", b"2")
        db.flush()
        db.flush_memtable()
    clock.advance(86_400)
    report = gc(clocked_memory_store, clock).run_once(dry_run=False)
    assert orphans <= set(report.deleted_keys())
    assert not orphans & keys(clocked_memory_store)
    with DbReader.open("db", clocked_memory_store, clock=clock) as reader:
        assert list(reader.scan()) == [(b"new", b"2")]


def test_gc_finishes_a_deletion_interrupted_at_any_point(clock: ManualRuntime) -> None:
    for n in range(400):
        store = MemoryStore("gc", now=lambda: datetime.fromtimestamp(clock.now(), UTC))
        write_rounds(store, clock, 2)
        full_compaction(store, "db", clock)  # a .compactions namespace too
        destroy("db", store, soft=True, clock=clock, dry_run=False)
        clock.advance(86_400)
        faulty = FaultInjectingStore(store)
        faulty.crash_after(n)
        try:
            gc(faulty, clock).run_once(dry_run=False)
        except (SimulatedCrash, GcFailedError):
            pass
        else:
            break
        done = gc(store, clock).run_once(dry_run=False)  # the re-run finishes it
        assert done.destroyed
        left = {k for k in keys(store) if not k.startswith("db/gc/")}
        assert len(left) == 3 and {k.split("/")[1] for k in left} == {"manifest", "wal", "compactions"}
        assert ManifestStore(store, "db").read_latest() is None
    else:
        pytest.fail("the deletion never completed")
    assert n >= 10
