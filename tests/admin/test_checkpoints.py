from __future__ import annotations

import threading
import uuid

import pytest

from slate_ops import admin
from slate_ops.config import CheckpointOptions
from slate_ops.errors import (
    CheckpointExpiredError,
    CheckpointNotFoundError,
    DbAlreadyExistsError,
    DbDestroyedError,
    DbNotFoundError,
    DbNotInitializedError,
)
from slate_ops.manifest.model import Manifest
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import MemoryStore, ObjectStore
from slate_ops.runtime import ManualRuntime
from tests.support.stores import snapshot

DB = "tenants/acme"


@pytest.fixture
def clock() -> ManualRuntime:
    return ManualRuntime(1_000_000.0)


def test_create_db_writes_initialized_manifest_one() -> None:
    memory = MemoryStore()
    created = admin.create_db("/db/", memory)
    assert created.id == 1 and created.value.initialized
    assert [m.key for m in memory.list()] == ["db/manifest/00000000000000000001.manifest"]
    with pytest.raises(DbAlreadyExistsError, match=r"memory://.*db"):
        admin.create_db("db", memory)
    assert admin.create_db("db", memory, exist_ok=True).id == 1


def test_checkpoint_of_current_manifest_pins_the_version_being_written(
    acme_store: MemoryStore, clock: ManualRuntime
) -> None:
    result = admin.create_checkpoint(
        DB, acme_store, CheckpointOptions(lifetime="1h", name="nightly"), clock=clock
    )
    assert result.manifest_id == 2
    current = admin.read_manifest(DB, acme_store)
    assert current.id == 2
    (checkpoint,) = current.value.checkpoints
    assert checkpoint.id == result.id and checkpoint.manifest_id == 2 and checkpoint.name == "nightly"
    assert checkpoint.create_time_s == 1_000_000 and checkpoint.expire_time_s == 1_003_600


def test_checkpoint_from_source_reuses_its_manifest(acme_store: MemoryStore, clock: ManualRuntime) -> None:
    source = admin.create_checkpoint(DB, acme_store, clock=clock)
    admin.create_checkpoint(DB, acme_store, clock=clock)  # the manifest moves on
    derived = admin.create_checkpoint(DB, acme_store, CheckpointOptions(source=source.id), clock=clock)
    assert derived.manifest_id == source.manifest_id == 2
    assert admin.read_manifest(DB, acme_store).id == 4


@pytest.mark.parametrize("expired", [False, True])
def test_missing_or_expired_source_is_refused_and_touches_nothing(
    acme_store: MemoryStore, clock: ManualRuntime, expired: bool
) -> None:
    source_id = uuid.uuid4()
    if expired:
        source_id = admin.create_checkpoint(DB, acme_store, CheckpointOptions(lifetime="10s"), clock=clock).id
        clock.advance(10)
    before = snapshot(acme_store)
    error = CheckpointExpiredError if expired else CheckpointNotFoundError
    with pytest.raises(error, match=str(source_id)):
        admin.create_checkpoint(DB, acme_store, CheckpointOptions(source=source_id), clock=clock)
    assert snapshot(acme_store) == before


def test_uninitialized_and_destroyed_databases_are_refused(clock: ManualRuntime) -> None:
    memory = MemoryStore()
    ManifestStore(memory, "clone").create_initial(Manifest(initialized=False))
    ManifestStore(memory, "gone").create_initial(Manifest(destroyed_at_s=5))
    before = snapshot(memory)
    with pytest.raises(DbNotInitializedError, match="clone"):
        admin.create_checkpoint("clone", memory, clock=clock)
    with pytest.raises(DbDestroyedError, match="gone"):
        admin.create_checkpoint("gone", memory, clock=clock)
    with pytest.raises(DbNotFoundError, match="nothing-here"):
        admin.create_checkpoint("nothing-here", memory, clock=clock)
    assert snapshot(memory) == before


def test_refresh_sets_expiry_from_now(acme_store: MemoryStore, clock: ManualRuntime) -> None:
    from datetime import timedelta

    created = admin.create_checkpoint(DB, acme_store, CheckpointOptions(lifetime="1min"), clock=clock)
    clock.advance(30)
    refreshed = admin.refresh_checkpoint(DB, acme_store, created.id, timedelta(minutes=10), clock=clock)
    assert refreshed.expire_time_s == 1_000_030 + 600
    assert refreshed.manifest_id == created.manifest_id
    forever = admin.refresh_checkpoint(DB, acme_store, created.id, None, clock=clock)
    assert forever.expire_time_s is None
    assert admin.list_checkpoints(DB, acme_store)[0].expire_time_s is None


def test_refresh_of_expired_or_missing_checkpoint_is_refused(
    acme_store: MemoryStore, clock: ManualRuntime
) -> None:
    created = admin.create_checkpoint(DB, acme_store, CheckpointOptions(lifetime="5s"), clock=clock)
    clock.advance(5)
    before = snapshot(acme_store)
    with pytest.raises(CheckpointExpiredError):
        admin.refresh_checkpoint(DB, acme_store, created.id, None, clock=clock)
    with pytest.raises(CheckpointNotFoundError):
        admin.refresh_checkpoint(DB, acme_store, uuid.uuid4(), None, clock=clock)
    assert snapshot(acme_store) == before


def test_delete_and_list_by_name(acme_store: MemoryStore, clock: ManualRuntime) -> None:
    a = admin.create_checkpoint(DB, acme_store, CheckpointOptions(name="daily"), clock=clock)
    b = admin.create_checkpoint(DB, acme_store, CheckpointOptions(name="daily"), clock=clock)
    admin.create_checkpoint(DB, acme_store, CheckpointOptions(name="other"), clock=clock)
    assert {c.id for c in admin.list_checkpoints(DB, acme_store, "daily")} == {a.id, b.id}
    deleted = admin.delete_checkpoint(DB, acme_store, a.id, dry_run=False)
    assert deleted.id == a.id
    assert {c.id for c in admin.list_checkpoints(DB, acme_store, "daily")} == {b.id}
    before = snapshot(acme_store)
    with pytest.raises(CheckpointNotFoundError):
        admin.delete_checkpoint(DB, acme_store, a.id, dry_run=False)
    assert snapshot(acme_store) == before


def test_expiry_dry_run_reports_exactly_what_a_real_run_removes(
    acme_store: MemoryStore, clock: ManualRuntime
) -> None:
    short = admin.create_checkpoint(DB, acme_store, CheckpointOptions(lifetime="10s"), clock=clock)
    long = admin.create_checkpoint(DB, acme_store, CheckpointOptions(lifetime="1day"), clock=clock)
    forever = admin.create_checkpoint(DB, acme_store, clock=clock)
    clock.advance(11)
    before = snapshot(acme_store)
    dry = admin.expire_checkpoints(DB, acme_store, clock=clock)
    assert dry.dry_run and snapshot(acme_store) == before
    real = admin.expire_checkpoints(DB, acme_store, dry_run=False, clock=clock)
    assert [c.id for c in dry.expired] == [c.id for c in real.expired] == [short.id]
    assert {c.id for c in admin.list_checkpoints(DB, acme_store)} == {long.id, forever.id}
    again = admin.expire_checkpoints(DB, acme_store, dry_run=False, clock=clock)
    assert again.expired == () and snapshot(acme_store) != before
    assert again.manifest_id == real.manifest_id  # nothing to do commits nothing


def test_concurrent_checkpoint_creation_loses_nothing(acme_store: MemoryStore) -> None:
    created: list[uuid.UUID] = []
    lock = threading.Lock()

    def create() -> None:
        for _ in range(5):
            result = admin.create_checkpoint(DB, acme_store)
            with lock:
                created.append(result.id)

    threads = [threading.Thread(target=create) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {c.id for c in admin.list_checkpoints(DB, acme_store)} == set(created)
    assert len(created) == 30
    # each checkpoint pins the manifest version that first contained it
    for checkpoint in admin.list_checkpoints(DB, acme_store):
        pinned = admin.read_manifest(DB, acme_store, checkpoint.manifest_id).value
        assert checkpoint.id in {c.id for c in pinned.checkpoints}


def test_checkpoint_round_trip_on_every_store(acme_store: ObjectStore) -> None:
    """memory, local and S3 (moto on loopback): the same commits through real conditional puts."""
    clock = ManualRuntime(5_000.0)
    admin.create_db("db", acme_store)
    kept = admin.create_checkpoint("db", acme_store, CheckpointOptions(name="keep"), clock=clock)
    gone = admin.create_checkpoint("db", acme_store, CheckpointOptions(lifetime="1s"), clock=clock)
    clock.advance(2)
    report = admin.expire_checkpoints("db", acme_store, dry_run=False, clock=clock)
    assert [c.id for c in report.expired] == [gone.id]
    assert [c.id for c in admin.list_checkpoints("db", acme_store)] == [kept.id]
    assert [m.id for m in admin.list_manifests("db", acme_store)] == [1, 2, 3, 4]
    assert ManifestStore(acme_store, "db").sequence.boundary.read() == (0, None)


def test_expiry_never_falls_short_of_the_lifetime(acme_store: MemoryStore) -> None:
    clock = ManualRuntime(100.9)
    created = admin.create_checkpoint(DB, acme_store, CheckpointOptions(lifetime="10s"), clock=clock)
    (checkpoint,) = admin.list_checkpoints(DB, acme_store)
    assert checkpoint.id == created.id and checkpoint.expire_time_s == 111
    assert not checkpoint.is_expired(110.9) and checkpoint.is_expired(111)


def test_admin_checkpoint_covers_writes_durable_only_in_the_wal(acme_store: MemoryStore) -> None:
    from slate_ops import Db, DbReader
    from tests.support.engine import QUIET, QUIET_READER

    with Db.open(DB, acme_store, QUIET) as db:
        db.put(b"in-l0", b"1")
        db.flush_memtable()
        db.put(b"wal-only", b"2")
        db.flush()
        checkpoint = admin.create_checkpoint(DB, acme_store)
        db.put(b"after", b"3")
        db.flush()
    with DbReader.open(DB, acme_store, checkpoint.id, QUIET_READER) as reader:
        assert dict(reader.scan()) == {b"in-l0": b"1", b"wal-only": b"2"}


def test_create_db_exist_ok_refuses_a_destroyed_database() -> None:
    memory = MemoryStore()
    ManifestStore(memory, "gone").create_initial(Manifest(destroyed_at_s=5))
    with pytest.raises(DbDestroyedError):
        admin.create_db("gone", memory, exist_ok=True)
