"""What a projection or union clone of a SlateDB database needs besides the clone itself: the WAL
check SlateDB makes (:func:`wal_data_ids`) and the explicit fix for it (:func:`flush_wal_to_l0`).

SlateDB 0.17 refuses a projection (split shard) or a union (merge) whose source has data WAL SSTs
in ``(replay_after_wal_id, next_wal_sst_id - 1]`` ("Projection and/or union with WAL is not
supported", ``validate_no_data_wal`` in slatedb/src/clone.rs). Measured on 0.17.0: a writer with
the WAL on leaves the last data WAL SST in that range after every memtable flush and after
shutdown, and reopening with the WAL on and flushing again does not clear it; reopening with
``wal_enabled=false``, rewriting one key with the value it already has and flushing the memtable
to L0 does (``replay_after_wal_id`` then reaches ``next_wal_sst_id - 1``) -- docs/design/slatedb-engine.md §4.
"""

from __future__ import annotations

from dataclasses import dataclass

from slate_ops.engines.slatedb.admin import SlateDbAdmin
from slate_ops.engines.slatedb.loop import LOOP, binding
from slate_ops.engines.slatedb.views import ManifestView
from slate_ops.errors import SlateDbError
from slate_ops.layout import WAL_DIR, own_directory, parse_wal_key

__all__ = ["WalFlushOutcome", "flush_wal_to_l0", "wal_data_ids"]


def wal_data_ids(db: SlateDbAdmin, manifest: ManifestView) -> list[int]:
    """The WAL SST ids SlateDB's clone check finds data in for ``manifest`` (one LIST): non-empty
    WAL objects in ``(replay_after_wal_id, next_wal_sst_id - 1]``. Zero-byte ones are fences."""
    found = []
    for meta in db.store.list(own_directory(db.db_path, WAL_DIR)):
        wal_id = parse_wal_key(db.db_path, meta.key)
        if wal_id is None:
            continue
        if manifest.replay_after_wal_id < wal_id < manifest.next_wal_sst_id and meta.size > 0:
            found.append(wal_id)
    return sorted(found)


@dataclass(frozen=True)
class WalFlushOutcome:
    """What :func:`flush_wal_to_l0` did: the manifest before and after, the key it rewrote (None
    when the database holds no SST to take one from), and the data WAL SSTs left in the range."""

    manifest_before: int
    manifest_after: int
    rewritten_key: bytes | None
    wal_left: tuple[int, ...]


def flush_wal_to_l0(db: SlateDbAdmin) -> WalFlushOutcome:
    """Empty the WAL replay range of the database by opening it as its writer twice: once with
    SlateDB's defaults (the WAL is replayed and the memtable flushed to L0), then with
    ``wal_enabled=false``, rewriting the smallest key of its SSTs with the value it has (or, when
    that key reads as absent, deleting it again) and flushing the memtable to L0, which moves
    ``replay_after_wal_id`` past every WAL SST. The visible contents do not change; the rewritten
    key gets a new sequence number.

    Opening a ``Db`` FENCES the running writer (it gets a fenced error on its next write): stop
    the writer first. Binding failures raise :class:`SlateDbError`.
    """
    sdb = binding()
    path = db.binding_path  # an S3 store's key prefix joined to the database's path
    before = db.read_manifest()
    if before is None:
        raise SlateDbError(db.db_path, "flush the WAL to L0", FileNotFoundError("no manifest"))

    async def open_flush_close(wal: bool) -> bytes | None:
        settings = sdb.Settings.default()
        if not wal:
            settings.set("wal_enabled", "false")
        builder = sdb.DbBuilder(path, db.object_store)
        builder.with_settings(settings)
        writer = await builder.build()
        key: bytes | None = None
        try:
            if not wal:
                admin = sdb.AdminBuilder(path, db.object_store).build()
                m = await admin.read_manifest(None)
                views = (*m.l0, *(v for r in m.compacted for v in r.sst_views))
                firsts = [v.sst.info.first_entry for v in views]
                key = min((k for k in firsts if k is not None), default=None)
                if key is not None:
                    value = await writer.get(key)
                    if value is None:
                        await writer.delete(key)
                    else:
                        await writer.put(key, value)
            await writer.flush_with_options(sdb.FlushOptions(flush_type=sdb.FlushType.MEM_TABLE))
        finally:
            await writer.shutdown()
        return key

    def run(wal: bool) -> bytes | None:
        return LOOP.call(db.db_path, "flush the WAL to L0", open_flush_close(wal), db.timeouts.of("writer"))

    run(True)
    key = run(False)
    after = db.read_manifest()
    assert after is not None
    return WalFlushOutcome(before.id, after.id, key, tuple(wal_data_ids(db, after)))
