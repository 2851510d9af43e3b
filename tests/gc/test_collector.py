"""The collector as a whole: dry run == real run, errors reported and raised, the re-check, the loop."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import timedelta
from typing import Any

import pytest

import slate_ops.gc.collector as collector_module
from slate_ops import Db, admin
from slate_ops.compaction import Compactor, CompactorOptions
from slate_ops.config import CheckpointOptions
from slate_ops.errors import DbNotFoundError, GcFailedError
from slate_ops.gc import GarbageCollector, GcOptions, GcReport
from slate_ops.manifest.checkpoints import with_expiry
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import FaultInjectingStore, MemoryStore
from slate_ops.runtime import ManualRuntime
from tests.support.engine import quiet
from tests.support.gc import MIN_AGE, gc, keys, write_rounds
from tests.support.jsonable import to_jsonable
from tests.support.stores import snapshot


def busy_database(store: MemoryStore, clock: ManualRuntime) -> None:
    """Several flushes, two compactions, checkpoints that expire, a writer left open at the end."""
    write_rounds(store, clock, 4)
    admin.create_checkpoint("db", store, CheckpointOptions(lifetime="1min", name="short"), clock=clock)
    options = CompactorOptions(min_sources=2, compaction_checkpoint_lifetime="2min")
    compactor = Compactor("db", store, options, clock=clock)
    compactor.run_once()
    write_rounds(store, clock, 3)
    compactor = Compactor("db", store, options, clock=clock)
    compactor.run_once()
    compactor.close()
    clock.advance(200)
    with Db.open("db", store, quiet(), clock=clock) as db:
        db.put(b"late", b"value")
        db.flush()


@pytest.mark.parametrize("elapsed", [0.0, MIN_AGE, 2 * MIN_AGE, 10_000.0])
def test_dry_run_reports_exactly_what_a_real_run_deletes(
    clocked_memory_store: MemoryStore, clock: ManualRuntime, elapsed: float
) -> None:
    busy_database(clocked_memory_store, clock)
    clock.advance(elapsed)
    before = snapshot(clocked_memory_store)
    dry = gc(clocked_memory_store, clock).run_once(dry_run=True)
    assert snapshot(clocked_memory_store) == before  # a dry run writes and deletes nothing
    real = gc(clocked_memory_store, clock).run_once(dry_run=False)
    assert dry.dry_run and not real.dry_run
    assert dry.deleted_keys() == real.deleted_keys()
    assert [c.id for c in dry.checkpoints_expired] == [c.id for c in real.checkpoints_expired]
    for resource in ("manifest", "compactions", "wal", "compacted"):
        assert dry.resource(resource) == real.resource(resource)
    assert not real.deleted_keys() & keys(clocked_memory_store)
    if elapsed >= 2 * MIN_AGE:
        assert real.deleted_keys()


def test_report_is_plain_json_with_counts_bytes_and_metrics(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    busy_database(clocked_memory_store, clock)
    clock.advance(10_000)
    report = gc(clocked_memory_store, clock).run_once(dry_run=False)
    data = json.loads(json.dumps(to_jsonable(report)))
    assert data["path"] == "db" and data["dry_run"] is False and data["errors"] == []
    assert [r["resource"] for r in data["resources"]] == ["manifest", "compactions", "wal", "compacted"]
    for resource in data["resources"]:
        assert resource["count"] == len(resource["deleted"])
        assert resource["bytes"] == sum(d["size"] for d in resource["deleted"])
    assert {"checks", "advance_attempts", "stale_writes_rejected", "check_seconds_total"} <= set(
        data["metrics"]
    )
    assert data["manifest_id"] >= 1 and len(data["checkpoints_expired"]) == 3  # short + 2 compaction


def test_only_the_chosen_resources_run(clocked_memory_store: MemoryStore, clock: ManualRuntime) -> None:
    busy_database(clocked_memory_store, clock)
    clock.advance(10_000)
    report = gc(clocked_memory_store, clock, resources=["wal"]).run_once(dry_run=False)
    assert [r.resource for r in report.resources] == ["wal"]
    assert report.checkpoints_expired == () and report.resource("wal").count > 0  # type: ignore[union-attr]


def test_a_failed_delete_is_reported_raised_and_does_not_stop_the_others(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    busy_database(clocked_memory_store, clock)
    clock.advance(10_000)
    expected = gc(clocked_memory_store, clock).run_once(dry_run=True)
    victim = sorted(d.key for d in expected.resource("wal").deleted)[0]  # type: ignore[union-attr]
    faulty = FaultInjectingStore(clocked_memory_store)
    faulty.fail("delete", key_contains=victim, times=None)
    with pytest.raises(GcFailedError, match=f"deleting {victim} failed") as raised:
        gc(faulty, clock).run_once(dry_run=False)
    report = raised.value.report
    assert isinstance(report, GcReport) and not report.ok
    wal = report.resource("wal")
    assert wal is not None and len(wal.errors) == 1 and victim not in {d.key for d in wal.deleted}
    assert report.deleted_keys() == expected.deleted_keys() - {victim}
    assert victim in keys(clocked_memory_store)


def test_an_unreadable_manifest_listing_is_reported_and_raised(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    write_rounds(clocked_memory_store, clock, 1)
    faulty = FaultInjectingStore(clocked_memory_store)
    faulty.fail("list", key_contains="db/manifest/")
    before = snapshot(clocked_memory_store)
    with pytest.raises(GcFailedError, match="reading the manifests") as raised:
        gc(faulty, clock).run_once(dry_run=False)
    assert raised.value.report.manifest_id is None  # type: ignore[attr-defined]
    assert snapshot(clocked_memory_store) == before


def test_missing_database_is_an_error(clocked_memory_store: MemoryStore, clock: ManualRuntime) -> None:
    with pytest.raises(DbNotFoundError, match="no database"):
        gc(clocked_memory_store, clock).run_once(dry_run=False)


def test_a_checkpoint_revived_during_the_run_keeps_what_it_pins(
    clocked_memory_store: MemoryStore, clock: ManualRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader refreshes its (expired) checkpoint after the plan was made: the real run re-checks."""
    write_rounds(clocked_memory_store, clock, 4)
    stale = admin.create_checkpoint(
        "db", clocked_memory_store, CheckpointOptions(lifetime="1min"), clock=clock
    )
    compactor = Compactor(
        "db",
        clocked_memory_store,
        CompactorOptions(min_sources=2, compaction_checkpoint_lifetime="1s"),
        clock=clock,
    )
    compactor.run_once()
    compactor.close()
    clock.advance(10_000)
    dry = gc(clocked_memory_store, clock).run_once(dry_run=True)
    pinned_manifest = f"db/manifest/{stale.manifest_id:020d}.manifest"
    assert pinned_manifest in dry.deleted_keys() and dry.resource("compacted").count == 4  # type: ignore[union-attr]

    real_expire = collector_module.expire_checkpoints

    def refresh_then_expire(*args: Any, **kwargs: Any) -> Any:
        ManifestStore(clocked_memory_store, "db").update(
            lambda v: with_expiry(v.value, stale.id, int(clock.now()) + 3600)
        )
        return real_expire(*args, **kwargs)

    monkeypatch.setattr(collector_module, "expire_checkpoints", refresh_then_expire)
    real = gc(clocked_memory_store, clock).run_once(dry_run=False)
    assert stale.id not in {c.id for c in real.checkpoints_expired}
    assert pinned_manifest not in real.deleted_keys() and pinned_manifest in keys(clocked_memory_store)
    assert real.resource("compacted").count == 0  # type: ignore[union-attr]
    assert real.deleted_keys() < dry.deleted_keys()


def test_run_loop_retries_failures_and_stops_on_request(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    write_rounds(clocked_memory_store, clock, 1)
    faulty = FaultInjectingStore(clocked_memory_store)
    faulty.fail("list", key_contains="db/wal/", times=1)
    collector = GarbageCollector("db", faulty, GcOptions(interval=timedelta(milliseconds=10)), clock=clock)
    stop = threading.Event()
    runs: list[GcReport] = []
    real_run_once = collector.run_once

    def counting_run_once(*, dry_run: bool) -> GcReport:
        try:
            report = real_run_once(dry_run=dry_run)
        except GcFailedError as error:
            runs.append(error.report)  # type: ignore[arg-type]
            raise
        runs.append(report)
        if len(runs) == 2:
            stop.set()
        return report

    collector.run_once = counting_run_once  # type: ignore[method-assign]
    thread = threading.Thread(target=collector.run, args=(stop,))
    thread.start()
    thread.join(10)
    assert not thread.is_alive()
    assert [r.ok for r in runs] == [False, True]
    assert collector.last_error is None and collector.last_report is runs[1]


def test_run_loop_stops_when_the_database_is_gone(
    clocked_memory_store: MemoryStore, clock: ManualRuntime
) -> None:
    collector = GarbageCollector(f"missing-{uuid.uuid4().hex}", clocked_memory_store, clock=clock)
    assert collector.run(threading.Event()) is None
