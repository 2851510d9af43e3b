"""The in-memory manifest (SlateDB's Checkpoints and Clones design "Manifest Schema", ManifestV2).

Plain frozen dataclasses: the rest of slate_ops never touches FlatBuffers objects; only
:mod:`slate_ops.manifest.codec` translates between the two. SST and view ids are ULIDs, checkpoint
ids are v4 UUIDs.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace

from ulid import ULID

from slate_ops.keytext import render_bytes
from slate_ops.layout import sst_key


@dataclass(frozen=True)
class KeyRange:
    """A half-open key range ``[start, end)``; ``None`` means unbounded on that side."""

    start: bytes | None = None
    end: bytes | None = None

    def is_empty(self) -> bool:
        # b"" is the smallest key, so an unbounded start is the same as b"".
        return self.end is not None and (self.start or b"") >= self.end

    def contains(self, key: bytes) -> bool:
        return (self.start is None or key >= self.start) and (self.end is None or key < self.end)

    def intersect(self, other: KeyRange) -> KeyRange:
        """The keys in both ranges (possibly an empty range)."""
        start = other.start if self.start is None else self.start
        if other.start is not None and start is not None:
            start = max(start, other.start)
        end = other.end if self.end is None else self.end
        if other.end is not None and end is not None:
            end = min(end, other.end)
        return KeyRange(start, end)

    def overlaps(self, other: KeyRange) -> bool:
        return not (self.is_empty() or other.is_empty() or self.intersect(other).is_empty())

    def covers(self, other: KeyRange) -> bool:
        """Every key of ``other`` is in this range (an empty ``other`` is always covered)."""
        return other.is_empty() or self.intersect(other) == other

    def __str__(self) -> str:
        start = "-inf" if self.start is None else render_bytes(self.start)
        end = "+inf" if self.end is None else render_bytes(self.end)
        return f"[{start}, {end})"


@dataclass(frozen=True)
class SstInfo:
    """What the manifest records about one SST file (written once, never changed)."""

    first_key: bytes
    last_key: bytes
    size_bytes: int
    num_entries: int
    min_seq: int
    max_seq: int
    format_version: int = 1


@dataclass(frozen=True)
class CompactedSst:
    """An L0 or sorted-run SST. ``original_id`` is set when union renamed a colliding id: the file
    still lives under its original id (SlateDB's Checkpoints and Clones design "Union")."""

    id: ULID
    info: SstInfo
    original_id: ULID | None = None

    @property
    def physical_id(self) -> ULID:
        return self.original_id if self.original_id is not None else self.id


@dataclass(frozen=True)
class SstView:
    """A view over an SST, optionally narrowed to ``visible_range``. ``view_id`` identifies the
    view itself, so the same SST can appear twice with different ranges."""

    view_id: ULID
    sst_id: ULID
    visible_range: KeyRange | None = None


@dataclass(frozen=True)
class SortedRun:
    id: int
    views: tuple[SstView, ...] = ()


@dataclass(frozen=True)
class ExternalDb:
    """A database whose SSTs this one references (clones, unions)."""

    path: str
    source_checkpoint_id: uuid.UUID
    final_checkpoint_id: uuid.UUID
    # The ids (CompactedSst.id) of the SSTs whose files live under ``path``. After a union renamed a
    # colliding id this is the new id; CompactedSst.original_id names the file.
    sst_ids: tuple[ULID, ...] = ()


@dataclass(frozen=True)
class WriterCheckpoint:
    """Checkpoint metadata marking the checkpoint a writer holds for its reads."""

    epoch: int


@dataclass(frozen=True)
class Checkpoint:
    id: uuid.UUID
    manifest_id: int
    create_time_s: int
    # As stored: None (absent) or 0 never expires (SlateDB's Checkpoints and Clones design: "If
    # checkpoint_expire_time_s is 0, the checkpoint will never expire"). Read it through
    # ``expires_at``, which folds the two.
    expire_time_s: int | None = None
    metadata: WriterCheckpoint | None = None
    name: str | None = None

    @property
    def expires_at(self) -> int | None:
        """The unix second the checkpoint expires at; None when it never expires (stored 0 or absent)."""
        return self.expire_time_s or None

    def is_expired(self, now_s: float) -> bool:
        expires_at = self.expires_at
        return expires_at is not None and expires_at <= now_s


@dataclass(frozen=True)
class Manifest:
    """One version of a database's state. Writers own the L0 and WAL fields; the compactor owns
    sorted runs and the L0 compaction watermark."""

    initialized: bool = True
    destroyed_at_s: int | None = None
    writer_epoch: int = 0
    compactor_epoch: int = 0
    # WAL SSTs with id <= replay_after_wal_id are fully in L0; replay starts after it.
    replay_after_wal_id: int = 0
    # The highest WAL id a reader or writer has observed (SlateDB's Checkpoints and Clones design "Readers").
    wal_id_last_seen: int = 0
    next_wal_sst_id: int = 1
    last_l0_seq: int = 0
    # The newest L0 view the compactor has consumed (SlateDB's Checkpoints and Clones design,
    # "l0_last_compacted").
    l0_last_compacted: ULID | None = None
    external_dbs: tuple[ExternalDb, ...] = ()
    ssts: tuple[CompactedSst, ...] = ()
    l0: tuple[SstView, ...] = ()  # newest first
    compacted: tuple[SortedRun, ...] = ()  # newest first
    checkpoints: tuple[Checkpoint, ...] = field(default=())
    # The keys this database may hold (shards of a split); None = all keys.
    visible_range: KeyRange | None = None
    # Set when the database's objects were deleted (hard destroy, or GC of a destroyed database):
    # this manifest is then a tombstone. It keeps the epochs (fencing stale writers and compactors)
    # and the WAL and manifest ids, and nothing else; the path reads as "no database" and a new
    # database may be created there (docs/design/clones-and-destroy.md, "Deleting a Database").
    deleted_at_s: int | None = None

    @property
    def is_tombstone(self) -> bool:
        """The database was deleted: this manifest only keeps its epochs and ids."""
        return self.deleted_at_s is not None

    def with_changes(self, **changes: object) -> Manifest:
        return replace(self, **changes)  # type: ignore[arg-type]

    def checkpoint(self, checkpoint_id: uuid.UUID) -> Checkpoint | None:
        return next((c for c in self.checkpoints if c.id == checkpoint_id), None)

    def sst(self, sst_id: ULID) -> CompactedSst | None:
        return next((s for s in self.ssts if s.id == sst_id), None)

    def owner_of(self, sst: CompactedSst) -> ExternalDb | None:
        """The external database holding ``sst``'s file (listed by ``sst.id``, which differs from the
        file's id only after a union rename), or None when the file is under this database's path."""
        return next((e for e in self.external_dbs if sst.id in e.sst_ids), None)


def resolve_sst_path(manifest: Manifest, db_path: str, sst: CompactedSst) -> str:
    """Where ``sst`` of ``manifest`` (the database at ``db_path``) is stored: under the external
    database that lists it, else under ``db_path`` (docs/design/clones-and-destroy.md)."""
    owner = manifest.owner_of(sst)
    return sst_key(db_path if owner is None else owner.path, sst.physical_id)
