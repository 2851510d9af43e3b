"""The one admin handle (slate_ops.admin.open) over both engines: the same calls, the same report
shapes, on a slate_ops database written by our Db and on a SlateDB database written by SlateDB's
own Db (through the binding; those cases skip without it)."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from slate_ops import admin
from slate_ops.admin.handle import DatabaseHandle, SlateDbHandle, SlateOpsHandle
from slate_ops.admin.tags import create_tag
from slate_ops.config import CheckpointCreateResult, CheckpointOptions
from slate_ops.engines import Engine
from slate_ops.errors import (
    CheckpointExpiredError,
    CheckpointNotFoundError,
    CheckpointProtectedError,
    DbNotFoundError,
    InvalidArgumentError,
    InvalidDeletionError,
    SlateDbManifestError,
    UnsupportedOnEngineError,
)
from slate_ops.gc import GcOptions, GcReport
from slate_ops.manifest.model import Checkpoint
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import SYSTEM_RUNTIME, ManualRuntime
from tests.support.jsonable import to_jsonable
from tests.support.writers import DB, write_slate_ops, write_slatedb

# Young enough that what the writers just left is garbage (tests only).
FAST_GC = GcOptions.with_min_age(timedelta(milliseconds=1), allow_unsafe_min_age=True)


def objects(store: ObjectStore, path: str = DB) -> dict[str, int]:
    return {m.key: m.size for m in store.list(f"{path}/")}


def field_names(value: Any) -> list[str]:
    return [f.name for f in dataclasses.fields(value)]


def test_open_detects_the_engine_and_can_be_forced(
    engine_name: str, handle: DatabaseHandle, engine_store: ObjectStore
) -> None:
    assert isinstance(handle, DatabaseHandle)
    assert handle.engine is Engine(engine_name)
    assert type(handle) is (SlateOpsHandle if engine_name == "slate_ops" else SlateDbHandle)
    assert handle.path == DB
    forced = admin.open(DB, engine_store, engine_name)
    assert type(forced) is type(handle) and forced.describe() == handle.describe()
    with pytest.raises(InvalidArgumentError, match="engine 'rocksdb'"):
        admin.open(DB, engine_store, "rocksdb")
    with pytest.raises(DbNotFoundError):
        admin.open("dbs/missing", engine_store)


def test_describe_is_a_db_status(engine_name: str, handle: DatabaseHandle) -> None:
    status = handle.describe()
    assert isinstance(status, admin.DbStatus)
    assert status.path == DB and status.manifest_id > 0 and status.initialized
    assert status.destroyed_at_s is None
    assert status.ssts > 0 and status.sst_bytes > 0
    assert status.l0_ssts + status.sorted_runs > 0
    if engine_name == "slatedb":
        assert status.sorted_runs == 1  # the compaction's run
    assert set(to_jsonable(status)) == set(field_names(admin.DbStatus))


def test_checkpoints_create_list_refresh_delete(handle: DatabaseHandle) -> None:
    created = handle.create_checkpoint(CheckpointOptions(lifetime=timedelta(hours=1), name="nightly"))
    assert isinstance(created, CheckpointCreateResult)
    (listed,) = handle.list_checkpoints("nightly")
    assert isinstance(listed, Checkpoint)
    assert listed.id == created.id and listed.manifest_id == created.manifest_id
    assert listed.expires_at is not None and listed.expires_at > time.time() + 3000
    from_source = handle.create_checkpoint(CheckpointOptions(source=created.id, name="copy"))
    assert from_source.manifest_id == created.manifest_id

    refreshed = handle.refresh_checkpoint(created.id, timedelta(hours=2))
    assert refreshed.expires_at is not None and refreshed.expires_at > time.time() + 6000
    assert handle.refresh_checkpoint(created.id, None).expires_at is None  # never expires

    dry = handle.delete_checkpoint(created.id)  # the default is a dry run
    assert dry.id == created.id and handle.list_checkpoints("nightly")
    handle.delete_checkpoint(created.id, dry_run=False)
    assert handle.list_checkpoints("nightly") == []
    with pytest.raises(CheckpointNotFoundError):
        handle.delete_checkpoint(created.id)
    with pytest.raises(CheckpointNotFoundError):
        handle.refresh_checkpoint(uuid.uuid4(), None)


def test_expired_checkpoints_are_not_refreshed(handle: DatabaseHandle) -> None:
    clock = ManualRuntime(SYSTEM_RUNTIME.now())  # SlateDB stamps its expiry with the real clock
    handle = admin.open(handle.path, handle.store, clock=clock)
    short = handle.create_checkpoint(CheckpointOptions(lifetime=timedelta(seconds=1), name="short"))
    clock.advance(3)  # slate_ops rounds an expiry up to the next second
    with pytest.raises(CheckpointExpiredError):
        handle.refresh_checkpoint(short.id, timedelta(hours=1))
    assert handle.describe().expired_checkpoints == 1


@pytest.mark.parametrize("name", ["tag:v1", "slate_ops/clone:x"])
def test_reserved_names_are_refused(handle: DatabaseHandle, name: str) -> None:
    before = handle.describe().manifest_id
    with pytest.raises(InvalidArgumentError, match="reserved"):
        handle.create_checkpoint(CheckpointOptions(name=name))
    assert handle.describe().manifest_id == before


def test_tags_are_protected(engine_name: str, handle: DatabaseHandle, engine_store: ObjectStore) -> None:
    """A tag (a checkpoint named ``tag:<name>``, never expiring) cannot be deleted or given an
    expiry through the checkpoint calls, on either engine; SlateDB itself would allow both."""
    if engine_name == "slate_ops":
        tag_id = create_tag(DB, engine_store, "v1").checkpoint_id
    else:
        from slate_ops.engines.slatedb import SlateDbAdmin as EngineHandle

        tag_id = uuid.UUID(EngineHandle(DB, engine_store).create_checkpoint(name="tag:v1")[0])
    before = handle.describe().manifest_id
    with pytest.raises(CheckpointProtectedError, match="tag 'v1'"):
        handle.delete_checkpoint(tag_id, dry_run=False)
    with pytest.raises(CheckpointProtectedError, match="tag 'v1'"):
        handle.refresh_checkpoint(tag_id, timedelta(days=1))
    assert handle.describe().manifest_id == before
    assert [c.id for c in handle.list_checkpoints("tag:v1")] == [tag_id]


def test_gc_plan_then_run_report_the_same_shape(
    engine_name: str, handle: DatabaseHandle, engine_store: ObjectStore
) -> None:
    time.sleep(0.05)  # everything the writer left is older than FAST_GC's 1 ms
    before = objects(engine_store)
    plan = handle.gc_plan(FAST_GC)
    assert isinstance(plan, GcReport) and plan.dry_run and plan.ok
    assert objects(engine_store) == before  # the plan writes nothing, on SlateDB too
    planned = plan.deleted_keys()
    assert planned and planned <= set(before)
    assert plan.resource("manifest") is not None and plan.resource("manifest").count > 0  # type: ignore[union-attr]
    assert {r.resource for r in plan.resources} <= {"manifest", "wal", "compacted", "compactions"}
    if engine_name == "slatedb":
        assert plan.resource("compacted").count > 0  # type: ignore[union-attr]  # the L0s the compaction replaced
    run = handle.run_gc(FAST_GC, dry_run=False)
    assert isinstance(run, GcReport) and not run.dry_run and run.ok
    assert run.deleted_keys() == planned
    assert not (planned & set(objects(engine_store)))
    assert set(to_jsonable(run)) == set(to_jsonable(plan)) == set(field_names(GcReport))


def test_destroy_dry_run_lists_and_changes_nothing(
    engine_name: str, handle: DatabaseHandle, engine_store: ObjectStore
) -> None:
    before = objects(engine_store)
    report = handle.destroy(soft=False)
    assert isinstance(report, admin.DestroyReport) and report.dry_run and not report.soft
    assert objects(engine_store) == before
    # every object is deleted or kept (slate_ops' hard destroy keeps its tombstone, fence and
    # marker, and also lists the manifests it writes on the way and deletes)
    assert report.deleted and set(before) <= set(report.deleted) | set(report.kept)
    if engine_name == "slatedb":
        assert set(report.deleted) == set(before)  # delete_db deletes everything under the path
        with pytest.raises(UnsupportedOnEngineError, match="soft destroy"):
            handle.destroy()
        assert objects(engine_store) == before
    done = handle.destroy(soft=False, dry_run=False)
    # SlateDB's real run also reports its `.deleting` marker (written first, deleted last)
    assert set(report.deleted) <= set(done.deleted) <= set(report.deleted) | {f"{DB}/.deleting"}
    # what is left is what the report says it keeps, besides slate_ops' GC boundary files
    # (never deleted, not listed in `kept`: tests/admin/test_destroy.py's kept_objects)
    assert {k for k in objects(engine_store) if not k.endswith(".boundary")} == set(done.kept)
    assert set(to_jsonable(done)) == set(to_jsonable(report)) == set(field_names(admin.DestroyReport))


def test_a_store_holding_both_engines(engine_store: ObjectStore) -> None:
    """One store, one database of each engine: open() picks the right handle for each, and the
    reports of the same calls have the same JSON keys."""
    write_slate_ops(engine_store, "dbs/ours")
    write_slatedb(engine_store, "dbs/theirs")
    ours, theirs = admin.open("dbs/ours", engine_store), admin.open("dbs/theirs", engine_store)
    assert (ours.engine, theirs.engine) == (Engine.SLATE_OPS, Engine.SLATEDB)
    calls: tuple[Callable[[DatabaseHandle], Any], ...] = (
        lambda h: h.describe(),
        lambda h: h.gc_plan(FAST_GC),
        lambda h: h.destroy(soft=False),
        lambda h: (h.create_checkpoint(CheckpointOptions(name="x")), h.list_checkpoints("x"))[1],
    )
    for call in calls:
        a, b = to_jsonable(call(ours)), to_jsonable(call(theirs))
        if isinstance(a, list):
            a, b = a[0], b[0]
        assert set(a) == set(b)


def test_a_wrong_forced_engine_fails_safe(engine_store: ObjectStore) -> None:
    """A forced engine is not checked (open reads nothing), but the wrong one refuses on the first
    call and changes nothing: ours names SlateDB, the binding cannot read our manifest."""
    pytest.importorskip("slatedb.uniffi")
    from slate_ops.errors import SlateDbError

    write_slate_ops(engine_store, "dbs/ours")
    write_slatedb(engine_store, "dbs/theirs")
    for path, forced, error in (
        ("dbs/ours", "slatedb", SlateDbError),
        ("dbs/theirs", "slate_ops", SlateDbManifestError),
    ):
        before = objects(engine_store, path)
        h = admin.open(path, engine_store, forced)
        calls: tuple[Callable[[DatabaseHandle], Any], ...] = (
            lambda d: d.describe(),
            lambda d: d.run_gc(dry_run=False),
            lambda d: d.destroy(soft=False, dry_run=False),
        )
        for call in calls:
            with pytest.raises(error):
                call(h)
        assert objects(engine_store, path) == before


def test_hard_destroy_is_refused_while_a_checkpoint_is_live(
    handle: DatabaseHandle, engine_store: ObjectStore
) -> None:
    """slate_ops' rule on both engines: no hard destroy while an unexpired checkpoint needs the data."""
    handle.create_checkpoint(CheckpointOptions(lifetime=timedelta(hours=1), name="reader"))
    before = objects(engine_store)
    for dry_run in (True, False):
        with pytest.raises(InvalidDeletionError, match="unexpired checkpoint"):
            handle.destroy(soft=False, dry_run=dry_run)
    assert objects(engine_store) == before
