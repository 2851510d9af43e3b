"""GC of compacted SSTs (docs/design/gc.md, "The tasks"; SlateDB's "Clean up SSTs").

Kept: every SST of this database that the latest manifest, a live checkpoint's manifest or the
issue-204 history references (:mod:`slate_ops.gc.snapshot`); anything written after the cutoff; and
anything written since the oldest compaction still ``running`` at the current compactor epoch began
(minus a clock-skew margin of :data:`CLOCK_SKEW_S`, or ``compacted_min_age`` if that is shorter),
because those may be outputs it has yet to commit. A running record of
an older epoch is fenced and can never commit: its outputs are orphans.
"""

from __future__ import annotations

from slate_ops.compaction.state import CompactionsState
from slate_ops.gc.listing import SstFile
from slate_ops.gc.references import Protection
from slate_ops.objstore.base import ObjectMeta

CLOCK_SKEW_S = 60.0
"""Allowed difference between the compactor's clock (``started_at_s``) and the store's."""


def running_since(state: CompactionsState, compactor_epoch: int) -> float | None:
    """When the oldest compaction that may still commit started (None: none is running)."""
    starts = [
        r.started_at_s for r in state.compactions if r.status == "running" and r.epoch >= compactor_epoch
    ]
    return min(starts) if starts else None


def plan_compacted(
    files: list[SstFile], protection: Protection, cutoff: float, running: float | None, min_age: float
) -> list[ObjectMeta]:
    margin = min(CLOCK_SKEW_S, min_age)
    keep_after = cutoff if running is None else min(cutoff, running - margin)
    return [
        f.meta
        for f in files
        if not protection.keeps_sst(f.meta.key) and f.meta.last_modified.timestamp() <= keep_after
    ]
