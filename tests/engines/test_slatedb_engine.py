"""The SlateDB adapter against databases written by the binding's own Db (local directories).

Each test proves its effect is visible to SlateDB itself: a checkpoint SlateDB lists and reads at,
a GC run whose deletions SlateDB's own run_gc_once made (and equal the plan), a clone SlateDB opens.
"""

from __future__ import annotations

import asyncio
import importlib
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from slate_ops.engines.slatedb import LOOP, CloneSource, GcPolicy, LoopOwner, SlateDbAdmin
from slate_ops.engines.slatedb import admin as sdb_admin
from slate_ops.engines.slatedb import loop as sdb_loop
from slate_ops.errors import SlateDbBindingMissingError, SlateDbError
from slate_ops.layout import own_directory
from slate_ops.objstore import LocalStore
from slate_ops.objstore.wrappers import CountingStore
from tests.support.slatedb import in_child, local_store, read_all, write_db

ALL_NOW = GcPolicy(manifest=0, wal=0, wal_fence=0, compacted=0, compactions=0)


def test_without_the_binding_a_typed_error_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real = importlib.import_module

    def no_slatedb(name: str, *a: Any) -> Any:
        if name.startswith("slatedb"):
            raise ImportError("No module named 'slatedb'")
        return real(name, *a)

    monkeypatch.setattr(sdb_loop, "_binding", None)
    monkeypatch.setattr(importlib, "import_module", no_slatedb)
    with pytest.raises(
        SlateDbBindingMissingError,
        match=r"slate_ops\[slatedb\].*0\.17\.0|0\.17\.0.*slate_ops\[slatedb\]",
    ):
        SlateDbAdmin("db", tmp_path)


def test_one_loop_serves_threads_and_callers_inside_a_running_loop(sdb: Any, tmp_path: Path) -> None:
    LOOP.run(write_db(sdb, tmp_path, "db", rounds=1, keys=10))
    h = SlateDbAdmin("db", tmp_path)
    ids: list[int] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(5):
                ids.append(h.read_manifest().id)  # type: ignore[union-attr]
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(ids) == 40 and len(set(ids)) == 1

    async def inside_a_running_loop() -> int:  # e.g. a caller that is itself async
        return h.read_manifest().id  # type: ignore[union-attr]

    assert asyncio.run(inside_a_running_loop()) == ids[0]

    async def on_the_owner_loop() -> None:
        h.read_manifest()

    with pytest.raises(SlateDbError, match="loop's own thread"):
        LOOP.run(on_the_owner_loop())


def test_a_second_owner_is_independent(sdb: Any, tmp_path: Path) -> None:
    own = LoopOwner()
    own.run(write_db(sdb, tmp_path, "db", rounds=1, keys=5))
    assert SlateDbAdmin("db", tmp_path, own).read_manifest() is not None
    assert own.thread_ident != LOOP.thread_ident


def test_checkpoints_are_slatedbs(sdb: Any, tmp_path: Path) -> None:
    expected = LOOP.run(write_db(sdb, tmp_path, "db", rounds=2, keys=50))
    h = SlateDbAdmin("db", tmp_path)
    cp, mid = h.create_checkpoint(lifetime_s=3600, name="nightly")
    assert [c.id for c in h.list_checkpoints("nightly")] == [cp]
    c = h.list_checkpoints("nightly")[0]
    assert c.manifest_id == mid and c.expire_time_s is not None and c.expire_time_s - c.create_time_s == 3600
    # SlateDB reads the database at it, after a later write
    LOOP.run(write_db(sdb, tmp_path, "db", rounds=1, keys=10))
    assert LOOP.run(read_all(sdb, tmp_path, "db", checkpoint=cp)) == expected
    # from a source: same manifest
    cp2, mid2 = h.create_checkpoint(source=cp, name="copy")
    assert mid2 == mid
    h.refresh_checkpoint(cp, None)
    assert h.list_checkpoints("nightly")[0].expire_time_s is None
    h.delete_checkpoint(cp)
    h.delete_checkpoint(cp2)
    assert h.list_checkpoints("nightly") == [] and h.list_checkpoints("copy") == []
    with pytest.raises(SlateDbError, match="refresh_checkpoint"):
        h.refresh_checkpoint(cp, 60)


def test_manifest_view(sdb: Any, tmp_path: Path) -> None:
    LOOP.run(write_db(sdb, tmp_path, "db", rounds=2, keys=100))
    m = SlateDbAdmin("db", tmp_path).read_manifest()
    assert m is not None and m.initialized and not m.sorted_runs
    assert len(m.l0) == 2
    for s in m.l0:
        assert (s.first_key, s.last_key) == (b"k0000", b"k0099") and s.size > 0
        assert (tmp_path / "db" / "compacted" / f"{s.sst_id}.sst").is_file()
    LOOP.run(write_db(sdb, tmp_path, "db2", rounds=3, keys=100, compact=True))
    m2 = SlateDbAdmin("db2", tmp_path).read_manifest()
    assert m2 is not None and not m2.l0 and len(m2.sorted_runs) == 1
    assert m2.sorted_runs[0].ssts[0].first_key == b"k0000"
    assert [v.id for v in SlateDbAdmin("db2", tmp_path).list_manifests()][-1] == m2.id


def test_gc_plan_is_what_run_gc_once_deletes(sdb: Any, tmp_path: Path) -> None:
    expected = LOOP.run(write_db(sdb, tmp_path, "db", rounds=3, keys=100, compact=True))
    h = SlateDbAdmin("db", tmp_path)
    # the writer leaves its compactor's 15-minute checkpoint; without it the replaced L0 SSTs are garbage
    for c in h.list_checkpoints():
        h.delete_checkpoint(c.id)
    keep, keep_mid = h.create_checkpoint(name="keep")  # pins a manifest
    h.create_checkpoint(lifetime_s=0.001, name="short")  # expires before the plan
    time.sleep(0.05)
    plan = h.gc_plan(ALL_NOW)
    assert len(plan.expired_checkpoints) == 1
    by_dir = {d: {x.key for x in plan.deletions if x.directory == d} for d in sdb_admin.DIRECTORIES}
    assert all(by_dir[d] for d in ("manifest", "wal", "wal_fence", "compacted", "compactions")), by_dir
    assert f"db/manifest/{keep_mid:020d}.manifest" not in by_dir["manifest"]
    # SlateDB's rule: the newest L0 (== last_compacted_l0_sst_view_id) is at the cutoff, not before it
    m = h.read_manifest()
    assert m is not None and m.last_compacted_l0_sst_view_id is not None
    assert f"db/compacted/{m.last_compacted_l0_sst_view_id}.sst" not in by_dir["compacted"]
    assert len(by_dir["compacted"]) == 2
    # SlateDB's own dry run deletes nothing (but writes its boundary files: see the design doc)
    before = h.list_objects()

    def d() -> Any:
        return sdb.GarbageCollectorDirectoryOptions(min_age_ms=0, dry_run=True)

    LOOP.run(
        h.binding_admin.run_gc_once(
            sdb.GarbageCollectorOptions(
                manifest_options=d(),
                wal_options=d(),
                wal_fence_options=d(),
                compacted_options=d(),
                compactions_options=d(),
                detach_options=None,
            )
        )
    )
    after_dry = h.list_objects()
    assert set(before) <= set(after_dry)
    # measured: SlateDB's "dry run" still writes: it removes expired checkpoints (a new manifest)
    # and advances the GC boundary files -- why slate_ops plans instead of calling it
    assert h.list_checkpoints("short") == []
    assert {"db/gc/manifest.boundary", "db/gc/compactions.boundary"} <= set(after_dry) - set(before)
    plan = h.gc_plan(ALL_NOW)  # again: the dry run expired the checkpoint (a manifest write)
    report = h.run_gc(plan)
    assert report.matches_plan, (report.unplanned, report.not_deleted)
    assert set(report.deleted) == plan.keys() and report.deleted
    # every row still there, for SlateDB, now and at the kept checkpoint
    assert LOOP.run(read_all(sdb, tmp_path, "db")) == expected
    assert LOOP.run(read_all(sdb, tmp_path, "db", checkpoint=keep)) == expected


def test_gc_plan_costs_four_lists_of_its_own(sdb: Any, tmp_path: Path) -> None:
    """slate_ops' side of a plan: one LIST per directory (WAL and WAL fences share one); the
    manifests and the .compactions file are read by the binding (its requests are not counted)."""
    LOOP.run(write_db(sdb, tmp_path, "db", rounds=2, keys=20))
    store = CountingStore(LocalStore(tmp_path))
    h = SlateDbAdmin("db", store)
    store.reset()
    h.gc_plan(ALL_NOW)
    assert (
        store.counts["list"] == 4 and store.total == 4
    )  # manifest, wal (both modes), compacted, compactions


def test_default_policy_plans_nothing_young(sdb: Any, tmp_path: Path) -> None:
    LOOP.run(write_db(sdb, tmp_path, "db", rounds=2, keys=20))
    h = SlateDbAdmin("db", tmp_path)
    plan = h.gc_plan()
    assert plan.deletions == ()
    report = h.run_gc(plan)
    assert report.deleted == () and report.matches_plan


def test_delete_db_dry_run_lists_and_deletes_nothing(sdb: Any, tmp_path: Path) -> None:
    LOOP.run(write_db(sdb, tmp_path, "db", rounds=1, keys=10))
    h = SlateDbAdmin("db", tmp_path)
    before = h.list_objects()
    listed = h.delete_db(confirm=False)
    assert set(listed) == set(before) and h.list_objects() == before
    h.delete_db(confirm=True)
    assert h.list_objects() == {}
    assert h.read_manifest() is None


def test_delete_db_does_not_check_live_checkpoints(sdb: Any, tmp_path: Path) -> None:
    """Measured: SlateDB's delete_db deletes a database whose checkpoint is live (an hour left) --
    why the admin handle refuses a hard destroy then, as slate_ops does for its own databases."""
    LOOP.run(write_db(sdb, tmp_path, "db", rounds=1, keys=10))
    h = SlateDbAdmin("db", tmp_path)
    h.create_checkpoint(lifetime_s=3600, name="reader")
    assert h.delete_db(confirm=True)
    assert h.list_objects() == {}


def test_clone_split_and_merge_are_read_by_slatedb(sdb: Any, tmp_path: Path) -> None:
    expected = LOOP.run(write_db(sdb, tmp_path, "src", rounds=2, keys=100, wal=False))
    src = SlateDbAdmin("src", tmp_path)
    cp, _ = src.create_checkpoint(name="split-point")
    # a plain clone at the checkpoint
    clone = SlateDbAdmin("copy", tmp_path).clone_from([CloneSource("src", cp)])
    assert [e.path for e in clone.external_dbs] == ["src"]
    assert LOOP.run(read_all(sdb, tmp_path, "copy")) == expected
    # split: two projection clones
    mid = b"k0050"
    SlateDbAdmin("low", tmp_path).clone_from([CloneSource("src", cp, end=mid)])
    SlateDbAdmin("high", tmp_path).clone_from([CloneSource("src", cp, start=mid)])
    low = LOOP.run(read_all(sdb, tmp_path, "low"))
    high = LOOP.run(read_all(sdb, tmp_path, "high"))
    assert low == {k: v for k, v in expected.items() if k < mid}
    assert high == {k: v for k, v in expected.items() if k >= mid}
    # merge: a union clone of the two shards, each at a checkpoint of its own
    lcp, _ = SlateDbAdmin("low", tmp_path).create_checkpoint()
    hcp, _ = SlateDbAdmin("high", tmp_path).create_checkpoint()
    merged = SlateDbAdmin("all", tmp_path).clone_from(
        [CloneSource("low", lcp, end=mid), CloneSource("high", hcp, start=mid)]
    )
    # measured: SlateDB records the database that owns the SSTs (src), not the shards, and the
    # shards' checkpoints are not what pins them: deleting a shard leaves the merge readable
    print(merged.external_dbs, SlateDbAdmin("low", tmp_path).read_manifest().external_dbs)  # type: ignore[union-attr]
    assert {e.path for e in merged.external_dbs} == {"src"}
    assert LOOP.run(read_all(sdb, tmp_path, "all")) == expected
    for shard in ("low", "high"):
        SlateDbAdmin(shard, tmp_path).delete_db(confirm=True)
    assert LOOP.run(read_all(sdb, tmp_path, "all")) == expected

    # the clone is a database SlateDB writes to, apart from its source
    async def put() -> None:
        db = await sdb.DbBuilder("all", local_store(sdb, tmp_path)).build()
        await db.put(b"new", b"1")
        await db.shutdown()

    LOOP.run(put())
    assert LOOP.run(read_all(sdb, tmp_path, "all"))[b"new"] == b"1"
    assert b"new" not in LOOP.run(read_all(sdb, tmp_path, "src"))


def test_overlapping_union_is_refused_by_slatedb(sdb: Any, tmp_path: Path) -> None:
    LOOP.run(write_db(sdb, tmp_path, "a", rounds=1, keys=10, wal=False))
    LOOP.run(write_db(sdb, tmp_path, "b", rounds=1, keys=10, wal=False))
    with pytest.raises(SlateDbError, match="clone") as e:
        SlateDbAdmin("ab", tmp_path).clone_from([CloneSource("a"), CloneSource("b")])
    print(e.value)
    assert SlateDbAdmin("ab", tmp_path).read_manifest() is None


def test_a_source_with_wal_data_is_refused_for_projection(sdb: Any, tmp_path: Path) -> None:
    """Measured on 0.17.0: after memtable flushes and a clean shutdown the last data WAL SST is
    still in the replay range, so SlateDB refuses a projection (a plain clone works)."""
    LOOP.run(write_db(sdb, tmp_path, "src", rounds=2, keys=20))
    m = SlateDbAdmin("src", tmp_path).read_manifest()
    assert m is not None and m.replay_after_wal_id + 1 < m.next_wal_sst_id
    with pytest.raises(SlateDbError, match="with WAL is not supported"):
        SlateDbAdmin("low", tmp_path).clone_from([CloneSource("src", end=b"k0010")])
    SlateDbAdmin("copy", tmp_path).clone_from([CloneSource("src")])
    assert len(LOOP.run(read_all(sdb, tmp_path, "copy"))) == 20


def _manifest_id(root: Path) -> int | None:
    m = SlateDbAdmin("db", root).read_manifest()
    return m.id if m else None


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_worker_processes(sdb: Any, tmp_path: Path, method: str) -> None:
    """A spawned worker uses the binding; a worker forked after the binding ran in its parent gets
    SlateDbForkError at once (measured: unguarded, it hangs on its first binding call)."""
    LOOP.run(write_db(sdb, tmp_path, "db", rounds=1, keys=5))
    mid = SlateDbAdmin("db", tmp_path).read_manifest().id  # type: ignore[union-attr]
    kind, value = in_child(method, _manifest_id, tmp_path)
    if method == "spawn":
        assert (kind, value) == ("ok", mid)
    else:
        assert kind == "SlateDbForkError" and "spawn" in value


def test_compaction_request_with_and_without_a_compactor(sdb: Any, tmp_path: Path) -> None:
    LOOP.run(write_db(sdb, tmp_path, "db", rounds=3, keys=50))
    h = SlateDbAdmin("db", tmp_path)
    # no writer, so no compactor: SlateDB leaves the request SUBMITTED
    out = h.request_compaction(timeout_s=1.0)
    assert (out.status, out.picked_up, out.sources) == ("SUBMITTED", False, 3)

    # a writer's embedded compactor (polling every 100 ms) picks the queued request up
    async def open_writer() -> Any:
        from tests.support.slatedb import fast_settings

        b = sdb.DbBuilder("db", local_store(sdb, tmp_path))
        b.with_settings(fast_settings(sdb))
        return await b.build()

    db = LOOP.run(open_writer())
    try:
        deadline = time.monotonic() + 30
        while h.read_manifest().l0 and time.monotonic() < deadline:  # type: ignore[union-attr]
            time.sleep(0.05)
        m = h.read_manifest()
        assert m is not None and not m.l0 and len(m.sorted_runs) == 1
        assert h.request_compaction().status == "NOTHING_TO_DO"
        # measured: the request left SUBMITTED is what the writer's compactor then ran
        left = LOOP.run(h.binding_admin.read_compaction(out.compaction_id, None))
        assert left is not None and left.status == sdb.CompactionStatus.COMPLETED
    finally:
        LOOP.run(db.shutdown())
    assert len(LOOP.run(read_all(sdb, tmp_path, "db"))) == 50


def test_gc_plan_takes_only_the_layouts_keys(sdb: Any, tmp_path: Path) -> None:
    """Objects in a database's directories that are not its own (stray files, names of the wrong
    shape) are never planned for deletion, and a stray name after the latest ``.compactions`` file
    does not make that file look older than the latest (keys parsed by slate_ops.layout)."""
    LOOP.run(write_db(sdb, tmp_path, "db", rounds=3, keys=100, compact=True))
    h = SlateDbAdmin("db", tmp_path)
    for c in h.list_checkpoints():
        h.delete_checkpoint(c.id)
    store = LocalStore(tmp_path)
    latest_compactions = sorted(m.key for m in store.list(own_directory("db", "compactions")))[-1]
    strays = ["db/wal/1.sst", "db/compacted/not-a-ulid.sst", "db/compactions/zz-notes"]
    for key in strays:
        store.put(key, b"")
    time.sleep(0.01)
    plan = h.gc_plan(ALL_NOW)
    planned = plan.keys()
    assert plan.deletions and not set(strays) & planned
    assert latest_compactions not in planned
    assert {d.directory for d in plan.deletions} >= {"manifest", "wal", "compacted", "compactions"}
