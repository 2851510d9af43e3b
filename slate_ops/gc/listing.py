"""Listing the object namespaces GC manages; files it does not recognise are never touched."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ulid import ULID

from slate_ops.layout import COMPACTED_DIR, WAL_DIR, WalStore, sst_key
from slate_ops.objstore.base import ObjectMeta, ObjectStore
from slate_ops.txn.paths import join

_WAL_NAME = re.compile(r"^(\d{20})\.sst$")


@dataclass(frozen=True)
class WalFile:
    id: int
    meta: ObjectMeta

    @property
    def is_fence(self) -> bool:
        """An empty WAL object is a writer's fence, never data (engine/wal.py)."""
        return self.meta.size == 0


@dataclass(frozen=True)
class SstFile:
    id: ULID
    meta: ObjectMeta


def list_wal(store: ObjectStore, db_path: str) -> list[WalFile]:
    """``<db>/wal/<20-digit id>.sst`` objects in id order."""
    wal = WalStore(store, db_path)
    files = []
    for meta in store.list(join(db_path, WAL_DIR) + "/"):
        match = _WAL_NAME.match(meta.key.rsplit("/", 1)[-1])
        if match and meta.key == wal.key(int(match.group(1))):
            files.append(WalFile(int(match.group(1)), meta))
    return files


def list_compacted(store: ObjectStore, db_path: str) -> list[SstFile]:
    """``<db>/compacted/<ULID>.sst`` objects (this database's own L0 and sorted-run SSTs)."""
    files = []
    for meta in store.list(join(db_path, COMPACTED_DIR) + "/"):
        name = meta.key.rsplit("/", 1)[-1]
        if not name.endswith(".sst"):
            continue
        try:
            sst_id = ULID.from_str(name[: -len(".sst")])
        except ValueError:
            continue
        if meta.key == sst_key(db_path, sst_id):
            files.append(SstFile(sst_id, meta))
    return files
