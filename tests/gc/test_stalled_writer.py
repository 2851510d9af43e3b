"""SlateDB's GC boundary-file design "Motivation", replayed against the real GC for both sequenced namespaces.

A writer prepares id N+1 and stalls on its create (a gate); other writers commit N+1..N+3; the GC
advances the boundary and deletes the old files; the stalled create then succeeds at the object
store, but the write is reported failed (``create``) or re-applied on top of the latest
(``update``), and the stale file never becomes the latest version.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Any

import pytest

from slate_ops import admin
from slate_ops.compaction.state import CompactionRecord, CompactionsState, CompactionsStore
from slate_ops.errors import BoundaryViolationError
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import FaultInjectingStore, MemoryStore
from slate_ops.runtime import ManualRuntime
from slate_ops.txn import SequencedStore, Versioned
from slate_ops.txn.boundary import METRICS
from tests.support.gc import MIN_AGE, gc


@dataclass(frozen=True)
class Namespace:
    """How to open one namespace, tag a value as "written by the others", and as "stale"."""

    name: str
    open: Any
    other: Any  # change applied by the other writers
    stale: Any  # the stalled writer's change
    seen_other: Any  # how many "other" changes a value carries
    is_stale: Any


MANIFESTS = Namespace(
    "manifest",
    lambda store: ManifestStore(store, "db").sequence,
    lambda v: v.with_changes(wal_id_last_seen=v.wal_id_last_seen + 1),
    lambda v: v.with_changes(last_l0_seq=v.last_l0_seq + 100),
    lambda v: v.wal_id_last_seen,
    lambda v: v.last_l0_seq >= 100,
)


def _record(state: CompactionsState, name: str) -> CompactionsState:
    return replace(state, compactions=(*state.compactions, CompactionRecord(name, 1, "l0", "completed", ())))


COMPACTIONS = Namespace(
    "compactions",
    lambda store: CompactionsStore(store, "db").sequence,
    lambda v: _record(v, "other"),
    lambda v: _record(v, "stale"),
    lambda v: sum(r.id == "other" for r in v.compactions),
    lambda v: any(r.id == "stale" for r in v.compactions),
)


def setup(store: MemoryStore, namespace: Namespace) -> SequencedStore[Any]:
    admin.create_db("db", store)
    if namespace.name == "compactions":
        CompactionsStore(store, "db").claim(1, 0.0)
    sequence: SequencedStore[Any] = namespace.open(store)
    for _ in range(2):  # N = 3 in both namespaces (manifest: 1 + 2; compactions: claim + 2)
        sequence.update(lambda current: namespace.other(current.value) if current else None)
    return sequence


@pytest.mark.parametrize("namespace", [MANIFESTS, COMPACTIONS], ids=lambda n: n.name)
@pytest.mark.parametrize("mode", ["create", "update"])
def test_stalled_writer_cannot_commit_behind_the_gc_boundary(
    clocked_memory_store: MemoryStore, clock: ManualRuntime, namespace: Namespace, mode: str
) -> None:
    others = setup(clocked_memory_store, namespace)
    latest = others.read_latest()
    assert latest is not None and latest.id == 3
    n = latest.id
    faulty = FaultInjectingStore(clocked_memory_store)
    stalled: SequencedStore[Any] = namespace.open(faulty)
    assert stalled.read_latest() == latest
    gate = faulty.gate("put", key_contains=f"{n + 1:020d}.{namespace.name}")
    outcome: dict[str, Any] = {}

    def stalled_writer() -> None:
        try:
            if mode == "create":  # step 1: read N, prepare N+1 ...
                outcome["result"] = stalled.create(n + 1, namespace.stale(latest.value))
            else:
                outcome["result"] = stalled.update(lambda current: namespace.stale(current.value))
        except Exception as error:
            outcome["error"] = error

    thread = threading.Thread(target=stalled_writer)
    thread.start()
    assert gate.wait_until_reached(5)  # step 2: ... and stall before the create
    for _ in range(3):  # step 3: others create N+1, N+2, N+3
        others.update(lambda current: namespace.other(current.value))
    clock.advance(MIN_AGE + 1)
    rejected_before = METRICS.snapshot()["stale_writes_rejected"]
    report = gc(clocked_memory_store, clock, resources=[namespace.name]).run_once(
        dry_run=False
    )  # step 4: GC deletes N+1
    resource = report.resource(namespace.name)
    assert resource is not None and resource.boundary == n + 2
    assert f"{n + 1:020d}.{namespace.name}" in " ".join(d.key for d in resource.deleted)
    assert [f.id for f in others.list()] == [n + 3]

    gate.release()  # step 5: the stalled create of N+1 now succeeds at the object store ...
    thread.join(5)
    assert not thread.is_alive()
    # the stale create landed, was rejected by the boundary check and withdrawn by its writer
    assert n + 1 not in [f.id for f in others.list()]
    assert METRICS.snapshot()["stale_writes_rejected"] == rejected_before + 1
    # ... step 6 does not happen: the write is not reported as committed at N+1.
    if mode == "create":
        error = outcome["error"]
        assert isinstance(error, BoundaryViolationError)
        assert (error.object_id, error.boundary) == (n + 1, n + 2)
        current = namespace.open(clocked_memory_store).read_latest()
        assert current.id == n + 3 and not namespace.is_stale(current.value)
    else:
        committed: Versioned[Any] = outcome["result"]
        assert committed.id == n + 4  # re-applied on top of the latest
        assert namespace.seen_other(committed.value) == 5 and namespace.is_stale(committed.value)
        current = namespace.open(clocked_memory_store).read_latest()
        assert current == committed
    assert namespace.seen_other(current.value) == 5  # no other writer's update was lost

    clock.advance(MIN_AGE + 1)  # GC after the withdrawn stale write changes nothing that is current
    gc(clocked_memory_store, clock, resources=[namespace.name]).run_once(dry_run=False)
    assert n + 1 not in [f.id for f in others.list()]
    assert namespace.open(clocked_memory_store).read_latest() == current
