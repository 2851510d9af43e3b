"""GC health on both engines (slate_ops.admin.gc_health, ``handle.gc_health``): the "GC had been
dead for six days" case (SlateDB #2089) detected by advancing an injected clock past interval x N,
and cleared by a real GC run. SlateDB databases are written by SlateDB's own Db and read back by it.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest

from slate_ops import Db, admin
from slate_ops.admin.gc_health import GcHealth
from slate_ops.admin.handle import DatabaseHandle
from slate_ops.errors import GcFailedError, InvalidArgumentError
from slate_ops.gc import GcOptions
from slate_ops.objstore import LocalStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import ManualRuntime
from tests.support.db_state import contents
from tests.support.engine import quiet
from tests.support.jsonable import to_jsonable
from tests.support.slatedb import read_slatedb, write_slatedb

DB = "dbs/health"
INTERVAL = timedelta(minutes=10)
# Young enough that what the writers just left is garbage at once (tests only); the default interval.
FAST_GC = GcOptions.with_min_age(timedelta(milliseconds=1), allow_unsafe_min_age=True, interval=INTERVAL)
N = 3
SIX_DAYS = 6 * 86400.0


def write(engine: str, store: ObjectStore, round_: int = 0) -> dict[bytes, bytes]:
    """Two flushes by ``engine``'s own writer (SlateDB: three, and on the first round a compaction,
    its compactor's checkpoint removed so that what the compaction replaced is garbage); the rows
    written."""
    if engine == "slate_ops":
        expected: dict[bytes, bytes] = {}
        with Db.open(DB, store, quiet()) as db:
            for r in range(2):
                for i in range(50):
                    k, v = b"k%04d" % i, b"v%d-%d" % (round_, r)
                    db.put(k, v)
                    expected[k] = v
                db.flush_memtable()
        return expected
    return write_slatedb(store, DB, rounds=3, keys=50, compact=round_ == 0, drop_checkpoints=True)


def read_back(engine: str, store: ObjectStore) -> dict[bytes, bytes]:
    """Every row, read the way the engine's own users read it (SlateDB: its DbReader)."""
    if engine == "slate_ops":
        return contents(store, DB)
    return read_slatedb(store, DB)


def test_dead_gc_is_detected_and_a_run_clears_it(engine_name: str, local_or_s3_store: ObjectStore) -> None:
    expected = write(engine_name, local_or_s3_store)
    clock = ManualRuntime(time.time())
    handle: DatabaseHandle = admin.open(DB, local_or_s3_store, clock=clock)

    fresh = handle.gc_health(FAST_GC, intervals=N)
    assert isinstance(fresh, GcHealth) and fresh.engine == engine_name
    assert fresh.passed, fresh.problems
    assert fresh.overdue_count == 0 and fresh.waiting_count == 0
    assert fresh.last_gc_at is None and fresh.evidence == "oldest_garbage"  # no GC ever deleted
    assert fresh.overdue_after_s == INTERVAL.total_seconds() * N

    # Garbage has waited two intervals (not yet N) and no GC ever advanced a boundary: failing.
    clock.advance(2 * INTERVAL.total_seconds() + 1)
    stale = handle.gc_health(FAST_GC, intervals=N)
    assert not stale.passed and stale.overdue_count == 0 and stale.waiting_count > 0
    assert "no GC has ever advanced a boundary" in stale.problems[0]

    # Six days later: the garbage is overdue by far more than interval x N.
    clock.advance(SIX_DAYS)
    dead = handle.gc_health(FAST_GC, intervals=N)
    assert not dead.passed
    plan = {d.key for r in handle.gc_plan(FAST_GC).resources for d in r.deleted}
    assert dead.overdue_count > 0 and dead.overdue_bytes > 0
    assert dead.oldest_overdue_key in plan
    assert dead.oldest_overdue_age_s is not None and dead.oldest_overdue_age_s > SIX_DAYS
    assert dead.overdue_by_resource.get("manifest", 0) > 0
    assert sum(dead.overdue_by_resource.values()) == dead.overdue_count
    assert "have been eligible for GC for more than 30m 0s" in dead.problems[0]
    assert DB in dead.problems[0] and dead.oldest_overdue_key in dead.problems[0]

    report = handle.run_gc(FAST_GC, dry_run=False)
    assert sum(r.count for r in report.resources) > 0
    healed = handle.gc_health(FAST_GC, intervals=N)
    assert healed.passed, healed.problems
    assert healed.overdue_count == 0 and healed.waiting_count == 0
    # The boundary GC just advanced is "six days old" on the advanced clock; with nothing waiting
    # that is an idle database, not a dead GC.
    assert healed.evidence == "boundary" and healed.last_gc_at is not None
    assert healed.since_last_gc_s is not None and healed.since_last_gc_s > SIX_DAYS
    assert read_back(engine_name, local_or_s3_store) == expected


def test_a_boundary_not_advanced_while_garbage_waits_fails(
    engine_name: str, local_or_s3_store: ObjectStore
) -> None:
    """After one real GC run the boundary exists; new garbage then waits while no GC advances it.

    Measured on SlateDB 0.17.0: on a local directory its GC cannot advance an existing boundary
    file (``PutMode::Update`` is not implemented by object_store's LocalFileSystem; the error is
    only logged), so from the second run on it never deletes manifests or ``.compactions`` files
    there: GC is half dead, which the handle's run reports (GcFailedError, planned but not deleted)
    and the health check keeps failing on."""
    write(engine_name, local_or_s3_store)
    time.sleep(0.01)
    admin.open(DB, local_or_s3_store).run_gc(FAST_GC, dry_run=False)
    expected = write(engine_name, local_or_s3_store, round_=1)  # every key overwritten
    clock = ManualRuntime(time.time())
    handle = admin.open(DB, local_or_s3_store, clock=clock)
    assert handle.gc_health(FAST_GC, intervals=N).passed
    clock.advance(N * INTERVAL.total_seconds() + 60)
    health = handle.gc_health(FAST_GC, intervals=N)
    assert not health.passed and health.evidence == "boundary"
    assert health.since_last_gc_s is not None and health.since_last_gc_s > N * INTERVAL.total_seconds()
    assert any("no GC has advanced a boundary" in p for p in health.problems), health.problems
    if engine_name == "slate_ops" or not isinstance(
        local_or_s3_store, LocalStore
    ):  # SlateDB on S3 updates it
        handle.run_gc(FAST_GC, dry_run=False)
        assert handle.gc_health(FAST_GC, intervals=N).passed
    else:
        with pytest.raises(GcFailedError, match=r"manifest.*planned but not deleted"):
            handle.run_gc(FAST_GC, dry_run=False)
        after = handle.gc_health(FAST_GC, intervals=N)
        assert not after.passed and set(after.overdue_by_resource) == {"manifest", "compactions"}
        assert any("cannot advance an existing boundary" in n for n in after.notes)
    assert read_back(engine_name, local_or_s3_store) == expected


def test_the_report_has_the_same_keys_on_both_engines(local_or_s3_store: ObjectStore, tmp_path: Path) -> None:
    write("slate_ops", local_or_s3_store)
    other = LocalStore(tmp_path / "other")
    (tmp_path / "other").mkdir()
    write("slatedb", other)
    ours = to_jsonable(admin.open(DB, local_or_s3_store).gc_health())
    theirs = to_jsonable(admin.open(DB, other).gc_health())
    assert list(ours) == list(theirs)
    assert ours["engine"] == "slate_ops" and theirs["engine"] == "slatedb"
    assert ours["passed"] and theirs["passed"]  # the default policy: nothing older than 5 min


def test_gc_health_reads_only(engine_name: str, local_or_s3_store: ObjectStore) -> None:
    write(engine_name, local_or_s3_store)
    before = {m.key: m.last_modified for m in local_or_s3_store.list(f"{DB}/")}
    clock = ManualRuntime(time.time() + SIX_DAYS)
    assert not admin.open(DB, local_or_s3_store, clock=clock).gc_health(FAST_GC).passed
    assert {m.key: m.last_modified for m in local_or_s3_store.list(f"{DB}/")} == before


@pytest.mark.parametrize("intervals", [0, -1])
def test_intervals_must_be_positive(local_or_s3_store: ObjectStore, intervals: int) -> None:
    write("slate_ops", local_or_s3_store)
    with pytest.raises(InvalidArgumentError, match="intervals"):
        admin.open(DB, local_or_s3_store).gc_health(intervals=intervals)
