from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from slate_ops import admin
from slate_ops.errors import CorruptObjectError, FencedError, UnsupportedFormatVersionError
from slate_ops.manifest.store import COMPACTOR_EPOCH, WRITER_EPOCH, ManifestStore
from slate_ops.objstore import LocalStore, MemoryStore
from tests.conftest import snapshot


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
