"""What an executor needs to run a compaction: plain, picklable data (no store, no manifest).

Executors receive a :class:`CompactionSpec` and return the metadata of the SSTs they wrote; the
compactor (the driver) commits the result. Sources are newest first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from slate_ops.compaction.firstreads import FirstReads
from slate_ops.manifest.model import CompactedSst, KeyRange
from slate_ops.sst import SstReader


@dataclass(frozen=True)
class SourceView:
    """One input SST object (path already resolved, clones included) and its visible range."""

    key: str
    size: int
    visible: KeyRange | None = None


@dataclass(frozen=True)
class SourceRun:
    """An L0 view (one SST) or a sorted run (non-overlapping views in key order)."""

    views: tuple[SourceView, ...]


@dataclass(frozen=True)
class CompactionSpec:
    db_path: str
    sources: tuple[SourceRun, ...]
    drop_tombstones: bool
    target_sst_bytes: int
    subcompactions: tuple[KeyRange, ...]
    """Half-open key ranges covering the whole key space, in key order."""
    opened: Mapping[str, SstReader] = field(default_factory=dict, compare=False, repr=False)
    """Readers of the sources (by key) that the driver opened while planning: an executor in the
    driver's process reuses them instead of reading every input's tail again (one round trip less
    per compaction). Never pickled: a Spark task opens its own."""
    first_reads: FirstReads | None = field(default=None, compare=False, repr=False)
    """The inputs' first blocks, fetched while the driver planned: an executor in the driver's
    process takes them instead of requesting them again. Never pickled."""

    def __reduce__(self) -> tuple[Any, ...]:
        plain = (self.db_path, self.sources, self.drop_tombstones, self.target_sst_bytes, self.subcompactions)
        return (CompactionSpec, plain)


@dataclass(frozen=True)
class SubcompactionResult:
    outputs: tuple[CompactedSst, ...]
    bytes_read: int
    bytes_written: int
    rows_in: int
    rows_out: int


@dataclass(frozen=True)
class ExecutionResult:
    outputs: tuple[CompactedSst, ...]
    """In key order: together they form the new sorted run."""
    bytes_read: int
    bytes_written: int
    rows_in: int
    rows_out: int
    subcompactions: int


def intersect(visible: KeyRange | None, bounds: KeyRange) -> KeyRange | None:
    """``visible ∩ bounds``, or None when empty."""
    result = bounds if visible is None else visible.intersect(bounds)
    return None if result.is_empty() else result
