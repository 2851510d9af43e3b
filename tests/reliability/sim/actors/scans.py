"""Scans held open across steps (the writer's and the reader's): each must be a snapshot of its start."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator

from tests.reliability.sim.context import OpenScan, SimContext
from tests.reliability.sim.runtime import diff


def open_scan(
    ctx: SimContext, iterator: Iterator[tuple[bytes, bytes]], lo: int, checkpoint_id: uuid.UUID
) -> OpenScan:
    seen = dict(itertools.islice(iterator, 3))
    return OpenScan(iterator, seen, lo, ctx.model.issued, checkpoint_id, ctx.step)


def finish_scan(ctx: SimContext, scan: OpenScan, who: str) -> str:
    """Read the rest of a scan opened earlier: it must be the history at one prefix between what
    was seen and what was issued when it started (the writer's: exactly what was issued)."""
    scan.seen.update(scan.iterator)
    ctx.checks["long_scan_is_a_snapshot"] += 1
    lo = scan.hi if who == "writer" else scan.lo
    prefix = ctx.model.first_match(scan.seen, lo, scan.hi)
    if prefix is None:
        raise ctx.violation(
            f"the {who}'s scan opened at step {scan.step} is the history at no prefix in [{lo}, "
            f"{scan.hi}]; vs the state at its start: {diff(scan.seen, ctx.model.state(scan.hi))}"
        )
    if who == "reader":
        ctx.reader_floor = max(ctx.reader_floor, prefix)
    return f"ok {len(scan.seen)} keys as of step {scan.step}"
