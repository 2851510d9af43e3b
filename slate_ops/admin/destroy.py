"""Destroying a database (docs/design/clones-and-destroy.md, "Deleting a Database" and ``destroy`` in "Public
API").

Soft: fence any writer (bump the writer epoch and fence the WAL), remove the writer's checkpoint and
set ``destroyed_at_s``; the garbage collector deletes the data once the grace period has passed and
every checkpoint is gone. Hard: refuse while unexpired checkpoints exist, else delete the database
now through :func:`slate_ops.gc.destroyed.delete_database` — the one code path GC uses too: mark it
destroyed (fencing writers and compactors) and fence the WAL, release the final checkpoints it holds
on external databases, commit a tombstone manifest, advance the GC boundaries, and delete only the
database's own objects (matched by full key) except the tombstone, the WAL fence, the last
``.compactions`` file and the ``gc/`` boundaries. A crash part-way is finished by a re-run.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from slate_ops.engine.wal_store import WalStore, fence_chain_end
from slate_ops.errors import InvalidDeletionError
from slate_ops.gc.destroyed import delete_database, marked_destroyed
from slate_ops.manifest.model import Manifest, WriterCheckpoint
from slate_ops.manifest.store import WRITER_EPOCH, ManifestStore, VersionedManifest
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.metering import ZERO, RequestCounts
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime


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
    # Hard only: the tombstone manifest the deletion writes (or found), and every object it writes and
    # keeps: the tombstone, the WAL fence, the last .compactions file, the gc/deleted.<id> marker.
    tombstone: str | None = None
    kept: tuple[str, ...] = ()
    requests: RequestCounts = field(default=ZERO, compare=False)
    """The object-store requests and bytes this operation made (through the admin handle; zero
    when called directly)."""


def destroy(
    path: str,
    store: ObjectStore,
    *,
    soft: bool = True,
    dry_run: bool = True,
    clock: Runtime = SYSTEM_RUNTIME,
) -> DestroyReport:
    """Destroy the database at ``path``, softly (the default) or hard; see the module docstring.

    A hard destroy raises :class:`InvalidDeletionError` while unexpired checkpoints exist (a live
    writer's, a reader's, a clone's final checkpoint) and then changes nothing; on a path already
    deleted (its tombstone is the latest manifest) it deletes what an interrupted run left and
    reports the tombstone. :class:`DbNotFoundError` if the path never held a database. The default
    dry run reports exactly what a real run would delete and change, and changes nothing;
    ``dry_run=False`` acts.
    """
    manifests = ManifestStore(store, path)
    if not soft:
        return _destroy_hard(manifests, dry_run, clock)
    current = manifests.read_latest_required()
    return _destroy_soft(manifests, current, dry_run, clock)


def _destroy_soft(
    manifests: ManifestStore, current: VersionedManifest, dry_run: bool, clock: Runtime
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
    wal = WalStore(manifests.store, manifests.path)
    location, epoch = manifests.location, fenced.epoch
    fence_chain_end(wal, claimed.value.replay_after_wal_id, fenced.confirm, location, "destroy", epoch)
    now = int(clock.now())
    # Step 3. Through the fenced store: a writer opened since our claim makes this fail (re-run it).
    committed = fenced.update(lambda latest: marked_destroyed(latest.value, now))
    return DestroyReport(manifests.path, True, False, committed.value.destroyed_at_s, (), (), tuple(removed))


def _destroy_hard(manifests: ManifestStore, dry_run: bool, clock: Runtime) -> DestroyReport:
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

    done = delete_database(
        manifests.path, manifests.store, now=now, refuse=refuse_if_checkpointed, dry_run=dry_run
    )
    return DestroyReport(
        path=done.path,
        soft=False,
        dry_run=dry_run,
        destroyed_at_s=int(now) if done.destroyed_at_s is None else done.destroyed_at_s,
        deleted=done.deleted_keys,
        released_parent_checkpoints=done.released,
        tombstone=done.tombstone,
        kept=done.kept,
    )


__all__ = ["DestroyReport", "destroy"]
