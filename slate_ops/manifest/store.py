"""The manifest namespace of one database: ``<db>/manifest/<id>.manifest``.

A thin wrapper over :class:`~slate_ops.txn.SequencedStore` (with the ``manifest`` GC boundary) and,
for writers and compactors, :class:`~slate_ops.txn.FenceableStore`.
"""

from __future__ import annotations

from collections.abc import Callable

from slate_ops.errors import (
    DbAlreadyExistsError,
    DbDestroyedError,
    DbNotFoundError,
    DbNotInitializedError,
    SequenceConflictError,
)
from slate_ops.manifest.codec import decode_manifest, encode_manifest
from slate_ops.manifest.model import Manifest
from slate_ops.objstore.base import ObjectStore
from slate_ops.txn import EpochField, FenceableStore, SequencedFile, SequencedStore, Versioned
from slate_ops.txn.paths import normalize_db_path

MANIFEST_DIR = "manifest"
MANIFEST_SUFFIX = "manifest"

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

    def __init__(self, store: ObjectStore, path: str) -> None:
        self.store = store
        self.path = normalize_db_path(path)
        self.sequence: SequencedStore[Manifest] = SequencedStore(
            store, self.path, MANIFEST_DIR, MANIFEST_SUFFIX, ManifestCodec()
        )

    @property
    def location(self) -> str:
        url = self.store.url
        return f"{url}{'' if url.endswith('/') else '/'}{self.path}"

    def create_initial(self, manifest: Manifest) -> VersionedManifest:
        """Write manifest 1; :class:`DbAlreadyExistsError` if the database exists."""
        if self.sequence.read_latest() is not None:
            raise DbAlreadyExistsError(f"a database already exists at {self.location}")
        try:
            return self.sequence.create(1, manifest)
        except SequenceConflictError:
            raise DbAlreadyExistsError(f"a database already exists at {self.location}") from None

    def read_latest(self) -> VersionedManifest | None:
        return self.sequence.read_latest()

    def read_latest_required(self) -> VersionedManifest:
        latest = self.sequence.read_latest()
        if latest is None:
            raise DbNotFoundError(
                f"no database at {self.location}: no manifest under {self.sequence.directory}/. "
                "Check the store URL and path, or create it with `slate-ops create-db`."
            )
        return latest

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
        """Bump the writer or compactor epoch once (fencing older instances); see FenceableStore."""
        self.read_latest_required()
        return FenceableStore.claim(self.sequence, field, change)

    def advance_boundary(self, boundary: int) -> int:
        return self.sequence.advance_boundary(boundary)


def require_not_destroyed(manifest: Manifest, location: str) -> None:
    if manifest.destroyed_at_s is not None:
        raise DbDestroyedError(
            f"the database at {location} was destroyed at {manifest.destroyed_at_s} (unix seconds)"
        )


def require_usable(manifest: Manifest, location: str) -> None:
    """Refuse a destroyed or not yet initialised database (docs/design/engine.md, "Creating a Checkpoint")."""
    require_not_destroyed(manifest, location)
    if not manifest.initialized:
        raise DbNotInitializedError(
            f"the database at {location} is not initialised (a clone or union did not finish); "
            "re-run the operation that created it"
        )
