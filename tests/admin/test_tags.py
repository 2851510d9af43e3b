"""Tags (Paimon's tag design): never-expiring, uniquely named checkpoints, and the ``$tags`` table."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from slate_ops import Db, DbReader, admin
from slate_ops.admin.tags import TAG_PREFIX, TAGS_SCHEMA
from slate_ops.compaction import Compactor, CompactorOptions
from slate_ops.config import CheckpointOptions
from slate_ops.errors import (
    CheckpointExpiredError,
    CheckpointNotFoundError,
    CheckpointProtectedError,
    InvalidArgumentError,
    TagExistsError,
    TagNotFoundError,
)
from slate_ops.gc import GarbageCollector, GcOptions
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import MemoryStore
from slate_ops.runtime import ManualRuntime
from tests.support.engine import quiet
from tests.support.stores import snapshot

DB = "tenants/acme"
FULL = CompactorOptions(min_sources=2, target_sst_bytes=4096, max_subcompaction_bytes=1 << 20)


@pytest.fixture
def clock() -> ManualRuntime:
    return ManualRuntime(1_000_000.0)


def write(store: MemoryStore, clock: ManualRuntime, value: bytes, keys: int = 30) -> None:
    with Db.open(DB, store, quiet(l0_max_ssts=1000), clock=clock) as db:
        for i in range(keys):
            db.put(b"k%03d" % i, value + b"-%d" % i)
        db.flush_memtable()


def test_tag_of_current_manifest_is_a_named_never_expiring_checkpoint(
    acme_store: MemoryStore, clock: ManualRuntime
) -> None:
    tag = admin.create_tag(DB, acme_store, "v1.0", clock=clock)
    assert tag.name == "v1.0" and tag.manifest_id == 2 and tag.create_time_s == 1_000_000
    (checkpoint,) = admin.list_checkpoints(DB, acme_store)
    assert checkpoint.id == tag.checkpoint_id and checkpoint.name == TAG_PREFIX + "v1.0"
    assert checkpoint.expire_time_s is None and checkpoint.manifest_id == 2
    assert admin.read_manifest(DB, acme_store).id == 2


def test_tag_of_a_checkpoint_reuses_its_manifest(acme_store: MemoryStore, clock: ManualRuntime) -> None:
    source = admin.create_checkpoint(DB, acme_store, CheckpointOptions(lifetime="1h"), clock=clock)
    admin.create_checkpoint(DB, acme_store, clock=clock)  # the manifest moves on
    tag = admin.create_tag(DB, acme_store, "nightly", checkpoint=source.id, clock=clock)
    assert tag.manifest_id == source.manifest_id == 2
    assert admin.read_manifest(DB, acme_store).id == 4


@pytest.mark.parametrize("expired", [False, True])
def test_tag_of_missing_or_expired_checkpoint_is_refused(
    acme_store: MemoryStore, clock: ManualRuntime, expired: bool
) -> None:
    source_id = uuid.uuid4()
    if expired:
        source_id = admin.create_checkpoint(DB, acme_store, CheckpointOptions(lifetime="10s"), clock=clock).id
        clock.advance(10)
    before = snapshot(acme_store)
    with pytest.raises(CheckpointExpiredError if expired else CheckpointNotFoundError):
        admin.create_tag(DB, acme_store, "t", checkpoint=source_id, clock=clock)
    assert snapshot(acme_store) == before


@pytest.mark.parametrize("name", ["", "a b", "tab\there", "nl\n", "bell\x07", "x" * 201])
def test_invalid_names_are_refused(acme_store: MemoryStore, name: str) -> None:
    before = snapshot(acme_store)
    with pytest.raises(InvalidArgumentError):
        admin.create_tag(DB, acme_store, name)
    assert snapshot(acme_store) == before


def test_longest_name_is_accepted(acme_store: MemoryStore) -> None:
    assert admin.create_tag(DB, acme_store, "x" * 200).name == "x" * 200


def test_duplicate_name_is_refused_and_writes_nothing(acme_store: MemoryStore, clock: ManualRuntime) -> None:
    first = admin.create_tag(DB, acme_store, "release", clock=clock)
    before = snapshot(acme_store)
    with pytest.raises(TagExistsError, match=str(first.checkpoint_id)):
        admin.create_tag(DB, acme_store, "release", clock=clock)
    assert snapshot(acme_store) == before
    # An ordinary checkpoint with the same bare name is not a tag and does not collide.
    admin.create_checkpoint(DB, acme_store, CheckpointOptions(name="other"), clock=clock)
    admin.create_tag(DB, acme_store, "other", clock=clock)


def test_replace_swaps_the_tag_in_one_commit(acme_store: MemoryStore, clock: ManualRuntime) -> None:
    old = admin.create_tag(DB, acme_store, "release", clock=clock)
    admin.create_checkpoint(DB, acme_store, clock=clock)
    clock.advance(5)
    new = admin.create_tag(DB, acme_store, "release", replace=True, clock=clock)
    assert new.checkpoint_id != old.checkpoint_id and new.manifest_id == 4
    current = admin.read_manifest(DB, acme_store)
    assert current.id == 4  # one commit: added the new tag and removed the old one
    tags = [c for c in current.value.checkpoints if c.name == TAG_PREFIX + "release"]
    assert [c.id for c in tags] == [new.checkpoint_id]
    assert ManifestStore(acme_store, DB).read(3).value.checkpoint(old.checkpoint_id) is not None
    assert admin.list_tags(DB, acme_store).column("tag_name").to_pylist() == ["release"]


def test_replace_from_the_old_tags_own_checkpoint(acme_store: MemoryStore, clock: ManualRuntime) -> None:
    old = admin.create_tag(DB, acme_store, "release", clock=clock)
    new = admin.create_tag(DB, acme_store, "release", checkpoint=old.checkpoint_id, replace=True, clock=clock)
    assert new.manifest_id == old.manifest_id and new.checkpoint_id != old.checkpoint_id
    assert [c.id for c in admin.list_checkpoints(DB, acme_store)] == [new.checkpoint_id]


def test_delete_and_missing_delete(acme_store: MemoryStore, clock: ManualRuntime) -> None:
    tag = admin.create_tag(DB, acme_store, "gone", clock=clock)
    keep = admin.create_checkpoint(DB, acme_store, clock=clock)
    before = snapshot(acme_store)
    assert admin.delete_tag(DB, acme_store, "gone", dry_run=True) == tag
    assert snapshot(acme_store) == before
    assert admin.delete_tag(DB, acme_store, "gone", dry_run=False) == tag
    assert [c.id for c in admin.list_checkpoints(DB, acme_store)] == [keep.id]
    before = snapshot(acme_store)
    for dry_run in (False, True):
        with pytest.raises(TagNotFoundError, match="gone"):
            admin.delete_tag(DB, acme_store, "gone", dry_run=dry_run)
    assert snapshot(acme_store) == before


def test_list_tags_schema_and_values(acme_store: MemoryStore, clock: ManualRuntime) -> None:
    empty = admin.list_tags(DB, acme_store)
    assert empty.schema == TAGS_SCHEMA and empty.num_rows == 0
    write(acme_store, clock, b"a")
    first = admin.create_tag(DB, acme_store, "first", clock=clock)
    write(acme_store, clock, b"b", keys=10)
    clock.advance(60)
    second = admin.create_tag(DB, acme_store, "second", clock=clock)
    table = admin.list_tags(DB, acme_store)
    assert table.schema == TAGS_SCHEMA
    assert table.schema.field("manifest_id").type == pa.uint64()
    assert table.schema.field("create_time").type == pa.timestamp("s", tz="UTC")
    rows = table.to_pylist()
    assert [r["tag_name"] for r in rows] == ["first", "second"]
    for row, tag in zip(rows, (first, second), strict=True):
        manifest = ManifestStore(acme_store, DB).read(tag.manifest_id).value
        referenced = {v.sst_id for v in manifest.l0} | {
            v.sst_id for run in manifest.compacted for v in run.views
        }
        infos = [s.info for s in manifest.ssts if s.id in referenced]
        assert infos
        assert row["checkpoint_id"] == str(tag.checkpoint_id)
        assert row["manifest_id"] == tag.manifest_id
        assert row["create_time"] == datetime.fromtimestamp(tag.create_time_s, UTC)
        assert row["record_count"] == sum(i.num_entries for i in infos)
        assert row["bytes"] == sum(i.size_bytes for i in infos)
    assert rows[0]["record_count"] == 30 and rows[1]["record_count"] == 40


def test_tag_survives_expiry_compaction_and_gc(acme_store: MemoryStore, clock: ManualRuntime) -> None:
    write(acme_store, clock, b"old")
    tag = admin.create_tag(DB, acme_store, "keep", clock=clock)
    admin.create_checkpoint(DB, acme_store, CheckpointOptions(lifetime="10s"), clock=clock)
    write(acme_store, clock, b"new")
    write(acme_store, clock, b"newer")
    clock.advance(3600)
    report = admin.expire_checkpoints(DB, acme_store, dry_run=False, clock=clock)
    assert len(report.expired) == 1
    assert [c.id for c in admin.list_checkpoints(DB, acme_store)] == [tag.checkpoint_id]

    Compactor(DB, acme_store, FULL, clock=clock).run_once(full=True)
    clock.advance(3600)
    options = GcOptions.with_min_age(timedelta(seconds=1), allow_unsafe_min_age=True)  # 0 is refused
    before = snapshot(acme_store, DB + "/compacted/")
    GarbageCollector(DB, acme_store, options, clock=clock).run_once(dry_run=False)
    after = snapshot(acme_store, DB + "/compacted/")
    assert set(after) < set(before)  # GC did delete SSTs: the overwritten, untagged ones

    reader = DbReader.open(DB, acme_store, checkpoint_id=tag.checkpoint_id, clock=clock)
    try:
        assert dict(reader.scan()) == {b"k%03d" % i: b"old-%d" % i for i in range(30)}
    finally:
        reader.close()
    current = DbReader.open(DB, acme_store, clock=clock)
    try:
        assert current.get(b"k000") == b"newer-0"
    finally:
        current.close()
    assert admin.list_tags(DB, acme_store).column("record_count").to_pylist() == [30]

    # Deleting the tag lets GC reclaim what only the tag referenced (after min_age).
    tagged = ManifestStore(acme_store, DB).read(tag.manifest_id).value
    only_tagged = {s.id for s in tagged.ssts} - {
        s.id for s in ManifestStore(acme_store, DB).read_latest_required().value.ssts
    }
    assert only_tagged and all(DB + f"/compacted/{i}.sst" in after for i in only_tagged)
    admin.delete_tag(DB, acme_store, "keep", dry_run=False)
    for _ in range(2):  # the first run sees them unreferenced, the next one past min_age deletes them
        clock.advance(3600)
        GarbageCollector(DB, acme_store, options, clock=clock).run_once(dry_run=False)
    remaining = snapshot(acme_store, DB + "/compacted/")
    assert not any(DB + f"/compacted/{i}.sst" in remaining for i in only_tagged)
    with DbReader.open(DB, acme_store, clock=clock) as reader:
        assert reader.get(b"k000") == b"newer-0"


def test_tag_names_are_reserved_and_tags_cannot_be_given_a_lifetime() -> None:
    from slate_ops.errors import InvalidArgumentError
    from slate_ops.objstore import MemoryStore

    memory = MemoryStore()
    admin.create_db("db", memory)
    before = snapshot(memory)
    with pytest.raises(InvalidArgumentError, match="reserved for tags"):
        admin.create_checkpoint("db", memory, CheckpointOptions(name="tag:sneaky"))
    assert snapshot(memory) == before
    tag = admin.create_tag("db", memory, "keep")
    with pytest.raises(CheckpointProtectedError, match="tags never expire"):
        admin.refresh_checkpoint("db", memory, tag.checkpoint_id, timedelta(days=1))
    assert admin.list_tags("db", memory).column("tag_name").to_pylist() == ["keep"]
    (checkpoint,) = admin.list_checkpoints("db", memory)
    assert checkpoint.id == tag.checkpoint_id and checkpoint.expire_time_s is None
