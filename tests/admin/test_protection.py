"""Every database owns its protection: compositions of split, merge, clone, destroy and GC.

Each test here is a regression for a defect that lost data or reported a wrong result although
every operation was right on its own (issue 12): shards sharing one final checkpoint on their
source, merged entries of one path sharing one, a split reporting success onto another source's
shards, and a fully flushed database refused for a split.
"""

from __future__ import annotations

import pytest

from slate_ops import Db, admin
from slate_ops.admin.clone import FINAL_CHECKPOINT_PREFIX
from slate_ops.admin.reachability import check_references
from slate_ops.compaction import Compactor
from slate_ops.engine.batch import KIND_VALUE
from slate_ops.engine.wal_store import WalStore
from slate_ops.errors import CloneMismatchError
from slate_ops.gc import GarbageCollector, GcOptions
from slate_ops.manifest.model import KeyRange
from slate_ops.objstore import FaultInjectingStore, MemoryStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.wrappers import SimulatedCrash
from slate_ops.runtime import ManualRuntime
from slate_ops.sst import entries_to_table
from tests.admin.test_rescale import FULL, SOURCE, build_source, restricted
from tests.support.db_state import contents, manifest
from tests.support.engine import quiet
from tests.support.stores import snapshot

DAY = 86_400.0


def write(store: ObjectStore, path: str, clock: ManualRuntime, items: dict[bytes, bytes]) -> None:
    with Db.open(path, store, quiet(l0_max_ssts=1000), clock=clock) as db:
        for key, value in items.items():
            db.put(key, value)
        db.flush_memtable()


def collect_everything(store: ObjectStore, paths: list[str], clock: ManualRuntime) -> None:
    """GC of every database, five times, the clock a day further each time (past every min age
    and the soft-destroy grace), so whatever is unprotected is really gone."""
    for _ in range(5):
        clock.advance(DAY)
        for path in paths:
            if manifest_exists(store, path):
                gc = GarbageCollector(path, store, GcOptions(), clock=clock)
                planned = gc.run_once(dry_run=True)
                done = gc.run_once(dry_run=False)
                # The dry run reports exactly what the real run then does.
                assert planned.deleted_keys() == done.deleted_keys()
                assert (planned.clones_detached, planned.destroyed) == (done.clones_detached, done.destroyed)


def manifest_exists(store: ObjectStore, path: str) -> bool:
    return any(True for _ in store.list(f"{path}/manifest/"))


def final_checkpoints(store: ObjectStore, path: str) -> list[str]:
    names = (c.name for c in manifest(store, path).checkpoints)
    return sorted(n for n in names if n is not None and n.startswith(FINAL_CHECKPOINT_PREFIX))


# --- defect 1: shards share one final checkpoint on their source -----------------------------------


def test_each_shard_holds_its_own_final_checkpoint_on_the_source(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    build_source(clocked_memory_store, clock=clock)
    admin.split(SOURCE, clocked_memory_store, [b"k050"], ["dbs/a", "dbs/b"], clock=clock)
    a, b = manifest(clocked_memory_store, "dbs/a"), manifest(clocked_memory_store, "dbs/b")
    finals = {e.final_checkpoint_id for m in (a, b) for e in m.external_dbs}
    assert len(finals) == len(a.external_dbs) + len(b.external_dbs) == 2
    assert final_checkpoints(clocked_memory_store, SOURCE) == [
        FINAL_CHECKPOINT_PREFIX + "dbs/a",
        FINAL_CHECKPOINT_PREFIX + "dbs/b",
    ]


def test_a_shard_compacting_away_the_source_leaves_its_sibling_protected(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    model = build_source(clocked_memory_store, clock=clock)
    admin.split(SOURCE, clocked_memory_store, [b"k050"], ["dbs/a", "dbs/b"], clock=clock)
    admin.destroy(SOURCE, clocked_memory_store, soft=True, dry_run=False, clock=clock)
    write(clocked_memory_store, "dbs/a", clock, {b"k001": b"a-write"})
    Compactor("dbs/a", clocked_memory_store, FULL, clock=clock).run_once(full=True)
    collect_everything(clocked_memory_store, ["dbs/a", "dbs/b", SOURCE], clock)

    assert contents(clocked_memory_store, "dbs/b") == restricted(model, KeyRange(b"k050", None))
    assert contents(clocked_memory_store, "dbs/a") == restricted(model, KeyRange(None, b"k050")) | {
        b"k001": b"a-write"
    }
    assert manifest(clocked_memory_store, "dbs/a").external_dbs == ()  # detached: it released its checkpoint
    assert final_checkpoints(clocked_memory_store, SOURCE) == [FINAL_CHECKPOINT_PREFIX + "dbs/b"]


def test_hard_destroying_a_shard_leaves_its_sibling_protected(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    model = build_source(clocked_memory_store, clock=clock)
    admin.split(SOURCE, clocked_memory_store, [b"k050"], ["dbs/a", "dbs/b"], clock=clock)
    planned = admin.destroy("dbs/a", clocked_memory_store, soft=False, dry_run=True, clock=clock)
    done = admin.destroy("dbs/a", clocked_memory_store, soft=False, dry_run=False, clock=clock)
    assert (planned.deleted, planned.released_parent_checkpoints) == (
        done.deleted,
        done.released_parent_checkpoints,
    )
    assert [path for path, _ in done.released_parent_checkpoints] == [SOURCE]  # its own only
    write(clocked_memory_store, SOURCE, clock, {b"k070": b"source-after-split", b"k010": b"x"})
    Compactor(SOURCE, clocked_memory_store, FULL, clock=clock).run_once(full=True)
    collect_everything(clocked_memory_store, [SOURCE, "dbs/b"], clock)

    assert contents(clocked_memory_store, "dbs/b") == restricted(model, KeyRange(b"k050", None))


# --- defect 2: merged entries of one path share one final checkpoint -----------------------------


def test_a_merge_of_clones_taken_at_different_times_pins_both_states(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    """Clones of one parent at two times, split, and their halves merged: the merged database has
    two entries for the parent, each pinning its own manifest with its own final checkpoint."""
    parent = "dbs/parent"
    first = {b"k%03d" % i: b"first" for i in range(0, 100, 2)}
    write(clocked_memory_store, parent, clock, first)
    admin.create_clone("dbs/c1", parent, clocked_memory_store, clock=clock)
    later = {b"k%03d" % i: b"later" for i in range(50, 100)}  # an L0 SST only the second clone sees
    write(clocked_memory_store, parent, clock, later)
    admin.create_clone("dbs/c2", parent, clocked_memory_store, clock=clock)
    admin.split("dbs/c1", clocked_memory_store, [b"k050"], ["dbs/c1-low", "dbs/c1-high"], clock=clock)
    admin.split("dbs/c2", clocked_memory_store, [b"k050"], ["dbs/c2-low", "dbs/c2-high"], clock=clock)
    admin.merge(["dbs/c1-low", "dbs/c2-high"], clocked_memory_store, "dbs/merged", clock=clock)

    merged = manifest(clocked_memory_store, "dbs/merged")
    assert len([e for e in merged.external_dbs if e.path == parent]) == 2
    expected = restricted(first, KeyRange(None, b"k050")) | restricted(first | later, KeyRange(b"k050", None))
    assert contents(clocked_memory_store, "dbs/merged") == expected

    # Everything in between goes; the parent moves on and collects.
    for path in ("dbs/c1-low", "dbs/c1-high", "dbs/c2-low", "dbs/c2-high"):
        admin.destroy(path, clocked_memory_store, soft=False, dry_run=False, clock=clock)
    for path in ("dbs/c1", "dbs/c2"):
        admin.destroy(path, clocked_memory_store, soft=True, dry_run=False, clock=clock)
    write(clocked_memory_store, parent, clock, {b"k099": b"parent-moves-on"})
    Compactor(parent, clocked_memory_store, FULL, clock=clock).run_once(full=True)
    collect_everything(clocked_memory_store, [parent, "dbs/c1", "dbs/c2", "dbs/merged"], clock)

    assert contents(clocked_memory_store, "dbs/merged") == expected
    assert len({e.final_checkpoint_id for e in merged.external_dbs}) == len(merged.external_dbs)
    # A clone of the merge owns checkpoints of its own on every database it reads.
    admin.create_clone("dbs/merged-clone", "dbs/merged", clocked_memory_store, clock=clock)
    clone = manifest(clocked_memory_store, "dbs/merged-clone")
    ours = {e.final_checkpoint_id for e in clone.external_dbs}
    assert len(ours) == len(clone.external_dbs) and not ours & {
        e.final_checkpoint_id for e in merged.external_dbs
    }
    admin.destroy("dbs/merged", clocked_memory_store, soft=True, dry_run=False, clock=clock)
    collect_everything(
        clocked_memory_store, [parent, "dbs/c1", "dbs/c2", "dbs/merged", "dbs/merged-clone"], clock
    )
    assert contents(clocked_memory_store, "dbs/merged-clone") == expected


def test_shards_of_a_merge_outlive_the_merge_and_its_sources(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    """Split, merge the shards back, split the merge again, then destroy everything in between."""
    model = build_source(clocked_memory_store, clock=clock)
    admin.split(SOURCE, clocked_memory_store, [b"k050"], ["dbs/a", "dbs/b"], clock=clock)
    admin.merge(["dbs/a", "dbs/b"], clocked_memory_store, "dbs/m", clock=clock)
    admin.split(
        "dbs/m", clocked_memory_store, [b"k030", b"k070"], ["dbs/m0", "dbs/m1", "dbs/m2"], clock=clock
    )
    write(clocked_memory_store, "dbs/m1", clock, {b"k040": b"m1-write"})
    Compactor("dbs/m1", clocked_memory_store, FULL, clock=clock).run_once(full=True)
    for path in ("dbs/a", "dbs/b", "dbs/m", SOURCE):
        admin.destroy(path, clocked_memory_store, soft=True, dry_run=False, clock=clock)
    collect_everything(
        clocked_memory_store, [SOURCE, "dbs/a", "dbs/b", "dbs/m", "dbs/m0", "dbs/m1", "dbs/m2"], clock
    )

    assert contents(clocked_memory_store, "dbs/m0") == restricted(model, KeyRange(None, b"k030"))
    assert contents(clocked_memory_store, "dbs/m1") == restricted(model, KeyRange(b"k030", b"k070")) | {
        b"k040": b"m1-write"
    }
    assert contents(clocked_memory_store, "dbs/m2") == restricted(model, KeyRange(b"k070", None))
    everything = [
        m.external_dbs for p in ("dbs/m0", "dbs/m1", "dbs/m2") for m in [manifest(clocked_memory_store, p)]
    ]
    finals = [(e.path, e.final_checkpoint_id) for entries in everything for e in entries]
    assert len(set(finals)) == len(finals)


# --- defect 3: a split onto another source's shards ------------------------------------------------


def test_a_split_onto_the_shards_of_another_source_is_refused(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    build_source(clocked_memory_store, "dbs/s1", clock=clock)
    build_source(clocked_memory_store, "dbs/s2", clock=clock)
    admin.split("dbs/s1", clocked_memory_store, [b"k050"], ["dbs/a", "dbs/b"], clock=clock)
    before = snapshot(clocked_memory_store)
    with pytest.raises(CloneMismatchError, match=r"'dbs/a'.*\['dbs/s1'\].*'dbs/s2'"):
        admin.split("dbs/s2", clocked_memory_store, [b"k050"], ["dbs/a", "dbs/b"], clock=clock)
    assert snapshot(clocked_memory_store) == before
    # The same split again is still a no-op.
    assert (
        admin.split("dbs/s1", clocked_memory_store, [b"k050"], ["dbs/a", "dbs/b"], clock=clock).created
        is False
    )


def test_a_split_of_a_clone_without_own_ssts_is_recognised_on_a_rerun(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    build_source(clocked_memory_store, clock=clock)
    admin.create_clone(
        "dbs/clone", SOURCE, clocked_memory_store, clock=clock
    )  # owns no SST: shards inherit entries
    admin.create_clone("dbs/other", SOURCE, clocked_memory_store, clock=clock)
    assert admin.split("dbs/clone", clocked_memory_store, [b"k050"], ["dbs/a", "dbs/b"], clock=clock).created
    assert (
        admin.split("dbs/clone", clocked_memory_store, [b"k050"], ["dbs/a", "dbs/b"], clock=clock).created
        is False
    )
    with pytest.raises(CloneMismatchError, match="dbs/other"):
        admin.split("dbs/other", clocked_memory_store, [b"k050"], ["dbs/a", "dbs/b"], clock=clock)


# --- defect 4: a fully flushed database refused for a split ----------------------------------------


def test_a_fully_flushed_and_closed_database_can_be_split(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    model = {b"k%05d" % i: b"v%d" % i for i in range(20_000)}
    with Db.open(SOURCE, clocked_memory_store, quiet(l0_max_ssts=1000), clock=clock) as db:
        for key, value in model.items():
            db.put(key, value)
        db.flush_memtable()
    # What a writer's close() could leave (the engine no longer does): a WAL SST after the replay
    # point whose entries an L0 SST already holds. It carries nothing a projection would lose.
    current = manifest(clocked_memory_store, SOURCE)
    wal = WalStore(clocked_memory_store, SOURCE)
    stale = [(b"k00001", 2, KIND_VALUE, b"v1"), (b"k00002", 3, KIND_VALUE, b"v2")]
    assert max(seq for _, seq, _, _ in stale) <= current.last_l0_seq
    wal.write(max([current.replay_after_wal_id, *wal.list_ids()]) + 1, entries_to_table(stale))

    report = admin.split(SOURCE, clocked_memory_store, [b"k10000"], ["dbs/a", "dbs/b"], clock=clock)
    assert report.created
    assert contents(clocked_memory_store, "dbs/a") | contents(clocked_memory_store, "dbs/b") == model


def test_a_wal_sst_newer_than_l0_is_still_refused(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    build_source(clocked_memory_store, clock=clock)
    with Db.open(SOURCE, clocked_memory_store, quiet(), clock=clock) as db:
        db.put(b"k001", b"only-in-the-wal")
    current = manifest(clocked_memory_store, SOURCE)
    wal = WalStore(clocked_memory_store, SOURCE)
    assert any(
        (seq := wal.max_seq(i, size)) is not None and seq > current.last_l0_seq
        for i, size in wal.list_sizes(current.replay_after_wal_id)
    )
    before = snapshot(clocked_memory_store)
    with pytest.raises(Exception, match="writes only in its WAL"):
        admin.split(SOURCE, clocked_memory_store, [b"k050"], ["dbs/a", "dbs/b"], clock=clock)
    assert snapshot(clocked_memory_store) == before


# --- databases that read a soft-destroyed one --------------------------------------------------------


def test_clones_splits_and_merges_of_shards_of_a_soft_destroyed_source(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    """The new database needs a final checkpoint on the soft-destroyed source its source reads:
    made from the shard's own live final checkpoint there, not refused half-way."""
    model = build_source(clocked_memory_store, clock=clock)
    admin.split(SOURCE, clocked_memory_store, [b"k050"], ["dbs/a", "dbs/b"], clock=clock)
    admin.destroy(SOURCE, clocked_memory_store, soft=True, dry_run=False, clock=clock)

    admin.create_clone("dbs/a-clone", "dbs/a", clocked_memory_store, clock=clock)
    admin.split("dbs/b", clocked_memory_store, [b"k070"], ["dbs/b0", "dbs/b1"], clock=clock)
    admin.merge(["dbs/a", "dbs/b"], clocked_memory_store, "dbs/ab", clock=clock)
    everything = [SOURCE, "dbs/a", "dbs/b", "dbs/a-clone", "dbs/b0", "dbs/b1", "dbs/ab"]
    assert check_references(clocked_memory_store, everything, now=clock.now()) == []

    for path in ("dbs/a", "dbs/b"):
        admin.destroy(path, clocked_memory_store, soft=True, dry_run=False, clock=clock)
    collect_everything(clocked_memory_store, everything, clock)
    assert check_references(clocked_memory_store, now=clock.now()) == []
    assert contents(clocked_memory_store, "dbs/a-clone") == restricted(model, KeyRange(None, b"k050"))
    assert contents(clocked_memory_store, "dbs/b0") == restricted(model, KeyRange(b"k050", b"k070"))
    assert contents(clocked_memory_store, "dbs/b1") == restricted(model, KeyRange(b"k070", None))
    assert contents(clocked_memory_store, "dbs/ab") == model


def test_an_interrupted_split_of_an_empty_source_finishes_after_the_source_got_data(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    """A re-run compares existing shards with the state the split started from (its checkpoint),
    not with the source's latest state (found by the simulation)."""
    admin.create_db("src", clocked_memory_store)
    for crash_point in range(40):
        faulty = FaultInjectingStore(clocked_memory_store)
        faulty.crash_after(crash_point)
        try:
            admin.split("src", faulty, [b"m"], ["dbs/a", "dbs/b"], clock=clock)
        except SimulatedCrash:
            if manifest_exists(clocked_memory_store, "dbs/b"):
                break  # a shard exists, the split is unfinished
    else:
        pytest.fail("no crash point left an unfinished split")
    write(clocked_memory_store, "src", clock, {b"x": b"1"})
    report = admin.split("src", clocked_memory_store, [b"m"], ["dbs/a", "dbs/b"], clock=clock)
    assert [d.path for d in report.databases] == ["dbs/a", "dbs/b"]
    assert (
        contents(clocked_memory_store, "dbs/a") == {} and contents(clocked_memory_store, "dbs/b") == {}
    )  # the state it started from
