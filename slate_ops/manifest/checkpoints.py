"""Checkpoint changes to a manifest (docs/design/engine.md, "Creating a checkpoint"), as pure functions.

Shared by the admin API, the writer and the reader, each of which commits them with its own
changes through the sequenced-commit primitive.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import replace
from datetime import timedelta

from slate_ops.config import CheckpointOptions, check_duration
from slate_ops.errors import CheckpointExpiredError, CheckpointNotFoundError
from slate_ops.manifest.model import Checkpoint, Manifest, WriterCheckpoint
from slate_ops.manifest.store import VersionedManifest, require_not_destroyed, require_usable


def with_new_checkpoint(
    current: VersionedManifest,
    options: CheckpointOptions,
    checkpoint_id: uuid.UUID,
    now: float,
    location: str,
    metadata: WriterCheckpoint | None = None,
    *,
    on_destroyed: bool = False,
) -> Manifest:
    """``current`` plus a new checkpoint, by the two procedures of docs/design/engine.md, "Creating a
    checkpoint".

    Shared by the admin API and the writer, which commits it with its own changes. A destroyed
    database refuses new checkpoints, except, with ``on_destroyed``, one made from a live source
    checkpoint: a final checkpoint for a database that reads it through a clone, shard or merge.
    That pins nothing the source does not pin already, and the database's GC waits for both.
    """
    manifest = current.value
    if options.source is None:
        require_usable(manifest, location)
        manifest_id = current.id + 1
    else:
        if not on_destroyed:
            require_not_destroyed(manifest, location)
        manifest_id = live_checkpoint(manifest, options.source, now, location).manifest_id
    checkpoint = Checkpoint(
        id=checkpoint_id,
        manifest_id=manifest_id,
        create_time_s=int(now),
        expire_time_s=expiry_time(now, options.lifetime),
        metadata=metadata,
        name=options.name,
    )
    return manifest.with_changes(checkpoints=(*manifest.checkpoints, checkpoint))


def live_checkpoint(manifest: Manifest, checkpoint_id: uuid.UUID, now: float, location: str) -> Checkpoint:
    """The checkpoint, refusing a missing one (CheckpointNotFoundError) or an expired one."""
    checkpoint = manifest.checkpoint(checkpoint_id)
    if checkpoint is None:
        raise checkpoint_not_found(checkpoint_id, location)
    if checkpoint.is_expired(now):
        raise CheckpointExpiredError(
            f"checkpoint {checkpoint_id} of {location} expired at {checkpoint.expires_at} "
            "(unix seconds); use a live checkpoint or create a new one"
        )
    return checkpoint


def with_expiry(manifest: Manifest, checkpoint_id: uuid.UUID, expire_time_s: int | None) -> Manifest:
    """``manifest`` with the checkpoint's expiry time replaced."""
    return manifest.with_changes(
        checkpoints=tuple(
            replace(c, expire_time_s=expire_time_s) if c.id == checkpoint_id else c
            for c in manifest.checkpoints
        )
    )


def checkpoint_not_found(checkpoint_id: uuid.UUID, location: str) -> CheckpointNotFoundError:
    return CheckpointNotFoundError(
        f"no checkpoint {checkpoint_id} in the current manifest of {location}; "
        "list them with `slate-ops list-checkpoints`"
    )


def expiry_time(now: float, lifetime: timedelta | None) -> int | None:
    """``now + lifetime`` (None: never expires); a lifetime that is not positive or is longer than
    :data:`slate_ops.config.MAX_DURATION` is refused (:class:`~slate_ops.errors.InvalidDurationError`)."""
    if lifetime is None:
        return None
    # Rounded up: a checkpoint may outlive its lifetime by under a second, never fall short of it.
    return math.ceil(now + check_duration(lifetime, "checkpoint lifetime").total_seconds())
