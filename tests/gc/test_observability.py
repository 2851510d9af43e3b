"""Boundary metrics and warnings (SlateDB's GC boundary-file design, "Observability"), and SlateDB
issue 2089 on a local store."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import pytest

from slate_ops import admin
from slate_ops.errors import BoundaryViolationError
from slate_ops.gc import GarbageCollector
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import FaultInjectingStore, LocalStore, MemoryStore
from slate_ops.txn.boundary import METRICS, BoundaryObject


def test_checks_and_rejected_stale_writes_are_counted_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    boundary = BoundaryObject(store, "db", "manifest")
    before = METRICS.snapshot()
    boundary.check(1, "db/manifest/1")
    boundary.advance(5)
    with caplog.at_level(logging.WARNING), pytest.raises(BoundaryViolationError):
        boundary.check(5, "db/manifest/5")
    own = boundary.metrics.snapshot()
    assert (own["checks"], own["stale_writes_rejected"]) == (2, 1)
    assert (own["advance_attempts"], own["advances"], own["advance_conflicts"], own["advance_failures"]) == (
        1,
        1,
        0,
        0,
    )
    assert 0 < own["check_seconds_max"] <= own["check_seconds_total"]
    after = METRICS.snapshot()
    assert after["checks"] - before["checks"] >= 2
    assert after["stale_writes_rejected"] - before["stale_writes_rejected"] >= 1
    assert any("stale write db/manifest/5 rejected: id 5 <= boundary 5" in r.message for r in caplog.records)


def test_a_lost_advance_race_is_counted_as_a_conflict_and_retried() -> None:
    store = MemoryStore()
    BoundaryObject(store, "db", "manifest").advance(1)
    faulty = FaultInjectingStore(store)
    slow = BoundaryObject(faulty, "db", "manifest")
    gate = faulty.gate("put", key_contains="manifest.boundary")
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(slow.advance(5)))
    thread.start()
    assert gate.wait_until_reached(5)  # read boundary 1 with its etag, about to put 5
    BoundaryObject(store, "db", "manifest").advance(3)  # another GC wins meanwhile
    gate.release()
    thread.join(5)
    assert result == [5] and store.get("db/gc/manifest.boundary").data == b"5"
    metrics = slow.metrics.snapshot()
    assert (metrics["advance_attempts"], metrics["advance_conflicts"], metrics["advances"]) == (2, 1, 1)


def age(root: Path, seconds: float) -> None:
    then = time.time() - seconds
    for path in root.rglob("*"):
        if path.is_file() and ".locks" not in path.parts:
            os.utime(path, (then, then))


def test_second_boundary_advance_works_on_the_local_store(tmp_path: Path) -> None:
    """SlateDB issue 2089: on a local directory the second advance (an if-match put) failed and GC
    stopped silently. Ours supports if-match: every run advances and collects."""
    store = LocalStore(tmp_path / "store")
    admin.create_db("db", store)
    manifests = ManifestStore(store, "db")
    boundaries = []
    for _ in range(3):
        for _ in range(3):
            manifests.update(lambda current: current.value)
        age(tmp_path / "store", 3600)
        report = GarbageCollector("db", store).run_once(dry_run=False)
        boundaries.append(report.resource("manifest").boundary)  # type: ignore[union-attr]
        assert [f.id for f in manifests.list()] == [report.manifest_id]
    assert boundaries == [3, 6, 9]
    assert store.get("db/gc/manifest.boundary").data == b"9"
