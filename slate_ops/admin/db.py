"""Creating a database and inspecting its manifests."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from slate_ops.errors import DbAlreadyExistsError, ObjectNotFoundError
from slate_ops.manifest.model import KeyRange, Manifest
from slate_ops.manifest.store import ManifestStore, VersionedManifest, require_not_destroyed
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime


def create_db(path: str, store: ObjectStore, *, exist_ok: bool = False) -> VersionedManifest:
    """Create an empty database: manifest 1 with ``initialized=true``.

    With ``exist_ok`` an existing database is returned as it is instead of refused — unless it
    was destroyed (:class:`DbDestroyedError`).
    """
    manifests = ManifestStore(store, path)
    try:
        return manifests.create_initial(Manifest(initialized=True))
    except DbAlreadyExistsError as error:
        if not exist_ok:
            raise DbAlreadyExistsError(
                f"{error}; use it as it is with exist_ok=True (`slate-ops create-db --exist-ok`), or "
                "choose another path"
            ) from None
        existing = manifests.read_latest_required()
        require_not_destroyed(existing.value, manifests.location)
        return existing


def read_manifest(path: str, store: ObjectStore, manifest_id: int | None = None) -> VersionedManifest:
    """The current manifest, or version ``manifest_id`` if it still exists."""
    manifests = ManifestStore(store, path)
    if manifest_id is None:
        return manifests.read_latest_required()
    try:
        return manifests.read(manifest_id)
    except ObjectNotFoundError as error:
        manifests.read_latest_required()  # no database at all is the clearer error
        raise ObjectNotFoundError(
            f"manifest {manifest_id} of {manifests.location} does not exist (never written, or deleted "
            "by GC); list the stored versions with `slate-ops list-manifests`",
            error.key,
        ) from None


@dataclass(frozen=True)
class ManifestFile:
    id: int
    size: int
    last_modified: datetime


def list_manifests(path: str, store: ObjectStore) -> list[ManifestFile]:
    """Every manifest version still stored, oldest first."""
    manifests = ManifestStore(store, path)
    manifests.read_latest_required()
    return [ManifestFile(f.id, f.meta.size, f.meta.last_modified) for f in manifests.list()]


@dataclass(frozen=True)
class DbStatus:
    """A summary of the current manifest, as sensors and the CLI report it."""

    path: str
    manifest_id: int
    initialized: bool
    destroyed_at_s: int | None
    writer_epoch: int
    compactor_epoch: int
    l0_ssts: int
    sorted_runs: int
    ssts: int
    sst_bytes: int
    checkpoints: int
    expired_checkpoints: int
    external_dbs: int


def describe_db(path: str, store: ObjectStore, *, clock: Runtime = SYSTEM_RUNTIME) -> DbStatus:
    """The summary of the current manifest. Its counters (the Dagster asset metadata's names) count
    ``l0_ssts`` as L0 views and ``ssts`` as SST objects; :func:`describe_db_detail` tells the two apart."""
    manifests = ManifestStore(store, path)
    current = manifests.read_latest_required()
    return status_of(manifests.path, current, clock.now())


def status_of(path: str, current: VersionedManifest, now: float) -> DbStatus:
    m = current.value
    return DbStatus(
        path=path,
        manifest_id=current.id,
        initialized=m.initialized,
        destroyed_at_s=m.destroyed_at_s,
        writer_epoch=m.writer_epoch,
        compactor_epoch=m.compactor_epoch,
        l0_ssts=len(m.l0),
        sorted_runs=len(m.compacted),
        ssts=len(m.ssts),
        sst_bytes=sum(s.info.size_bytes for s in m.ssts),
        checkpoints=len(m.checkpoints),
        expired_checkpoints=sum(1 for c in m.checkpoints if c.is_expired(now)),
        external_dbs=len(m.external_dbs),
    )


@dataclass(frozen=True)
class SstCounts:
    """The SSTs a manifest reads, counted as views and as objects.

    A *view* is an entry of L0 or of a sorted run: it reads one SST object, possibly narrowed to a key
    range. After a split or a merge one SST object can back several views (each shard's range of
    it), so views and objects differ: a merged database may have 4 L0 views over 2 SST objects. An
    SST object is *own* when its file lives under this database's path, *external* when it lives
    under another database's (a clone's parent, a split's source, a merge's sources).
    """

    l0_views: int
    sorted_runs: int
    sorted_run_views: int
    sst_objects: int
    own_ssts: int
    external_ssts: int
    own_sst_bytes: int
    external_sst_bytes: int


def sst_counts(manifest: Manifest) -> SstCounts:
    """:class:`SstCounts` of ``manifest``; pure."""
    external = [s for s in manifest.ssts if manifest.owner_of(s) is not None]
    external_bytes = sum(s.info.size_bytes for s in external)
    return SstCounts(
        l0_views=len(manifest.l0),
        sorted_runs=len(manifest.compacted),
        sorted_run_views=sum(len(run.views) for run in manifest.compacted),
        sst_objects=len(manifest.ssts),
        own_ssts=len(manifest.ssts) - len(external),
        external_ssts=len(external),
        own_sst_bytes=sum(s.info.size_bytes for s in manifest.ssts) - external_bytes,
        external_sst_bytes=external_bytes,
    )


@dataclass(frozen=True)
class DbDetail:
    """What ``slate-ops describe`` prints: the :class:`DbStatus` and the :class:`SstCounts` of one
    manifest, and the key range the database may hold (None: every key)."""

    status: DbStatus
    ssts: SstCounts
    visible_range: KeyRange | None


def describe_db_detail(path: str, store: ObjectStore, *, clock: Runtime = SYSTEM_RUNTIME) -> DbDetail:
    """:func:`describe_db` with views and SST objects told apart, from one read of the current manifest."""
    manifests = ManifestStore(store, path)
    current = manifests.read_latest_required()
    return DbDetail(
        status_of(manifests.path, current, clock.now()),
        sst_counts(current.value),
        current.value.visible_range,
    )
