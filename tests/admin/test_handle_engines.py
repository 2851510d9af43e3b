"""State, tags, expiry, restore-to-new, split and merge through the one admin handle, the same
calls on both engines (a slate_ops database written by our Db, a SlateDB one by SlateDB's own
Db): the same report types and JSON keys, each effect read back by the engine's own reader."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from slate_ops import admin
from slate_ops.admin import handle as handles
from slate_ops.admin.db import DbDetail
from slate_ops.admin.handle import DatabaseHandle, SlateDbHandle
from slate_ops.admin.history import ManifestChange
from slate_ops.admin.rescale import RescaleReport
from slate_ops.admin.shape import LsmShape
from slate_ops.admin.split_keys import SplitSuggestion
from slate_ops.admin.tags import TAGS_SCHEMA, Tag
from slate_ops.config import CheckpointOptions
from slate_ops.errors import TagExistsError, TagNotFoundError, UnsupportedOnEngineError
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import SYSTEM_RUNTIME, ManualRuntime
from tests.support.db_state import contents
from tests.support.jsonable import to_jsonable
from tests.support.writers import DB


def rows(h: DatabaseHandle, path: str) -> dict[bytes, bytes]:
    """What the engine's own reader sees at ``path``: our DbReader, or SlateDB's DbReader."""
    if h.engine.value == "slate_ops":
        return contents(h.store, path)
    sdb = pytest.importorskip("slatedb.uniffi")
    from slate_ops.engines.slatedb import LOOP
    from slate_ops.engines.slatedb.store import binding_path, binding_store
    from tests.support.slatedb import read_all

    target = binding_store(h.store)
    return LOOP.run(read_all(sdb, None, binding_path(h.store, path), store=target))


def keys_of(value: Any) -> set[str]:
    return set(to_jsonable(value))


def test_state_reports_have_one_shape(handle: DatabaseHandle) -> None:
    detail = handle.describe_detail()
    assert isinstance(detail, DbDetail) and detail.status == handle.describe()
    assert detail.ssts.sst_objects == detail.status.ssts and detail.visible_range is None
    shape = handle.shape()
    assert isinstance(shape, LsmShape) and shape.manifest_id == detail.status.manifest_id
    assert len(shape.l0) == detail.status.l0_ssts and len(shape.sorted_runs) == detail.status.sorted_runs
    history = handle.history()
    assert history and all(isinstance(c, ManifestChange) for c in history)
    assert history[0].id == detail.status.manifest_id
    assert {"l0 flush", "new writer"} <= {k for c in history for k in c.kinds}
    assert keys_of(history[0]) == {f.name for f in dataclasses.fields(ManifestChange)}
    assert len(handle.history(limit=2)) == 2


def test_tags_and_expiry_on_both_engines(handle: DatabaseHandle) -> None:
    tag = handle.create_tag("v1")
    assert isinstance(tag, Tag) and tag.name == "v1"
    table = handle.list_tags()
    assert table.schema == TAGS_SCHEMA and table.column("tag_name").to_pylist() == ["v1"]
    with pytest.raises(TagExistsError):
        handle.create_tag("v1")
    replaced = handle.create_tag("v1", replace=True)
    assert handle.list_tags().column("checkpoint_id").to_pylist() == [str(replaced.checkpoint_id)]
    assert handle.delete_tag("v1") == replaced  # dry run
    handle.delete_tag("v1", dry_run=False)
    assert handle.list_tags().num_rows == 0
    with pytest.raises(TagNotFoundError):
        handle.delete_tag("v1")

    clock = ManualRuntime(SYSTEM_RUNTIME.now())  # SlateDB stamps its expiry with the real clock
    handle = admin.open(handle.path, handle.store, clock=clock)
    short = handle.create_checkpoint(CheckpointOptions(lifetime=timedelta(seconds=1), name="short"))
    handle.create_tag("kept")
    clock.advance(3)  # slate_ops rounds an expiry up to the next second
    dry = handle.expire_checkpoints()
    assert dry.dry_run and [c.id for c in dry.expired] == [short.id]
    done = handle.expire_checkpoints(dry_run=False)
    assert [c.id for c in done.expired] == [short.id]
    assert handle.list_checkpoints("short") == [] and handle.list_tags().num_rows == 1
    assert keys_of(done) == keys_of(dry)


def test_restore_to_new_on_both_and_rollback_only_on_ours(handle: DatabaseHandle) -> None:
    before = rows(handle, DB)
    handle.create_tag("v1")
    status = handle.restore_to_new("dbs/restored", tag="v1")
    assert status.path == "dbs/restored" and status.initialized
    assert rows(handle, "dbs/restored") == before
    assert admin.open("dbs/restored", handle.store).engine is handle.engine
    if isinstance(handle, SlateDbHandle):
        with pytest.raises(UnsupportedOnEngineError, match="restore_to_new"):
            handle.rollback_to_tag("v1", dry_run=False)
    else:
        assert handle.rollback_to_tag("v1").dry_run


def test_split_and_merge_on_both_engines(handle: DatabaseHandle) -> None:
    expected = rows(handle, DB)
    suggestion = handle.explain_split_keys(2)
    assert isinstance(suggestion, SplitSuggestion)
    key = b"k0025"
    if isinstance(handle, SlateDbHandle):  # SlateDB's writer left WAL data in the replay range
        report = handle.split([key], ["dbs/low", "dbs/high"], flush_wal=True)
    else:
        report = handle.split([key], ["dbs/low", "dbs/high"])
    assert isinstance(report, RescaleReport) and report.operation == "split"
    assert rows(handle, "dbs/low") == {k: v for k, v in expected.items() if k < key}
    assert rows(handle, "dbs/high") == {k: v for k, v in expected.items() if k >= key}
    merged = handles.merge(["dbs/low", "dbs/high"], handle.store, "dbs/merged")
    assert merged.operation == "merge" and [d.path for d in merged.databases] == ["dbs/merged"]
    assert rows(handle, "dbs/merged") == expected
    assert keys_of(report) == keys_of(merged) == {f.name for f in dataclasses.fields(RescaleReport)}


def test_the_same_split_reports_the_same_key_ranges_on_both_engines(engine_store: ObjectStore) -> None:
    """slate_ops' convention on both engines: start inclusive, end EXCLUSIVE, None open. SlateDB
    records the last shard's open end as its SST's last key, inclusive; reporting that key as an
    exclusive end would tell a reader that the shard does not hold it."""
    from tests.support.writers import write_slate_ops, write_slatedb

    pytest.importorskip("slatedb.uniffi")
    write_slate_ops(engine_store, "ours/main")
    write_slatedb(engine_store, "theirs/main")
    found: dict[str, Any] = {}
    for name in ("ours", "theirs"):
        h = admin.open(f"{name}/main", engine_store)
        kw = {"flush_wal": True} if isinstance(h, SlateDbHandle) else {}
        split = h.split([b"k0025"], [f"{name}/low", f"{name}/high"], **kw)
        merged = handles.merge([f"{name}/low", f"{name}/high"], engine_store, f"{name}/merged")
        found[name] = {
            "split": [{k: d[k] for k in ("key_range",)} for d in to_jsonable(split)["databases"]],
            "merge": [d["key_range"] for d in to_jsonable(merged)["databases"]],
            "describe": {
                p: to_jsonable(admin.open(f"{name}/{p}", engine_store).describe_detail())["visible_range"]
                for p in ("low", "high", "merged")
            },
        }
        if name == "theirs":  # the last shard holds k0049 and reads it
            assert rows(h, "theirs/high")[b"k0049"] == rows(h, "theirs/main")[b"k0049"]
    assert found["theirs"] == found["ours"]
    assert found["ours"]["split"] == [
        {"key_range": {"start": None, "end": b"k0025".hex()}},
        {"key_range": {"start": b"k0025".hex(), "end": None}},
    ]
    assert found["ours"]["merge"] == [{"start": None, "end": None}]
