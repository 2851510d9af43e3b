"""verify_db: every check passes on healthy databases (a clone and a shard too) and names the object
when it is broken."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from ulid import ULID

from slate_ops import Db, admin
from slate_ops.admin.verify import (
    BOUNDARIES_BELOW_LATEST,
    CHECKPOINT_MANIFESTS_EXIST,
    CHECKS,
    L0_BELOW_THRESHOLD,
    NO_EXPIRED_CHECKPOINTS,
    SORTED_RUNS_ORDERED,
    SSTS_EXIST,
    CheckResult,
    Severity,
    failed,
    verify_db,
)
from slate_ops.compaction import Compactor, CompactorOptions
from slate_ops.config import CheckpointOptions
from slate_ops.errors import DbNotFoundError, InvalidArgumentError
from slate_ops.layout import sst_key
from slate_ops.manifest.model import KeyRange, Manifest, SortedRun, resolve_sst_path
from slate_ops.manifest.store import ManifestStore, VersionedManifest
from slate_ops.objstore import CountingStore, MemoryStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import ManualRuntime
from slate_ops.txn.boundary import BoundaryObject
from tests.support.db_state import manifest
from tests.support.engine import quiet

DB = "dbs/main"
CLONE = "dbs/clone"
LOW, HIGH = "dbs/low", "dbs/high"
FULL = CompactorOptions(min_sources=2, target_sst_bytes=2048, max_subcompaction_bytes=1 << 20)


def build(store: ObjectStore, clock: ManualRuntime, path: str = DB) -> None:
    """A sorted run of several SSTs (full compaction) and one L0 SST on top; the WAL flushed."""
    options = quiet(l0_max_ssts=1000)
    with Db.open(path, store, options, clock=clock) as db:
        for round_ in range(3):
            for i in range(round_, 100, round_ + 1):
                db.put(b"k%03d" % i, b"r%d-%d" % (round_, i) * 8)
            db.flush_memtable()
    Compactor(path, store, FULL, clock=clock).run_once(full=True)
    with Db.open(path, store, options, clock=clock) as db:
        for i in range(0, 100, 5):
            db.put(b"k%03d" % i, b"l0")
        db.flush_memtable()


def results(store: ObjectStore, path: str, clock: ManualRuntime, **kwargs: int) -> dict[str, CheckResult]:
    checked = verify_db(path, store, clock=clock, **kwargs)
    assert [r.name for r in checked] == list(CHECKS)
    return {r.name: r for r in checked}


def only_failure(store: ObjectStore, path: str, clock: ManualRuntime, **kwargs: int) -> CheckResult:
    bad = failed(verify_db(path, store, clock=clock, **kwargs))
    assert len(bad) == 1, bad
    return bad[0]


def update(store: ObjectStore, path: str, change: dict[str, object]) -> VersionedManifest:
    def apply(current: VersionedManifest) -> Manifest:
        return current.value.with_changes(**change)

    return ManifestStore(store, path).update(apply)


# --- healthy databases ----------------------------------------------------------------------------


def test_every_check_passes_on_a_healthy_database_a_clone_and_shards(
    memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    build(memory_store, clock)
    admin.create_checkpoint(
        DB, memory_store, CheckpointOptions(lifetime=timedelta(hours=1), name="backup"), clock=clock
    )
    admin.create_tag(DB, memory_store, "v1", clock=clock)
    admin.create_clone(CLONE, DB, memory_store, clock=clock)
    admin.split(DB, memory_store, [b"k050"], [LOW, HIGH], clock=clock)
    current = manifest(memory_store, DB)
    assert current.compacted and len(current.compacted[0].views) > 1 and current.l0
    assert manifest(memory_store, CLONE).external_dbs and manifest(memory_store, LOW).external_dbs
    # A boundary GC could have written (the newest old version) is fine.
    ManifestStore(memory_store, DB).advance_boundary(
        ManifestStore(memory_store, DB).read_latest_required().id - 1
    )
    for path in (DB, CLONE, LOW, HIGH):
        checked = results(memory_store, path, clock)
        assert not failed(checked.values()), (path, failed(checked.values()))
        for result in checked.values():
            assert result.problems == () and result.description
    assert "referenced by" in results(memory_store, DB, clock)[SSTS_EXIST].description


def test_cost_is_one_head_per_distinct_sst_and_nothing_is_written(
    memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    build(memory_store, clock)
    admin.create_checkpoint(DB, memory_store, CheckpointOptions(name="a"), clock=clock)
    with Db.open(DB, memory_store, quiet(), clock=clock) as db:  # one more L0 SST: "a" shares the others
        db.put(b"new", b"v")
        db.flush_memtable()
    current = manifest(memory_store, DB)
    counting = CountingStore(memory_store)
    before = {m.key: m.etag for m in memory_store.list()}
    verify_db(DB, counting, clock=clock)
    counts = counting.counts
    manifests = ManifestStore(memory_store, DB)
    pinned = {c.manifest_id for c in current.checkpoints} - {manifests.read_latest_required().id}
    assert len(pinned) == 2  # "a" and the compaction's checkpoint (15 minutes) on the manifest before it
    read = [current, *(manifests.read(i).value for i in pinned)]
    keys = {resolve_sst_path(m, DB, s) for m in read for s in m.ssts}
    assert len(keys) < sum(len(m.ssts) for m in read)  # shared SSTs are checked once
    assert counts["head"] == len(keys)
    assert (counts["put"], counts["delete"]) == (0, 0)
    # LIST + GET of the latest manifest, a GET per pinned manifest, two boundary GETs, LIST compactions/.
    assert (counts["list"], counts["get"]) == (2, 1 + len(pinned) + 2)
    assert {m.key: m.etag for m in memory_store.list()} == before


def test_a_destroyed_database_is_not_checked_and_a_missing_one_is_an_error(
    memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    with pytest.raises(DbNotFoundError):
        verify_db(DB, memory_store, clock=clock)
    build(memory_store, clock)
    admin.destroy(DB, memory_store, clock=clock, dry_run=False)
    for key in [m.key for m in memory_store.list(f"{DB}/compacted/")]:
        memory_store.delete(key)
    checked = verify_db(DB, memory_store, clock=clock)
    assert all(r.passed and r.description.startswith("skipped: the database was destroyed") for r in checked)
    with pytest.raises(InvalidArgumentError):
        verify_db(DB, memory_store, clock=clock, l0_threshold=0)


# --- each check fails, naming the object ---------------------------------------------------------


def test_a_missing_sst_is_named_with_the_manifests_that_need_it(
    memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    build(memory_store, clock)
    current = manifest(memory_store, DB)
    view = current.compacted[0].views[0]
    key = sst_key(DB, view.sst_id)
    memory_store.delete(key)
    result = only_failure(memory_store, DB, clock)
    assert (result.name, result.severity) == (SSTS_EXIST, Severity.ERROR)
    (problem,) = result.problems
    assert key in problem and f"SST {view.sst_id}" in problem and "latest manifest" in problem


def test_an_sst_only_a_live_checkpoint_needs_is_checked_too(
    memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    build(memory_store, clock)
    pinned = admin.create_checkpoint(
        DB, memory_store, CheckpointOptions(lifetime=timedelta(hours=1), name="pin"), clock=clock
    )
    old_l0 = manifest(memory_store, DB).l0[0].sst_id
    Compactor(DB, memory_store, FULL, clock=clock).run_once(
        full=True
    )  # the L0 SST leaves the latest manifest
    assert all(v.sst_id != old_l0 for v in manifest(memory_store, DB).l0)
    assert not failed(verify_db(DB, memory_store, clock=clock))
    memory_store.delete(sst_key(DB, old_l0))
    result = only_failure(memory_store, DB, clock)
    assert result.name == SSTS_EXIST
    assert any(str(old_l0) in p and str(pinned.id) in p and "'pin'" in p for p in result.problems)
    assert all("latest manifest" not in p for p in result.problems if str(old_l0) in p)
    clock.advance(2 * 3600)  # the checkpoint expired: nothing needs the SST any more
    assert {r.name for r in failed(verify_db(DB, memory_store, clock=clock))} == {NO_EXPIRED_CHECKPOINTS}


def test_a_clones_missing_sst_resolves_to_its_parents_path(
    memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    build(memory_store, clock)
    admin.create_clone(CLONE, DB, memory_store, clock=clock)
    sst = manifest(memory_store, CLONE).compacted[0].views[-1].sst_id
    memory_store.delete(sst_key(DB, sst))
    result = only_failure(memory_store, CLONE, clock)
    assert result.name == SSTS_EXIST
    assert any(sst_key(DB, sst) in p and f"external database {DB!r}" in p for p in result.problems)


def test_overlapping_or_unordered_views_in_a_sorted_run_are_named(
    memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    build(memory_store, clock)
    run = manifest(memory_store, DB).compacted[0]
    first, second = run.views[0], run.views[1]
    widened = dataclasses.replace(second, view_id=ULID(), visible_range=None)
    # The second view's SST again, starting inside the first view: the two overlap.
    overlapping = dataclasses.replace(widened, sst_id=first.sst_id)
    update(memory_store, DB, {"compacted": (SortedRun(run.id, (first, overlapping, *run.views[2:])),)})
    result = only_failure(memory_store, DB, clock)
    assert (result.name, result.severity) == (SORTED_RUNS_ORDERED, Severity.ERROR)
    assert any(
        f"sorted run {run.id}" in p
        and str(first.view_id) in p
        and str(overlapping.view_id) in p
        and "overlap" in p
        for p in result.problems
    )
    update(memory_store, DB, {"compacted": (SortedRun(run.id, tuple(reversed(run.views))),)})
    result = only_failure(memory_store, DB, clock)
    assert result.name == SORTED_RUNS_ORDERED and "out of key order" in result.problems[0]
    # Narrowed views of one SST (a split's projection) that meet but do not overlap are fine.
    halves = (
        dataclasses.replace(first, view_id=ULID(), visible_range=KeyRange(None, b"k001")),
        dataclasses.replace(first, view_id=ULID(), visible_range=KeyRange(b"k001", None)),
    )
    update(memory_store, DB, {"compacted": (SortedRun(run.id, (*halves, *run.views[1:])),)})
    assert not failed(verify_db(DB, memory_store, clock=clock))


def test_a_live_checkpoints_missing_manifest_is_named(
    memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    build(memory_store, clock)
    pinned = admin.create_checkpoint(
        DB, memory_store, CheckpointOptions(lifetime=timedelta(hours=1), name="pin"), clock=clock
    )
    admin.create_checkpoint(DB, memory_store, CheckpointOptions(lifetime=timedelta(hours=1)), clock=clock)
    manifests = ManifestStore(memory_store, DB)
    memory_store.delete(manifests.sequence.key(pinned.manifest_id))
    result = only_failure(memory_store, DB, clock)
    assert (result.name, result.severity) == (CHECKPOINT_MANIFESTS_EXIST, Severity.ERROR)
    (problem,) = result.problems
    assert str(pinned.id) in problem and manifests.sequence.key(pinned.manifest_id) in problem
    # Once it expired, its manifest may be collected: only the lingering checkpoint is reported.
    clock.advance(2 * 3600)
    assert {r.name for r in failed(verify_db(DB, memory_store, clock=clock))} == {NO_EXPIRED_CHECKPOINTS}


def test_an_expired_checkpoint_that_lingers_is_named_with_its_expiry(
    memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    admin.create_db(DB, memory_store)
    created = admin.create_checkpoint(
        DB, memory_store, CheckpointOptions(lifetime=timedelta(seconds=10), name="short"), clock=clock
    )
    admin.create_tag(DB, memory_store, "forever", clock=clock)
    clock.advance(9)
    assert not failed(verify_db(DB, memory_store, clock=clock))
    clock.advance(51)
    result = only_failure(memory_store, DB, clock)
    assert (result.name, result.severity) == (NO_EXPIRED_CHECKPOINTS, Severity.WARN)
    (problem,) = result.problems
    assert str(created.id) in problem and "'short'" in problem
    assert "expired at 2023-11-14T22:13:30Z, 50 s ago" in problem
    admin.expire_checkpoints(DB, memory_store, dry_run=False, clock=clock)
    assert not failed(verify_db(DB, memory_store, clock=clock))


def test_l0_warns_at_the_threshold_and_fails_as_an_error_at_l0_max_ssts(
    memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    with Db.open(DB, memory_store, quiet(l0_max_ssts=1000), clock=clock) as db:
        for i in range(8):
            db.put(b"k%d" % i, b"v")
            db.flush_memtable()
            checked = results(memory_store, DB, clock, l0_threshold=4, l0_max_ssts=8)[L0_BELOW_THRESHOLD]
            assert checked.passed == (i + 1 < 4), i
            assert checked.severity == (Severity.ERROR if i + 1 >= 8 else Severity.WARN)
    assert f"holds 8 view(s) (SSTs {manifest(memory_store, DB).l0[0].sst_id}" in checked.problems[0]
    assert "writer stops flushing" in checked.problems[0]
    assert results(memory_store, DB, clock, l0_threshold=9, l0_max_ssts=20)[L0_BELOW_THRESHOLD].passed
    # The default threshold is the compactor's min_sources (4).
    assert not results(memory_store, DB, clock)[L0_BELOW_THRESHOLD].passed


def test_a_boundary_at_or_above_the_latest_id_is_named(
    memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    build(memory_store, clock)
    manifests = ManifestStore(memory_store, DB)
    latest = manifests.read_latest_required().id
    manifests.advance_boundary(latest - 1)
    compactions = BoundaryObject(memory_store, DB, "compactions")
    compactions.advance(1)  # build() wrote more than one .compactions version
    assert not failed(verify_db(DB, memory_store, clock=clock))

    manifests.advance_boundary(latest)
    result = only_failure(memory_store, DB, clock)
    assert (result.name, result.severity) == (BOUNDARIES_BELOW_LATEST, Severity.ERROR)
    (problem,) = result.problems
    assert f"{DB}/gc/manifest.boundary is {latest}, not below the latest manifest id {latest}" in problem

    compactions.advance(1000)
    result = only_failure(memory_store, DB, clock)
    assert any(f"{DB}/gc/compactions.boundary is 1000" in p for p in result.problems)

    other = "dbs/other"  # no .compactions at all: any boundary is above it
    admin.create_db(other, memory_store)
    BoundaryObject(memory_store, other, "compactions").advance(1)
    assert only_failure(memory_store, other, clock).name == BOUNDARIES_BELOW_LATEST
    memory_store.put(f"{other}/gc/manifest.boundary", b"garbage")
    assert any("manifest.boundary is corrupt" in p for p in only_failure(memory_store, other, clock).problems)
