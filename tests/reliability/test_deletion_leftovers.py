"""The simulation's check of a finished hard destroy (``invariants.deletion_leftovers``).

Seed 10 (200 steps) and the long seed 1000 once failed with "a finished hard destroy of fam/f003 left
5 objects": the tombstone manifest, the WAL fence, the ``.compactions`` file, ``gc/deleted.<id>`` and
``gc/manifest.boundary`` — exactly what a deletion keeps by design since deletions leave a tombstone
(docs/design/clones-and-destroy.md, "Deleting a Database"). The check then still demanded an empty
path. These tests pin the corrected expectation on real stores: the fences are accepted, and every
object a finished deletion must not leave is still reported.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from slate_ops import Db, admin
from slate_ops.layout import compactions_key, manifest_key, sst_key, wal_key
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import FaultInjectingStore, MemoryStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.wrappers import SimulatedCrash
from slate_ops.runtime import ManualRuntime
from tests.reliability.sim.invariants import deletion_leftovers
from tests.support.engine import quiet

DB = "fam/f003"
NOW = 1_700_000_000.0


def filled(path: str = DB) -> MemoryStore:
    """A database with L0 SSTs, WAL SSTs and several manifests; its writer closed cleanly."""
    store = MemoryStore("leftovers")
    with Db.open(path, store, quiet()) as db:
        for round_ in range(2):
            for i in range(10):
                db.put(b"k%02d" % i, b"v%d" % round_)
            db.flush_memtable()
        db.put(b"wal-only", b"w")
    return store


def hard_destroy(store: ObjectStore, path: str = DB) -> admin.DestroyReport:
    return admin.destroy(path, store, soft=False, dry_run=False, clock=ManualRuntime(NOW))


def test_a_finished_hard_destroy_leaves_only_its_tombstone_and_fences() -> None:
    store = filled()
    report = hard_destroy(store)
    left = {m.key for m in store.list(DB + "/")}
    # What the old check ("nothing under the path") refused: five objects, all kept by design.
    assert left == {*report.kept, f"{DB}/gc/manifest.boundary"} and len(left) == 5
    assert deletion_leftovers(store, DB) == []


def test_a_path_that_never_held_a_database_must_be_empty() -> None:
    store = MemoryStore("leftovers")
    assert deletion_leftovers(store, DB) == []
    store.put(wal_key(DB, 1), b"")
    assert deletion_leftovers(store, DB) == [f"{wal_key(DB, 1)} (no manifest is left)"]


def test_an_unfinished_clone_keeps_no_wal_fence() -> None:
    store = filled("fam/parent")
    admin.create_clone(DB, "fam/parent", store, clock=ManualRuntime(NOW))
    ManifestStore(store, DB).update(lambda m: m.value.with_changes(initialized=False))
    hard_destroy(store)
    assert not list(store.list(DB + "/wal/"))
    assert deletion_leftovers(store, DB) == []
    store.put(wal_key(DB, 1), b"")  # a fence where the deletion keeps none
    assert deletion_leftovers(store, DB) == [f"{wal_key(DB, 1)} (wal)"]


def _tombstone_id(store: ObjectStore) -> int:
    manifests = ManifestStore(store, DB)
    return max(listed.id for listed in manifests.sequence.list())


def _fence(store: ObjectStore) -> int:
    return ManifestStore(store, DB).read(_tombstone_id(store)).value.replay_after_wal_id


def _stray_sst(store: ObjectStore, old_manifest: bytes) -> str:
    key = sst_key(DB, "01JAAAAAAAAAAAAAAAAAAAAAAA")
    store.put(key, b"x")
    return key


def _wal_below_fence(store: ObjectStore, old_manifest: bytes) -> str:
    key = wal_key(DB, _fence(store) - 1)
    store.put(key, b"x")  # a stale writer's orphan: a re-run would delete it
    return key


def _second_compactions_file(store: ObjectStore, old_manifest: bytes) -> str:
    key = compactions_key(DB, 2)
    store.put(key, store.get(compactions_key(DB, 1)).data)
    return key


def _resurrected_manifest(store: ObjectStore, old_manifest: bytes) -> str:
    key = manifest_key(DB, _tombstone_id(store) + 1)
    store.put(key, old_manifest)  # the deleted database's manifest again, after the tombstone
    return key


def _stray_gc_object(store: ObjectStore, old_manifest: bytes) -> str:
    key = f"{DB}/gc/deleted.00000000000000000001"  # a marker of no tombstone
    store.put(key, b"")
    return key


@pytest.mark.parametrize(
    ("plant", "reported"),
    [
        (_stray_sst, "(compacted)"),
        (_wal_below_fence, "(wal)"),
        (_second_compactions_file, "(compactions)"),
        (_resurrected_manifest, "is not a tombstone"),
        (_stray_gc_object, "(elsewhere)"),
    ],
    ids=["sst", "wal-below-fence", "second-compactions", "manifest-after-tombstone", "gc-stray"],
)
def test_every_object_a_finished_deletion_must_not_leave_is_reported(
    plant: Callable[[ObjectStore, bytes], str], reported: str
) -> None:
    store = filled()
    old_manifest = store.get(manifest_key(DB, 1)).data
    hard_destroy(store)
    planted = plant(store, old_manifest)
    problems = deletion_leftovers(store, DB)
    assert any(reported in p for p in problems), problems
    assert any(planted in p or planted.endswith(f"{_tombstone_id(store):020d}.manifest") for p in problems)


def test_an_interrupted_deletion_is_reported_until_a_rerun_finishes_it() -> None:
    store: ObjectStore | None = None
    tombstone = None
    for n in range(200):  # crash at the first request after the tombstone is committed
        probe = filled()
        faulty = FaultInjectingStore(probe)
        faulty.crash_after(n)
        with pytest.raises(SimulatedCrash):
            hard_destroy(faulty)
        latest = ManifestStore(probe, DB).read_current()
        if latest is not None and latest.value.is_tombstone:
            store, tombstone = probe, latest.id
            break
    assert store is not None and tombstone is not None
    problems = deletion_leftovers(store, DB)
    assert any("(compacted)" in p for p in problems), problems
    assert any("manifests" in p and "not one tombstone" in p for p in problems), problems
    hard_destroy(store)
    assert deletion_leftovers(store, DB) == []
