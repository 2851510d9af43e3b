"""Small typed views of what the binding returns (manifests, SST views, checkpoints), so nothing
above this package touches a UniFFI record."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CheckpointView:
    id: str
    manifest_id: int
    create_time_s: int
    expire_time_s: int | None
    name: str | None


@dataclass(frozen=True)
class SstView:
    """One SST view of the manifest: the view id, the physical SST's id (its object is
    ``compacted/<sst_id>.sst``, under ``db_path`` unless an external db owns it), bounds of its
    visible keys and the estimated size."""

    view_id: str
    sst_id: str
    # Inclusive bounds of the visible keys (None: unknown, an empty SST): the SST's first and last
    # entries, the first narrowed to the projection's start, the last to an inclusive projection
    # end. An exclusive end leaves the SST's last entry (which key below it is last is not recorded).
    first_key: bytes | None
    last_key: bytes | None
    size: int
    # The view's projection in slate_ops' convention, ``[visible_start, visible_end)`` (None: open
    # on that side; both None: not projected). SlateDB records an inclusive end where a projection's
    # open end met the SST's last entry: it is ``last_entry + b"\x00"`` here, the same keys.
    visible_start: bytes | None = None
    visible_end: bytes | None = None
    # The physical SST's own first and last entries (what a projection cannot widen).
    sst_first_key: bytes | None = None
    sst_last_key: bytes | None = None

    def bounds_start(self) -> bool:
        """Whether the projection sets a start: SlateDB records an open start as the SST's first
        entry (a start requested at exactly that key reads the same: no key is below it)."""
        return self.visible_start is not None and self.visible_start != self.sst_first_key

    def bounds_end(self) -> bool:
        """Whether the projection sets an end: SlateDB records an open end as the SST's last entry,
        inclusive (``sst_last_key + b"\\x00"`` here)."""
        return self.visible_end is not None and (
            self.sst_last_key is None or self.visible_end != self.sst_last_key + b"\x00"
        )


@dataclass(frozen=True)
class SortedRunView:
    id: int
    ssts: tuple[SstView, ...]
    size: int


@dataclass(frozen=True)
class ExternalDbView:
    path: str
    source_checkpoint_id: str
    final_checkpoint_id: str | None
    sst_ids: tuple[str, ...]


@dataclass(frozen=True)
class ManifestView:
    id: int
    writer_epoch: int
    compactor_epoch: int
    initialized: bool
    l0: tuple[SstView, ...]
    sorted_runs: tuple[SortedRunView, ...]
    checkpoints: tuple[CheckpointView, ...]
    external_dbs: tuple[ExternalDbView, ...]
    segments: int
    next_wal_sst_id: int
    replay_after_wal_id: int
    last_compacted_l0_sst_view_id: str | None
    last_l0_seq: int

    def sst_ids(self) -> set[str]:
        """Every physical SST this manifest references (L0 and sorted runs)."""
        return {s.sst_id for s in self.l0} | {s.sst_id for r in self.sorted_runs for s in r.ssts}

    def views(self) -> tuple[SstView, ...]:
        """Every SST view: L0's, then the sorted runs' (newest first)."""
        return (*self.l0, *(v for r in self.sorted_runs for v in r.ssts))

    def sst_sizes(self) -> dict[str, int]:
        """SlateDB's estimated size of each physical SST (an SST seen through several views once)."""
        sizes: dict[str, int] = {}
        for v in self.views():
            sizes.setdefault(v.sst_id, v.size)
        return sizes


def _sst_view(v: Any) -> SstView:
    info = v.sst.info
    first, last = info.first_entry, info.last_entry
    r = v.visible_range  # SlateDB's KeyRange: each bound inclusive or exclusive
    start = end = None
    if r is not None:
        start = r.start if r.start is None or r.start_inclusive else r.start + b"\x00"
        end = r.end if r.end is None or not r.end_inclusive else r.end + b"\x00"
        if start is not None and (first is None or start > first):
            first = start
        if r.end is not None and r.end_inclusive and (last is None or r.end < last):
            last = r.end
    return SstView(
        v.id,
        v.sst.id.value,
        first,
        last,
        v.estimated_size_bytes,
        start,
        end,
        info.first_entry,
        info.last_entry,
    )


def _checkpoint(c: Any) -> CheckpointView:
    return CheckpointView(c.id, c.manifest_id, c.create_time_secs, c.expire_time_secs, c.name)


def _manifest_view(m: Any) -> ManifestView:
    return ManifestView(
        id=m.id,
        writer_epoch=m.writer_epoch,
        compactor_epoch=m.compactor_epoch,
        initialized=m.initialized,
        l0=tuple(_sst_view(v) for v in m.l0),
        sorted_runs=tuple(
            SortedRunView(r.id, tuple(_sst_view(v) for v in r.sst_views), r.estimated_size_bytes)
            for r in m.compacted
        ),
        checkpoints=tuple(_checkpoint(c) for c in m.checkpoints),
        external_dbs=tuple(
            ExternalDbView(
                e.path, e.source_checkpoint_id, e.final_checkpoint_id, tuple(s.value for s in e.sst_ids)
            )
            for e in m.external_dbs
        ),
        segments=len(m.segments),
        next_wal_sst_id=m.next_wal_sst_id,
        replay_after_wal_id=m.replay_after_wal_id,
        last_compacted_l0_sst_view_id=m.last_compacted_l0_sst_view_id,
        last_l0_seq=m.last_l0_seq,
    )


# --- ULIDs ------------------------------------------------------------------------------------

_CROCKFORD = {c: i for i, c in enumerate("0123456789ABCDEFGHJKMNPQRSTVWXYZ")}


def ulid_time_ms(ulid: str) -> int:
    """The millisecond timestamp in a ULID's first 10 characters (SlateDB's SST and compaction ids)."""
    t = 0
    for ch in ulid[:10].upper():
        t = t * 32 + _CROCKFORD[ch]
    return t


# --- GC plan ----------------------------------------------------------------------------------
