"""Clones (SlateDB's Checkpoints and Clones design, "Clones"): what a clone reads, isolation, nesting,
refusals and resumability."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from slate_ops import CheckpointScope, Db, DbReader, admin
from slate_ops.admin.clone import FINAL_CHECKPOINT_PREFIX, SOURCE_CHECKPOINT_PREFIX, clone_manifest
from slate_ops.compaction import CompactorOptions
from slate_ops.config import CheckpointOptions
from slate_ops.engine.lsm import LsmState, SstReaders
from slate_ops.engine.wal_store import WalStore
from slate_ops.errors import (
    CheckpointExpiredError,
    CheckpointNotFoundError,
    CloneMismatchError,
    CloneWalMissingError,
    DbDestroyedError,
    DbNotFoundError,
    DbNotInitializedError,
    InvalidArgumentError,
)
from slate_ops.layout import sst_key
from slate_ops.manifest.model import Checkpoint, Manifest
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import FaultInjectingStore, LocalStore, MemoryStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.wrappers import SimulatedCrash
from slate_ops.runtime import ManualRuntime
from tests.support.compaction import compact_once
from tests.support.db_state import contents, manifest
from tests.support.engine import QUIET_READER, quiet
from tests.support.stores import snapshot

PARENT = "dbs/parent"
FULL = CompactorOptions(min_sources=2, target_sst_bytes=4096, max_subcompaction_bytes=1 << 20)


def build_parent(
    store: ObjectStore, path: str = PARENT, clock: ManualRuntime | None = None
) -> dict[bytes, bytes]:
    """A parent with a sorted run, an L0 SST and writes only in the WAL; returns its contents."""
    model: dict[bytes, bytes] = {}
    options = quiet(l0_max_ssts=1000)
    with Db.open(path, store, options, clock=clock or ManualRuntime()) as db:
        for round_ in range(3):
            for i in range(round_, 60, round_ + 1):
                key, value = b"k%03d" % i, b"r%d-%d" % (round_, i)
                db.put(key, value)
                model[key] = value
            db.delete(b"k%03d" % (round_ * 7))
            model.pop(b"k%03d" % (round_ * 7), None)
            db.flush_memtable()
    compact_once(path, store, FULL)
    with Db.open(path, store, options, clock=clock or ManualRuntime()) as db:
        for i in range(0, 60, 5):
            db.put(b"k%03d" % i, b"l0-%d" % i)
            model[b"k%03d" % i] = b"l0-%d" % i
        db.flush_memtable()
        for i in range(0, 60, 9):  # these stay in the WAL only
            db.put(b"k%03d" % i, b"wal-%d" % i)
            model[b"k%03d" % i] = b"wal-%d" % i
        db.delete(b"k001")
        model.pop(b"k001", None)
    return model


def named(store: ObjectStore, path: str, name: str) -> list[Checkpoint]:
    return [c for c in manifest(store, path).checkpoints if c.name == name]


def test_clone_reads_the_parent_at_the_checkpoint(engine_store: ObjectStore) -> None:
    build_parent(engine_store)
    with Db.open(PARENT, engine_store, quiet()) as db:
        db.put(b"at-checkpoint", b"1")
        checkpoint = db.create_checkpoint()  # flushes the memtable: the WAL past L0 is empty
        db.put(b"after-checkpoint", b"2")
        db.put(b"k002", b"changed later")
    with DbReader.open(PARENT, engine_store, checkpoint.id, QUIET_READER) as reader:
        at_checkpoint = dict(reader.scan())
    assert b"at-checkpoint" in at_checkpoint and b"after-checkpoint" not in at_checkpoint

    created = admin.create_clone("dbs/clone", PARENT, engine_store, checkpoint.id)
    assert created.value.initialized
    assert contents(engine_store, "dbs/clone") == at_checkpoint
    (parent_entry,) = created.value.external_dbs
    assert parent_entry.path == PARENT and parent_entry.source_checkpoint_id == checkpoint.id
    assert [c.id for c in named(engine_store, PARENT, FINAL_CHECKPOINT_PREFIX + "dbs/clone")] == [
        parent_entry.final_checkpoint_id
    ]
    # The writer of the clone reads the parent's SSTs through path resolution, and its WAL copy.
    with admin.open_from_checkpoint("dbs/clone", engine_store, PARENT, checkpoint.id, quiet()) as clone:
        assert dict(clone.scan()) == at_checkpoint
        lsm = LsmState(clone.manifest, clone.path, SstReaders(engine_store, None))
        assert lsm.object_keys() and all(key.startswith(PARENT + "/compacted/") for key in lsm.object_keys())


def test_clone_without_checkpoint_includes_writes_only_in_the_wal(engine_store: ObjectStore) -> None:
    model = build_parent(engine_store)
    parent = manifest(engine_store, PARENT)
    assert WalStore(engine_store, PARENT).list_ids(parent.replay_after_wal_id)  # WAL-only writes exist
    created = admin.create_clone("dbs/clone", PARENT, engine_store)
    assert contents(engine_store, "dbs/clone") == model
    copied = WalStore(engine_store, "dbs/clone").list_ids()
    assert copied and min(copied) > created.value.replay_after_wal_id
    # The ephemeral source checkpoint is gone once the final one pins the state.
    assert named(engine_store, PARENT, SOURCE_CHECKPOINT_PREFIX + "dbs/clone") == []
    assert len(named(engine_store, PARENT, FINAL_CHECKPOINT_PREFIX + "dbs/clone")) == 1


def test_writes_are_isolated_both_ways(engine_store: ObjectStore) -> None:
    model = build_parent(engine_store)
    admin.create_clone("dbs/clone", PARENT, engine_store)
    with Db.open("dbs/clone", engine_store, quiet()) as clone:
        clone.put(b"clone-only", b"c")
        clone.delete(b"k003")
        clone.flush_memtable()
        clone.put(b"clone-wal", b"w")
    with Db.open(PARENT, engine_store, quiet()) as parent:
        parent.put(b"parent-only", b"p")
        parent.put(b"k004", b"parent-changed")
        parent.flush_memtable()
    compact_once(PARENT, engine_store, FULL)  # rewrites the parent's SSTs
    clone_model = {k: v for k, v in model.items() if k != b"k003"} | {b"clone-only": b"c", b"clone-wal": b"w"}
    parent_model = model | {b"parent-only": b"p", b"k004": b"parent-changed"}
    assert contents(engine_store, "dbs/clone") == clone_model
    assert contents(engine_store, PARENT) == parent_model
    assert not [m.key for m in engine_store.list(PARENT + "/") if b"clone" in m.key.encode()]


def test_compactor_and_reader_of_a_clone_read_the_parents_ssts(local_dir_store: LocalStore) -> None:
    model = build_parent(local_dir_store)
    admin.create_clone("dbs/clone", PARENT, local_dir_store)
    parent_objects = snapshot(local_dir_store, PARENT + "/compacted/")
    with DbReader.open("dbs/clone", local_dir_store, options=QUIET_READER) as reader:
        assert dict(reader.scan()) == model
    report = compact_once("dbs/clone", local_dir_store, FULL)
    assert report is not None and report.input_ssts
    after = manifest(local_dir_store, "dbs/clone")
    assert after.external_dbs[0].sst_ids == ()  # every parent SST was compacted away
    assert all(local_dir_store.head(sst_key("dbs/clone", s.physical_id)).size for s in after.ssts)
    assert contents(local_dir_store, "dbs/clone") == model
    assert snapshot(local_dir_store, PARENT + "/compacted/") == parent_objects
    assert contents(local_dir_store, PARENT) == model


def test_clone_of_a_clone(local_dir_store: LocalStore) -> None:
    model = build_parent(local_dir_store)
    first = admin.create_clone("dbs/first", PARENT, local_dir_store)
    with Db.open("dbs/first", local_dir_store, quiet()) as db:
        db.put(b"first", b"1")
        db.flush_memtable()  # the first clone now has SSTs of its own
        db.put(b"first-wal", b"2")
    second = admin.create_clone("dbs/second", "dbs/first", local_dir_store)
    first_model = model | {b"first": b"1", b"first-wal": b"2"}
    assert contents(local_dir_store, "dbs/second") == first_model

    inherited, direct = second.value.external_dbs
    assert inherited.path == PARENT and direct.path == "dbs/first"
    # Each entry owns its own final checkpoint (no two entries, no two databases share one).
    assert inherited.final_checkpoint_id != direct.final_checkpoint_id
    # The inherited entry starts from the first clone's final checkpoint (the same manifest).
    assert inherited.source_checkpoint_id == first.value.external_dbs[0].final_checkpoint_id
    assert set(inherited.sst_ids) == set(first.value.external_dbs[0].sst_ids)
    own_first = {s.physical_id for s in manifest(local_dir_store, "dbs/first").ssts} - set(inherited.sst_ids)
    assert set(direct.sst_ids) == own_first and own_first
    # The grandparent holds one final checkpoint per clone; the first clone holds the second's.
    finals = {
        c.name: c.id
        for c in manifest(local_dir_store, PARENT).checkpoints
        if c.name != "slate_ops/compaction"
    }
    assert finals == {
        FINAL_CHECKPOINT_PREFIX + "dbs/first": first.value.external_dbs[0].final_checkpoint_id,
        FINAL_CHECKPOINT_PREFIX + "dbs/second": inherited.final_checkpoint_id,
    }
    assert [c.id for c in manifest(local_dir_store, "dbs/first").checkpoints] == [direct.final_checkpoint_id]

    with Db.open("dbs/second", local_dir_store, quiet()) as db:
        db.put(b"second", b"3")
    compact_once("dbs/second", local_dir_store, FULL)
    assert contents(local_dir_store, "dbs/second") == first_model | {b"second": b"3"}
    assert contents(local_dir_store, "dbs/first") == first_model
    assert contents(local_dir_store, PARENT) == model


@pytest.mark.parametrize("given_checkpoint", [False, True], ids=["ephemeral", "given-checkpoint"])
@pytest.mark.parametrize("nested", [False, True], ids=["clone", "clone-of-clone"])
def test_a_crash_at_every_step_is_completed_by_a_rerun(
    local_dir_store: LocalStore, given_checkpoint: bool, nested: bool
) -> None:
    clock = ManualRuntime(1_700_000_000.0)
    model = build_parent(local_dir_store, clock=clock)
    parent = PARENT
    if nested:
        admin.create_clone("dbs/middle", PARENT, local_dir_store, clock=clock)
        parent = "dbs/middle"
    checkpoint = None
    if given_checkpoint:
        checkpoint = admin.create_checkpoint(
            parent, local_dir_store, CheckpointOptions(lifetime="1h"), clock=clock
        ).id
        # What a reader of that checkpoint sees: the admin API's checkpoint does not advance
        # wal_id_last_seen, so writes only in the parent's WAL are not part of it.
        with DbReader.open(parent, local_dir_store, checkpoint, QUIET_READER, clock=clock) as reader:
            model = dict(reader.scan())
    externals = [PARENT, "dbs/middle"] if nested else [PARENT]

    crashes = 0
    for n in range(500):
        clone = f"dbs/clone{n}"
        faulty = FaultInjectingStore(local_dir_store)
        faulty.crash_after(n)
        try:
            admin.create_clone(clone, parent, faulty, checkpoint, clock=clock)
        except SimulatedCrash:
            crashes += 1
            written = ManifestStore(local_dir_store, clone).read_latest()
            if written is not None and not written.value.initialized:
                with pytest.raises(DbNotInitializedError, match="re-run"):
                    Db.open(clone, local_dir_store, quiet())
        else:
            completed = n
            break
        finished = admin.create_clone(clone, parent, local_dir_store, checkpoint, clock=clock)  # the re-run
        assert finished.value.initialized
        assert contents(local_dir_store, clone) == model
        finals = {e.path: e.final_checkpoint_id for e in finished.value.external_dbs}
        for external in externals:  # one final checkpoint per external database, its own
            assert [c.id for c in named(local_dir_store, external, FINAL_CHECKPOINT_PREFIX + clone)] == [
                finals[external]
            ]
        # Only a crash before the clone manifest existed can leave an ephemeral checkpoint, and it
        # expires within 5 minutes.
        for leftover in named(local_dir_store, parent, SOURCE_CHECKPOINT_PREFIX + clone):
            assert leftover.id != finished.value.external_dbs[-1].source_checkpoint_id
            assert leftover.expire_time_s is not None and leftover.expire_time_s <= clock.now() + 300
    else:
        pytest.fail("create_clone never completed")
    assert crashes == completed and completed >= 10
    print(f"create_clone completed after {completed} crashes")

    clock.advance(301)
    admin.expire_checkpoints(parent, local_dir_store, dry_run=False, clock=clock)
    remaining = [
        c.name for c in manifest(local_dir_store, parent).checkpoints if c.name != "slate_ops/compaction"
    ]
    expected = [FINAL_CHECKPOINT_PREFIX + f"dbs/clone{n}" for n in range(completed + 1)]
    if given_checkpoint:
        expected.append(None)
    assert sorted(remaining, key=str) == sorted(expected, key=str)


def test_rerun_with_other_arguments_is_refused(local_dir_store: LocalStore) -> None:
    build_parent(local_dir_store)
    admin.create_db("dbs/other", local_dir_store)
    first = admin.create_checkpoint(PARENT, local_dir_store, CheckpointOptions(lifetime="1h")).id
    second = admin.create_checkpoint(PARENT, local_dir_store, CheckpointOptions(lifetime="1h")).id
    admin.create_clone("dbs/clone", PARENT, local_dir_store, first)
    before = snapshot(local_dir_store)
    with pytest.raises(CloneMismatchError, match="already a clone of dbs/parent"):
        admin.create_clone("dbs/clone", "dbs/other", local_dir_store)
    with pytest.raises(CloneMismatchError, match=str(second)):
        admin.create_clone("dbs/clone", PARENT, local_dir_store, second)
    with pytest.raises(CloneMismatchError, match="not a clone"):
        admin.create_clone("dbs/other", PARENT, local_dir_store)
    with pytest.raises(InvalidArgumentError, match="own path"):
        admin.create_clone(PARENT, "/dbs/parent/", local_dir_store)
    with pytest.raises(InvalidArgumentError, match="nest"):
        admin.create_clone("dbs/parent/inner", PARENT, local_dir_store)
    assert snapshot(local_dir_store) == before
    # The same arguments, or no checkpoint ("accept any"), are a no-op re-run.
    assert admin.create_clone("dbs/clone", PARENT, local_dir_store, first).value.initialized
    assert admin.create_clone("dbs/clone", PARENT, local_dir_store).value.initialized


def test_rerun_of_an_unfinished_clone_with_another_parent_is_refused(local_dir_store: LocalStore) -> None:
    build_parent(local_dir_store)
    admin.create_db("dbs/other", local_dir_store)
    faulty = FaultInjectingStore(local_dir_store)
    faulty.fail("put", key_contains="dbs/clone/wal/", error=SimulatedCrash("crash"))
    with pytest.raises(SimulatedCrash):
        admin.create_clone("dbs/clone", PARENT, faulty)
    assert not manifest(local_dir_store, "dbs/clone").initialized
    with pytest.raises(CloneMismatchError):
        admin.create_clone("dbs/clone", "dbs/other", local_dir_store)
    with pytest.raises(DbNotInitializedError, match="re-run"):
        DbReader.open("dbs/clone", local_dir_store, options=QUIET_READER)
    assert admin.create_clone("dbs/clone", PARENT, local_dir_store).value.initialized


def test_missing_or_expired_parent_checkpoint_is_refused(local_dir_store: LocalStore) -> None:
    clock = ManualRuntime(1_700_000_000.0)
    build_parent(local_dir_store, clock=clock)
    short = admin.create_checkpoint(
        PARENT, local_dir_store, CheckpointOptions(lifetime="10s"), clock=clock
    ).id
    clock.advance(20)
    before = snapshot(local_dir_store)
    with pytest.raises(CheckpointExpiredError):
        admin.create_clone("dbs/clone", PARENT, local_dir_store, short, clock=clock)
    with pytest.raises(CheckpointNotFoundError):
        admin.create_clone("dbs/clone", PARENT, local_dir_store, uuid.uuid4(), clock=clock)
    assert snapshot(local_dir_store) == before


def test_an_expired_ephemeral_checkpoint_stops_an_unfinished_clone(local_dir_store: LocalStore) -> None:
    clock = ManualRuntime(1_700_000_000.0)
    model = build_parent(local_dir_store, clock=clock)
    # A first run that died right after writing the clone manifest (before the final checkpoint).
    ephemeral = admin.create_checkpoint(
        PARENT, local_dir_store, CheckpointOptions(lifetime=timedelta(minutes=5)), clock=clock
    )
    at_source = admin.read_manifest(PARENT, local_dir_store, ephemeral.manifest_id).value
    ManifestStore(local_dir_store, "dbs/clone").create_initial(
        clone_manifest(at_source, PARENT, ephemeral.id)
    )
    clock.advance(6 * 60)
    with pytest.raises(CheckpointExpiredError, match="destroy the clone"):
        admin.create_clone("dbs/clone", PARENT, local_dir_store, clock=clock)
    # The way out the message names: destroy the unfinished clone and clone again.
    admin.destroy("dbs/clone", local_dir_store, soft=False, clock=clock, dry_run=False)
    admin.create_clone("dbs/clone", PARENT, local_dir_store, clock=clock)
    assert contents(local_dir_store, "dbs/clone") == model


def test_a_missing_wal_sst_is_refused(local_dir_store: LocalStore) -> None:
    build_parent(local_dir_store)
    with Db.open(PARENT, local_dir_store, quiet()) as db:
        db.put(b"x", b"1")
        db.flush()
        db.put(b"y", b"2")
        db.flush()
        checkpoint = db.create_checkpoint(CheckpointScope.DURABLE, CheckpointOptions(lifetime="1h"))
    at = admin.read_manifest(PARENT, local_dir_store, checkpoint.manifest_id).value
    wal = WalStore(local_dir_store, PARENT)
    assert at.wal_id_last_seen > at.replay_after_wal_id + 1  # x and y are only in the WAL
    local_dir_store.delete(wal.key(at.replay_after_wal_id + 1))
    with pytest.raises(CloneWalMissingError, match="lose"):
        admin.create_clone("dbs/clone", PARENT, local_dir_store, checkpoint.id)
    assert not manifest(local_dir_store, "dbs/clone").initialized


def test_parent_must_exist_be_initialized_and_not_destroyed(
    local_dir_store: MemoryStore | LocalStore,
) -> None:
    with pytest.raises(DbNotFoundError):
        admin.create_clone("dbs/clone", PARENT, local_dir_store)
    ManifestStore(local_dir_store, "dbs/unfinished").create_initial(Manifest(initialized=False))
    with pytest.raises(DbNotInitializedError):
        admin.create_clone("dbs/clone", "dbs/unfinished", local_dir_store)
    admin.create_db(PARENT, local_dir_store)
    admin.destroy(PARENT, local_dir_store, dry_run=False)
    with pytest.raises(DbDestroyedError):
        admin.create_clone("dbs/clone", PARENT, local_dir_store)
    assert ManifestStore(local_dir_store, "dbs/clone").read_latest() is None
