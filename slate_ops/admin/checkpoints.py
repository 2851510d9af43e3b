"""Checkpoints through the admin API (docs/design/engine.md, "Creating a checkpoint").

Each call reads the current manifest, applies one change and commits the next version with the
sequenced-commit primitive, re-applying the change on a lost race. A refused call commits nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from slate_ops.admin.clone import FINAL_CHECKPOINT_PREFIX, SOURCE_CHECKPOINT_PREFIX
from slate_ops.admin.rescale import MERGE_CHECKPOINT_PREFIX, SPLIT_CHECKPOINT_PREFIX
from slate_ops.clock import render_utc
from slate_ops.config import CheckpointCreateResult, CheckpointOptions, check_duration
from slate_ops.engine.wal_chain import walk_chain
from slate_ops.engine.wal_store import WalStore
from slate_ops.errors import CheckpointProtectedError, InvalidArgumentError
from slate_ops.gc.checkpoints import CheckpointExpiryReport, expire_checkpoints
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
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime


def create_checkpoint(
    path: str,
    store: ObjectStore,
    options: CheckpointOptions | None = None,
    *,
    clock: Runtime = SYSTEM_RUNTIME,
    new_id: Callable[[], uuid.UUID] | None = None,
) -> CheckpointCreateResult:
    """Create a checkpoint of the current manifest, or of ``options.source``'s manifest.

    From the current manifest, ``manifest_id`` is the version being written (V+1), so the checkpoint
    is committed together with the state it pins. From a source checkpoint it is the source's
    ``manifest_id``; a missing or expired source is refused.
    """
    options = options or CheckpointOptions()
    require_creatable_name(options.name)
    manifests = ManifestStore(store, path)
    checkpoint_id = (new_id or clock.new_uuid)()
    committed = manifests.update(checkpoint_adder(manifests, options, checkpoint_id, clock))
    created = committed.value.checkpoint(checkpoint_id)
    assert created is not None
    return CheckpointCreateResult(id=checkpoint_id, manifest_id=created.manifest_id)


def require_creatable_name(name: str | None) -> None:
    """Refuse (:class:`InvalidArgumentError`) a checkpoint name reserved for tags or for the
    checkpoints slate_ops takes itself (both engines' ``create_checkpoint``)."""
    if name is not None and name.startswith(TAG_PREFIX):
        raise InvalidArgumentError(
            f"checkpoint names starting with {TAG_PREFIX!r} are reserved for tags; use create_tag"
        )
    if name is not None and name.startswith(RESERVED_NAME_PREFIX):
        raise InvalidArgumentError(
            f"checkpoint name {name!r}: names starting with {RESERVED_NAME_PREFIX!r} are reserved "
            "for the checkpoints slate_ops takes itself (clones, splits, merges, compaction); pick another"
        )


TAG_PREFIX = "tag:"
"""Checkpoints named ``tag:<name>`` are tags (:mod:`slate_ops.admin.tags`): they never expire."""

RESERVED_NAME_PREFIX = "slate_ops/"
"""Names of the checkpoints slate_ops takes itself; ``create_checkpoint`` refuses them."""


@dataclass(frozen=True)
class Protection:
    """Why a checkpoint may not be given an expiry, shortened or deleted by hand
    (docs/design/clones-and-destroy.md, "Protected checkpoints").

    ``what`` describes the checkpoint, ``dependents`` are the databases that depend on it (none for a
    tag), ``release`` is the command that releases it properly and ``never_expires``
    says whether it must keep no expiry at all (final checkpoints, tags) or may only not be shortened
    (the source checkpoints of operations in progress, which expire by design).
    """

    what: str
    dependents: tuple[str, ...]
    release: str
    never_expires: bool


def protection_of(checkpoint: Checkpoint) -> Protection | None:
    """The :class:`Protection` of ``checkpoint``, or None for an ordinary one (an operator's, a
    reader's, the compactor's), which may be refreshed and deleted freely."""
    name = checkpoint.name or ""
    if name.startswith(TAG_PREFIX):
        tag = name[len(TAG_PREFIX) :]
        return Protection(
            f"the tag {tag!r} (tags never expire)",
            (),
            f"delete the tag instead (`delete-tag -n {tag}`)",
            True,
        )
    if name.startswith(FINAL_CHECKPOINT_PREFIX):
        db = name[len(FINAL_CHECKPOINT_PREFIX) :]
        return Protection(
            f"the final checkpoint of database {db!r} (a clone, shard or merge target that reads this "
            "database's SSTs in place)",
            (db,),
            f"destroy that database (`slate-ops --path {db} destroy`; its final checkpoints are released "
            "when it is deleted, at once with `destroy --hard`), or let its GC detach this database once "
            "it reads none of its SSTs any more",
            True,
        )
    operations = (
        (SOURCE_CHECKPOINT_PREFIX, "clone", "the clone"),
        (SPLIT_CHECKPOINT_PREFIX, "split", "the split"),
        (MERGE_CHECKPOINT_PREFIX, "merge", "the merge"),
    )
    for prefix, command, operation in operations:
        if name.startswith(prefix):
            targets = (
                tuple(name[len(prefix) :].split(","))
                if prefix == SPLIT_CHECKPOINT_PREFIX
                else (name[len(prefix) :],)
            )
            return Protection(
                f"the source checkpoint of {operation} creating {', '.join(map(repr, targets))}",
                targets,
                f"re-run the same `slate-ops {command}` to finish it (it then deletes this checkpoint), "
                "or destroy the databases it created and let the checkpoint expire",
                False,
            )
    return None


def _refused(checkpoint: Checkpoint, protection: Protection, change: str, location: str) -> Exception:
    dependents = ", ".join(repr(d) for d in protection.dependents)
    depends = f", and {dependents} depends on it" if dependents else ""
    return CheckpointProtectedError(
        f"cannot {change} checkpoint {checkpoint.id} of {location}: it is {protection.what}{depends}; "
        f"nothing was changed. To release it, {protection.release}"
    )


def require_refreshable(checkpoint: Checkpoint, expire_time_s: int | None, location: str) -> None:
    """Refuse with :class:`CheckpointProtectedError` to move a protected checkpoint's expiry to
    ``expire_time_s`` if that gives it an expiry it must not have, or an earlier one."""
    protection = protection_of(checkpoint)
    if protection is None or expire_time_s is None:
        return
    current = checkpoint.expires_at  # None: never expires (stored absent or 0)
    if protection.never_expires or current is None:
        raise _refused(checkpoint, protection, f"give an expiry ({render_utc(expire_time_s)}) to", location)
    if expire_time_s < current:
        raise _refused(
            checkpoint,
            protection,
            f"shorten (to {render_utc(expire_time_s)}, from {render_utc(current)})",
            location,
        )


def require_deletable(checkpoint: Checkpoint, location: str) -> None:
    """Refuse with :class:`CheckpointProtectedError` to delete a protected checkpoint by hand."""
    protection = protection_of(checkpoint)
    if protection is not None:
        raise _refused(checkpoint, protection, "delete", location)


def checkpoint_adder(
    manifests: ManifestStore, options: CheckpointOptions, checkpoint_id: uuid.UUID, clock: Runtime
) -> Callable[[VersionedManifest], Manifest]:
    """The manifest change that adds a checkpoint (docs/design/engine.md, "Creating a checkpoint").

    From the current manifest, the checkpoint also covers writes durable only in the WAL so far:
    readers of it replay the WAL up to ``wal_id_last_seen`` (docs/design/engine.md, "DbReader"), so that is
    raised to the last id of the WAL chain (one LIST, before the commit loop; objects beyond its
    first missing id are orphans or PUTs in flight, never acknowledged).
    """
    listing = WalStore(manifests.store, manifests.path).list_sizes() if options.source is None else []

    def add(current: VersionedManifest) -> Manifest:
        manifest = with_new_checkpoint(current, options, checkpoint_id, clock.now(), manifests.location)
        if options.source is not None:
            return manifest
        last_wal = walk_chain(listing, manifest.replay_after_wal_id).end - 1
        return manifest.with_changes(wal_id_last_seen=max(manifest.wal_id_last_seen, last_wal))

    return add


def refresh_checkpoint(
    path: str,
    store: ObjectStore,
    checkpoint_id: uuid.UUID,
    lifetime: timedelta | None = None,
    *,
    clock: Runtime = SYSTEM_RUNTIME,
) -> Checkpoint:
    """Set the checkpoint's expiry to now + ``lifetime`` (None: never expires).

    ``lifetime`` must be positive and at most 100 years (:class:`~slate_ops.errors.InvalidDurationError`).
    An expired checkpoint is refused: GC may already have released what it pinned. A protected
    checkpoint (:func:`protection_of`: a final checkpoint, an operation's source checkpoint, a tag) is
    refused an expiry it must not have, or an earlier one (:class:`CheckpointProtectedError`, naming the
    database that depends on it); a refused call writes nothing.
    """
    if lifetime is not None:
        check_duration(lifetime, "checkpoint lifetime")
    manifests = ManifestStore(store, path)

    def refresh(current: VersionedManifest) -> Manifest:
        manifest = current.value
        require_not_destroyed(manifest, manifests.location)
        now = clock.now()
        checkpoint = live_checkpoint(manifest, checkpoint_id, now, manifests.location)
        expire_time_s = expiry_time(now, lifetime)
        require_refreshable(checkpoint, expire_time_s, manifests.location)
        return with_expiry(manifest, checkpoint_id, expire_time_s)

    committed = manifests.update(refresh)
    refreshed = committed.value.checkpoint(checkpoint_id)
    assert refreshed is not None
    return refreshed


def delete_checkpoint(
    path: str, store: ObjectStore, checkpoint_id: uuid.UUID, *, dry_run: bool = True
) -> Checkpoint:
    """Remove the checkpoint from the manifest and return it; a missing id is refused, and so is a
    protected one (:func:`protection_of`; :class:`CheckpointProtectedError` names the database that
    depends on it and what releases it).

    A dry run (the default: deleting a checkpoint removes protection) returns the checkpoint that
    would be removed, or raises what the real run would, and writes nothing.
    """
    manifests = ManifestStore(store, path)
    if dry_run:
        found = manifests.read_latest_required().value.checkpoint(checkpoint_id)
        if found is None:
            raise checkpoint_not_found(checkpoint_id, manifests.location)
        require_deletable(found, manifests.location)
        return found
    removed: list[Checkpoint] = []

    def delete(current: VersionedManifest) -> Manifest:
        manifest = current.value
        checkpoint = manifest.checkpoint(checkpoint_id)
        if checkpoint is None:
            raise checkpoint_not_found(checkpoint_id, manifests.location)
        require_deletable(checkpoint, manifests.location)
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
    "RESERVED_NAME_PREFIX",
    "TAG_PREFIX",
    "CheckpointExpiryReport",
    "Protection",
    "create_checkpoint",
    "delete_checkpoint",
    "expire_checkpoints",
    "list_checkpoints",
    "protection_of",
    "refresh_checkpoint",
    "require_creatable_name",
    "require_deletable",
    "require_refreshable",
]
