"""Every maintenance operation's report carries the object-store requests it made: equal to what a
meter wrapped OUTSIDE the call saw, DELETEs equal to the objects a GC deleted, dry runs without a
PUT or DELETE; on both engines (SlateDB: the requests made through slate_ops' store)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from slate_ops import Db, admin
from slate_ops.admin.handle import DatabaseHandle, SlateOpsHandle, merge
from slate_ops.admin.handle.metered import CheckpointCreated
from slate_ops.admin.tag_policy import TagPolicy
from slate_ops.compaction import LocalExecutor
from slate_ops.config import CheckpointOptions
from slate_ops.errors import StoreRootNotFoundError
from slate_ops.objstore import LocalStore, MemoryStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.metering import ZERO, MeteredStore, RequestCounts
from slate_ops.runtime import ManualRuntime
from tests.support.compaction import SMALL, fill
from tests.support.gc import unsafe, write_rounds
from tests.support.writers import DB


def _outside(
    handle_of: Callable[[ObjectStore], DatabaseHandle], store: ObjectStore
) -> tuple[DatabaseHandle, MeteredStore]:
    outside = MeteredStore(store)
    return handle_of(outside), outside


def _measured(outside: MeteredStore, call: Callable[[], Any]) -> tuple[Any, RequestCounts]:
    before = outside.counts
    result = call()
    return result, outside.counts - before


def test_compaction_reports_what_an_outside_meter_saw(memory_store: MemoryStore) -> None:
    fill(memory_store, flushes=4)
    db, outside = _outside(lambda s: SlateOpsHandle("db", s), memory_store)
    report, seen = _measured(outside, lambda: db.compact(executor=LocalExecutor(), options=SMALL))
    assert report is not None
    assert report.requests == seen
    assert seen.put >= len(report.output_ssts) + 1  # the outputs and the new manifest
    assert seen.bytes_written >= report.bytes_written > 0
    assert seen.bytes_read >= report.bytes_read > 0
    assert db.last_requests == seen


def test_gc_reports_one_delete_per_deleted_object(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    store = clocked_memory_store
    write_rounds(store, clock, 4)
    SlateOpsHandle("db", store, clock=clock).compact(executor=LocalExecutor(), options=SMALL)
    clock.advance(3600)
    db, outside = _outside(lambda s: SlateOpsHandle("db", s, clock=clock), store)
    dry, dry_seen = _measured(outside, lambda: db.run_gc(unsafe(60), dry_run=True))
    assert dry.requests == dry_seen
    assert dry_seen.list > 0 and dry_seen.put == dry_seen.delete == 0
    report, seen = _measured(outside, lambda: db.run_gc(unsafe(60), dry_run=False))
    deleted = len(report.deleted_keys())
    assert deleted > 0
    assert report.requests == seen
    assert report.requests.delete == deleted
    assert db.gc_plan(unsafe(60)).requests.delete == 0


def test_dry_runs_count_reads_and_write_nothing(acme_store: MemoryStore, clock: ManualRuntime) -> None:
    db, outside = _outside(lambda s: SlateOpsHandle("tenants/acme", s, clock=clock), acme_store)
    created = db.create_checkpoint(CheckpointOptions(lifetime=timedelta(seconds=5)))
    assert isinstance(created, CheckpointCreated)
    assert created.requests.put >= 1 and created.requests == db.last_requests
    db.create_tag("v1")
    assert db.last_requests.put >= 1
    clock.advance(60)
    dry_runs: list[Callable[[], Any]] = [
        lambda: db.expire_checkpoints(dry_run=True),
        lambda: db.destroy(soft=True, dry_run=True),
        lambda: db.rollback_to_tag("v1", dry_run=True),
        lambda: db.apply_tag_policy(TagPolicy(num_retained_max=1), dry_run=True),
        lambda: db.delete_tag("v1", dry_run=True),
    ]
    for dry_run in dry_runs:
        result, seen = _measured(outside, dry_run)
        assert seen.get + seen.list > 0 and seen.put == seen.delete == 0
        assert db.last_requests == seen
        if hasattr(result, "requests"):
            assert result.requests == seen
    expired, seen = _measured(outside, lambda: db.expire_checkpoints(dry_run=False))
    assert len(expired.expired) == 1 and expired.requests == seen and seen.put >= 1


def test_clone_verify_split_and_merge_are_metered(acme_store: MemoryStore, clock: ManualRuntime) -> None:
    with Db.open("tenants/acme", acme_store, clock=clock) as writer:
        for i in range(20):
            writer.put(b"k%02d" % i, b"v")
        writer.flush_memtable()
    db, outside = _outside(lambda s: SlateOpsHandle("tenants/acme", s, clock=clock), acme_store)
    _, seen = _measured(outside, lambda: db.clone_to("clones/c1"))
    assert seen.put >= 1 and db.last_requests == seen
    _, seen = _measured(outside, db.verify)
    assert seen.get >= 1 and seen.put == 0 and db.last_requests == seen
    split, seen = _measured(outside, lambda: db.split([b"k10"], ["parts/a", "parts/b"]))
    assert split.requests == seen and seen.put >= 2
    merged, seen = _measured(outside, lambda: merge(["parts/a", "parts/b"], outside, "merged", clock=clock))
    assert merged.requests.put >= 1
    assert merged.requests.get <= seen.get  # the sources' engine probes are outside the operation


def test_concurrent_operations_on_one_handle_count_their_own(memory_store: MemoryStore) -> None:
    admin.create_db("db", memory_store)
    db, outside = _outside(lambda s: SlateOpsHandle("db", s), memory_store)
    reports: list[RequestCounts] = []
    barrier = threading.Barrier(8)

    def work() -> None:
        barrier.wait()
        created = db.create_checkpoint()
        assert isinstance(created, CheckpointCreated)
        reports.append(created.requests)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Each report counts its own requests only: together they are exactly what the store saw.
    assert sum(reports, ZERO) == outside.counts
    assert all(r.put >= 1 for r in reports)


def test_called_directly_the_report_has_no_requests(memory_store: MemoryStore) -> None:
    admin.create_db("db", memory_store)
    assert admin.run_gc("db", memory_store, dry_run=True).requests == ZERO


@pytest.mark.parametrize("engine_name", ["slatedb"])
def test_slatedb_counts_what_goes_through_our_store(engine_name: str, engine_store: ObjectStore) -> None:
    pytest.importorskip("slatedb.uniffi")
    from tests.support.writers import write_slatedb

    write_slatedb(engine_store)
    db, outside = _outside(lambda s: admin.open(DB, s, engine_name), engine_store)
    plan, seen = _measured(outside, db.gc_plan)
    assert plan.requests == seen
    assert seen.list >= 4 and seen.put == seen.delete == 0  # manifest/, wal/, compacted/, compactions/


def test_a_metered_operation_still_names_a_missing_store_directory(tmp_path: Path) -> None:
    with pytest.raises(StoreRootNotFoundError, match="does not exist"):
        SlateOpsHandle("db", LocalStore(tmp_path / "missing")).compact()
