"""What the manifests that still matter reference: the sets GC must never delete from.

A manifest protects, for the database at ``db_path`` (spec 000 "Garbage Collector"):

* its own compacted SSTs (external ones live in other databases and are never ours to delete);
* as the **latest** manifest, every WAL SST above ``replay_after_wal_id`` (not yet in L0);
* as a **checkpointed** manifest, the WAL SSTs in ``(replay_after_wal_id, wal_id_last_seen]``
  (what a reader of the checkpoint replays);
* the external databases whose ``sst_ids`` it still lists (clone detaching).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from slate_ops.engine.lsm import COMPACTED_DIR, resolve_sst_path, sst_key
from slate_ops.manifest.model import Manifest
from slate_ops.txn.paths import join

UNBOUNDED = 2**64


@dataclass
class Protection:
    """A union of manifests' references. ``everything`` keeps every object (an unknowable history)."""

    db_path: str
    sst_keys: set[str] = field(default_factory=set)
    wal_ranges: list[tuple[int, int]] = field(default_factory=list)  # (after, upto], inclusive upto
    external_paths: set[str] = field(default_factory=set)
    everything: bool = False

    def add(self, manifest: Manifest, *, as_latest: bool) -> None:
        own_dir = join(self.db_path, COMPACTED_DIR) + "/"
        for sst in manifest.ssts:
            key = resolve_sst_path(manifest, self.db_path, sst)
            if key.startswith(own_dir):
                self.sst_keys.add(key)
        # A view whose SST entry is missing from ``ssts`` would be a corrupt manifest; keep its id too.
        for view in (*manifest.l0, *(v for run in manifest.compacted for v in run.views)):
            if manifest.sst(view.sst_id) is None:
                self.sst_keys.add(sst_key(self.db_path, view.sst_id))
        upto = UNBOUNDED if as_latest else manifest.wal_id_last_seen
        self.wal_ranges.append((manifest.replay_after_wal_id, upto))
        self.external_paths |= {e.path for e in manifest.external_dbs if e.sst_ids}

    def keeps_wal(self, wal_id: int) -> bool:
        return self.everything or any(after < wal_id <= upto for after, upto in self.wal_ranges)

    def keeps_sst(self, key: str) -> bool:
        return self.everything or key in self.sst_keys

    def merged(self, other: Protection) -> Protection:
        return Protection(
            self.db_path,
            self.sst_keys | other.sst_keys,
            [*self.wal_ranges, *other.wal_ranges],
            self.external_paths | other.external_paths,
            self.everything or other.everything,
        )
