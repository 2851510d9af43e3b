"""Rollback to a tag: fencing, the tag's WAL writes, discarded state, dry runs, crashes, GC."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from ulid import ULID

from slate_ops import Db, DbReader, admin
from slate_ops.compaction import Compactor, CompactorOptions
from slate_ops.engine.wal_fence import WAL_FENCE_WINDOW, WINDOW_FENCE
from slate_ops.engine.wal_store import WalStore
from slate_ops.errors import DbDestroyedError, FencedError, TagNotFoundError
from slate_ops.gc import GarbageCollector, GcOptions
from slate_ops.layout import sst_key
from slate_ops.manifest.model import WriterCheckpoint
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import LocalStore, MemoryStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.wrappers import FaultInjectingStore, SimulatedCrash
from slate_ops.runtime import ManualRuntime
from tests.support.engine import quiet, simulate_crash
from tests.support.stores import snapshot

DB = "tenants/acme"
FULL = CompactorOptions(min_sources=2, target_sst_bytes=4096, max_subcompaction_bytes=1 << 20)


@pytest.fixture
def clock() -> ManualRuntime:
    return ManualRuntime(1_000_000.0)


def content(store: ObjectStore, clock: ManualRuntime, checkpoint: object = None) -> dict[bytes, bytes]:
    """What a reader sees: of the tag's checkpoint, or of the current state."""
    reader = DbReader.open(DB, store, checkpoint_id=checkpoint, clock=clock)  # type: ignore[arg-type]
    try:
        return dict(reader.scan())
    finally:
        reader.close()


def writer(store: ObjectStore, clock: ManualRuntime) -> Db:
    return Db.open(DB, store, quiet(l0_max_ssts=1000), clock=clock)


@pytest.fixture
def tagged(acme_store: MemoryStore, clock: ManualRuntime) -> Iterator[tuple[Db, dict[bytes, bytes]]]:
    """A tag ``t`` over a sorted run, an L0 SST and WAL-only writes; then later writes in L0 and in
    two WAL SSTs by a writer that is still open. Yields it and the tag's content."""
    with writer(acme_store, clock) as db:
        for i in range(30):
            db.put(b"k%03d" % i, b"run-%d" % i)
        db.flush_memtable()
    Compactor(DB, acme_store, FULL, clock=clock).run_once(full=True)
    db = writer(acme_store, clock)
    db.put(b"k000", b"l0")
    db.flush_memtable()
    db.put(b"k001", b"wal-1")
    db.delete(b"k002")
    db.flush()
    db.put(b"k003", b"wal-2")
    db.put(b"k001", b"wal-1b")
    db.flush()
    tag = admin.create_tag(DB, acme_store, "t", clock=clock)
    expected = {b"k%03d" % i: b"run-%d" % i for i in range(30)}
    expected |= {b"k000": b"l0", b"k001": b"wal-1b", b"k003": b"wal-2"}
    del expected[b"k002"]
    assert content(acme_store, clock, tag.checkpoint_id) == expected

    clock.advance(60)
    db.put(b"k004", b"after-l0")
    db.delete(b"k005")
    db.flush_memtable()
    db.put(b"k006", b"after-wal")
    db.put(b"k000", b"after-wal")
    db.flush()
    db.put(b"k007", b"after-wal")
    db.flush()  # everything durable: the writer's background flusher has nothing left to race with
    assert content(acme_store, clock)[b"k006"] == b"after-wal"
    yield db, expected
    if not db.is_closed:
        simulate_crash(db)


def test_rollback_restores_the_tag_and_fences_the_old_writer(
    acme_store: MemoryStore, clock: ManualRuntime, tagged: tuple[Db, dict[bytes, bytes]]
) -> None:
    old, expected = tagged
    before = admin.read_manifest(DB, acme_store)
    report = admin.rollback_to_tag(DB, acme_store, "t", dry_run=False, clock=clock)
    after = admin.read_manifest(DB, acme_store)

    assert not report.dry_run and report.tag.name == "t"
    assert (report.manifest_id_before, report.manifest_id_after) == (before.id, before.id + 2)
    assert after.id == before.id + 2  # the fencing commit, then the one that makes the tag current
    assert after.value.writer_epoch == before.value.writer_epoch + 1 == report.writer_epoch
    assert after.value.compactor_epoch == before.value.compactor_epoch + 1 == report.compactor_epoch
    assert not any(isinstance(c.metadata, WriterCheckpoint) for c in after.value.checkpoints)
    assert report.removed_writer_checkpoints == tuple(
        c.id for c in before.value.checkpoints if isinstance(c.metadata, WriterCheckpoint)
    )
    kept = [c for c in before.value.checkpoints if not isinstance(c.metadata, WriterCheckpoint)]
    assert after.value.checkpoints == tuple(kept)  # the compaction checkpoint and the tag
    assert report.tag.checkpoint_id in {c.id for c in kept} and len(kept) == 2
    # The tag's two WAL SSTs with writes are flushed into one new L0 SST, in front of the tag's L0.
    tag_manifest = ManifestStore(acme_store, DB).read(report.tag.manifest_id).value
    assert report.flushed_sst is not None and len(report.flushed_wal_ids) == 2
    assert after.value.l0[0].sst_id == report.flushed_sst.id
    assert after.value.l0[1:] == tag_manifest.l0 and after.value.compacted == tag_manifest.compacted
    assert report.flushed_sst.info.num_entries == 3  # k001 (newest version), k002 (tombstone), k003
    # WAL: nothing at or below the fence, nor in its window, is replayed; the discarded WAL SSTs are the
    # ones after the tag.
    fence = report.fence_wal_id
    assert after.value.replay_after_wal_id == fence + WAL_FENCE_WINDOW - 1
    assert WalStore(acme_store, DB).size(fence) == len(WINDOW_FENCE)
    assert [(w.wal_id, w.num_entries) for w in report.discarded_wal] == [(fence - 2, 2), (fence - 1, 1)]
    assert after.value.last_l0_seq == report.last_l0_seq == report.discarded_wal[-1].max_seq
    # The L0 SST flushed after the tag is discarded, with its bytes and entries (its memtable also
    # held the tag's WAL writes: 3 before the tag, 2 after).
    (discarded,) = report.discarded_ssts
    assert discarded.level == "l0" and discarded.num_entries == 5
    assert discarded.sst_id == before.value.l0[0].sst_id
    wal_bytes = sum(w.size_bytes for w in report.discarded_wal)
    assert report.discarded_bytes == discarded.size_bytes + wal_bytes
    assert report.discarded_entries == 5 + 3

    with pytest.raises(FencedError):
        old.put(b"k008", b"zombie")
        old.flush()
    with pytest.raises(FencedError):
        old.close()

    assert content(acme_store, clock) == expected
    with writer(acme_store, clock) as db:
        assert dict(db.scan()) == expected
        db.put(b"k001", b"new")  # must win over the flushed tag entry: sequence numbers go on
        db.put(b"k006", b"new")
        db.flush_memtable()
    with writer(acme_store, clock) as db:
        assert dict(db.scan()) == expected | {b"k001": b"new", b"k006": b"new"}
    Compactor(DB, acme_store, FULL, clock=clock).run_once(full=True)
    assert content(acme_store, clock) == expected | {b"k001": b"new", b"k006": b"new"}


def test_dry_run_writes_nothing_and_reports_exactly_the_real_run(
    acme_store: MemoryStore, clock: ManualRuntime, tagged: tuple[Db, dict[bytes, bytes]]
) -> None:
    sst_id = ULID()
    before = snapshot(acme_store)
    dry = admin.rollback_to_tag(DB, acme_store, "t", clock=clock, new_sst_id=lambda: sst_id)
    assert dry.dry_run and snapshot(acme_store) == before
    assert dry.discarded_ssts and dry.discarded_wal and dry.flushed_sst is not None
    real = admin.rollback_to_tag(DB, acme_store, "t", dry_run=False, clock=clock, new_sst_id=lambda: sst_id)
    assert dataclasses.replace(dry, dry_run=False) == real
    assert real.flushed_sst is not None
    assert acme_store.head(sst_key(DB, sst_id)).size == real.flushed_sst.info.size_bytes


def test_rolling_back_to_the_current_state_keeps_everything(
    acme_store: MemoryStore, clock: ManualRuntime
) -> None:
    with writer(acme_store, clock) as db:
        db.put(b"a", b"1")
        db.flush_memtable()
        db.put(b"b", b"2")
    admin.create_tag(DB, acme_store, "now", clock=clock)
    report = admin.rollback_to_tag(DB, acme_store, "now", dry_run=False, clock=clock)
    assert report.discarded_ssts == () and report.discarded_wal == () and report.flushed_sst is not None
    assert content(acme_store, clock) == {b"a": b"1", b"b": b"2"}
    # Again: the tag's WAL is flushed again (the same writes), nothing else changes.
    admin.rollback_to_tag(DB, acme_store, "now", dry_run=False, clock=clock)
    assert content(acme_store, clock) == {b"a": b"1", b"b": b"2"}


def test_tag_without_wal_writes_needs_no_flush(acme_store: MemoryStore, clock: ManualRuntime) -> None:
    with writer(acme_store, clock) as db:
        db.put(b"a", b"1")
        db.flush_memtable()
    admin.create_tag(DB, acme_store, "l0", clock=clock)
    with writer(acme_store, clock) as db:
        db.put(b"a", b"2")
    report = admin.rollback_to_tag(DB, acme_store, "l0", dry_run=False, clock=clock)
    assert report.flushed_sst is None and report.flushed_wal_ids == ()
    assert [w.num_entries for w in report.discarded_wal] == [1]
    assert content(acme_store, clock) == {b"a": b"1"}


def test_a_running_compactor_cannot_commit_after_the_rollback(
    acme_store: MemoryStore, clock: ManualRuntime, tagged: tuple[Db, dict[bytes, bytes]]
) -> None:
    _, expected = tagged
    compactor = Compactor(DB, acme_store, FULL, clock=clock)
    admin.rollback_to_tag(DB, acme_store, "t", dry_run=False, clock=clock)
    with pytest.raises(FencedError):
        compactor.run_once(full=True)
    assert content(acme_store, clock) == expected


def test_unknown_tag_and_destroyed_database_are_refused_and_write_nothing(
    acme_store: MemoryStore, clock: ManualRuntime
) -> None:
    admin.create_tag(DB, acme_store, "t", clock=clock)
    before = snapshot(acme_store)
    for dry_run in (True, False):
        with pytest.raises(TagNotFoundError, match=r"no tag 'nope'.*list-tags"):
            admin.rollback_to_tag(DB, acme_store, "nope", dry_run=dry_run, clock=clock)
    assert snapshot(acme_store) == before
    admin.destroy(DB, acme_store, clock=clock, dry_run=False)
    before = snapshot(acme_store)
    for dry_run in (True, False):
        with pytest.raises(DbDestroyedError):
            admin.rollback_to_tag(DB, acme_store, "t", dry_run=dry_run, clock=clock)
    assert snapshot(acme_store) == before


@pytest.mark.parametrize(
    ("op", "key", "after"),
    [
        ("put", "/compacted/", True),  # the L0 SST is uploaded, the manifest not yet committed
        ("put", "/wal/", False),  # the epoch is bumped, the WAL not yet fenced
        ("put", "/manifest/", False),  # the first manifest commit never happens
    ],
)
def test_a_rerun_after_a_crash_completes(
    acme_store: MemoryStore,
    clock: ManualRuntime,
    tagged: tuple[Db, dict[bytes, bytes]],
    op: str,
    key: str,
    after: bool,
) -> None:
    _, expected = tagged
    faulty = FaultInjectingStore(acme_store)
    (faulty.fail_after if after else faulty.fail)(op, key_contains=key, error=SimulatedCrash)
    manifest_before = admin.read_manifest(DB, acme_store).id
    ssts_before = set(snapshot(acme_store, DB + "/compacted/"))
    with pytest.raises(SimulatedCrash):
        admin.rollback_to_tag(DB, faulty, "t", dry_run=False, clock=clock)
    assert admin.read_manifest(DB, acme_store).id <= manifest_before + 1  # never the rolled-back state
    report = admin.rollback_to_tag(DB, acme_store, "t", dry_run=False, clock=clock)
    assert content(acme_store, clock) == expected
    with writer(acme_store, clock) as db:
        assert dict(db.scan()) == expected
    assert report.flushed_sst is not None
    written = set(snapshot(acme_store, DB + "/compacted/")) - ssts_before
    referenced = {sst_key(DB, s.id) for s in admin.read_manifest(DB, acme_store).value.ssts}
    # The re-run's L0 SST is referenced; the crashed run's, if it got that far, is an orphan for GC.
    assert written & referenced == {sst_key(DB, report.flushed_sst.id)}
    assert len(written - referenced) == (1 if after else 0)


def test_gc_after_rollback_keeps_the_tag_and_drops_the_discarded_state(
    acme_store: MemoryStore, clock: ManualRuntime, tagged: tuple[Db, dict[bytes, bytes]]
) -> None:
    _, expected = tagged
    report = admin.rollback_to_tag(DB, acme_store, "t", dry_run=False, clock=clock)
    clock.advance(3600)
    options = GcOptions.with_min_age(timedelta(seconds=1), allow_unsafe_min_age=True)
    GarbageCollector(DB, acme_store, options, clock=clock).run_once(dry_run=False)
    keys = set(snapshot(acme_store))
    assert sst_key(DB, report.discarded_ssts[0].sst_id) not in keys
    wal = WalStore(acme_store, DB)
    assert all(wal.key(w.wal_id) not in keys for w in report.discarded_wal)
    assert all(wal.key(i) in keys for i in report.flushed_wal_ids)  # the tag still pins them
    assert content(acme_store, clock) == expected
    assert content(acme_store, clock, report.tag.checkpoint_id) == expected
    with writer(acme_store, clock) as db:
        assert dict(db.scan()) == expected


def test_rollback_on_the_local_store(tmp_path: Path, clock: ManualRuntime) -> None:
    local = LocalStore(tmp_path / "store")
    admin.create_db(DB, local)
    with writer(local, clock) as db:
        db.put(b"a", b"l0")
        db.flush_memtable()
        db.put(b"b", b"wal")
        db.flush()
        admin.create_tag(DB, local, "t", clock=clock)
        db.put(b"a", b"after")
        db.delete(b"b")
        db.flush()
        before = snapshot(local)
        assert admin.rollback_to_tag(DB, local, "t", clock=clock).dry_run
        assert snapshot(local) == before
        admin.rollback_to_tag(DB, local, "t", dry_run=False, clock=clock)
        with pytest.raises(FencedError):
            db.put(b"c", b"zombie")
            db.flush()
        simulate_crash(db)
    assert content(local, clock) == {b"a": b"l0", b"b": b"wal"}
