"""The manifest namespace of one database: ``<db>/manifest/<id>.manifest``.

A thin wrapper over :class:`~slate_ops.txn.SequencedStore` (with the ``manifest`` GC boundary) and,
for writers and compactors, :class:`~slate_ops.txn.FenceableStore`.

A *tombstone* (a latest manifest with ``deleted_at_s`` set, written when a database's objects are
deleted) means "no database here": :meth:`ManifestStore.read_latest` returns None for it,
:meth:`~ManifestStore.read_latest_required` raises :class:`DbNotFoundError` saying when it was
deleted, updates and claims refuse it, and :meth:`~ManifestStore.create_initial` creates a new
database after it that continues its epochs and ids. Only the deletion itself, GC and discovery
look at the tombstone (:meth:`~ManifestStore.read_current`); docs/design/clones-and-destroy.md,
"Deleting a Database".
"""

from __future__ import annotations

from collections.abc import Callable

from slate_ops.clock import render_utc
from slate_ops.errors import (
    DbAlreadyExistsError,
    DbDestroyedError,
    DbNotFoundError,
    DbNotInitializedError,
    InvalidArgumentError,
    SequenceConflictError,
)
from slate_ops.layout import MANIFEST_DIR, MANIFEST_SUFFIX, normalize_db_path
from slate_ops.manifest.codec import decode_manifest, encode_manifest
from slate_ops.manifest.model import Manifest
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.local import db_not_found
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime
from slate_ops.txn import EpochField, FenceableStore, SequencedFile, SequencedStore, Versioned

VersionedManifest = Versioned[Manifest]

WRITER_EPOCH: EpochField[Manifest] = EpochField(
    "writer", lambda m: m.writer_epoch, lambda m, e: m.with_changes(writer_epoch=e)
)
COMPACTOR_EPOCH: EpochField[Manifest] = EpochField(
    "compactor", lambda m: m.compactor_epoch, lambda m, e: m.with_changes(compactor_epoch=e)
)


class ManifestCodec:
    def encode(self, value: Manifest) -> bytes:
        return encode_manifest(value)

    def decode(self, data: bytes, path: str) -> Manifest:
        return decode_manifest(data, path)


class ManifestStore:
    """Reads and commits the manifests of the database at ``path``."""

    def __init__(self, store: ObjectStore, path: str, *, clock: Runtime = SYSTEM_RUNTIME) -> None:
        self.store = store
        self.path = normalize_db_path(path)
        self.sequence: SequencedStore[Manifest] = SequencedStore(
            store, self.path, MANIFEST_DIR, MANIFEST_SUFFIX, ManifestCodec(), clock=clock
        )

    @property
    def location(self) -> str:
        url = self.store.url
        return f"{url}{'' if url.endswith('/') else '/'}{self.path}"

    def create_initial(self, manifest: Manifest) -> VersionedManifest:
        """Create the database: manifest 1, or after a tombstone the next id, continuing its ids.

        :class:`DbAlreadyExistsError` if a database exists. After a tombstone (a deleted database)
        the new manifest keeps ``manifest``'s state but continues the tombstone's epochs, manifest
        ids and WAL ids (:func:`continue_after`), so nothing a stale process of the deleted database
        writes later (at lower ids) is ever read and such a process stays fenced.
        """
        current = self.sequence.read_latest()
        if current is not None and not current.value.is_tombstone:
            raise DbAlreadyExistsError(f"a database already exists at {self.location}")
        next_id, value = (
            (1, manifest)
            if current is None
            else (current.id + 1, continue_after(current, manifest, self.location))
        )
        try:
            return self.sequence.create(next_id, value)
        except SequenceConflictError:
            raise DbAlreadyExistsError(f"a database already exists at {self.location}") from None

    def read_latest(self) -> VersionedManifest | None:
        """The latest manifest of the database; None if there is none (never created, or deleted:
        the latest manifest is a tombstone)."""
        latest = self.sequence.read_latest()
        return None if latest is None or latest.value.is_tombstone else latest

    def read_current(self) -> VersionedManifest | None:
        """The latest manifest as stored, a tombstone included; None if the namespace is empty."""
        return self.sequence.read_latest()

    def read_latest_required(self) -> VersionedManifest:
        latest = self.sequence.read_latest()
        if latest is None:
            raise db_not_found(
                self.store,
                f"no database at {self.location}: no manifest under {self.sequence.directory}/. "
                "Check the store URL and path, or create it with `slate-ops create-db`.",
            )
        if latest.value.is_tombstone:
            raise self.deleted(latest)
        return latest

    def deleted(self, tombstone: VersionedManifest) -> DbNotFoundError:
        """The error for a path whose latest manifest is ``tombstone``: no database, deleted when."""
        return DbNotFoundError(
            f"no database at {self.location}: the database there was deleted at "
            f"{_utc(tombstone.value.deleted_at_s)} (manifest {tombstone.id} is its tombstone). The path "
            "is free: create a new database there with `slate-ops create-db`."
        )

    def read(self, manifest_id: int) -> VersionedManifest:
        return self.sequence.read(manifest_id)

    def list(self) -> list[SequencedFile]:
        return self.sequence.list()

    def update(self, change: Callable[[VersionedManifest], Manifest | None]) -> VersionedManifest:
        """Apply ``change`` to the latest manifest and commit it (re-applied on conflict).

        ``change`` receives the version it is applied to, so it can compute ``id + 1`` (the version
        being written, e.g. a new checkpoint's ``manifest_id``). Returning None commits nothing.
        """

        def apply(current: VersionedManifest | None) -> Manifest | None:
            if current is None:
                raise DbNotFoundError(f"no database at {self.location}: its manifest disappeared")
            if current.value.is_tombstone:
                raise self.deleted(current)
            return change(current)

        if self.sequence.cached() is None:
            self.read_latest_required()
        committed = self.sequence.update(apply)
        assert committed is not None
        return committed

    def claim(
        self,
        field: EpochField[Manifest],
        change: Callable[[VersionedManifest, int], Manifest] = lambda current, epoch: current.value,
    ) -> tuple[FenceableStore[Manifest], VersionedManifest]:
        """Bump the writer or compactor epoch once (fencing older instances); see FenceableStore.

        Refuses a deleted database (a tombstone, even one committed during the claim) with
        :class:`DbNotFoundError`."""
        self.read_latest_required()

        def claim_live(current: VersionedManifest, epoch: int) -> Manifest:
            if current.value.is_tombstone:
                raise self.deleted(current)
            return change(current, epoch)

        return FenceableStore.claim(self.sequence, field, claim_live)

    def advance_boundary(self, boundary: int) -> int:
        return self.sequence.advance_boundary(boundary)


def require_not_destroyed(manifest: Manifest, location: str) -> None:
    if manifest.destroyed_at_s is not None:
        raise DbDestroyedError(
            f"the database at {location} was destroyed at {manifest.destroyed_at_s} (unix seconds)"
        )


def require_usable(manifest: Manifest, location: str) -> None:
    """Refuse a destroyed or not yet initialised database (docs/design/engine.md, "Creating a checkpoint")."""
    require_not_destroyed(manifest, location)
    if not manifest.initialized:
        raise DbNotInitializedError(
            f"the database at {location} is not initialised (a clone or union did not finish); "
            "re-run the operation that created it"
        )


def continue_after(tombstone: VersionedManifest, manifest: Manifest, location: str) -> Manifest:
    """``manifest`` as the first manifest of a new database after ``tombstone``: its epochs, WAL ids
    and ``wal_id_last_seen`` continue the tombstone's (whose WAL fence, and the fence's window, end at
    ``next_wal_sst_id - 1``), so the new database replays nothing at or below them.

    A manifest that brings WAL SSTs of its own in ``(replay_after_wal_id, wal_id_last_seen]`` (a
    clone copies its parent's WAL ids) must lie above the fence, else :class:`InvalidArgumentError`:
    a stale writer of the deleted database may have left objects at those ids.
    """
    t = tombstone.value
    fence = max(t.next_wal_sst_id - 1, t.replay_after_wal_id)
    if manifest.wal_id_last_seen > manifest.replay_after_wal_id and manifest.replay_after_wal_id < fence:
        raise InvalidArgumentError(
            f"cannot create the database at {location}: the database deleted there at "
            f"{_utc(t.deleted_at_s)} reserved WAL ids up to {fence}, and the new one would bring WAL "
            f"SSTs at ids {manifest.replay_after_wal_id + 1}..{manifest.wal_id_last_seen}. Flush the "
            "source's WAL first (a new checkpoint after a flush), or use another path. Nothing was written."
        )
    return manifest.with_changes(
        writer_epoch=max(manifest.writer_epoch, t.writer_epoch),
        compactor_epoch=max(manifest.compactor_epoch, t.compactor_epoch),
        replay_after_wal_id=max(manifest.replay_after_wal_id, fence),
        wal_id_last_seen=max(manifest.wal_id_last_seen, fence),
        next_wal_sst_id=max(manifest.next_wal_sst_id, fence + 1),
        destroyed_at_s=None,
        deleted_at_s=None,
    )


def _utc(seconds: int | None) -> str:
    return "an unknown time" if seconds is None else render_utc(seconds)
