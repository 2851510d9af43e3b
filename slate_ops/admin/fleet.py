"""The databases in a store: which exist under a prefix (:func:`discover_databases`, the one
discovery: Dagster's ``discover:``, reference checks), their state (``slate-ops list-dbs``); and
whether a database moved on from a manifest a caller already knows (the fleet sensors' ticks)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from slate_ops.admin.db import sst_counts
from slate_ops.errors import CorruptObjectError, ObjectNotFoundError, SlateDbManifestError
from slate_ops.layout import discovery_prefix, live_databases, manifest_key, parse_manifest_key
from slate_ops.manifest.store import ManifestStore, VersionedManifest
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.metering import list_requests

LIVE = "live"
UNINITIALIZED = "uninitialized"
DESTROYED = "destroyed"
UNREADABLE = "unreadable"
SLATEDB = "slatedb"
"""The state of a SlateDB database (its manifest is SlateDB's): listed, never read or maintained."""


@dataclass(frozen=True)
class DbListing:
    """One database found in a store.

    ``state`` is ``live``, ``uninitialized`` (a clone, split or merge that has not finished: re-run
    it), ``destroyed`` (soft-destroyed; GC deletes it after its grace period), ``slatedb`` (a
    database SlateDB wrote, which slate_ops does not maintain: ``error`` says so) or ``unreadable``
    (its latest manifest could not be decoded: ``error`` says why). The counters of the last two are
    0. ``sst_bytes`` and ``ssts`` count the SST objects the latest manifest references whose files
    live under this database's path (not those it reads from a parent or a source); ``last_write``
    is when the latest manifest was written, i.e. the database's last commit.
    """

    path: str
    state: str
    manifest_id: int
    initialized: bool
    destroyed_at_s: int | None
    ssts: int
    sst_bytes: int
    external_dbs: int
    last_write: datetime
    error: str | None = None


@dataclass(frozen=True)
class Discovery:
    """What one discovery LIST found: the database ``paths`` (sorted) and how many ``objects`` it
    listed, i.e. what it cost: :attr:`list_pages`."""

    paths: tuple[str, ...]
    objects: int

    @property
    def list_pages(self) -> int:
        """The LIST requests it took: one per page of 1,000 keys (one for an empty prefix)."""
        return list_requests(self.objects)


def discover_databases(store: ObjectStore, prefix: str = "") -> list[str]:
    """The paths of the databases at and under ``prefix`` (a database path: ``""`` is the whole
    store, ``"team"`` finds ``team`` and ``team/a``, never ``team2``), sorted; one LIST.

    A path holds a database when it holds manifests and was not deleted
    (:func:`slate_ops.layout.live_databases`: a manifest under a path no database may have is none).
    """
    return list(discover(store, prefix).paths)


def discover(store: ObjectStore, prefix: str = "") -> Discovery:
    """:func:`discover_databases`, with the number of objects its LIST paged through."""
    listed = [0]
    paths = tuple(_latest_manifests(store, prefix, listed))
    return Discovery(paths, listed[0])


def holds_manifests(store: ObjectStore, path: str) -> bool:
    """Whether ``path`` holds manifests (a database, possibly deleted since): one LIST of its
    ``manifest/`` directory, not of everything under it."""
    return bool(ManifestStore(store, path).sequence.list())


def list_dbs(prefix: str, store: ObjectStore) -> list[DbListing]:
    """Every database at and under ``prefix`` (as :func:`discover_databases` finds them) with its
    state, in path order.

    One LIST of every object under the prefix and one GET of each database's latest manifest. A
    deleted database (hard-destroyed, or deleted by GC: its latest manifest is a tombstone) is not
    listed.
    """
    listings = []
    for path, (manifest_id, written) in _latest_manifests(store, prefix).items():
        listing = _listing(store, path, manifest_id, written)
        if listing is not None:
            listings.append(listing)
    return listings


def _latest_manifests(
    store: ObjectStore, prefix: str, listed: list[int] | None = None
) -> dict[str, tuple[int, datetime]]:
    """``{path: (latest manifest id, when it was written)}`` of the live databases under ``prefix``,
    in path order, from one LIST (refuses a ``prefix`` no database path may have, e.g. ``..``);
    ``listed[0]`` counts the objects listed."""
    written: dict[str, datetime] = {}

    def keys() -> Iterator[str]:
        for meta in store.list(discovery_prefix(prefix)):
            if listed is not None:
                listed[0] += 1
            if parse_manifest_key(meta.key) is not None:  # only the manifests' times are kept
                written[meta.key] = meta.last_modified
            yield meta.key

    return {
        path: (manifest_id, written[manifest_key(path, manifest_id)])
        for path, manifest_id in live_databases(keys()).items()
    }


def _listing(store: ObjectStore, path: str, manifest_id: int, written: datetime) -> DbListing | None:
    manifests = ManifestStore(store, path)
    try:
        manifest = manifests.read(manifest_id).value
    except ObjectNotFoundError:
        current = manifests.read_latest()  # superseded and deleted since the LIST; or deleted
        if current is None:
            return None
        manifest_id, manifest = current.id, current.value
    except CorruptObjectError as error:
        state = SLATEDB if isinstance(error, SlateDbManifestError) else UNREADABLE
        return DbListing(path, state, manifest_id, False, None, 0, 0, 0, written, str(error))
    if manifest.is_tombstone:
        return None  # a deleted database: the path holds no database
    counts = sst_counts(manifest)
    if manifest.destroyed_at_s is not None:
        state = DESTROYED
    elif not manifest.initialized:
        state = UNINITIALIZED
    else:
        state = LIVE
    return DbListing(
        path=path,
        state=state,
        manifest_id=manifest_id,
        initialized=manifest.initialized,
        destroyed_at_s=manifest.destroyed_at_s,
        ssts=counts.own_ssts,
        sst_bytes=counts.own_sst_bytes,
        external_dbs=len(manifest.external_dbs),
        last_write=written,
    )


def latest_manifest_since(
    path: str, store: ObjectStore, known_id: int | None, *, probe: bool = False
) -> VersionedManifest | None:
    """The latest manifest of the database at ``path``, or None when it is still ``known_id``.

    Without ``known_id``: a LIST of its manifests and a GET of the latest. With it: one LIST of the
    manifests from ``known_id`` on (``start_after`` the key just before it), which proves that manifest
    still exists and nothing newer does, so an unchanged database costs that one request; if newer
    ones are listed, a GET of the newest. GC never deletes the latest manifest, so when the listing is
    empty ``known_id`` is gone with nothing after it (a hard destroy, maybe re-created with lower ids):
    the database is read as without ``known_id`` (:class:`~slate_ops.errors.DbNotFoundError` if none,
    or if the newest manifest is a tombstone: the database was deleted).

    ``probe``: first one GET of manifest ``known_id + 1`` (:meth:`SequencedStore.probe_after`);
    absent, the database is unchanged and that GET is all it costs; present, the LIST above follows
    (and when that manifest is the newest, it is not read again). The caller vouches that ``known_id``
    was confirmed the latest less than GC's ``min_age`` floor ago (docs/orchestration.md, "What each
    database costs"): a probe cannot tell a manifest never written from one GC deleted.
    """
    manifests = ManifestStore(store, path)
    if known_id is None or known_id < 1:
        return manifests.read_latest_required()
    following = manifests.sequence.probe_after(known_id) if probe else None
    if probe and following is None:
        return None
    listed = manifests.sequence.list(start_after_id=known_id - 1)
    if listed and listed[-1].id == known_id:
        return None
    if listed:
        try:
            if following is not None and following.id == listed[-1].id:
                newest = following  # the probe read it
            else:
                newest = manifests.read(listed[-1].id)
        except ObjectNotFoundError:
            pass  # deleted since the LIST (a destroy): read it afresh
        else:
            if newest.value.is_tombstone:
                raise manifests.deleted(newest)  # DbNotFoundError: the database was deleted
            return newest
    return manifests.read_latest_required()


__all__ = [
    "DESTROYED",
    "LIVE",
    "UNINITIALIZED",
    "UNREADABLE",
    "DbListing",
    "Discovery",
    "discover",
    "discover_databases",
    "holds_manifests",
    "latest_manifest_since",
    "list_dbs",
]
