"""Clones (docs/design/clones-and-destroy.md, "What a clone is"): a new database that starts from a parent's
checkpoint.

A clone's manifest references the parent's SSTs in place (``external_dbs``, resolved by
:func:`slate_ops.manifest.model.resolve_sst_path`); only the WAL SSTs not yet in L0 are copied. New
writes go to the clone only. :func:`create_clone` follows the spec's procedure step by step and is
idempotent: every step first checks whether it already happened, so a crash at any point leaves a
state that re-running the same call completes (docs/design/clones-and-destroy.md lists what each
crash point leaves).

Two deliberate refinements of the spec:

* an inherited external database (nested clones) gets the parent's *final* checkpoint on it as its
  ``source_checkpoint_id``, not the parent's own source: that one may have been an ephemeral
  checkpoint long expired, while the final checkpoint pins the same manifest (the schema's
  invariant) and lives as long as the parent references the database. Inherited entries that no
  longer reference any SST are dropped;
* once the clone is initialised, the ephemeral source checkpoint is deleted from the parent instead
  of being left to expire; only a crash before the clone manifest exists leaves one behind, and it
  expires after 5 minutes.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

from slate_ops.config import CheckpointOptions
from slate_ops.engine import Db, DbOptions
from slate_ops.engine.wal_chain import next_in_chain, walk_chain
from slate_ops.engine.wal_store import WalStore
from slate_ops.errors import (
    CheckpointExpiredError,
    CheckpointNotFoundError,
    CloneMismatchError,
    CloneWalMissingError,
    CommitRetriesExhaustedError,
    DbAlreadyExistsError,
    DbNotInitializedError,
    InvalidArgumentError,
)
from slate_ops.manifest.checkpoints import live_checkpoint, with_new_checkpoint
from slate_ops.manifest.model import ExternalDb, Manifest
from slate_ops.manifest.store import (
    ManifestStore,
    VersionedManifest,
    require_not_destroyed,
    require_usable,
)
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime

log = logging.getLogger(__name__)

EPHEMERAL_LIFETIME = timedelta(minutes=5)
"""Lifetime of the source checkpoint taken when no parent checkpoint is given: the retry window."""

SOURCE_CHECKPOINT_PREFIX = "slate_ops/clone-source:"
"""Name prefix of an ephemeral source checkpoint on a parent (followed by the clone's path)."""

FINAL_CHECKPOINT_PREFIX = "slate_ops/clone:"
"""Name prefix of a clone's final checkpoint on an external database (followed by the clone's path)."""

_MAX_ATTEMPTS = 16


def create_clone(
    clone_path: str,
    parent_path: str,
    store: ObjectStore,
    parent_checkpoint: uuid.UUID | None = None,
    *,
    clock: Runtime = SYSTEM_RUNTIME,
) -> VersionedManifest:
    """Create (or finish creating) the clone at ``clone_path`` of ``parent_path``; returns its manifest.

    From ``parent_checkpoint`` if given (it must exist and be unexpired), else from a new 5-minute
    checkpoint of the parent's current state, which includes every WAL SST durable at that moment.
    Re-running with the same arguments completes an interrupted clone; re-running an existing clone
    with another parent or checkpoint raises :class:`CloneMismatchError`.
    """
    clones = ManifestStore(store, clone_path)
    parents = ManifestStore(store, parent_path)
    check_paths(clones.path, parents.path)
    for _ in range(_MAX_ATTEMPTS):
        # docs/design/clones-and-destroy.md, "The procedure": read M_c (optional) and M_p, which must be
        # initialised.
        existing = clones.read_latest()
        parent = parents.read_latest_required()
        if not parent.value.initialized:
            raise DbNotInitializedError(
                f"cannot clone {parents.location}: it is not initialised (a clone or union of it did not "
                "finish); finish that first"
            )
        if existing is None:
            # The source checkpoint, then M_c' written uninitialised (create-if-absent).
            require_usable(parent.value, parents.location)
            source_id, at_source = _source_checkpoint(parents, parent, parent_checkpoint, clones.path, clock)
            manifest = clone_manifest(at_source, parents.path, source_id, clock=clock)
            try:
                current = clones.create_initial(manifest)
            except DbAlreadyExistsError:
                # "If CAS fails, go to step 1": another run created it; validate theirs.
                log.info("clone manifest of %s was created concurrently; re-reading", clones.location)
                continue
        else:
            current = existing
            _validate_existing(current.value, clones.location, parents.path, parent_checkpoint)
        if current.value.initialized:
            # M_c initialised: every external database must still hold its final checkpoint.
            _require_final_checkpoints(current.value, store, clones.location)
        else:
            ensure_final_checkpoints(current.value, store, clones.path, clock)
            _copy_wal(current.value, store, clones.path)
            current = clones.update(  # "Update M_c with initialized set to true"
                lambda latest: (
                    None if latest.value.initialized else latest.value.with_changes(initialized=True)
                )
            )
        _drop_ephemeral_sources(current.value, store, clones.path)
        return current
    raise CommitRetriesExhaustedError(
        f"the clone manifest of {clones.location} kept changing under the clone; retry later"
    )


def open_from_checkpoint(
    path: str,
    store: ObjectStore,
    parent_path: str,
    parent_checkpoint: uuid.UUID | None = None,
    options: DbOptions | None = None,
    *,
    clock: Runtime = SYSTEM_RUNTIME,
) -> Db:
    """Open the clone at ``path`` of ``parent_path`` as its writer, creating or finishing the clone
    first (:func:`create_clone`); the spec's ``Db::open_from_checkpoint``."""
    create_clone(path, parent_path, store, parent_checkpoint, clock=clock)
    return Db.open(path, store, options, clock=clock)


def ensure_clone(
    clone_path: str, parent_path: str, store: ObjectStore, *, clock: Runtime = SYSTEM_RUNTIME
) -> VersionedManifest | None:
    """Create the clone, or finish an interrupted one; None (nothing read beyond the clone's manifest)
    when it is already initialised, so a clone later detached from its parent by GC stays valid."""
    existing = ManifestStore(store, clone_path).read_latest()
    if existing is not None and existing.value.initialized:
        return None
    return create_clone(clone_path, parent_path, store, clock=clock)


def clone_manifest(
    at_source: Manifest,
    parent_path: str,
    source_id: uuid.UUID,
    *,
    clock: Runtime = SYSTEM_RUNTIME,
    new_final_id: Callable[[], uuid.UUID] | None = None,
) -> Manifest:
    """The uninitialised clone manifest built from the parent's manifest at the source checkpoint.

    docs/design/clones-and-destroy.md, "The procedure": the parent's external databases, plus an entry
    for the parent listing its own SSTs; writer epoch + 1; everything else of the LSM and WAL state
    copied; no checkpoints.
    The parent's entry is last: it is the clone's direct parent. Every entry gets its own, newly generated
    final checkpoint id (``new_final_id``, else ``clock.new_uuid``): each database owns the checkpoints
    that protect what it reads, so releasing one (a destroyed sibling shard, a detached entry) never
    unpins another database or another entry
    (docs/design/clones-and-destroy.md, "Who owns which checkpoint").
    """
    new_final_id = new_final_id or clock.new_uuid
    inherited_ids = {i for ed in at_source.external_dbs for i in ed.sst_ids}
    own = tuple(dict.fromkeys(s.id for s in at_source.ssts if s.id not in inherited_ids))
    inherited = tuple(
        replace(ed, source_checkpoint_id=ed.final_checkpoint_id, final_checkpoint_id=new_final_id())
        for ed in at_source.external_dbs
        if ed.sst_ids
    )
    parent = ExternalDb(parent_path, source_id, new_final_id(), own)
    return at_source.with_changes(
        initialized=False,
        destroyed_at_s=None,
        writer_epoch=at_source.writer_epoch + 1,
        external_dbs=(*inherited, parent),
        checkpoints=(),
    )


def check_paths(clone: str, parent: str) -> None:
    if clone == parent:
        raise InvalidArgumentError(f"a clone needs its own path; both are {clone!r}")
    for outer, inner in ((clone, parent), (parent, clone)):
        if outer == "" or inner.startswith(outer + "/"):
            # Destroying the outer database would delete the inner one's objects.
            raise InvalidArgumentError(f"clone and parent paths must not nest: {inner!r} is inside {outer!r}")


def _source_checkpoint(
    parents: ManifestStore,
    parent: VersionedManifest,
    parent_checkpoint: uuid.UUID | None,
    clone_path: str,
    clock: Runtime,
) -> tuple[uuid.UUID, Manifest]:
    """The clone's ``source_checkpoint_id`` and the parent's manifest at it (M_p')."""
    if parent_checkpoint is not None:
        checkpoint = live_checkpoint(parent.value, parent_checkpoint, clock.now(), parents.location)
        return checkpoint.id, parents.read(checkpoint.manifest_id).value
    # Like a reader establishing its checkpoint (spec "Readers"), record the newest WAL id, so the
    # clone includes every write durable now, not only what is in L0.
    listing = WalStore(parents.store, parents.path).list_sizes()
    checkpoint_id = clock.new_uuid()
    options = CheckpointOptions(lifetime=EPHEMERAL_LIFETIME, name=SOURCE_CHECKPOINT_PREFIX + clone_path)

    def add(current: VersionedManifest) -> Manifest:
        manifest = with_new_checkpoint(current, options, checkpoint_id, clock.now(), parents.location)
        last_wal = walk_chain(listing, manifest.replay_after_wal_id).end - 1  # the chain's end, not orphans
        return manifest.with_changes(wal_id_last_seen=max(manifest.wal_id_last_seen, last_wal))

    committed = parents.update(add)  # the checkpoint pins the version it is committed in
    return checkpoint_id, committed.value


def _validate_existing(
    manifest: Manifest, location: str, parent_path: str, parent_checkpoint: uuid.UUID | None
) -> None:
    """An existing M_c must come from ``parent_path`` (and the checkpoint, if given)."""
    require_not_destroyed(manifest, location)
    if not manifest.external_dbs:
        raise CloneMismatchError(
            f"a database that is not a clone already exists at {location}; destroy it or pick another path"
        )

    def matches(ed: ExternalDb) -> bool:
        return ed.path == parent_path and parent_checkpoint in (None, ed.source_checkpoint_id)

    # While uninitialised, the direct parent is the last entry (it is where the WAL comes from). Once
    # initialised, GC may detach entries, so any entry matches (as the spec says).
    candidates = manifest.external_dbs if manifest.initialized else manifest.external_dbs[-1:]
    if not any(matches(ed) for ed in candidates):
        recorded = manifest.external_dbs[-1]
        wanted = parent_path + ("" if parent_checkpoint is None else f" at checkpoint {parent_checkpoint}")
        raise CloneMismatchError(
            f"{location} is already a clone of {recorded.path} at checkpoint "
            f"{recorded.source_checkpoint_id}, not of {wanted}; re-run the clone with its original "
            "arguments, or destroy it first"
        )


def ensure_final_checkpoints(manifest: Manifest, store: ObjectStore, clone_path: str, clock: Runtime) -> None:
    """Every external database holds the clone's final checkpoint (no expiry), made from its source."""
    for ed in manifest.external_dbs:
        _ensure_final_checkpoint(ed, store, clone_path, clock)


def _ensure_final_checkpoint(ed: ExternalDb, store: ObjectStore, clone_path: str, clock: Runtime) -> None:
    external = ManifestStore(store, ed.path)
    options = CheckpointOptions(
        lifetime=None, source=ed.source_checkpoint_id, name=FINAL_CHECKPOINT_PREFIX + clone_path
    )

    def add(current: VersionedManifest) -> Manifest | None:
        if current.value.checkpoint(ed.final_checkpoint_id) is not None:
            return None  # created by an earlier, interrupted run
        return with_new_checkpoint(
            current, options, ed.final_checkpoint_id, clock.now(), external.location, on_destroyed=True
        )

    try:
        external.update(add)
    except (CheckpointNotFoundError, CheckpointExpiredError) as error:
        raise type(error)(
            f"{error}. The clone at {clone_path!r} cannot be finished from it: destroy the clone "
            "(`slate-ops --path CLONE destroy --hard`) and clone again"
        ) from error


def _copy_wal(manifest: Manifest, store: ObjectStore, clone_path: str) -> None:
    """Copy the objects of the direct parent's WAL chain in ``(replay_after_wal_id, wal_id_last_seen]``.

    Every object the chain visits is copied, fences included (a window fence keeps the ids it covers
    out of the clone's chain too), nothing else: the clone's replay is the parent's chain. The
    source checkpoint (and the final one) pins that range on the parent, so the chain must reach past
    it there. An id already in the clone was copied by an earlier run: skipped. A chain ending inside
    the range would drop acknowledged writes the clone silently lacks, so it is refused. (Ids at or
    below ``replay_after_wal_id`` are covered by L0 and never copied.)
    """
    low, high = manifest.replay_after_wal_id, manifest.wal_id_last_seen
    if high <= low:
        return
    parent = WalStore(store, manifest.external_dbs[-1].path)
    clone = WalStore(store, clone_path)
    copied = {i for i in clone.list_ids(low) if i <= high}
    sizes = dict(parent.list_sizes(low))
    visited, at = [], low + 1
    while at <= high and at in sizes:
        visited.append(at)
        at = next_in_chain(at, sizes[at], [])
    if at <= high:
        raise CloneWalMissingError(
            f"{parent.key(at)} is missing although the clone's source checkpoint covers WAL ids "
            f"{low + 1}..{high}; cloning would lose its writes. Destroy the clone at {clone_path!r} "
            "and clone again from a newer checkpoint"
        )
    for wal_id in visited:
        if wal_id not in copied:
            clone.create(wal_id, store.get(parent.key(wal_id)).data)  # False: a concurrent run copied it


def _require_final_checkpoints(manifest: Manifest, store: ObjectStore, location: str) -> None:
    """An initialised clone: every external database must still hold its final checkpoint."""
    for ed in manifest.external_dbs:
        external = ManifestStore(store, ed.path)
        latest = external.read_latest()
        if latest is None or latest.value.checkpoint(ed.final_checkpoint_id) is None:
            raise CheckpointNotFoundError(
                f"the clone at {location} is initialised but {external.location} no longer holds its final "
                f"checkpoint {ed.final_checkpoint_id}; the clone's SSTs there are unprotected"
            )


def _drop_ephemeral_sources(manifest: Manifest, store: ObjectStore, clone_path: str) -> None:
    """Delete the ephemeral source checkpoint this clone took, now that final checkpoints pin its state."""
    for ed in manifest.external_dbs:
        _drop_ephemeral_source(ed, store, SOURCE_CHECKPOINT_PREFIX + clone_path)


def _drop_ephemeral_source(ed: ExternalDb, store: ObjectStore, name: str) -> None:
    external = ManifestStore(store, ed.path)

    def drop(current: VersionedManifest) -> Manifest | None:
        source = current.value.checkpoint(ed.source_checkpoint_id)
        if source is None or source.name != name:
            return None  # not ours (a given checkpoint, or inherited), or already deleted
        keep = tuple(c for c in current.value.checkpoints if c.id != ed.source_checkpoint_id)
        return current.value.with_changes(checkpoints=keep)

    if external.read_latest() is not None:
        external.update(drop)


__all__ = [
    "EPHEMERAL_LIFETIME",
    "FINAL_CHECKPOINT_PREFIX",
    "SOURCE_CHECKPOINT_PREFIX",
    "clone_manifest",
    "create_clone",
    "ensure_clone",
    "open_from_checkpoint",
]
