"""Deleting a database: the one code path of a hard destroy and of GC of a soft-destroyed database
(docs/design/clones-and-destroy.md, "Deleting a Database"; docs/design/gc.md, "One run" step 2).

:func:`delete_database` runs these steps; a crash at any point is finished by running it again:

1. Unless already destroyed: mark the database destroyed in one CAS that bumps ``writer_epoch`` (a
   claim) and ``compactor_epoch``, which fences every writer's and compactor's manifest commits (and
   refuses while the caller's ``refuse`` objects, e.g. to unexpired checkpoints). Then fence the WAL:
   a window fence at the end of its chain, ``F`` (docs/design/engine.md, "Several WAL PUTs in
   flight"; a writer's first id after it would be ``N``, past ``F``'s window and every listed id) —
   unless the database was never initialised (an unfinished clone, split or merge, which no writer
   can open): then no fence is needed, its WAL is deleted whole and a new database there (the clone
   made again) starts its WAL ids afresh.
2. Release the final checkpoints this database (a clone, shard or merge) holds on its external
   databases.
3. Commit the *tombstone* as the next manifest ``T``: ``destroyed_at_s`` and ``deleted_at_s`` set,
   the epochs kept, ``replay_after_wal_id = F``, ``next_wal_sst_id = N`` and nothing else. Readers
   see no database; a new database created at the path continues its epochs and ids
   (``ManifestStore.create_initial``).
4. Claim the ``.compactions`` namespace at the tombstone's compactor epoch (its file ``C``), write
   the empty marker ``gc/deleted.<T>`` (one LIST then tells discovery the path is deleted), then
   advance the GC boundaries: ``manifest`` to ``T - 1`` and ``compactions`` to ``C - 1``, before
   deleting any of those files; boundary files are never deleted and never move backward.
5. Delete the database's own objects, matched by full key (:mod:`slate_ops.layout`): manifests
   below ``T``, WAL objects below ``N`` but ``F`` (the orphans inside ``F``'s window too), every
   SST under ``compacted/``, ``.compactions`` files below ``C``. Kept: the tombstone, the WAL fence
   ``F``, the ``.compactions`` file ``C`` and ``gc/`` (the boundaries and the marker).
   Nothing else under the path is touched: not a nested database, not an object of no database.

Why the kept objects fence every stale process: a writer caching manifest ``M < T`` commits ``M + 1``,
which is at or behind the boundary (:class:`~slate_ops.errors.BoundaryViolationError`) or ``T``
itself; either way it re-reads, finds the tombstone at a higher epoch and gets
:class:`~slate_ops.errors.FencedError`. Its WAL writes stop at ``F``; whatever it wrote below ``N``
is never read (the tombstone, and any database after it, replays only ids at or above ``N``). A compactor
is fenced the same way in ``.compactions`` by ``C`` and its boundary.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

from slate_ops.compaction.state import CompactionsStore
from slate_ops.engine.wal_store import WalStore, fence_chain_end
from slate_ops.errors import DbNotFoundError, FencedError, InvalidDeletionError
from slate_ops.gc.report import DeletedObject
from slate_ops.layout import (
    COMPACTED_DIR,
    COMPACTIONS_DIR,
    MANIFEST_DIR,
    WAL_DIR,
    deleted_marker_key,
    own_directory,
    parse_compactions_key,
    parse_own_manifest_key,
    parse_sst_key,
    parse_wal_key,
)
from slate_ops.manifest.model import Manifest
from slate_ops.manifest.store import WRITER_EPOCH, ManifestStore, VersionedManifest
from slate_ops.objstore.base import ObjectMeta, ObjectStore
from slate_ops.objstore.local import db_not_found

log = logging.getLogger(__name__)

UNBOUNDED = 2**64
"""A bound above every id: everything listed is below it."""


def release_external_checkpoints(manifest: Manifest, store: ObjectStore) -> list[tuple[str, uuid.UUID]]:
    """Remove ``manifest``'s final checkpoint from every external database; returns what was removed.

    Idempotent: a checkpoint already gone, or an external database that no longer exists (or was
    deleted), is skipped. Used by hard destroy and by GC for destroyed clones.
    """
    released: list[tuple[str, uuid.UUID]] = []
    for ed in manifest.external_dbs:
        external = ManifestStore(store, ed.path)
        if _release(external, ed.final_checkpoint_id):
            released.append((external.path, ed.final_checkpoint_id))
    return released


def held_external_checkpoints(manifest: Manifest, store: ObjectStore) -> list[tuple[str, uuid.UUID]]:
    """The final checkpoints of ``manifest`` that its external databases hold now (what
    :func:`release_external_checkpoints` would release)."""
    held = []
    for ed in manifest.external_dbs:
        external = ManifestStore(store, ed.path)
        latest = external.read_latest()
        if latest is not None and latest.value.checkpoint(ed.final_checkpoint_id) is not None:
            held.append((external.path, ed.final_checkpoint_id))
    return held


def _release(external: ManifestStore, checkpoint_id: uuid.UUID) -> bool:
    """Remove one checkpoint from ``external``; False if it (or the database) is already gone."""
    found = False

    def drop(current: VersionedManifest) -> Manifest | None:
        nonlocal found
        found = current.value.checkpoint(checkpoint_id) is not None
        if not found:
            return None
        keep = tuple(c for c in current.value.checkpoints if c.id != checkpoint_id)
        return current.value.with_changes(checkpoints=keep)

    try:
        if external.read_latest() is None:
            return False
        external.update(drop)
    except DbNotFoundError:  # deleted while we looked
        return False
    return found


@dataclass(frozen=True)
class Deletion:
    """What :func:`delete_database` did, or would do with ``dry_run``.

    ``marked`` is the key of the manifest that marks the database destroyed when it was not yet
    (written, then deleted with the older versions; in ``deleted_keys``), ``tombstone`` the key of the
    tombstone manifest (written, or found), ``kept`` the objects a deletion writes and keeps (the
    tombstone, the WAL fence, the ``.compactions`` file; ``gc/`` boundaries are never touched).
    ``deleted`` lists the deleted objects in deletion order; ``deleted_keys`` the same keys with
    ``marked`` in its place, exactly what a real run deletes.
    """

    path: str
    dry_run: bool
    destroyed_at_s: int | None
    marked: str | None
    tombstone: str
    kept: tuple[str, ...]
    deleted: tuple[ObjectMeta, ...]
    released: tuple[tuple[str, uuid.UUID], ...]

    @property
    def deleted_keys(self) -> tuple[str, ...]:
        keys = [meta.key for meta in self.deleted]
        if self.dry_run and self.marked is not None:
            keys.append(self.marked)  # the highest manifest id below the tombstone: deleted last
        return tuple(keys)


def delete_database(
    path: str,
    store: ObjectStore,
    *,
    now: float,
    refuse: Callable[[Manifest], None],
    dry_run: bool,
) -> Deletion:
    """Delete the database at ``path`` in the steps of the module docstring; see :class:`Deletion`.

    ``refuse(manifest)`` raises to stop before anything changes (hard destroy: unexpired checkpoints;
    GC: the grace period or a live checkpoint); it is checked first and again inside the commits. A
    database already deleted (its tombstone is the latest manifest) is finished: leftovers of an
    interrupted run are deleted, nothing else changes. :class:`DbNotFoundError` if the path holds no
    manifest at all. The dry run reads only and reports exactly what a real run would delete.
    """
    manifests = ManifestStore(store, path)
    current = manifests.read_current()
    if current is None:
        return _no_database(manifests)
    if not current.value.is_tombstone:
        refuse(current.value)
    if dry_run:
        return _plan(manifests, current)
    marked: str | None = None
    released: list[tuple[str, uuid.UUID]] = []
    tombstone = current
    if not current.value.is_tombstone:
        if current.value.destroyed_at_s is None:
            current = _mark_destroyed(manifests, now, refuse)
            marked = manifests.sequence.key(current.id)
        destroyed = current.value
        fence, first = NO_FENCE, NO_FENCE + 1
        if destroyed.initialized:  # else no writer ever held it (writers refuse it): nothing to fence
            wal = WalStore(store, manifests.path)
            location, epoch = manifests.location, destroyed.writer_epoch
            fenced = fence_chain_end(
                wal, destroyed.replay_after_wal_id, _no_writer, location, "deletion", epoch
            )
            fence, first = fenced.fence_id, fenced.first_id
        released = release_external_checkpoints(destroyed, store)
        tombstone = _commit_tombstone(manifests, now, fence, first, refuse)
    compactions_id = _claim_compactions(store, manifests.path, tombstone.value.compactor_epoch, now)
    store.put(deleted_marker_key(manifests.path, tombstone.id), b"")  # discovery skips the path
    if tombstone.id > 1:
        manifests.advance_boundary(tombstone.id - 1)
    if compactions_id > 1:
        CompactionsStore(store, manifests.path).sequence.advance_boundary(compactions_id - 1)
    wal_below, fence = _wal_below(tombstone.value), _fence_of(tombstone.value)
    doomed = _own_objects(store, manifests.path, tombstone.id, wal_below, fence, compactions_id)
    if manifests.sequence.list(start_after_id=tombstone.id):
        # A new database was created at the path after the tombstone: what is left belongs to its
        # GC (it never reads an id at or below the tombstone's), and its new SSTs must not be touched.
        log.info("a new database exists at %s; its GC deletes what the deletion left", manifests.location)
        doomed = []
    for meta in doomed:
        store.delete(meta.key)
    return Deletion(
        path=manifests.path,
        dry_run=False,
        destroyed_at_s=tombstone.value.destroyed_at_s,
        marked=marked,
        tombstone=manifests.sequence.key(tombstone.id),
        kept=_kept(manifests, tombstone.id, fence, compactions_id),
        deleted=tuple(doomed),
        released=tuple(released),
    )


def _no_database(manifests: ManifestStore) -> NoReturn:
    raise db_not_found(
        manifests.store,
        f"no database at {manifests.location}: no manifest under {manifests.sequence.directory}/. "
        "Check the store URL and path.",
    )


NO_FENCE = 0
"""The "fence" of a deleted database that was never initialised (an unfinished clone, split or merge):
no writer ever held it, so its WAL is deleted whole and a new database there starts its WAL afresh."""


def _no_writer() -> None:
    """The deletion's confirmation when fencing the WAL: no writer claims a destroyed database."""


def _fence_of(tombstone: Manifest) -> int:
    """The WAL fence the tombstone keeps (a tombstone written before window fences has it at
    ``replay_after_wal_id = next_wal_sst_id - 1`` too)."""
    return tombstone.replay_after_wal_id


def _wal_below(tombstone: Manifest) -> int:
    """WAL objects below this id, but the fence, are the deleted database's: its chain and the
    orphans inside the fence's window."""
    return UNBOUNDED if _fence_of(tombstone) == NO_FENCE else tombstone.next_wal_sst_id


def _kept(manifests: ManifestStore, tombstone_id: int, fence: int, compactions_id: int) -> tuple[str, ...]:
    wal = WalStore(manifests.store, manifests.path)
    compactions = CompactionsStore(manifests.store, manifests.path).sequence
    return (
        manifests.sequence.key(tombstone_id),
        *([] if fence == NO_FENCE else [wal.key(fence)]),
        compactions.key(compactions_id),
        deleted_marker_key(manifests.path, tombstone_id),
    )


def _mark_destroyed(
    manifests: ManifestStore, now: float, refuse: Callable[[Manifest], None]
) -> VersionedManifest:
    """Step 1: ``destroyed_at_s`` set in the CAS that bumps the writer epoch (a claim) and the
    compactor epoch, so a writer's and a compactor's next manifest commit raise FencedError."""

    def mark(current: VersionedManifest, epoch: int) -> Manifest:
        refuse(current.value)  # in the same CAS: no checkpoint can slip in
        return marked_destroyed(current.value, int(now)) or current.value

    _, claimed = manifests.claim(WRITER_EPOCH, mark)
    return claimed


def marked_destroyed(manifest: Manifest, now: int) -> Manifest | None:
    """``destroyed_at_s`` set (None if already set), also fencing any running compactor: its next
    commit raises FencedError instead of adding SSTs and a checkpoint to a destroyed database."""
    if manifest.destroyed_at_s is not None:
        return None
    return manifest.with_changes(destroyed_at_s=now, compactor_epoch=manifest.compactor_epoch + 1)


def tombstone_of(manifest: Manifest, now: int, fence: int, first_wal_id: int | None = None) -> Manifest:
    """The tombstone of the destroyed ``manifest`` whose WAL was fenced at ``fence``: its epochs and
    ``destroyed_at_s``, ``deleted_at_s = now``, WAL ids continuing at ``first_wal_id`` (past the
    fence's window; ``fence + 1`` if not given, from 1 with :data:`NO_FENCE`), nothing else."""
    first = fence + 1 if first_wal_id is None else first_wal_id
    return Manifest(
        destroyed_at_s=manifest.destroyed_at_s,
        deleted_at_s=now,
        writer_epoch=manifest.writer_epoch,
        compactor_epoch=manifest.compactor_epoch,
        replay_after_wal_id=fence,
        wal_id_last_seen=first - 1,
        next_wal_sst_id=first,
    )


def _commit_tombstone(
    manifests: ManifestStore, now: float, fence: int, first: int, refuse: Callable[[Manifest], None]
) -> VersionedManifest:
    def entomb(current: VersionedManifest | None) -> Manifest | None:
        if current is None:
            raise DbNotFoundError(f"no database at {manifests.location}: its manifest disappeared")
        if current.value.is_tombstone:
            return None  # a concurrent deletion committed it
        refuse(current.value)
        if current.value.destroyed_at_s is None:
            raise InvalidDeletionError(
                f"{manifests.location} is no longer marked destroyed (manifest {current.id}); nothing "
                "more was deleted. Destroy it again if that is still wanted."
            )
        return tombstone_of(current.value, int(now), fence, first)

    committed = manifests.sequence.update(entomb)
    assert committed is not None
    return committed


def _claim_compactions(store: ObjectStore, path: str, epoch: int, now: float) -> int:
    """The id of the ``.compactions`` file at the tombstone's compactor ``epoch``, written if needed."""
    compactions = CompactionsStore(store, path)
    for _ in range(8):
        latest = compactions.sequence.read_latest()
        if latest is not None and latest.value.compactor_epoch >= epoch:
            return latest.id
        try:
            compactions.claim(epoch, now)
        except FencedError:
            continue  # a concurrent deletion claimed it first: re-read
        claimed = compactions.sequence.cached()
        assert claimed is not None
        return claimed.id
    raise InvalidDeletionError(
        f"the .compactions files of {path!r} kept changing under the deletion; stop every compactor of "
        "it and re-run"
    )


def _own_objects(
    store: ObjectStore, path: str, manifest_below: int, wal_below: int, wal_fence: int, compactions_below: int
) -> list[ObjectMeta]:
    """The database's own objects a deletion removes, in deletion order: WAL objects below
    ``wal_below`` but the fence ``wal_fence``, every own SST, ``.compactions`` files below
    ``compactions_below``, then manifests below ``manifest_below`` in id order. Keys are matched in
    full (:mod:`slate_ops.layout`), so a nested database's objects and objects of no database are
    never included."""
    wal = [
        (wal_id, meta)
        for meta in store.list(own_directory(path, WAL_DIR))
        if (wal_id := parse_wal_key(path, meta.key)) is not None
        and wal_id < wal_below
        and wal_id != wal_fence
    ]
    ssts = [
        meta
        for meta in store.list(own_directory(path, COMPACTED_DIR))
        if parse_sst_key(path, meta.key) is not None
    ]
    compactions = [
        (cid, meta)
        for meta in store.list(own_directory(path, COMPACTIONS_DIR))
        if (cid := parse_compactions_key(path, meta.key)) is not None and cid < compactions_below
    ]
    manifests = [
        (mid, meta)
        for meta in store.list(own_directory(path, MANIFEST_DIR))
        if (mid := parse_own_manifest_key(path, meta.key)) is not None and mid < manifest_below
    ]
    ordered = [m for _, m in sorted(wal, key=lambda x: x[0])] + ssts
    ordered += [m for _, m in sorted(compactions, key=lambda x: x[0])]
    ordered += [m for _, m in sorted(manifests, key=lambda x: x[0])]
    return ordered


def _plan(manifests: ManifestStore, current: VersionedManifest) -> Deletion:
    """The dry run: what a real run started now would delete and write (reads only)."""
    store, path = manifests.store, manifests.path
    m = current.value
    compactions = CompactionsStore(store, path).sequence.read_latest()
    if m.is_tombstone:
        tombstone_id, fence, epoch, marked, destroyed_at = (
            current.id,
            _fence_of(m),
            m.compactor_epoch,
            None,
            m.destroyed_at_s,
        )
        wal_below = _wal_below(m)
        manifest_below = tombstone_id
        released: list[tuple[str, uuid.UUID]] = []
    else:
        marked_id = current.id + 1 if m.destroyed_at_s is None else None
        marked = None if marked_id is None else manifests.sequence.key(marked_id)
        tombstone_id = (marked_id or current.id) + 1
        epoch = m.compactor_epoch + (1 if marked_id is not None else 0)
        fence = (
            WalStore(store, path).chain(m.replay_after_wal_id).end if m.initialized else NO_FENCE
        )  # as .fence
        destroyed_at = m.destroyed_at_s
        wal_below = manifest_below = UNBOUNDED  # everything stored now is below the fence and the tombstone
        released = held_external_checkpoints(m, store)
    if compactions is not None and compactions.value.compactor_epoch >= epoch:
        compactions_id, compactions_below = compactions.id, compactions.id
    else:
        compactions_id = (compactions.id if compactions is not None else 0) + 1
        compactions_below = UNBOUNDED
    doomed = _own_objects(store, path, manifest_below, wal_below, fence, compactions_below)
    return Deletion(
        path=path,
        dry_run=True,
        destroyed_at_s=destroyed_at,
        marked=marked,
        tombstone=manifests.sequence.key(tombstone_id),
        kept=_kept(manifests, tombstone_id, fence, compactions_id),
        deleted=tuple(doomed),
        released=tuple(released),
    )


def due_for_deletion(manifest: Manifest, now: float, grace_s: float) -> bool:
    """Destroyed, the grace period over, and no live checkpoint (expired ones do not count)."""
    return (
        manifest.destroyed_at_s is not None
        and now >= manifest.destroyed_at_s + grace_s
        and not any(not c.is_expired(now) for c in manifest.checkpoints)
    )


@dataclass(frozen=True)
class DestroyOutcome:
    deleted: tuple[DeletedObject, ...]
    released: tuple[str, ...]  # "<parent path>: <checkpoint id>"
    tombstone: str  # the key of the tombstone manifest (written, or to be written by a real run)


def delete_destroyed(
    path: str, store: ObjectStore, *, now: float, grace_s: float, dry_run: bool
) -> DestroyOutcome:
    """GC's step for a destroyed database that is due (or a deleted one with leftovers):
    :func:`delete_database`, refusing once it is no longer due."""

    def refuse(manifest: Manifest) -> None:
        if not due_for_deletion(manifest, now, grace_s):
            raise InvalidDeletionError(
                f"{path!r} is not due for deletion: destroyed_at_s={manifest.destroyed_at_s}, grace "
                f"{grace_s:.0f}s, or a checkpoint is live; nothing was deleted"
            )

    done = delete_database(path, store, now=now, refuse=refuse, dry_run=dry_run)
    released = tuple(f"{p}: {c}" for p, c in done.released)
    return DestroyOutcome(tuple(DeletedObject.of(m) for m in done.deleted), released, done.tombstone)
