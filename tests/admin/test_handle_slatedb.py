"""The SlateDB handle's state, tags, expiry, clones, restore, split, merge and split keys, on
databases written by SlateDB's own Db through the binding, every effect read back WITH THE BINDING
(``Admin.list_checkpoints``, ``DbReader``)."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest

from slate_ops import admin
from slate_ops.admin import handle
from slate_ops.admin.handle import SlateDbHandle
from slate_ops.admin.history import ManifestChange
from slate_ops.admin.rescale import RescaleReport
from slate_ops.admin.tag_policy import TagPolicy
from slate_ops.admin.tags import TAGS_SCHEMA
from slate_ops.config import CheckpointOptions
from slate_ops.errors import (
    CheckpointExpiredError,
    CheckpointProtectedError,
    InvalidArgumentError,
    NonAdjacentSourcesError,
    OverlappingSourcesError,
    SlateDbWalNotFlushedError,
    TagExistsError,
    TagNotFoundError,
    TargetNotEmptyError,
    UnsupportedOnEngineError,
)
from slate_ops.objstore import LocalStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import SYSTEM_RUNTIME, ManualRuntime, Runtime

sdb = pytest.importorskip("slatedb.uniffi")

from slate_ops.engines.slatedb import LOOP  # noqa: E402
from tests.support.slatedb import local_store, read_all, write_db  # noqa: E402
from tests.support.writers import write_slate_ops  # noqa: E402

DB = "dbs/main"


def write(store: LocalStore, path: str = DB, **kw: Any) -> dict[bytes, bytes]:
    kw.setdefault("rounds", 3)
    kw.setdefault("keys", 50)
    return LOOP.run(write_db(sdb, store.root, path, **kw))


def rows(store: LocalStore, path: str, checkpoint: str | None = None) -> dict[bytes, bytes]:
    return LOOP.run(read_all(sdb, store.root, path, checkpoint))


def binding_checkpoints(store: LocalStore, path: str = DB) -> list[Any]:
    """The checkpoints SlateDB itself lists (the binding's Admin, not slate_ops' views)."""

    async def go() -> list[Any]:
        return list(await sdb.AdminBuilder(path, local_store(sdb, store.root)).build().list_checkpoints(None))

    return LOOP.run(go())


def objects(store: ObjectStore, prefix: str = "") -> dict[str, int]:
    return {m.key: m.size for m in store.list(prefix)}


def opened(store: LocalStore, path: str = DB, clock: Runtime = SYSTEM_RUNTIME) -> SlateDbHandle:
    h = admin.open(path, store, clock=clock)
    assert isinstance(h, SlateDbHandle)
    return h


# --- state ----------------------------------------------------------------------------------------


def test_describe_detail_shape_and_history(local_dir_store: LocalStore) -> None:
    write(local_dir_store, compact=True)
    h = opened(local_dir_store)
    detail = h.describe_detail()
    assert detail.status == h.describe()
    assert detail.ssts.sorted_runs == 1 and detail.ssts.sorted_run_views >= 1
    assert detail.ssts.own_ssts == detail.ssts.sst_objects and detail.ssts.external_ssts == 0
    assert detail.visible_range is None
    shape = h.shape()
    assert shape.manifest_id == detail.status.manifest_id
    (run,) = shape.sorted_runs
    assert run.first_key == b"k0000" and run.last_key == b"k0049" and run.size_bytes > 0

    history = h.history()
    assert all(isinstance(c, ManifestChange) for c in history)
    assert [c.id for c in history] == sorted((c.id for c in history), reverse=True)
    kinds = {k for c in history for k in c.kinds}
    assert {"create", "l0 flush", "compaction", "new writer"} <= kinds
    h.create_tag("v1")
    newest = h.history(limit=1)
    assert len(newest) == 1 and newest[0].kinds == ("tag added",) and "tag v1" in newest[0].details[0]


def test_clone_history_and_detail_name_the_parent(local_dir_store: LocalStore) -> None:
    write(local_dir_store)
    h = opened(local_dir_store)
    h.clone_to("dbs/copy")
    copy = opened(local_dir_store, "dbs/copy")
    first = copy.history()[-1]
    assert first.kinds == ("clone",) and DB in first.details[0]
    detail = copy.describe_detail()
    assert detail.status.external_dbs == 1 and detail.ssts.external_ssts > 0


# --- expiry ---------------------------------------------------------------------------------------


def test_expire_checkpoints_dry_run_first_and_never_tags(local_dir_store: LocalStore) -> None:
    write(local_dir_store)
    clock = ManualRuntime(SYSTEM_RUNTIME.now())  # SlateDB stamps expiry times with the real clock
    h = opened(local_dir_store, clock=clock)
    short = h.create_checkpoint(CheckpointOptions(lifetime=timedelta(seconds=1), name="short"))
    keep = h.create_checkpoint(CheckpointOptions(lifetime=timedelta(hours=1), name="keep"))
    # a tag given an expiry outside slate_ops (straight through SlateDB)
    tag_id, _ = h.db.create_checkpoint(lifetime_s=1, name="tag:odd")
    clock.advance(3)
    dry = h.expire_checkpoints()
    assert dry.dry_run and [c.id for c in dry.expired] == [short.id]
    assert {c.id for c in binding_checkpoints(local_dir_store)} >= {str(short.id), str(keep.id), tag_id}
    done = h.expire_checkpoints(dry_run=False)
    assert not done.dry_run and [c.id for c in done.expired] == [short.id]
    left = {c.id for c in binding_checkpoints(local_dir_store)}
    assert str(short.id) not in left and {str(keep.id), tag_id} <= left


# --- tags -----------------------------------------------------------------------------------------


def test_tags_create_list_delete_protected_and_read_by_slatedb(local_dir_store: LocalStore) -> None:
    expected = write(local_dir_store)
    h = opened(local_dir_store)
    tag = h.create_tag("v1")
    (cp,) = [c for c in binding_checkpoints(local_dir_store) if c.name == "tag:v1"]
    assert cp.id == str(tag.checkpoint_id) and cp.expire_time_secs is None  # no expiry
    assert rows(local_dir_store, DB, cp.id) == expected  # SlateDB reads the tagged state
    table = h.list_tags()
    assert table.schema == TAGS_SCHEMA
    assert table.column("tag_name").to_pylist() == ["v1"]
    assert table.column("checkpoint_id").to_pylist() == [str(tag.checkpoint_id)]
    assert table.column("bytes").to_pylist()[0] > 0

    before = objects(local_dir_store)
    with pytest.raises(TagExistsError, match="already exists"):
        h.create_tag("v1")
    with pytest.raises(CheckpointProtectedError):
        h.delete_checkpoint(tag.checkpoint_id, dry_run=False)
    with pytest.raises(CheckpointProtectedError):
        h.refresh_checkpoint(tag.checkpoint_id, timedelta(days=1))
    assert objects(local_dir_store) == before  # refused: nothing written

    replaced = h.create_tag("v1", replace=True)
    assert replaced.checkpoint_id != tag.checkpoint_id
    assert [c.id for c in binding_checkpoints(local_dir_store) if c.name == "tag:v1"] == [
        str(replaced.checkpoint_id)
    ]

    assert h.delete_tag("v1").name == "v1"  # dry run
    assert [c.name for c in binding_checkpoints(local_dir_store)] == ["tag:v1"]
    h.delete_tag("v1", dry_run=False)
    assert binding_checkpoints(local_dir_store) == []
    with pytest.raises(TagNotFoundError):
        h.delete_tag("v1")


def test_tag_from_a_checkpoint_and_an_expired_source(local_dir_store: LocalStore) -> None:
    write(local_dir_store)
    clock = ManualRuntime(SYSTEM_RUNTIME.now())  # SlateDB stamps expiry times with the real clock
    h = opened(local_dir_store, clock=clock)
    cp = h.create_checkpoint(CheckpointOptions(lifetime=timedelta(seconds=1), name="src"))
    tagged = h.create_tag("at-src", checkpoint=cp.id)
    assert tagged.manifest_id == cp.manifest_id
    clock.advance(3)
    with pytest.raises(CheckpointExpiredError):
        h.create_tag("late", checkpoint=cp.id)


def test_a_duplicate_left_by_a_racer_is_invisible_and_resolved(local_dir_store: LocalStore) -> None:
    """SlateDB keeps names neither unique nor protected: a second ``tag:v1`` checkpoint written
    straight through the binding (a racer that died between its create and its check) does not
    show; the first committed is the tag; delete_tag removes both."""
    write(local_dir_store)
    h = opened(local_dir_store)
    tag = h.create_tag("v1")
    time.sleep(1.1)  # a later create_time: the racer's checkpoint is the newer one
    dup, _ = h.db.create_checkpoint(name="tag:v1")
    assert h.list_tags().column("checkpoint_id").to_pylist() == [str(tag.checkpoint_id)]
    with pytest.raises(TagExistsError):
        h.create_tag("v1")
    assert h.delete_tag("v1").checkpoint_id == tag.checkpoint_id
    h.delete_tag("v1", dry_run=False)
    assert not [c for c in binding_checkpoints(local_dir_store) if c.id in (dup, str(tag.checkpoint_id))]


@pytest.mark.parametrize("replace", [False, True])
def test_racing_tag_creations_leave_one_tag(local_dir_store: LocalStore, replace: bool) -> None:
    """Eight handles create the same tag at once (SlateDB commits each checkpoint through its own
    manifest CAS): exactly one survives in SlateDB's own listing; without ``replace`` every other
    caller gets TagExistsError, with ``replace`` the survivor is one caller's returned tag."""
    write(local_dir_store)
    if replace:
        opened(local_dir_store).create_tag("v1")
    barrier = threading.Barrier(8)
    results: list[object] = []
    lock = threading.Lock()

    def racer() -> None:
        h = opened(local_dir_store)
        barrier.wait()
        try:
            out: object = h.create_tag("v1", replace=replace)
        except TagExistsError as e:
            out = e
        with lock:
            results.append(out)

    threads = [threading.Thread(target=racer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    (survivor,) = [c for c in binding_checkpoints(local_dir_store) if c.name == "tag:v1"]
    winners = [r for r in results if not isinstance(r, Exception)]
    assert len(results) == 8
    assert str(survivor.id) in {str(w.checkpoint_id) for w in winners}  # type: ignore[attr-defined]
    if not replace:
        assert len(winners) == 1
        # the race is real: losers passed the name check, created a duplicate and removed it
        # (measured: all 7 of them, in every trial)
        assert any("concurrently" in str(r) for r in results)


def test_tag_policy_creates_and_retires_as_ours(local_dir_store: LocalStore) -> None:
    write(local_dir_store)
    day = 86_400
    clock = ManualRuntime(20_000 * day + 3600)
    h = SlateDbHandle(DB, local_dir_store, clock=clock)
    policy = TagPolicy(num_retained_max=2)
    for _ in range(3):
        dry = h.apply_tag_policy(policy)
        assert dry.dry_run and dry.created is not None
        assert not [c for c in binding_checkpoints(local_dir_store) if c.name == "tag:" + dry.due_tag]
        done = h.apply_tag_policy(policy, dry_run=False)
        assert done.created is not None and done.created.name == dry.due_tag
        assert [d.tag.name for d in done.deleted] == [d.tag.name for d in dry.deleted]
        assert h.apply_tag_policy(policy, dry_run=False).created is None  # idempotent
        clock.advance(day)
    names = sorted(c.name for c in binding_checkpoints(local_dir_store))
    assert names == ["tag:auto-2024-10-05", "tag:auto-2024-10-06"]
    assert done.deleted[0].reason == "num_retained_max"


def test_rollback_is_refused_and_names_restore_to_new(local_dir_store: LocalStore) -> None:
    write(local_dir_store)
    h = opened(local_dir_store)
    h.create_tag("v1")
    before = objects(local_dir_store)
    with pytest.raises(UnsupportedOnEngineError, match="restore_to_new"):
        h.rollback_to_tag("v1", dry_run=False)
    assert objects(local_dir_store) == before


# --- clones and restore ---------------------------------------------------------------------------


def test_clone_and_restore_to_new_are_read_by_slatedb(local_dir_store: LocalStore) -> None:
    first = write(local_dir_store, rounds=1)
    h = opened(local_dir_store)
    h.create_tag("v1")
    cp = h.create_checkpoint(CheckpointOptions(lifetime=timedelta(hours=1), name="before"))
    later = write(local_dir_store, rounds=2)  # overwrites every key
    assert later != first

    status = h.clone_to("dbs/now")
    assert status.path == "dbs/now" and status.initialized and status.external_dbs == 1
    assert rows(local_dir_store, "dbs/now") == later
    assert h.restore_to_new("dbs/at-tag", tag="v1").initialized
    assert rows(local_dir_store, "dbs/at-tag") == first
    h.restore_to_new("dbs/at-cp", checkpoint=cp.id)
    assert rows(local_dir_store, "dbs/at-cp") == first
    assert rows(local_dir_store, DB) == later  # the source is unchanged


def test_clone_refusals_touch_nothing(local_dir_store: LocalStore) -> None:
    write(local_dir_store)
    write(local_dir_store, "dbs/other", rounds=1)
    clock = ManualRuntime(SYSTEM_RUNTIME.now())  # SlateDB stamps expiry times with the real clock
    h = opened(local_dir_store, clock=clock)
    (local_dir_store.root / "dbs/foreign").mkdir(parents=True)
    (local_dir_store.root / "dbs/foreign/notes.txt").write_text("not a database")
    write_slate_ops(local_dir_store, "dbs/ours")  # a slate_ops database: not SlateDB's, refused as well
    short = h.create_checkpoint(CheckpointOptions(lifetime=timedelta(seconds=1)))
    clock.advance(3)
    before = objects(local_dir_store)
    for call, error in (
        (lambda: h.clone_to("dbs/other"), TargetNotEmptyError),
        (lambda: h.clone_to("dbs/foreign"), TargetNotEmptyError),
        (lambda: h.clone_to("dbs/ours"), TargetNotEmptyError),
        (lambda: h.clone_to(DB), InvalidArgumentError),
        (lambda: h.clone_to("dbs/main/inner"), InvalidArgumentError),
        (lambda: h.clone_to("dbs/new", checkpoint=short.id), CheckpointExpiredError),
        (lambda: h.restore_to_new("dbs/new", tag="missing"), TagNotFoundError),
        (lambda: h.restore_to_new("dbs/new"), InvalidArgumentError),
    ):
        with pytest.raises(error):
            call()
        assert objects(local_dir_store) == before


# --- split and merge ------------------------------------------------------------------------------


def test_split_refuses_wal_data_then_flush_wal_splits(local_dir_store: LocalStore) -> None:
    expected = write(local_dir_store)  # WAL on: SlateDB leaves the last data WAL SST in the replay range
    h = opened(local_dir_store)
    before = objects(local_dir_store)
    with pytest.raises(SlateDbWalNotFlushedError, match="flush_wal=True") as refused:
        h.split([b"k0020"], ["dbs/low", "dbs/high"])
    assert refused.value.wal_ids
    assert objects(local_dir_store) == before  # nothing written
    report = h.split([b"k0020"], ["dbs/low", "dbs/high"], flush_wal=True)
    assert isinstance(report, RescaleReport) and report.operation == "split" and report.created
    assert [d.path for d in report.databases] == ["dbs/low", "dbs/high"]
    low, high = rows(local_dir_store, "dbs/low"), rows(local_dir_store, "dbs/high")
    assert low == {k: v for k, v in expected.items() if k < b"k0020"}
    assert high == {k: v for k, v in expected.items() if k >= b"k0020"}
    assert rows(local_dir_store, DB) == expected  # the flush changed no row
    assert report.databases[0].key_range is not None and report.databases[0].key_range.end == b"k0020"
    assert opened(local_dir_store, "dbs/low").describe_detail().visible_range.end == b"k0020"  # type: ignore[union-attr]


def test_split_refusals_touch_nothing(local_dir_store: LocalStore) -> None:
    write(local_dir_store, wal=False)
    write(local_dir_store, "dbs/taken", rounds=1)
    h = opened(local_dir_store)
    before = objects(local_dir_store)
    for keys, targets, error in (
        ([b"k2", b"k1"], ["a", "b", "c"], InvalidArgumentError),
        ([b"k1", b"k1"], ["a", "b", "c"], InvalidArgumentError),
        ([b"k1"], ["a", "b", "c"], InvalidArgumentError),
        ([], ["a"], InvalidArgumentError),
        ([b"k1"], ["a", "a"], InvalidArgumentError),
        ([b"k1"], ["dbs/new", "dbs/taken"], TargetNotEmptyError),
    ):
        with pytest.raises(error):
            h.split(keys, targets)
        assert objects(local_dir_store) == before


def test_merge_of_shards_is_read_by_slatedb_and_refusals_touch_nothing(local_dir_store: LocalStore) -> None:
    expected = write(local_dir_store, wal=False)
    h = opened(local_dir_store)
    h.split([b"k0015", b"k0030"], ["dbs/s1", "dbs/s2", "dbs/s3"])
    s1 = opened(local_dir_store, "dbs/s1")
    before = objects(local_dir_store)
    for call, error in (
        (lambda: s1.merge_with(["dbs/s3"], "dbs/gap"), NonAdjacentSourcesError),
        (lambda: s1.merge_with([DB], "dbs/overlap"), OverlappingSourcesError),
        (lambda: s1.merge_with(["dbs/s2"], "dbs/s2"), InvalidArgumentError),  # a source
        (lambda: s1.merge_with(["dbs/s2"], DB), TargetNotEmptyError),
    ):
        with pytest.raises(error):
            call()
        assert objects(local_dir_store) == before
    report = handle.merge(["dbs/s1", "dbs/s2"], local_dir_store, "dbs/low")  # detects SlateDB
    assert report.operation == "merge" and set(report.source_checkpoints) == {"dbs/s1", "dbs/s2"}
    assert rows(local_dir_store, "dbs/low") == {k: v for k, v in expected.items() if k < b"k0030"}
    whole = opened(local_dir_store, "dbs/low").merge_with(["dbs/s3"], "dbs/all")
    assert whole.databases[0].path == "dbs/all"
    assert rows(local_dir_store, "dbs/all") == expected


def test_merge_refuses_wal_data_of_a_source(local_dir_store: LocalStore) -> None:
    write(local_dir_store, "dbs/a", keys=10)
    LOOP.run(_write_keys(local_dir_store, "dbs/b", [b"z%03d" % i for i in range(10)]))
    a = opened(local_dir_store, "dbs/a")
    before = objects(local_dir_store)
    with pytest.raises(SlateDbWalNotFlushedError):
        a.merge_with(["dbs/b"], "dbs/ab")
    assert objects(local_dir_store) == before
    a.merge_with(["dbs/b"], "dbs/ab", flush_wal=True)
    got = rows(local_dir_store, "dbs/ab")
    assert len(got) == 20 and got == {**rows(local_dir_store, "dbs/a"), **rows(local_dir_store, "dbs/b")}


async def _write_keys(store: LocalStore, path: str, keys: list[bytes]) -> None:
    db = await sdb.DbBuilder(path, local_store(sdb, store.root)).build()
    for k in keys:
        await db.put(k, b"v")
    await db.flush_with_options(sdb.FlushOptions(flush_type=sdb.FlushType.MEM_TABLE))
    await db.shutdown()


# --- split keys -----------------------------------------------------------------------------------


def test_split_keys_from_the_manifest_sst_ranges(local_dir_store: LocalStore) -> None:
    write(local_dir_store, rounds=1, keys=10, wal=False)
    for start in (10, 20, 30):  # L0 SSTs of disjoint key ranges
        LOOP.run(_write_keys(local_dir_store, DB, [b"k%04d" % i for i in range(start, start + 10)]))
    h = opened(local_dir_store)
    keys = h.suggest_split_keys(4)
    assert keys == [b"k0010", b"k0020", b"k0030"]
    cp = h.create_checkpoint(CheckpointOptions(lifetime=timedelta(hours=1)))
    assert h.suggest_split_keys(4, checkpoint=cp.id) == keys
    short = h.explain_split_keys(8)
    assert len(short.keys) == 3 and short.reason is not None and "SST" in short.reason
    assert h.explain_split_keys(1).keys == [] and h.explain_split_keys(1).reason is None
    with pytest.raises(InvalidArgumentError):
        h.suggest_split_keys(0)
    with pytest.raises(Exception, match=str(uuid.UUID(int=1))):
        h.suggest_split_keys(2, checkpoint=uuid.UUID(int=1))


def test_flush_wal_empties_the_replay_range_and_keeps_every_row(local_dir_store: LocalStore) -> None:
    """Measured fix, as its own call: after flush_wal() SlateDB accepts a projection of the
    database (no WAL data left in its replay range) and reads every row."""
    expected = write(local_dir_store)
    h = opened(local_dir_store)
    from slate_ops.engines.slatedb.clones import wal_data_ids

    before = h.db.read_manifest()
    assert before is not None and wal_data_ids(h.db, before)
    h.flush_wal()
    after = h.db.read_manifest()
    assert after is not None and wal_data_ids(h.db, after) == []
    assert rows(local_dir_store, DB) == expected
    h.split([b"k0010"], ["dbs/a", "dbs/b"])
    assert {**rows(local_dir_store, "dbs/a"), **rows(local_dir_store, "dbs/b")} == expected
