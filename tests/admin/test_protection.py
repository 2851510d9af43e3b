"""Every database owns its protection: compositions of split, merge, clone, destroy and GC.

Each test here is a regression for a defect that lost data or reported a wrong result although
every operation was right on its own (issue 12): shards sharing one final checkpoint on their
source, merged entries of one path sharing one, a split reporting success onto another source's
shards, and a fully flushed database refused for a split.
"""

from __future__ import annotations

from datetime import UTC, datetime

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
from tests.admin.conftest import contents, manifest
from tests.admin.test_rescale import FULL, SOURCE, build_source, restricted
from tests.conftest import snapshot
from tests.engine.conftest import quiet

DAY = 86_400.0


@pytest.fixture
def clock() -> ManualRuntime:
    return ManualRuntime(1_700_000_000.0)


@pytest.fixture
def store(clock: ManualRuntime) -> MemoryStore:
    """Objects stamped by ``clock``: GC measures how long an object has been unreferenced by the
    manifests' ``last_modified``, so advancing the clock makes min ages really pass."""
    return MemoryStore(now=lambda: datetime.fromtimestamp(clock.now(), UTC))


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
    store: MemoryStore, clock: ManualRuntime
) -> None:
    build_source(store, clock=clock)
    admin.split(SOURCE, store, [b"k050"], ["dbs/a", "dbs/b"], clock=clock)
    a, b = manifest(store, "dbs/a"), manifest(store, "dbs/b")
    finals = {e.final_checkpoint_id for m in (a, b) for e in m.external_dbs}
    assert len(finals) == len(a.external_dbs) + len(b.external_dbs) == 2
    assert final_checkpoints(store, SOURCE) == [
        FINAL_CHECKPOINT_PREFIX + "dbs/a",
        FINAL_CHECKPOINT_PREFIX + "dbs/b",
    ]


def test_a_shard_compacting_away_the_source_leaves_its_sibling_protected(
    store: MemoryStore, clock: ManualRuntime
) -> None:
    model = build_source(store, clock=clock)
    admin.split(SOURCE, store, [b"k050"], ["dbs/a", "dbs/b"], clock=clock)
    admin.destroy(SOURCE, store, soft=True, dry_run=False, clock=clock)
    write(store, "dbs/a", clock, {b"k001": b"a-write"})
    Compactor("dbs/a", store, FULL, clock=clock).run_once(full=True)
    collect_everything(store, ["dbs/a", "dbs/b", SOURCE], clock)

    assert contents(store, "dbs/b") == restricted(model, KeyRange(b"k050", None))
    assert contents(store, "dbs/a") == restricted(model, KeyRange(None, b"k050")) | {b"k001": b"a-write"}
    assert manifest(store, "dbs/a").external_dbs == ()  # detached: it released its checkpoint
    assert final_checkpoints(store, SOURCE) == [FINAL_CHECKPOINT_PREFIX + "dbs/b"]


def test_hard_destroying_a_shard_leaves_its_sibling_protected(
    store: MemoryStore, clock: ManualRuntime
) -> None:
    model = build_source(store, clock=clock)
    admin.split(SOURCE, store, [b"k050"], ["dbs/a", "dbs/b"], clock=clock)
    planned = admin.destroy("dbs/a", store, soft=False, dry_run=True, clock=clock)
    done = admin.destroy("dbs/a", store, soft=False, dry_run=False, clock=clock)
    assert (planned.deleted, planned.released_parent_checkpoints) == (
        done.deleted,
        done.released_parent_checkpoints,
    )
    assert [path for path, _ in done.released_parent_checkpoints] == [SOURCE]  # its own only
    write(store, SOURCE, clock, {b"k070": b"source-after-split", b"k010": b"x"})
    Compactor(SOURCE, store, FULL, clock=clock).run_once(full=True)
    collect_everything(store, [SOURCE, "dbs/b"], clock)

    assert contents(store, "dbs/b") == restricted(model, KeyRange(b"k050", None))


# --- defect 2: merged entries of one path share one final checkpoint -----------------------------


def test_a_merge_of_clones_taken_at_different_times_pins_both_states(
    store: MemoryStore, clock: ManualRuntime
) -> None:
    """Clones of one parent at two times, split, and their halves merged: the merged database has
    two entries for the parent, each pinning its own manifest with its own final checkpoint."""
    parent = "dbs/parent"
    first = {b"k%03d" % i: b"first" for i in range(0, 100, 2)}
    write(store, parent, clock, first)
    admin.create_clone("dbs/c1", parent, store, clock=clock)
    later = {b"k%03d" % i: b"later" for i in range(50, 100)}  # an L0 SST only the second clone sees
    write(store, parent, clock, later)
    admin.create_clone("dbs/c2", parent, store, clock=clock)
    admin.split("dbs/c1", store, [b"k050"], ["dbs/c1-low", "dbs/c1-high"], clock=clock)
    admin.split("dbs/c2", store, [b"k050"], ["dbs/c2-low", "dbs/c2-high"], clock=clock)
    admin.merge(["dbs/c1-low", "dbs/c2-high"], store, "dbs/merged", clock=clock)

    merged = manifest(store, "dbs/merged")
    assert len([e for e in merged.external_dbs if e.path == parent]) == 2
    expected = restricted(first, KeyRange(None, b"k050")) | restricted(first | later, KeyRange(b"k050", None))
    assert contents(store, "dbs/merged") == expected

    # Everything in between goes; the parent moves on and collects.
    for path in ("dbs/c1-low", "dbs/c1-high", "dbs/c2-low", "dbs/c2-high"):
        admin.destroy(path, store, soft=False, dry_run=False, clock=clock)
    for path in ("dbs/c1", "dbs/c2"):
        admin.destroy(path, store, soft=True, dry_run=False, clock=clock)
    write(store, parent, clock, {b"k099": b"parent-moves-on"})
    Compactor(parent, store, FULL, clock=clock).run_once(full=True)
    collect_everything(store, [parent, "dbs/c1", "dbs/c2", "dbs/merged"], clock)

    assert contents(store, "dbs/merged") == expected
    assert len({e.final_checkpoint_id for e in merged.external_dbs}) == len(merged.external_dbs)
    # A clone of the merge owns checkpoints of its own on every database it reads.
    admin.create_clone("dbs/merged-clone", "dbs/merged", store, clock=clock)
    clone = manifest(store, "dbs/merged-clone")
    ours = {e.final_checkpoint_id for e in clone.external_dbs}
    assert len(ours) == len(clone.external_dbs) and not ours & {
        e.final_checkpoint_id for e in merged.external_dbs
    }
    admin.destroy("dbs/merged", store, soft=True, dry_run=False, clock=clock)
    collect_everything(store, [parent, "dbs/c1", "dbs/c2", "dbs/merged", "dbs/merged-clone"], clock)
    assert contents(store, "dbs/merged-clone") == expected


def test_shards_of_a_merge_outlive_the_merge_and_its_sources(
    store: MemoryStore, clock: ManualRuntime
) -> None:
    """Split, merge the shards back, split the merge again, then destroy everything in between."""
    model = build_source(store, clock=clock)
    admin.split(SOURCE, store, [b"k050"], ["dbs/a", "dbs/b"], clock=clock)
    admin.merge(["dbs/a", "dbs/b"], store, "dbs/m", clock=clock)
    admin.split("dbs/m", store, [b"k030", b"k070"], ["dbs/m0", "dbs/m1", "dbs/m2"], clock=clock)
    write(store, "dbs/m1", clock, {b"k040": b"m1-write"})
    Compactor("dbs/m1", store, FULL, clock=clock).run_once(full=True)
    for path in ("dbs/a", "dbs/b", "dbs/m", SOURCE):
        admin.destroy(path, store, soft=True, dry_run=False, clock=clock)
    collect_everything(store, [SOURCE, "dbs/a", "dbs/b", "dbs/m", "dbs/m0", "dbs/m1", "dbs/m2"], clock)

    assert contents(store, "dbs/m0") == restricted(model, KeyRange(None, b"k030"))
    assert contents(store, "dbs/m1") == restricted(model, KeyRange(b"k030", b"k070")) | {b"k040": b"m1-write"}
    assert contents(store, "dbs/m2") == restricted(model, KeyRange(b"k070", None))
    everything = [m.external_dbs for p in ("dbs/m0", "dbs/m1", "dbs/m2") for m in [manifest(store, p)]]
    finals = [(e.path, e.final_checkpoint_id) for entries in everything for e in entries]
    assert len(set(finals)) == len(finals)


# --- defect 3: a split onto another source's shards ------------------------------------------------


def test_a_split_onto_the_shards_of_another_source_is_refused(
    store: MemoryStore, clock: ManualRuntime
) -> None:
    build_source(store, "dbs/s1", clock=clock)
    build_source(store, "dbs/s2", clock=clock)
    admin.split("dbs/s1", store, [b"k050"], ["dbs/a", "dbs/b"], clock=clock)
    before = snapshot(store)
    with pytest.raises(CloneMismatchError, match=r"'dbs/a'.*\['dbs/s1'\].*'dbs/s2'"):
        admin.split("dbs/s2", store, [b"k050"], ["dbs/a", "dbs/b"], clock=clock)
    assert snapshot(store) == before
    # The same split again is still a no-op.
    assert admin.split("dbs/s1", store, [b"k050"], ["dbs/a", "dbs/b"], clock=clock).created is False


def test_a_split_of_a_clone_without_own_ssts_is_recognised_on_a_rerun(
    store: MemoryStore, clock: ManualRuntime
) -> None:
    build_source(store, clock=clock)
    admin.create_clone("dbs/clone", SOURCE, store, clock=clock)  # owns no SST: shards inherit entries
    admin.create_clone("dbs/other", SOURCE, store, clock=clock)
    assert admin.split("dbs/clone", store, [b"k050"], ["dbs/a", "dbs/b"], clock=clock).created
    assert admin.split("dbs/clone", store, [b"k050"], ["dbs/a", "dbs/b"], clock=clock).created is False
    with pytest.raises(CloneMismatchError, match="dbs/other"):
        admin.split("dbs/other", store, [b"k050"], ["dbs/a", "dbs/b"], clock=clock)


# --- defect 4: a fully flushed database refused for a split ----------------------------------------


def test_a_fully_flushed_and_closed_database_can_be_split(store: MemoryStore, clock: ManualRuntime) -> None:
    model = {b"k%05d" % i: b"v%d" % i for i in range(20_000)}
    with Db.open(SOURCE, store, quiet(l0_max_ssts=1000), clock=clock) as db:
        for key, value in model.items():
            db.put(key, value)
        db.flush_memtable()
    # What a writer's close() could leave (the engine no longer does): a WAL SST after the replay
    # point whose entries an L0 SST already holds. It carries nothing a projection would lose.
    current = manifest(store, SOURCE)
    wal = WalStore(store, SOURCE)
    stale = [(b"k00001", 2, KIND_VALUE, b"v1"), (b"k00002", 3, KIND_VALUE, b"v2")]
    assert max(seq for _, seq, _, _ in stale) <= current.last_l0_seq
    wal.write(max([current.replay_after_wal_id, *wal.list_ids()]) + 1, entries_to_table(stale))

    report = admin.split(SOURCE, store, [b"k10000"], ["dbs/a", "dbs/b"], clock=clock)
    assert report.created
    assert contents(store, "dbs/a") | contents(store, "dbs/b") == model


def test_a_wal_sst_newer_than_l0_is_still_refused(store: MemoryStore, clock: ManualRuntime) -> None:
    build_source(store, clock=clock)
    with Db.open(SOURCE, store, quiet(), clock=clock) as db:
        db.put(b"k001", b"only-in-the-wal")
    current = manifest(store, SOURCE)
    wal = WalStore(store, SOURCE)
    assert any(
        (seq := wal.max_seq(i, size)) is not None and seq > current.last_l0_seq
        for i, size in wal.list_sizes(current.replay_after_wal_id)
    )
    before = snapshot(store)
    with pytest.raises(Exception, match="writes only in its WAL"):
        admin.split(SOURCE, store, [b"k050"], ["dbs/a", "dbs/b"], clock=clock)
    assert snapshot(store) == before


# --- databases that read a soft-destroyed one --------------------------------------------------------


def test_clones_splits_and_merges_of_shards_of_a_soft_destroyed_source(
    store: MemoryStore, clock: ManualRuntime
) -> None:
    """The new database needs a final checkpoint on the soft-destroyed source its source reads:
    made from the shard's own live final checkpoint there, not refused half-way."""
    model = build_source(store, clock=clock)
    admin.split(SOURCE, store, [b"k050"], ["dbs/a", "dbs/b"], clock=clock)
    admin.destroy(SOURCE, store, soft=True, dry_run=False, clock=clock)

    admin.create_clone("dbs/a-clone", "dbs/a", store, clock=clock)
    admin.split("dbs/b", store, [b"k070"], ["dbs/b0", "dbs/b1"], clock=clock)
    admin.merge(["dbs/a", "dbs/b"], store, "dbs/ab", clock=clock)
    everything = [SOURCE, "dbs/a", "dbs/b", "dbs/a-clone", "dbs/b0", "dbs/b1", "dbs/ab"]
    assert check_references(store, everything, now=clock.now()) == []

    for path in ("dbs/a", "dbs/b"):
        admin.destroy(path, store, soft=True, dry_run=False, clock=clock)
    collect_everything(store, everything, clock)
    assert check_references(store, now=clock.now()) == []
    assert contents(store, "dbs/a-clone") == restricted(model, KeyRange(None, b"k050"))
    assert contents(store, "dbs/b0") == restricted(model, KeyRange(b"k050", b"k070"))
    assert contents(store, "dbs/b1") == restricted(model, KeyRange(b"k070", None))
    assert contents(store, "dbs/ab") == model


def test_an_interrupted_split_of_an_empty_source_finishes_after_the_source_got_data(
    store: MemoryStore, clock: ManualRuntime
) -> None:
    """A re-run compares existing shards with the state the split started from (its checkpoint),
    not with the source's latest state (found by the simulation)."""
    admin.create_db("src", store)
    for crash_point in range(40):
        faulty = FaultInjectingStore(store)
        faulty.crash_after(crash_point)
        try:
            admin.split("src", faulty, [b"m"], ["dbs/a", "dbs/b"], clock=clock)
        except SimulatedCrash:
            if manifest_exists(store, "dbs/b"):
                break  # a shard exists, the split is unfinished
    else:
        pytest.fail("no crash point left an unfinished split")
    write(store, "src", clock, {b"x": b"1"})
    report = admin.split("src", store, [b"m"], ["dbs/a", "dbs/b"], clock=clock)
    assert [d.path for d in report.databases] == ["dbs/a", "dbs/b"]
    assert contents(store, "dbs/a") == {} and contents(store, "dbs/b") == {}  # the state it started from
