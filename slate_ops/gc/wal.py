"""GC of WAL SSTs (docs/design/gc.md, "The tasks"; SlateDB's "Clean up WAL SSTs").

Kept: every WAL SST above the latest manifest's ``replay_after_wal_id`` (not yet in L0); the ranges
``(replay_after_wal_id, wal_id_last_seen]`` of every live checkpoint's manifest (what a reader of it
replays); anything the issue-204 history still references (:mod:`slate_ops.gc.snapshot`), so a WAL
SST is deleted only ``wal_min_age`` after the manifest that moved ``replay_after_wal_id`` past it;
anything written after the cutoff; and fence objects (window or legacy empty) unless ``delete_wal_fences``.
"""

from __future__ import annotations

from slate_ops.gc.listing import WalFile
from slate_ops.gc.references import Protection
from slate_ops.gc.task import PlannedDeletion

REASON = "a WAL SST that no manifest that matters replays, written before the cutoff"
FENCE_REASON = "a WAL fence that no manifest that matters replays past, written before the cutoff"


def plan_wal(
    files: list[WalFile], protection: Protection, cutoff: float, *, delete_fences: bool
) -> list[PlannedDeletion]:
    return [
        PlannedDeletion(f.meta, FENCE_REASON if f.is_fence else REASON, f.id)
        for f in files
        if not protection.keeps_wal(f.id)
        and f.meta.last_modified.timestamp() <= cutoff
        and (delete_fences or not f.is_fence)
    ]
