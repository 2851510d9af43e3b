"""verify (the asset checks' findings) on SlateDB databases written by SlateDB's own Db: the same
six check names as ours, each failing condition produced on a real database and detected."""

from __future__ import annotations

import dataclasses
import time
from datetime import timedelta
from typing import Any

from slate_ops import admin
from slate_ops.admin.handle import SlateDbHandle
from slate_ops.admin.handle.slatedb_verify import verify
from slate_ops.admin.verify import CHECKS, CheckResult, Severity
from slate_ops.config import CheckpointOptions
from slate_ops.engines.slatedb.views import SortedRunView
from slate_ops.gc import GcOptions
from slate_ops.layout import manifest_key
from slate_ops.objstore import LocalStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import ManualRuntime
from tests.support.slatedb import write_slatedb

DB = "dbs/verify"


def write(sdb: Any, store: LocalStore, *, compact: bool = True, rounds: int = 3) -> None:
    write_slatedb(store, DB, rounds=rounds, keys=50, compact=compact)


def by_name(results: list[CheckResult]) -> dict[str, CheckResult]:
    assert [r.name for r in results] == list(CHECKS)  # every check, in our order
    return {r.name: r for r in results}


def handle_of(store: LocalStore, clock: ManualRuntime | None = None) -> SlateDbHandle:
    h = admin.open(DB, store, clock=clock or ManualRuntime(time.time()))
    assert isinstance(h, SlateDbHandle)
    return h


def test_a_healthy_database_passes_every_check(sdb: Any, local_dir_store: LocalStore) -> None:
    write(sdb, local_dir_store)
    h = handle_of(local_dir_store)
    h.create_checkpoint(CheckpointOptions(name="keep"))
    results = by_name(h.verify())
    assert all(r.passed for r in results.values()), [r.problems for r in results.values()]
    assert all(r.severity is CHECKS[r.name][0] for r in results.values())
    assert "no boundary written yet" in results["boundaries_below_latest"].description


def test_a_missing_sst_fails_ssts_exist(sdb: Any, local_dir_store: LocalStore) -> None:
    write(sdb, local_dir_store)
    h = handle_of(local_dir_store)
    m = h.db.read_manifest()
    assert m is not None
    sst = m.sorted_runs[0].ssts[0].sst_id
    key = f"{DB}/compacted/{sst}.sst"
    local_dir_store.delete(key)
    result = by_name(h.verify())["ssts_exist"]
    assert not result.passed and result.severity is Severity.ERROR
    assert result.problems[0].startswith(f"{key} is missing (SST {sst}); needed by latest manifest")


def test_overlapping_views_in_a_sorted_run_fail_ordering(sdb: Any, local_dir_store: LocalStore) -> None:
    """SlateDB's L0 views of three flushes of the same keys, arranged as one sorted run: they
    overlap, which the check names (SlateDB's writer never makes such a run; the views are real)."""
    write(sdb, local_dir_store, compact=False)
    h = handle_of(local_dir_store)
    m = h.db.read_manifest()
    assert m is not None and len(m.l0) == 3
    bad = dataclasses.replace(m, l0=(), sorted_runs=(SortedRunView(7, m.l0, 0),))
    result = by_name(verify(h.db, lambda: bad, now=time.time(), l0_threshold=4, l0_max_ssts=8))[
        "sorted_runs_ordered"
    ]
    assert not result.passed and len(result.problems) == 2
    assert "sorted run 7" in result.problems[0] and result.problems[0].endswith("overlap")
    reordered = dataclasses.replace(bad, sorted_runs=(SortedRunView(7, m.l0[1:2] + m.l0[:1], 0),))
    assert not by_name(verify(h.db, lambda: reordered, now=time.time(), l0_threshold=4, l0_max_ssts=8))[
        "sorted_runs_ordered"
    ].passed
    assert by_name(h.verify())["sorted_runs_ordered"].passed  # the real database is fine


def test_a_checkpoint_whose_manifest_is_gone_fails(sdb: Any, local_dir_store: LocalStore) -> None:
    write(sdb, local_dir_store)
    h = handle_of(local_dir_store)
    created = h.create_checkpoint(CheckpointOptions(name="pinned"))
    write(
        sdb, local_dir_store, compact=False, rounds=1
    )  # newer manifests: the checkpoint's is not the latest
    local_dir_store.delete(manifest_key(DB, created.manifest_id))
    result = by_name(h.verify())["checkpoint_manifests_exist"]
    assert not result.passed and result.severity is Severity.ERROR
    assert result.problems == (
        f"checkpoint {created.id} 'pinned' pins manifest {created.manifest_id}: "
        f"{manifest_key(DB, created.manifest_id)} is missing or unreadable",
    )


def test_an_expired_checkpoint_still_listed_warns(sdb: Any, local_dir_store: LocalStore) -> None:
    write(sdb, local_dir_store)
    clock = ManualRuntime(time.time())
    h = handle_of(local_dir_store, clock)
    created = h.create_checkpoint(CheckpointOptions(lifetime=timedelta(minutes=5)))
    assert by_name(h.verify())["no_expired_checkpoints"].passed
    clock.advance(600)
    result = by_name(h.verify())["no_expired_checkpoints"]
    assert not result.passed and result.severity is Severity.WARN
    assert str(created.id) in result.problems[0] and "still listed" in result.problems[0]


def test_l0_at_the_threshold_warns_and_at_the_stall_limit_is_an_error(
    sdb: Any, local_dir_store: LocalStore
) -> None:
    write(sdb, local_dir_store, compact=False)  # 3 L0 SSTs
    h = handle_of(local_dir_store)
    assert by_name(h.verify())["l0_below_threshold"].passed
    warn = by_name(h.verify(l0_threshold=3))["l0_below_threshold"]
    assert not warn.passed and warn.severity is Severity.WARN
    assert "a SlateDB compactor must be running" in warn.problems[0]
    error = by_name(h.verify(l0_threshold=3, l0_max_ssts=3))["l0_below_threshold"]
    assert not error.passed and error.severity is Severity.ERROR
    assert "the writer stops flushing" in error.problems[0]


def test_a_boundary_at_the_latest_id_fails(sdb: Any, local_dir_store: LocalStore) -> None:
    write(sdb, local_dir_store)
    h = handle_of(local_dir_store)
    for c in h.db.list_checkpoints():
        h.db.delete_checkpoint(c.id)  # the writer's compactor's, so that GC has manifests to delete
    time.sleep(0.01)
    h.run_gc(GcOptions.with_min_age(timedelta(milliseconds=1), allow_unsafe_min_age=True), dry_run=False)
    ok = by_name(h.verify())["boundaries_below_latest"]
    assert ok.passed and f"{DB}/gc/manifest.boundary=" in ok.description  # SlateDB wrote it
    latest = h.describe().manifest_id
    local_dir_store.put(f"{DB}/gc/manifest.boundary", str(latest).encode())
    # Measured: SlateDB's own manifest reads never return now; verify reads nothing through it.
    results = by_name(h.verify())
    result = results["boundaries_below_latest"]
    assert not result.passed and result.severity is Severity.ERROR
    assert result.problems[0].startswith(f"{DB}/gc/manifest.boundary is {latest}, not below the latest")
    others = [r for name, r in results.items() if name != "boundaries_below_latest"]
    assert all(r.passed and r.description.startswith("not checked:") for r in others)
    health = h.gc_health()
    assert not health.passed and health.problems[0] == result.problems[0]
    local_dir_store.put(f"{DB}/gc/manifest.boundary", b"garbage")
    assert "not an ASCII unsigned integer" in by_name(h.verify())["boundaries_below_latest"].problems[0]


def test_a_clone_checks_its_parents_ssts(sdb: Any, local_or_s3_store: ObjectStore) -> None:
    """A SlateDB clone reads its parent's SSTs (an ExternalDb): verify HEADs them at the parent's
    path (without the store's prefix on S3) and names the parent when one is gone."""
    any_store = local_or_s3_store
    write_slatedb(any_store, DB, rounds=3, keys=50, compact=True)
    source = admin.open(DB, any_store)
    clone = "dbs/clone"
    source.clone_to(clone)
    h = admin.open(clone, any_store)
    assert isinstance(h, SlateDbHandle)
    results = by_name(h.verify())
    assert all(r.passed for r in results.values()), [r.problems for r in results.values()]
    m = h.db.read_manifest()
    assert m is not None and m.external_dbs
    sst = m.sorted_runs[0].ssts[0].sst_id
    any_store.delete(f"{DB}/compacted/{sst}.sst")
    result = by_name(h.verify())["ssts_exist"]
    assert not result.passed
    assert result.problems[0].startswith(
        f"{DB}/compacted/{sst}.sst is missing (SST {sst} of external database {DB!r})"
    )
