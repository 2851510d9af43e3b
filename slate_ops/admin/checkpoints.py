"""Checkpoints through the admin API (docs/design/engine.md, "Creating a Checkpoint" and "Public API").

Each call reads the current manifest, applies one change and commits the next version with the
sequenced-commit primitive, re-applying the change on a lost race. A refused call commits nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta

from slate_ops.clock import SYSTEM_CLOCK, Clock
from slate_ops.config import CheckpointCreateResult, CheckpointOptions
from slate_ops.errors import InvalidArgumentError
from slate_ops.gc.checkpoints import CheckpointExpiryReport, expire_checkpoints
from slate_ops.layout import WalStore
from slate_ops.manifest.checkpoints import (
    checkpoint_not_found,
    expiry_time,
    live_checkpoint,
    with_expiry,
    with_new_checkpoint,
)
from slate_ops.manifest.model import Checkpoint, Manifest
from slate_ops.manifest.store import (
    ManifestStore,
    VersionedManifest,
    require_not_destroyed,
)
from slate_ops.objstore.base import ObjectStore


def create_checkpoint(
    path: str,
    store: ObjectStore,
    options: CheckpointOptions | None = None,
    *,
    clock: Clock = SYSTEM_CLOCK,
    new_id: Callable[[], uuid.UUID] = uuid.uuid4,
) -> CheckpointCreateResult:
    """Create a checkpoint of the current manifest, or of ``options.source``'s manifest.

    From the current manifest, ``manifest_id`` is the version being written (V+1), so the checkpoint
    is committed together with the state it pins. From a source checkpoint it is the source's
    ``manifest_id``; a missing or expired source is refused.
    """
    options = options or CheckpointOptions()
    if options.name is not None and options.name.startswith(TAG_PREFIX):
        raise InvalidArgumentError(
            f"checkpoint names starting with {TAG_PREFIX!r} are reserved for tags; use create_tag"
        )
    manifests = ManifestStore(store, path)
    checkpoint_id = new_id()
    committed = manifests.update(checkpoint_adder(manifests, options, checkpoint_id, clock))
    created = committed.value.checkpoint(checkpoint_id)
    assert created is not None
    return CheckpointCreateResult(id=checkpoint_id, manifest_id=created.manifest_id)


TAG_PREFIX = "tag:"
"""Checkpoints named ``tag:<name>`` are tags (:mod:`slate_ops.admin.tags`): they never expire."""


def checkpoint_adder(
    manifests: ManifestStore, options: CheckpointOptions, checkpoint_id: uuid.UUID, clock: Clock
) -> Callable[[VersionedManifest], Manifest]:
    """The manifest change that adds a checkpoint (docs/design/engine.md, "Creating a Checkpoint").

    From the current manifest, the checkpoint also covers writes durable only in the WAL so far:
    readers of it replay the WAL up to ``wal_id_last_seen`` (docs/design/engine.md, "Readers"), so that is
    raised to the newest WAL id (one LIST, before the commit loop).
    """
    wal_ids = WalStore(manifests.store, manifests.path).list_ids() if options.source is None else []
    last_wal = wal_ids[-1] if wal_ids else 0

    def add(current: VersionedManifest) -> Manifest:
        manifest = with_new_checkpoint(current, options, checkpoint_id, clock.now(), manifests.location)
        if options.source is not None:
            return manifest
        return manifest.with_changes(wal_id_last_seen=max(manifest.wal_id_last_seen, last_wal))

    return add


def refresh_checkpoint(
    path: str,
    store: ObjectStore,
    checkpoint_id: uuid.UUID,
    lifetime: timedelta | None = None,
    *,
    clock: Clock = SYSTEM_CLOCK,
) -> Checkpoint:
    """Set the checkpoint's expiry to now + ``lifetime`` (None: never expires).

    An expired checkpoint is refused: GC may already have released what it pinned.
    """
    manifests = ManifestStore(store, path)

    def refresh(current: VersionedManifest) -> Manifest:
        manifest = current.value
        require_not_destroyed(manifest, manifests.location)
        now = clock.now()
        checkpoint = live_checkpoint(manifest, checkpoint_id, now, manifests.location)
        if checkpoint.name is not None and checkpoint.name.startswith(TAG_PREFIX) and lifetime is not None:
            raise InvalidArgumentError(
                f"checkpoint {checkpoint_id} is the tag {checkpoint.name[len(TAG_PREFIX) :]!r}: tags never "
                "expire; delete the tag instead (delete-tag)"
            )
        return with_expiry(manifest, checkpoint_id, expiry_time(now, lifetime))

    committed = manifests.update(refresh)
    refreshed = committed.value.checkpoint(checkpoint_id)
    assert refreshed is not None
    return refreshed


def delete_checkpoint(
    path: str, store: ObjectStore, checkpoint_id: uuid.UUID, *, dry_run: bool = True
) -> Checkpoint:
    """Remove the checkpoint from the manifest and return it; a missing id is refused.

    A dry run (the default: deleting a checkpoint removes protection) returns the checkpoint that
    would be removed and writes nothing.
    """
    manifests = ManifestStore(store, path)
    if dry_run:
        found = manifests.read_latest_required().value.checkpoint(checkpoint_id)
        if found is None:
            raise checkpoint_not_found(checkpoint_id, manifests.location)
        return found
    removed: list[Checkpoint] = []

    def delete(current: VersionedManifest) -> Manifest:
        manifest = current.value
        checkpoint = manifest.checkpoint(checkpoint_id)
        if checkpoint is None:
            raise checkpoint_not_found(checkpoint_id, manifests.location)
        removed[:] = [checkpoint]
        return manifest.with_changes(
            checkpoints=tuple(c for c in manifest.checkpoints if c.id != checkpoint_id)
        )

    manifests.update(delete)
    return removed[0]


def list_checkpoints(path: str, store: ObjectStore, name: str | None = None) -> list[Checkpoint]:
    """The checkpoints of the current manifest (expired ones included until GC removes them)."""
    manifest = ManifestStore(store, path).read_latest_required().value
    return [c for c in manifest.checkpoints if name is None or c.name == name]


__all__ = [
    "CheckpointExpiryReport",
    "create_checkpoint",
    "delete_checkpoint",
    "expire_checkpoints",
    "list_checkpoints",
    "refresh_checkpoint",
]
