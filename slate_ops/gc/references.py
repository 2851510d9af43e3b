"""What the manifests that still matter reference: the sets GC must never delete from.

A manifest protects, for the database at ``db_path`` (docs/design/gc.md, "What is never deleted"):

* its own compacted SSTs (external ones live in other databases and are never ours to delete);
* as the **latest** manifest, every WAL SST above ``replay_after_wal_id`` (not yet in L0);
* as a **checkpointed** manifest, the WAL SSTs in ``(replay_after_wal_id, wal_id_last_seen]``
  (what a reader of the checkpoint replays);
* the external databases whose ``sst_ids`` it still lists (clone detaching).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from slate_ops.layout import sst_key
from slate_ops.manifest.model import Manifest

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
        self.sst_keys |= own_sst_keys(manifest, self.db_path)
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


def own_sst_keys(manifest: Manifest, db_path: str) -> set[str]:
    """The keys of the SSTs of ``manifest`` that live in this database (docs/design/clones-and-destroy.md,
    "What a clone is").

    Linear in the manifest's size. A view whose SST entry is missing from ``ssts`` (a corrupt
    manifest) still protects its id.
    """
    external = {sst_id for e in manifest.external_dbs for sst_id in e.sst_ids}
    keys = {sst_key(db_path, s.physical_id) for s in manifest.ssts if s.id not in external}
    known = {s.id for s in manifest.ssts}
    views = (*manifest.l0, *(v for run in manifest.compacted for v in run.views))
    keys |= {sst_key(db_path, v.sst_id) for v in views if v.sst_id not in known and v.sst_id not in external}
    return keys
