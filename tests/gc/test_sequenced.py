"""GC of the .manifest and .compactions namespaces: the boundary protocol and retention rules of
SlateDB's GC boundary-file design."""

from __future__ import annotations

import logging

import pytest

from slate_ops import admin
from slate_ops.compaction.state import CompactionRecord, CompactionsStore
from slate_ops.config import CheckpointOptions
from slate_ops.errors import GcFailedError
from slate_ops.gc import GcReport
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import FaultInjectingStore, MemoryStore
from slate_ops.runtime import ManualRuntime
from slate_ops.txn.boundary import METRICS, BoundaryObject
from tests.support.gc import MIN_AGE, gc, keys

MANIFEST = "db/manifest/{:020d}.manifest"
COMPACTIONS = "db/compactions/{:020d}.compactions"


def commit_manifests(store: MemoryStore, clock: ManualRuntime, count: int, step: float = 10.0) -> None:
    """Manifests 1..count, ``step`` seconds apart."""
    admin.create_db("db", store)
    manifests = ManifestStore(store, "db")
    for _ in range(count - 1):
        clock.advance(step)
        manifests.update(lambda current: current.value)


def commit_compactions(store: MemoryStore, clock: ManualRuntime, count: int, step: float = 10.0) -> None:
    """.compactions files 1..count, ``step`` seconds apart (a claim, then records)."""
    state = CompactionsStore(store, "db")
    state.claim(1, clock.now())
    for i in range(count - 1):
        clock.advance(step)
        state.record(CompactionRecord(str(i), 1, "l0", "completed", ()))


def manifest_ids(store: MemoryStore) -> list[int]:
    return [f.id for f in ManifestStore(store, "db").list()]


def deleted(report: GcReport, resource: str) -> set[str]:
    found = report.resource(resource)
    assert found is not None
    return {d.key for d in found.deleted}


def test_latest_manifest_is_never_deleted(clocked_memory_store: MemoryStore, clock: ManualRuntime) -> None:
    commit_manifests(clocked_memory_store, clock, 5)
    clock.advance(10_000)
    report = gc(clocked_memory_store, clock).run_once(dry_run=False)
    assert manifest_ids(clocked_memory_store) == [5]
    assert deleted(report, "manifest") == {MANIFEST.format(i) for i in range(1, 5)}
    assert report.resource("manifest").boundary == 4  # type: ignore[union-attr]
    assert BoundaryObject(clocked_memory_store, "db", "manifest").read()[0] == 4
    again = gc(clocked_memory_store, clock).run_once(
        dry_run=False
    )  # a lone latest manifest stays, however old
    assert deleted(again, "manifest") == set() and manifest_ids(clocked_memory_store) == [5]


def test_only_manifests_older_than_min_age_are_deleted(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    commit_manifests(
        clocked_memory_store, clock, 10, step=60
    )  # manifest i written at (i - 1) * 60 s; now = 540 s
    # manifest 5 is exactly MIN_AGE old, manifest 6 is 240 s old
    report = gc(clocked_memory_store, clock, resources=["manifest"]).run_once(dry_run=False)
    assert deleted(report, "manifest") == {MANIFEST.format(i) for i in range(1, 5)}
    assert report.resource("manifest").boundary == 5  # type: ignore[union-attr]
    assert manifest_ids(clocked_memory_store) == [5, 6, 7, 8, 9, 10]  # 5 is the issue-204 edge: kept


def test_manifest_of_a_live_checkpoint_is_kept_and_of_an_expired_one_deleted(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    commit_manifests(clocked_memory_store, clock, 3)
    live = admin.create_checkpoint("db", clocked_memory_store, CheckpointOptions(lifetime="2h"), clock=clock)
    short = admin.create_checkpoint(
        "db", clocked_memory_store, CheckpointOptions(lifetime="1min"), clock=clock
    )
    commit_manifests_more(clocked_memory_store, clock, 3)
    clock.advance(3600)
    report = gc(clocked_memory_store, clock).run_once(dry_run=False)
    assert [c.id for c in report.checkpoints_expired] == [short.id]
    remaining = manifest_ids(clocked_memory_store)
    assert live.manifest_id in remaining
    assert short.manifest_id not in remaining
    assert remaining == [live.manifest_id, 8, 9]  # 8 was latest when the run began; 9 its expiry commit


def commit_manifests_more(store: MemoryStore, clock: ManualRuntime, count: int) -> None:
    manifests = ManifestStore(store, "db")
    for _ in range(count):
        clock.advance(10)
        manifests.update(lambda current: current.value)


@pytest.mark.parametrize("namespace", ["manifest", "compactions"])
def test_boundary_is_advanced_before_any_file_is_deleted(
    clocked_memory_store: MemoryStore, clock: ManualRuntime, namespace: str
) -> None:
    commit_manifests(clocked_memory_store, clock, 6)
    commit_compactions(clocked_memory_store, clock, 6)
    clock.advance(10_000)
    faulty = FaultInjectingStore(clocked_memory_store)
    gc(faulty, clock, resources=[namespace]).run_once(dry_run=False)
    calls = [(op, key) for op, key in faulty.calls if op in ("put", "delete")]
    boundary_put = calls.index(("put", f"db/gc/{namespace}.boundary"))
    deletes = [i for i, (op, key) in enumerate(calls) if op == "delete" and f"/{namespace}/" in key]
    assert deletes and min(deletes) > boundary_put
    assert clocked_memory_store.get(f"db/gc/{namespace}.boundary").data == b"5"


def test_compactions_files_follow_the_same_rules(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    admin.create_db("db", clocked_memory_store)
    commit_compactions(
        clocked_memory_store, clock, 8, step=60
    )  # file i written at (i - 1) * 60 s; now = 420 s
    clock.advance(540 - 420)  # file 5 is exactly MIN_AGE old
    report = gc(clocked_memory_store, clock, resources=["compactions"]).run_once(dry_run=False)
    assert deleted(report, "compactions") == {COMPACTIONS.format(i) for i in range(1, 6)}
    assert report.resource("compactions").boundary == 5  # type: ignore[union-attr]
    clock.advance(10_000)
    gc(clocked_memory_store, clock, resources=["compactions"]).run_once(dry_run=False)
    assert {k for k in keys(clocked_memory_store) if "/compactions/" in k} == {
        COMPACTIONS.format(8)
    }  # the latest
    assert CompactionsStore(clocked_memory_store, "db").read().compactor_epoch == 1


def test_boundary_files_are_never_deleted(clocked_memory_store: MemoryStore, clock: ManualRuntime) -> None:
    commit_manifests(clocked_memory_store, clock, 4)
    commit_compactions(clocked_memory_store, clock, 4)
    for _ in range(3):
        clock.advance(10_000)
        report = gc(clocked_memory_store, clock).run_once(dry_run=False)
        assert not any("/gc/" in key for key in report.deleted_keys())
        commit_manifests_more(clocked_memory_store, clock, 2)
    assert {"db/gc/manifest.boundary", "db/gc/compactions.boundary"} <= keys(clocked_memory_store)


def test_failed_boundary_advance_deletes_nothing_and_is_reported_and_raised(
    clocked_memory_store: MemoryStore, clock: ManualRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    commit_manifests(clocked_memory_store, clock, 5)
    commit_compactions(clocked_memory_store, clock, 3)
    clock.advance(10_000)
    faulty = FaultInjectingStore(clocked_memory_store)
    faulty.fail("put", key_contains="manifest.boundary", times=None)
    failures_before = METRICS.snapshot()["advance_failures"]
    with caplog.at_level(logging.WARNING), pytest.raises(GcFailedError) as raised:
        gc(faulty, clock).run_once(dry_run=False)
    report = raised.value.report
    assert isinstance(report, GcReport) and not report.ok
    manifest = report.resource("manifest")
    assert manifest is not None and manifest.count == 0 and manifest.errors
    assert "advancing the boundary to 4 failed, nothing deleted" in report.errors[0]
    assert manifest_ids(clocked_memory_store) == [1, 2, 3, 4, 5]
    assert deleted(report, "compactions") == {COMPACTIONS.format(1), COMPACTIONS.format(2)}  # others go on
    assert METRICS.snapshot()["advance_failures"] == failures_before + 1
    assert report.metrics["advance_failures"] >= 1
    assert any("advancing db/gc/manifest.boundary to 4 failed" in r.message for r in caplog.records)


def test_a_stale_file_behind_the_boundary_is_deleted_once_old(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    """A stalled writer's create behind the boundary is withdrawn by its writer; one left by a writer
    that crashed before withdrawing it is a young file that GC removes later."""
    commit_manifests(clocked_memory_store, clock, 5)
    clock.advance(10_000)
    gc(clocked_memory_store, clock).run_once(dry_run=False)
    stale = ManifestStore(clocked_memory_store, "db").sequence
    with pytest.raises(Exception, match="GC boundary 4"):
        stale.create(2, ManifestStore(clocked_memory_store, "db").read(5).value)
    assert manifest_ids(clocked_memory_store) == [5]  # withdrawn
    clocked_memory_store.put(
        stale.key(2), clocked_memory_store.get(stale.key(5)).data
    )  # the same create, its writer crashed after it
    assert manifest_ids(clocked_memory_store) == [2, 5]
    report = gc(clocked_memory_store, clock).run_once(dry_run=False)
    assert deleted(report, "manifest") == set()  # young: kept for min_age
    clock.advance(MIN_AGE)
    report = gc(clocked_memory_store, clock).run_once(dry_run=False)
    assert deleted(report, "manifest") == {MANIFEST.format(2)}
    assert manifest_ids(clocked_memory_store) == [5]
