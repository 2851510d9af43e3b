from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from slate_ops import admin
from slate_ops.errors import (
    CorruptObjectError,
    DbAlreadyExistsError,
    DbNotFoundError,
    FencedError,
    InvalidArgumentError,
    UnsupportedFormatVersionError,
)
from slate_ops.gc.destroyed import tombstone_of
from slate_ops.manifest.model import Manifest
from slate_ops.manifest.store import COMPACTOR_EPOCH, WRITER_EPOCH, ManifestStore
from slate_ops.objstore import LocalStore, MemoryStore
from tests.support.stores import snapshot


def test_writer_claim_fences_the_previous_writer() -> None:
    memory = MemoryStore()
    admin.create_db("db", memory)
    old, claimed = ManifestStore(memory, "db").claim(WRITER_EPOCH)
    assert claimed.value.writer_epoch == old.epoch == 1
    new, _ = ManifestStore(memory, "db").claim(WRITER_EPOCH)
    before = snapshot(memory)
    with pytest.raises(FencedError, match="writer at db/manifest is fenced"):
        old.update(lambda v: v.value.with_changes(last_l0_seq=99))
    assert snapshot(memory) == before
    committed = new.update(lambda v: v.value.with_changes(last_l0_seq=7))
    assert committed.value.last_l0_seq == 7 and committed.value.writer_epoch == 2


def test_compactor_claim_does_not_fence_the_writer() -> None:
    memory = MemoryStore()
    admin.create_db("db", memory)
    writer, _ = ManifestStore(memory, "db").claim(WRITER_EPOCH)
    ManifestStore(memory, "db").claim(COMPACTOR_EPOCH)
    assert writer.update(lambda v: v.value.with_changes(next_wal_sst_id=5)).value.compactor_epoch == 1


def test_corrupt_or_future_manifest_is_a_typed_error_naming_the_file() -> None:
    memory = MemoryStore()
    admin.create_db("db", memory)
    key = "db/manifest/00000000000000000001.manifest"
    good = memory.get(key).data
    memory.put(key, good[: len(good) // 2])
    with pytest.raises(CorruptObjectError, match=key):
        admin.read_manifest("db", memory)
    memory.put(key, b"\x07\x00" + good[2:])
    with pytest.raises((CorruptObjectError, UnsupportedFormatVersionError), match=key):
        admin.list_checkpoints("db", memory)


def _create_checkpoints(root: str, count: int) -> list[str]:
    store = LocalStore(root)
    return [str(admin.create_checkpoint("db", store).id) for _ in range(count)]


def test_checkpoints_from_several_processes_are_all_kept(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    admin.create_db("db", store)
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        results = pool.starmap(_create_checkpoints, [(str(tmp_path), 5)] * 4)
    created = {cid for batch in results for cid in batch}
    assert len(created) == 20
    assert {str(c.id) for c in admin.list_checkpoints("db", store)} == created
    assert admin.read_manifest("db", store).id == 21


# --- tombstones (docs/design/clones-and-destroy.md, "Deleting a Database") ------------------------


def _tombstoned(memory: MemoryStore) -> ManifestStore:
    """``db`` at manifest 3 (writer epoch 4, compactor epoch 2), then its tombstone at 4 with WAL
    fence 9, as a deletion leaves it."""
    manifests = ManifestStore(memory, "db")
    manifests.create_initial(
        Manifest(writer_epoch=3, compactor_epoch=1, next_wal_sst_id=7, replay_after_wal_id=2)
    )
    manifests.update(lambda v: v.value.with_changes(last_l0_seq=5))
    manifests.update(lambda v: v.value.with_changes(destroyed_at_s=10, writer_epoch=4, compactor_epoch=2))
    manifests.sequence.update(lambda v: tombstone_of(v.value if v else Manifest(), 20, 9))
    return manifests


def test_a_tombstone_is_no_database_for_readers_updates_and_claims() -> None:
    memory = MemoryStore()
    manifests = _tombstoned(memory)
    assert manifests.read_latest() is None
    current = manifests.read_current()
    assert current is not None and current.id == 4 and current.value.is_tombstone
    fresh = ManifestStore(memory, "db")
    with pytest.raises(
        DbNotFoundError, match=r"deleted at 1970-01-01T00:00:20Z \(manifest 4 is its tombstone\)"
    ):
        fresh.read_latest_required()
    before = snapshot(memory)
    with pytest.raises(DbNotFoundError, match="was deleted"):
        manifests.update(lambda v: v.value.with_changes(last_l0_seq=6))  # a stale admin process
    with pytest.raises(DbNotFoundError):
        fresh.claim(WRITER_EPOCH)
    assert snapshot(memory) == before


def test_create_initial_after_a_tombstone_continues_its_epochs_and_ids() -> None:
    memory = MemoryStore()
    manifests = _tombstoned(memory)
    created = ManifestStore(memory, "db").create_initial(Manifest(initialized=True))
    assert created.id == 5
    m = created.value
    assert (m.writer_epoch, m.compactor_epoch) == (4, 2)  # a stale writer at epoch <= 4 stays fenced
    assert (m.replay_after_wal_id, m.wal_id_last_seen, m.next_wal_sst_id) == (
        9,
        9,
        10,
    )  # nothing <= the fence
    assert (m.destroyed_at_s, m.deleted_at_s, m.last_l0_seq, m.ssts) == (None, None, 0, ())
    assert manifests.read_latest() == created
    with pytest.raises(DbAlreadyExistsError):
        ManifestStore(memory, "db").create_initial(Manifest())


def test_create_initial_after_a_tombstone_refuses_wal_ids_at_or_below_its_fence() -> None:
    memory = MemoryStore()
    _tombstoned(memory)
    before = snapshot(memory)
    clone_like = Manifest(initialized=False, replay_after_wal_id=3, wal_id_last_seen=12, next_wal_sst_id=13)
    with pytest.raises(InvalidArgumentError, match=r"reserved WAL ids up to 9.*ids 4\.\.12"):
        ManifestStore(memory, "db").create_initial(clone_like)
    assert snapshot(memory) == before
    above = clone_like.with_changes(replay_after_wal_id=9)
    assert ManifestStore(memory, "db").create_initial(above).value.wal_id_last_seen == 12
