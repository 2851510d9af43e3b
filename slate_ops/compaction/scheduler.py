"""The size-tiered scheduler: which sources to compact next.

* L0: when L0 holds ``min_sources`` SSTs, its oldest ``max_sources`` become a new sorted run,
  newer than every existing run (only one L0-sourcing compaction at a time: a compactor runs one
  compaction per round).
* Sorted runs: the newest window of at least ``min_sources`` adjacent runs whose largest is at most
  ``include_size_threshold`` times its smallest merges into one run at the window's place.
* Full: everything into one run.

Tombstones are dropped only when the output is the oldest sorted run: no older data can be hidden
behind them any more.
"""

from __future__ import annotations

from dataclasses import dataclass

from slate_ops.compaction.options import CompactorOptions
from slate_ops.manifest.model import Manifest, SortedRun, SstView


@dataclass(frozen=True)
class Proposal:
    kind: str  # "l0" | "sorted_runs" | "full"
    l0_views: tuple[SstView, ...]  # compacted L0 views, newest first
    run_ids: tuple[int, ...]  # compacted sorted runs, newest first
    destination: int  # the id of the output run
    drop_tombstones: bool


def run_size(manifest: Manifest, run: SortedRun) -> int:
    sizes = {s.id: s.info.size_bytes for s in manifest.ssts}
    return sum(sizes.get(v.sst_id, 0) for v in run.views)


def propose(manifest: Manifest, options: CompactorOptions, *, full: bool = False) -> Proposal | None:
    runs = manifest.compacted
    next_id = max((r.id for r in runs), default=-1) + 1
    if full:
        if not manifest.l0 and len(runs) <= 1:
            return None
        destination = min((r.id for r in runs), default=next_id)
        return Proposal("full", manifest.l0, tuple(r.id for r in runs), destination, True)
    if len(manifest.l0) >= options.min_sources:
        oldest = manifest.l0[-options.max_sources :]
        return Proposal("l0", oldest, (), next_id, drop_tombstones=not runs)
    window = _sorted_run_window(manifest, options)
    if window is None:
        return None
    first, last = window
    chosen = runs[first:last]
    return Proposal(
        "sorted_runs", (), tuple(r.id for r in chosen), chosen[-1].id, drop_tombstones=last == len(runs)
    )


def _sorted_run_window(manifest: Manifest, options: CompactorOptions) -> tuple[int, int] | None:
    sizes = [max(1, run_size(manifest, r)) for r in manifest.compacted]
    for first in range(len(sizes)):
        last = first
        smallest = largest = sizes[first]
        while last < len(sizes) and last - first < options.max_sources:
            smallest, largest = min(smallest, sizes[last]), max(largest, sizes[last])
            if largest > options.include_size_threshold * smallest:
                break
            last += 1
        if last - first >= options.min_sources:
            return first, last
    return None
