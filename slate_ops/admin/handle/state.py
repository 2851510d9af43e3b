"""What Dagster records of a database, whichever engine wrote it: :class:`DbState` (the summary, the
LSM shape, checkpoint and tag names: an asset's metadata) and :class:`CompactionPlan` (what one
compaction would pick: a dry run's report). The handles build them (``state_since``,
``plan_compaction``); the helpers below build them from one slate_ops manifest, or (the state)
from a handle's own reports (SlateDB).

Both engines keep ``<db>/manifest/<20-digit id>.manifest``, so :func:`latest_manifest_id_since`
answers the manifest sensor's cheap question ("anything newer than the cursor's manifest?") with one
LIST on either engine, or one GET probe of the next id (``probe``), without decoding a manifest.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from slate_ops.admin.db import DbStatus, status_of
from slate_ops.admin.shape import LsmShape, shape_of
from slate_ops.admin.tags import TAG_PREFIX, find_tags, is_tag
from slate_ops.compaction import CompactorOptions, propose
from slate_ops.errors import DbNotFoundError
from slate_ops.layout import (
    MANIFEST_DIR,
    MANIFEST_SUFFIX,
    manifest_key,
    normalize_db_path,
    parse_own_manifest_key,
)
from slate_ops.manifest.model import Checkpoint
from slate_ops.manifest.store import VersionedManifest
from slate_ops.objstore.base import ObjectStore
from slate_ops.txn import SequencedStore

__all__ = [
    "CompactionPlan",
    "DbState",
    "latest_manifest_id_since",
    "plan_of_manifest",
    "state_from_reports",
    "state_of_manifest",
]


@dataclass(frozen=True)
class DbState:
    """A database's current state as an asset records it: its summary, its LSM shape, the names of
    its checkpoints (tags left out; an unnamed one by its id) and of its tags (without the prefix)."""

    status: DbStatus
    shape: LsmShape
    checkpoint_names: tuple[str, ...]
    tag_names: tuple[str, ...]

    @property
    def manifest_id(self) -> int:
        return self.status.manifest_id


@dataclass(frozen=True)
class CompactionPlan:
    """What one compaction would pick now (``kind``: ``l0``, ``sorted_runs`` or ``full``), at
    ``manifest_id``: how many sources (L0 SSTs and sorted runs), which input SSTs and their bytes."""

    kind: str
    manifest_id: int
    sources: int
    input_ssts: tuple[str, ...]
    bytes_to_read: int


def state_of_manifest(path: str, current: VersionedManifest, now: float) -> DbState:
    """The state of a slate_ops database from its manifest ``current`` (no further reads)."""
    manifest = current.value
    return DbState(
        status=status_of(normalize_db_path(path), current, now),
        shape=shape_of(current.id, manifest),
        checkpoint_names=tuple(c.name or str(c.id) for c in manifest.checkpoints if not is_tag(c)),
        tag_names=tuple(t.name for t in find_tags(manifest)),
    )


def state_from_reports(status: DbStatus, shape: LsmShape, checkpoints: Iterable[Checkpoint]) -> DbState:
    """The state from a handle's own reports (a tag is a checkpoint named with the tag prefix)."""
    listed = list(checkpoints)
    return DbState(
        status=status,
        shape=shape,
        checkpoint_names=tuple(c.name or str(c.id) for c in listed if not is_tag(c)),
        tag_names=tuple(c.name[len(TAG_PREFIX) :] for c in listed if is_tag(c) and c.name is not None),
    )


def plan_of_manifest(
    current: VersionedManifest, options: CompactorOptions, *, full: bool = False
) -> CompactionPlan | None:
    """slate_ops' compactor's pick in manifest ``current`` (:func:`slate_ops.compaction.propose`)."""
    manifest = current.value
    proposal = propose(manifest, options, full=full)
    if proposal is None:
        return None
    sizes = {str(s.id): s.info.size_bytes for s in manifest.ssts}
    chosen = set(proposal.run_ids)
    ids = [str(v.sst_id) for v in proposal.l0_views]
    ids += [str(v.sst_id) for run in manifest.compacted if run.id in chosen for v in run.views]
    return CompactionPlan(
        kind=proposal.kind,
        manifest_id=current.id,
        sources=len(proposal.l0_views) + len(proposal.run_ids),
        input_ssts=tuple(ids),
        bytes_to_read=sum(sizes.get(i, 0) for i in ids),
    )


def latest_manifest_id_since(
    path: str, store: ObjectStore, known_id: int | None, *, probe: bool = False
) -> int | None:
    """The id of the latest manifest of the database at ``path`` (either engine), or None when it is
    still ``known_id``: one LIST of the manifests from ``known_id`` on, none read. Without
    ``known_id``, or when ``known_id`` is gone with nothing after it (a destroy and re-create), a
    LIST of every manifest; :class:`DbNotFoundError` when there is none.

    ``probe``: first one GET of manifest ``known_id + 1``, read as bytes (either engine's); absent,
    None after that one request; present, the LIST above (as
    :func:`slate_ops.admin.fleet.latest_manifest_since`'s probe, on whose caller's promise it rests)."""
    db = normalize_db_path(path)
    prefix = manifest_key(db, 0).rsplit("/", 1)[0] + "/"
    if probe and known_id is not None and known_id >= 1:
        manifests = SequencedStore(store, db, MANIFEST_DIR, MANIFEST_SUFFIX, _ANY_ENGINE)
        if manifests.probe_after(known_id) is None:
            return None
    if known_id is not None and known_id >= 1:
        after = manifest_key(db, known_id - 1)
        ids = [i for m in store.list(prefix, after) if (i := parse_own_manifest_key(db, m.key)) is not None]
        if ids and max(ids) == known_id:
            return None
        if ids:
            return max(ids)
    ids = [i for m in store.list(prefix) if (i := parse_own_manifest_key(db, m.key)) is not None]
    if not ids:
        raise DbNotFoundError(f"no database at {path!r} in {store.url}: no manifest under {prefix}")
    return max(ids)


class _Bytes:
    """The codec of a manifest read as bytes: both engines name their manifests alike."""

    def encode(self, value: bytes) -> bytes:
        return value

    def decode(self, data: bytes, path: str) -> bytes:
        return data


_ANY_ENGINE = _Bytes()
