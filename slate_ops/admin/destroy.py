"""Destroying a database (docs/design/clones-and-destroy.md, "Deleting a Database" and ``destroy`` in "Public
API").

Soft: fence any writer (bump the writer epoch and fence the WAL), remove the writer's checkpoint and
set ``destroyed_at_s``; the garbage collector deletes the data once the grace period has passed and
every checkpoint is gone. Hard: refuse while unexpired checkpoints exist, else set
``destroyed_at_s``, release the final checkpoints this database holds on its external (parent)
databases, delete every object under the path and the current manifest last, so a crash part-way
leaves a destroyed manifest that a re-run finishes.

Releasing the final checkpoints and deleting the objects are the garbage collector's steps for
destroyed databases too (:mod:`slate_ops.gc.destroyed`); a hard destroy runs them at once.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from slate_ops.clock import SYSTEM_CLOCK, Clock
from slate_ops.errors import InvalidDeletionError
from slate_ops.gc.destroyed import delete_db_objects, release_external_checkpoints
from slate_ops.layout import WalStore
from slate_ops.manifest.model import Manifest, WriterCheckpoint
from slate_ops.manifest.store import WRITER_EPOCH, ManifestStore, VersionedManifest
from slate_ops.objstore.base import ObjectStore


@dataclass(frozen=True)
class DestroyReport:
    """What :func:`destroy` did, or would do with ``dry_run``."""

    path: str
    soft: bool
    dry_run: bool
    destroyed_at_s: int | None
    deleted: tuple[str, ...]  # object keys, in deletion order (hard only)
    released_parent_checkpoints: tuple[tuple[str, uuid.UUID], ...]  # (external db path, checkpoint id)
    removed_writer_checkpoints: tuple[uuid.UUID, ...] = ()  # soft only


def destroy(
    path: str,
    store: ObjectStore,
    *,
    soft: bool = True,
    dry_run: bool = True,
    clock: Clock = SYSTEM_CLOCK,
) -> DestroyReport:
    """Destroy the database at ``path``, softly (the default) or hard; see the module docstring.

    A hard destroy raises :class:`InvalidDeletionError` while unexpired checkpoints exist (a live
    writer's, a reader's, a clone's final checkpoint) and then changes nothing. The default dry run
    reports exactly what a real run would delete and change, and changes nothing; ``dry_run=False``
    acts.
    """
    manifests = ManifestStore(store, path)
    current = manifests.read_latest_required()
    if soft:
        return _destroy_soft(manifests, current, dry_run, clock)
    return _destroy_hard(manifests, current, dry_run, clock)


def _destroy_soft(
    manifests: ManifestStore, current: VersionedManifest, dry_run: bool, clock: Clock
) -> DestroyReport:
    if dry_run:
        m = current.value
        writer = tuple(c.id for c in m.checkpoints if isinstance(c.metadata, WriterCheckpoint))
        at = m.destroyed_at_s if m.destroyed_at_s is not None else int(clock.now())
        return DestroyReport(manifests.path, True, True, at, (), (), writer)

    removed: list[uuid.UUID] = []

    def drop_writer_checkpoints(latest: VersionedManifest, epoch: int) -> Manifest:
        checkpoints = latest.value.checkpoints
        removed[:] = [c.id for c in checkpoints if isinstance(c.metadata, WriterCheckpoint)]
        return latest.value.with_changes(checkpoints=tuple(c for c in checkpoints if c.id not in removed))

    # Step 1: claim write ownership (fences the writer's manifest commits) and fence the WAL (its
    # next WAL write fails), as a new writer would; step 2 rides along with the epoch bump.
    fenced, claimed = manifests.claim(WRITER_EPOCH, drop_writer_checkpoints)
    WalStore(manifests.store, manifests.path).fence(
        max(claimed.value.replay_after_wal_id, claimed.value.next_wal_sst_id - 1)
    )
    now = int(clock.now())
    # Step 3. Through the fenced store: a writer opened since our claim makes this fail (re-run it).
    committed = fenced.update(lambda latest: _marked_destroyed(latest.value, now))
    return DestroyReport(manifests.path, True, False, committed.value.destroyed_at_s, (), (), tuple(removed))


def _destroy_hard(
    manifests: ManifestStore, current: VersionedManifest, dry_run: bool, clock: Clock
) -> DestroyReport:
    now = clock.now()

    def refuse_if_checkpointed(manifest: Manifest) -> None:
        active = [c for c in manifest.checkpoints if not c.is_expired(now)]
        if active:
            listed = ", ".join(f"{c.id}" + (f" ({c.name})" if c.name else "") for c in active)
            raise InvalidDeletionError(
                f"cannot hard-destroy {manifests.location}: {len(active)} unexpired checkpoint(s) still "
                f"need its data: {listed}. Close writers and readers, destroy its clones, delete or let "
                "the checkpoints expire, or destroy softly (GC finishes once they are gone). Nothing "
                "was deleted."
            )

    if dry_run:
        refuse_if_checkpointed(current.value)
        keys = [meta.key for meta in delete_db_objects(manifests.path, manifests.store, dry_run=True)]
        at = current.value.destroyed_at_s
        if at is None:  # a real run first commits the next version with destroyed_at_s set
            at = int(now)
            keys.append(manifests.sequence.key(current.id + 1))
        held = _held_external_checkpoints(current.value, manifests.store)
        return DestroyReport(manifests.path, False, True, at, tuple(keys), tuple(held))

    def mark_destroyed(latest: VersionedManifest) -> Manifest | None:
        refuse_if_checkpointed(latest.value)  # steps 1-2 in one CAS: no checkpoint can slip in
        return _marked_destroyed(latest.value, int(now))

    committed = manifests.update(mark_destroyed)
    # Once destroyed_at_s is set no checkpoint can be created, so the check stays true from here on.
    released = release_external_checkpoints(committed.value, manifests.store)
    deleted = delete_db_objects(manifests.path, manifests.store)  # steps 3-4: current manifest last
    return DestroyReport(
        manifests.path,
        False,
        False,
        committed.value.destroyed_at_s,
        tuple(meta.key for meta in deleted),
        tuple(released),
    )


def _marked_destroyed(manifest: Manifest, now: int) -> Manifest | None:
    """``destroyed_at_s`` set (None if already set), also fencing any running compactor: its next
    commit raises FencedError instead of adding SSTs and a checkpoint to a destroyed database."""
    if manifest.destroyed_at_s is not None:
        return None
    return manifest.with_changes(destroyed_at_s=now, compactor_epoch=manifest.compactor_epoch + 1)


def _held_external_checkpoints(manifest: Manifest, store: ObjectStore) -> list[tuple[str, uuid.UUID]]:
    """The final checkpoints of ``manifest`` that its external databases hold now."""
    held = []
    for ed in manifest.external_dbs:
        external = ManifestStore(store, ed.path)
        latest = external.read_latest()
        if latest is not None and latest.value.checkpoint(ed.final_checkpoint_id) is not None:
            held.append((external.path, ed.final_checkpoint_id))
    return held


__all__ = ["DestroyReport", "destroy"]
