"""What an executor needs to run a compaction: plain, picklable data (no store, no manifest).

Executors receive a :class:`CompactionSpec` and return the metadata of the SSTs they wrote; the
compactor (the driver) commits the result. Sources are newest first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ulid import ULID

from slate_ops.manifest.model import CompactedSst, KeyRange
from slate_ops.runtime import Runtime, seeded_ulids


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
class OutputIds:
    """Where a compaction's output SST ids come from, as plain data: a subcompaction may run in
    another process (a Spark task) and in any order, so each key range draws its ids from ``seed``
    and its own start key, timestamped ``timestamp_ms`` (the compaction's start)."""

    seed: int
    timestamp_ms: int

    @classmethod
    def draw(cls, clock: Runtime) -> OutputIds:
        return cls(clock.random().getrandbits(64), int(clock.now() * 1000))

    def for_range(self, key_range: KeyRange) -> Callable[[], ULID]:
        start = b"\x00" if key_range.start is None else b"\x01" + key_range.start
        return seeded_ulids(self.seed.to_bytes(8, "big") + start, self.timestamp_ms)


@dataclass(frozen=True)
class CompactionSpec:
    db_path: str
    sources: tuple[SourceRun, ...]
    drop_tombstones: bool
    target_sst_bytes: int
    subcompactions: tuple[KeyRange, ...]
    """Half-open key ranges covering the whole key space, in key order."""
    output_ids: OutputIds


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
