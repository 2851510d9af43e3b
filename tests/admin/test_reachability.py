"""The reachability invariant (issue 12, "every database owns its protection"): each kind of broken
reference is detected on a state built by hand, and a clean family of clones, shards and merges
passes, before and after GC."""

from __future__ import annotations

import itertools
import uuid
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from slate_ops import Db, admin
from slate_ops.admin.fleet import discover_databases
from slate_ops.admin.reachability import (
    FOREIGN_FINAL_CHECKPOINT,
    KINDS,
    MISSING_EXTERNAL_DB,
    MISSING_PINNED_MANIFEST,
    MISSING_SST,
    SHARED_FINAL_CHECKPOINT,
    UNPINNED_EXTERNAL,
    UNPROTECTED_EXTERNAL_SST,
    UNREADABLE_MANIFEST,
    ReferenceProblem,
    check_references,
)
from slate_ops.compaction import Compactor, CompactorOptions, LocalExecutor
from slate_ops.config import CheckpointOptions
from slate_ops.gc import GarbageCollector, GcOptions
from slate_ops.manifest.checkpoints import with_expiry
from slate_ops.manifest.model import Manifest, resolve_sst_path
from slate_ops.manifest.store import ManifestStore, VersionedManifest
from slate_ops.objstore import CountingStore, FaultInjectingStore, MemoryStore
from slate_ops.objstore.wrappers import SimulatedCrash
from slate_ops.runtime import ManualRuntime
from tests.support.engine import quiet

MAIN = "fam/main"
CLONE = "fam/clone"
FULL = CompactorOptions(min_sources=2, target_sst_bytes=4096, max_subcompaction_bytes=1 << 20)
DAY = 86_400.0


class Family:
    """A memory store whose ``last_modified`` follows a manual clock, and helpers to build a family."""

    def __init__(self) -> None:
        self.clock = ManualRuntime()
        self.store = MemoryStore(now=lambda: datetime.fromtimestamp(self.clock.now(), UTC))

    def write(self, path: str, keys: range, tag: str) -> None:
        with Db.open(path, self.store, quiet(l0_max_ssts=1000), clock=self.clock) as db:
            for i in keys:
                db.put(b"k%03d" % i, f"{tag}-{i}".encode())
            db.flush_memtable()
        self.clock.advance(1)

    def compact_full(self, path: str) -> None:
        Compactor(path, self.store, FULL, LocalExecutor(threads=1), clock=self.clock).run_once(full=True)
        self.clock.advance(1)

    def manifest(self, path: str) -> Manifest:
        return ManifestStore(self.store, path).read_latest_required().value

    def update(self, path: str, **changes: object) -> None:
        """Commit the latest manifest of ``path`` with ``changes``: a state built by hand."""

        def apply(current: VersionedManifest) -> Manifest:
            return current.value.with_changes(**changes)

        ManifestStore(self.store, path).update(apply)

    def drop_checkpoint(self, path: str, checkpoint_id: uuid.UUID) -> None:
        """Remove a checkpoint from ``path``'s manifest by hand: ``admin.delete_checkpoint`` refuses a
        final checkpoint, so this is the state an older release or a hostile process leaves."""
        checkpoints = self.manifest(path).checkpoints
        self.update(path, checkpoints=tuple(c for c in checkpoints if c.id != checkpoint_id))

    def check(self, *paths: str) -> list[ReferenceProblem]:
        return check_references(self.store, paths or None, now=self.clock.now())

    def gc_all(self) -> None:
        """GC of every database, the clock past every min age; dependents first."""
        self.clock.advance(DAY)
        for path in sorted(discover_databases(self.store), key=lambda p: -p.count("/")):
            GarbageCollector(path, self.store, GcOptions(), clock=self.clock).run_once(dry_run=False)
        for path in discover_databases(self.store):
            GarbageCollector(path, self.store, GcOptions(), clock=self.clock).run_once(dry_run=False)


@pytest.fixture
def fam() -> Family:
    family = Family()
    family.write(MAIN, range(0, 40), "a")
    family.write(MAIN, range(20, 60), "b")
    admin.create_clone(CLONE, MAIN, family.store, clock=family.clock)
    return family


def kinds(problems: list[ReferenceProblem]) -> set[tuple[str, str]]:
    return {(p.database, p.kind) for p in problems}


def own_sst_key(fam: Family, path: str) -> str:
    manifest = fam.manifest(path)
    sst = next(s for s in manifest.ssts if manifest.owner_of(s) is None)
    return resolve_sst_path(manifest, path, sst)


# --- a clean family passes ---------------------------------------------------------------------------


def test_a_clean_family_of_clones_shards_and_merges_passes() -> None:
    fam = Family()
    fam.write(MAIN, range(0, 60), "a")
    fam.write(MAIN, range(30, 90), "b")
    admin.create_clone(CLONE, MAIN, fam.store, clock=fam.clock)
    fam.write(CLONE, range(0, 10), "c")
    admin.create_clone("fam/nested", CLONE, fam.store, clock=fam.clock)
    admin.split(MAIN, fam.store, [b"k050"], ["fam/low", "fam/high"], clock=fam.clock)
    fam.write("fam/low", range(0, 20), "low")
    fam.write("fam/high", range(60, 70), "high")
    admin.merge(["fam/low", "fam/high"], fam.store, "fam/merged", clock=fam.clock)
    admin.create_clone("fam/merged-clone", "fam/merged", fam.store, clock=fam.clock)
    admin.split("fam/merged", fam.store, [b"k030"], ["fam/m-low", "fam/m-high"], clock=fam.clock)
    fam.write(MAIN, range(0, 100, 3), "main")
    fam.compact_full(MAIN)
    fam.compact_full(CLONE)
    assert fam.check() == []
    fam.gc_all()
    assert fam.check() == []
    assert len(discover_databases(fam.store)) == 9


def test_discover_finds_every_database_including_nested_and_root_ones() -> None:
    fam = Family()
    for path in ("", "a", "a/b", "x/manifests"):
        admin.create_db(path, fam.store)
    fam.store.put("stray/manifest/notes.txt", b"")
    # A manifest under a path no database may have (x/manifest: docs/design/names.md) is no database.
    fam.store.put("x/manifest/manifest/00000000000000000001.manifest", b"")
    assert discover_databases(fam.store) == ["", "a", "a/b", "x/manifests"]
    assert discover_databases(fam.store, "a") == ["a", "a/b"]
    assert fam.check() == []


def test_paths_without_a_database_are_skipped(fam: Family) -> None:
    assert fam.check("fam/nothing", MAIN, CLONE) == []


def test_each_sst_directory_is_listed_once_and_nothing_is_written(fam: Family) -> None:
    fam.write(CLONE, range(0, 5), "c")
    counting = CountingStore(fam.store)
    assert check_references(counting, [MAIN, CLONE], now=fam.clock.now()) == []
    counts = counting.counts
    # per database: LIST + GET of the latest manifest; then one LIST of each compacted/ directory
    assert counts["list"] == 2 + 2 and counts["head"] == 0
    assert counts["put"] == 0 and counts["delete"] == 0


def test_every_kind_is_described() -> None:
    assert set(KINDS) >= {
        MISSING_SST,
        MISSING_PINNED_MANIFEST,
        MISSING_EXTERNAL_DB,
        UNPINNED_EXTERNAL,
        UNPROTECTED_EXTERNAL_SST,
        SHARED_FINAL_CHECKPOINT,
        FOREIGN_FINAL_CHECKPOINT,
        UNREADABLE_MANIFEST,
    }


# --- each kind of problem ----------------------------------------------------------------------------


def test_a_missing_sst_is_reported_for_every_database_that_reads_it(fam: Family) -> None:
    key = own_sst_key(fam, MAIN)
    fam.store.delete(key)
    problems = fam.check()
    assert kinds(problems) == {(MAIN, MISSING_SST), (CLONE, MISSING_SST)}
    by_db = {p.database: p.detail for p in problems}
    assert key in by_db[MAIN] and "latest manifest" in by_db[MAIN] and "rollback" in by_db[MAIN]
    assert key in by_db[CLONE] and repr(MAIN) in by_db[CLONE]  # names where the SST lives


def test_an_sst_only_a_live_checkpoint_reads_must_exist() -> None:
    fam = Family()
    fam.write(MAIN, range(0, 40), "a")
    fam.write(MAIN, range(20, 60), "b")
    checkpoint = admin.create_checkpoint(MAIN, fam.store, CheckpointOptions(lifetime=None), clock=fam.clock)
    before = fam.manifest(MAIN)
    fam.compact_full(MAIN)  # the latest manifest no longer reads the L0 SSTs; the checkpoint does
    gone = next(s for s in before.ssts if fam.manifest(MAIN).sst(s.id) is None)
    fam.store.delete(resolve_sst_path(before, MAIN, gone))
    problems = fam.check(MAIN)
    assert kinds(problems) == {(MAIN, MISSING_SST)}
    assert f"manifest {checkpoint.manifest_id}" in problems[0].detail
    # Once the checkpoint is gone (and the compaction's own short one expired) nothing reads it.
    admin.delete_checkpoint(MAIN, fam.store, checkpoint.id, dry_run=False)
    fam.clock.advance(DAY)
    assert fam.check(MAIN) == []


def test_a_checkpoint_whose_manifest_is_missing_is_reported(fam: Family) -> None:
    checkpoint = admin.create_checkpoint(MAIN, fam.store, CheckpointOptions(lifetime=None), clock=fam.clock)
    fam.write(MAIN, range(0, 5), "c")
    fam.store.delete(ManifestStore(fam.store, MAIN).sequence.key(checkpoint.manifest_id))
    problems = fam.check(MAIN)
    assert kinds(problems) == {(MAIN, MISSING_PINNED_MANIFEST)}
    assert str(checkpoint.id) in problems[0].detail and "delete-checkpoint" in problems[0].detail


def test_a_final_checkpoint_whose_manifest_is_missing_is_reported(fam: Family) -> None:
    final = fam.manifest(CLONE).external_dbs[-1].final_checkpoint_id
    pinned = fam.manifest(MAIN).checkpoint(final)
    assert pinned is not None
    fam.write(MAIN, range(0, 5), "c")
    fam.store.delete(ManifestStore(fam.store, MAIN).sequence.key(pinned.manifest_id))
    problems = fam.check()
    # the parent's own view of the checkpoint, and the clone's
    assert kinds(problems) == {(MAIN, MISSING_PINNED_MANIFEST), (CLONE, MISSING_PINNED_MANIFEST)}


def test_a_deleted_final_checkpoint_leaves_the_clone_unpinned(fam: Family) -> None:
    final = fam.manifest(CLONE).external_dbs[-1].final_checkpoint_id
    fam.drop_checkpoint(MAIN, final)
    problems = fam.check()
    assert kinds(problems) == {(CLONE, UNPINNED_EXTERNAL)}
    assert str(final) in problems[0].detail and "holds no checkpoint" in problems[0].detail
    # the parent's GC then deletes what the clone reads: the invariant says so too
    fam.write(MAIN, range(0, 100), "c")
    fam.compact_full(MAIN)
    fam.gc_all()
    assert kinds(fam.check()) == {(CLONE, UNPINNED_EXTERNAL), (CLONE, MISSING_SST)}


def test_an_expired_final_checkpoint_does_not_pin(fam: Family) -> None:
    final = fam.manifest(CLONE).external_dbs[-1].final_checkpoint_id
    now = int(fam.clock.now())
    ManifestStore(fam.store, MAIN).update(lambda current: with_expiry(current.value, final, now))
    problems = fam.check()
    assert kinds(problems) == {(CLONE, UNPINNED_EXTERNAL)}
    assert "expired" in problems[0].detail


def test_an_external_database_without_a_manifest_is_reported(fam: Family) -> None:
    for meta in list(fam.store.list(MAIN + "/")):  # deleted behind everybody's back
        fam.store.delete(meta.key)
    problems = fam.check()
    assert (CLONE, MISSING_EXTERNAL_DB) in kinds(problems)
    assert (CLONE, MISSING_SST) in kinds(problems)  # and what it read there is gone
    assert all(p.database == CLONE for p in problems)


def test_two_databases_sharing_a_final_checkpoint_are_both_reported(fam: Family) -> None:
    admin.create_clone("fam/clone2", MAIN, fam.store, clock=fam.clock)
    shared = fam.manifest(CLONE).external_dbs[-1].final_checkpoint_id
    entry = fam.manifest("fam/clone2").external_dbs[-1]
    fam.update("fam/clone2", external_dbs=(replace(entry, final_checkpoint_id=shared),))
    problems = fam.check()
    assert kinds(problems) == {
        (CLONE, SHARED_FINAL_CHECKPOINT),
        ("fam/clone2", SHARED_FINAL_CHECKPOINT),
        ("fam/clone2", FOREIGN_FINAL_CHECKPOINT),  # the checkpoint is named after the first clone
    }
    detail = next(p.detail for p in problems if p.database == CLONE)
    assert str(shared) in detail and "'fam/clone2'" in detail
    # Releasing it for one of them (a hard destroy) leaves the other unpinned.
    admin.destroy("fam/clone2", fam.store, soft=False, clock=fam.clock, dry_run=False)
    assert kinds(fam.check()) == {(CLONE, UNPINNED_EXTERNAL)}


def merge_of_two_clones(fam: Family) -> str:
    """Two clones of the parent taken at different times, split at one key, the first's low shard
    merged with the second's high shard: the merged database has two entries for the parent."""
    fam.write(MAIN, range(60, 80), "later")
    admin.create_clone("fam/clone2", MAIN, fam.store, clock=fam.clock)
    admin.split(CLONE, fam.store, [b"k030"], ["fam/a-low", "fam/a-high"], clock=fam.clock)
    admin.split("fam/clone2", fam.store, [b"k030"], ["fam/b-low", "fam/b-high"], clock=fam.clock)
    admin.merge(["fam/a-low", "fam/b-high"], fam.store, "fam/merged", clock=fam.clock)
    entries = [e for e in fam.manifest("fam/merged").external_dbs if e.path == MAIN]
    assert len(entries) == 2 and entries[0].source_checkpoint_id != entries[1].source_checkpoint_id
    return "fam/merged"


def test_two_entries_of_one_database_sharing_a_final_checkpoint_are_reported(fam: Family) -> None:
    merged = merge_of_two_clones(fam)
    entries = fam.manifest(merged).external_dbs
    first = next(e.final_checkpoint_id for e in entries if e.path == MAIN)
    fam.update(
        merged,
        external_dbs=tuple(replace(e, final_checkpoint_id=first) if e.path == MAIN else e for e in entries),
    )
    problems = [p for p in fam.check() if p.database == merged]
    # the second entry's SSTs (written between the two clones) are not in the manifest the shared
    # checkpoint pins
    assert kinds(problems) == {(merged, SHARED_FINAL_CHECKPOINT), (merged, UNPROTECTED_EXTERNAL_SST)}
    shared = next(p.detail for p in problems if p.kind == SHARED_FINAL_CHECKPOINT)
    assert "1 other entry of its own" in shared and str(first) in shared


def test_an_sst_the_final_checkpoint_does_not_reference_is_unprotected(fam: Family) -> None:
    """The pin holds, but on a later state of the parent that no longer has the clone's SSTs."""
    fam.write(MAIN, range(0, 100), "c")
    fam.compact_full(MAIN)
    final = fam.manifest(CLONE).external_dbs[-1].final_checkpoint_id

    def repin(current: VersionedManifest) -> Manifest:
        checkpoints = tuple(
            replace(c, manifest_id=current.id) if c.id == final else c for c in current.value.checkpoints
        )
        return current.value.with_changes(checkpoints=checkpoints)

    ManifestStore(fam.store, MAIN).update(repin)
    problems = fam.check()
    assert kinds(problems) == {(CLONE, UNPROTECTED_EXTERNAL_SST)}
    assert str(final) in problems[0].detail


def test_an_unreadable_manifest_is_reported() -> None:
    fam = Family()
    fam.write(MAIN, range(0, 5), "a")
    latest = ManifestStore(fam.store, MAIN).read_latest_required()
    fam.store.put(ManifestStore(fam.store, MAIN).sequence.key(latest.id + 1), b"not a manifest")
    problems = fam.check()
    assert kinds(problems) == {(MAIN, UNREADABLE_MANIFEST)}


# --- states where nothing is wrong -------------------------------------------------------------------


def test_an_interrupted_clone_is_only_checked_while_its_source_is_live(fam: Family) -> None:
    for calls in itertools.count():  # crash right after the clone manifest is written
        faulty = FaultInjectingStore(fam.store)
        faulty.crash_after(calls)
        with pytest.raises(SimulatedCrash):
            admin.create_clone("fam/half", MAIN, faulty, clock=fam.clock)
        if ManifestStore(fam.store, "fam/half").read_latest() is not None:
            break
    half = fam.manifest("fam/half")
    assert (
        not half.initialized
        and fam.manifest(MAIN).checkpoint(half.external_dbs[-1].final_checkpoint_id) is None
    )
    assert fam.check() == []  # an uninitialised clone has no final checkpoints yet, by design
    fam.store.delete(own_sst_key(fam, MAIN))
    assert {p.database for p in fam.check()} == {MAIN, CLONE, "fam/half"}
    fam.clock.advance(600)  # its ephemeral source checkpoint expires: nothing protects it any more
    assert {p.database for p in fam.check()} == {MAIN, CLONE}


def test_a_destroyed_database_without_live_checkpoints_is_not_checked(fam: Family) -> None:
    admin.destroy(CLONE, fam.store, clock=fam.clock, dry_run=False)
    for meta in list(fam.store.list(CLONE + "/wal/")):
        fam.store.delete(meta.key)  # its deletion is under way
    fam.drop_checkpoint(MAIN, fam.manifest(CLONE).external_dbs[-1].final_checkpoint_id)
    assert fam.check() == []


def test_a_soft_destroyed_parent_keeps_protecting_its_clone(fam: Family) -> None:
    admin.destroy(MAIN, fam.store, clock=fam.clock, dry_run=False)
    fam.gc_all()
    assert fam.check() == []
    fam.store.delete(own_sst_key(fam, MAIN))  # it is still checked: its clone's checkpoint is live
    assert kinds(fam.check()) == {(MAIN, MISSING_SST), (CLONE, MISSING_SST)}


def test_a_random_final_checkpoint_id_is_reported_as_unpinned(fam: Family) -> None:
    entry = fam.manifest(CLONE).external_dbs[-1]
    fam.update(CLONE, external_dbs=(replace(entry, final_checkpoint_id=uuid.uuid4()),))
    assert kinds(fam.check()) == {(CLONE, UNPINNED_EXTERNAL)}


def test_an_interrupted_detach_is_not_a_problem(fam: Family) -> None:
    """GC detaching an entry that lists no SST releases its checkpoint first and drops the entry
    after; a crash in between leaves an unpinned empty entry, which protects nothing."""
    (entry,) = fam.manifest(CLONE).external_dbs
    fam.update(CLONE, external_dbs=(replace(entry, sst_ids=()),), ssts=(), l0=(), compacted=())
    fam.drop_checkpoint(MAIN, entry.final_checkpoint_id)
    assert fam.check() == []
    admin.destroy(MAIN, fam.store, soft=False, dry_run=False, clock=fam.clock)
    assert fam.check() == []
