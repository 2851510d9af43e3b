"""Listing the object namespaces GC manages; files it does not recognise are never touched."""

from __future__ import annotations

from dataclasses import dataclass

from ulid import ULID

from slate_ops.engine.wal_chain import is_data
from slate_ops.layout import COMPACTED_DIR, WAL_DIR, own_directory, parse_sst_key, parse_wal_key
from slate_ops.objstore.base import ObjectMeta, ObjectStore


@dataclass(frozen=True)
class WalFile:
    id: int
    meta: ObjectMeta

    @property
    def is_fence(self) -> bool:
        """A window fence or a legacy empty fence, never data (engine/wal_fence.py)."""
        return not is_data(self.meta.size)


@dataclass(frozen=True)
class SstFile:
    id: ULID
    meta: ObjectMeta


def list_wal(store: ObjectStore, db_path: str) -> list[WalFile]:
    """``<db>/wal/<20-digit id>.sst`` objects in id order (full keys: a nested database's are not ours)."""
    files = []
    for meta in store.list(own_directory(db_path, WAL_DIR)):
        wal_id = parse_wal_key(db_path, meta.key)
        if wal_id is not None:
            files.append(WalFile(wal_id, meta))
    return files


def list_compacted(store: ObjectStore, db_path: str) -> list[SstFile]:
    """``<db>/compacted/<ULID>.sst`` objects (this database's own L0 and sorted-run SSTs)."""
    files = []
    for meta in store.list(own_directory(db_path, COMPACTED_DIR)):
        sst_id = parse_sst_key(db_path, meta.key)
        if sst_id is not None:
            files.append(SstFile(sst_id, meta))
    return files
