"""Where every object of a database lives in the store: one module, as SlateDB's ``paths.rs``.

A database at path ``<db>`` (``""`` is the store's root) owns these keys::

    <db>/manifest/<20-digit id>.manifest        ManifestStore (slate_ops.manifest.store)
    <db>/compactions/<20-digit id>.compactions  the compactor's state (slate_ops.compaction.state)
    <db>/gc/<namespace>.boundary                GC boundary objects (slate_ops.txn.boundary)
    <db>/wal/<20-digit id>.sst                  WAL SSTs and fence objects (WalStore, below)
    <db>/compacted/<ULID>.sst                   L0 and sorted-run SSTs (sst_key)

The key builders and parsers below are the one place these names are spelled out: every listing
matches a key by comparing it in full with the key built for the parsed id (:func:`parse_wal_key`,
:func:`parse_sst_key`, :func:`parse_manifest_key`, ...), never by its last component alone, so the
objects of a database nested under this one (``<db>/wal/wal/...`` of a database named ``<db>/wal``)
are never taken for this database's own.

An SST listed by one of the manifest's ``external_dbs`` lives under that database's path instead
(clones, shards, merges: :func:`resolve_sst_path`). The WAL is here too, as :class:`WalStore`:
contiguous ids, entries in sequence order, and an empty object at an id is a fence, never data.
A writer fences older writers by creating an empty object at the next WAL id: the fenced writer's
create-if-absent of that id then fails, and it finds the newer epoch in the manifest
(docs/design/coordination.md, "Fencing").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import pyarrow as pa
from ulid import ULID

from slate_ops.errors import ObjectNotFoundError, PreconditionFailedError, PutOutcomeUnknownError
from slate_ops.manifest.model import CompactedSst, Manifest
from slate_ops.manifest.store import MANIFEST_DIR, MANIFEST_SUFFIX
from slate_ops.objstore.base import (
    GetResult,
    ObjectMeta,
    ObjectStore,
    PutMode,
    PutResult,
    new_put_id,
    resolve_put_outcome,
)
from slate_ops.sst import SstReader, encode_sst
from slate_ops.txn.paths import (
    COMPACTED_DIR,
    COMPACTIONS_DIR,
    GC_DIR,
    WAL_DIR,
    is_valid_db_path,
    join,
    normalize_db_path,
)
from slate_ops.txn.sequenced import ID_DIGITS

COMPACTIONS_SUFFIX = "compactions"
OWN_DIRECTORIES = (MANIFEST_DIR, WAL_DIR, COMPACTED_DIR, COMPACTIONS_DIR, GC_DIR)
"""Every directory a database owns under its path: the names the layout reserves (defined in
:mod:`slate_ops.txn.paths`, whose ``normalize_db_path`` refuses them as components of a database path)."""

_ID = re.compile(rf"^\d{{{ID_DIGITS}}}$")
_MANIFEST_TAIL = f"/{MANIFEST_DIR}/"


def _id_of(name: str, suffix: str) -> int | None:
    stem = name[: -len(suffix) - 1] if name.endswith("." + suffix) else ""
    return int(stem) if _ID.match(stem) else None


def _sequenced_key(db_path: str, directory: str, object_id: int, suffix: str) -> str:
    return join(db_path, directory, f"{object_id:0{ID_DIGITS}d}.{suffix}")


def _parse_sequenced(db_path: str, directory: str, suffix: str, key: str) -> int | None:
    object_id = _id_of(key.rsplit("/", 1)[-1], suffix)
    if object_id is None or key != _sequenced_key(db_path, directory, object_id, suffix):
        return None
    return object_id


def manifest_key(db_path: str, manifest_id: int) -> str:
    """``<db>/manifest/<20-digit id>.manifest``."""
    return _sequenced_key(normalize_db_path(db_path), MANIFEST_DIR, manifest_id, MANIFEST_SUFFIX)


def parse_manifest_key(key: str) -> tuple[str, int] | None:
    """``(database path, manifest id)`` if ``key`` is the key of a manifest of some database (the
    database is everything before its last ``/manifest/``), else None."""
    object_id = _id_of(key.rsplit("/", 1)[-1], MANIFEST_SUFFIX)
    if object_id is None:
        return None
    head = key[: key.rindex("/")]  # "<db>/manifest" or "manifest"
    if head == MANIFEST_DIR:
        db_path = ""
    elif head.endswith(_MANIFEST_TAIL[:-1]) and head != _MANIFEST_TAIL[:-1]:
        db_path = head[: -len(_MANIFEST_TAIL) + 1]
    else:
        return None
    if not is_valid_db_path(db_path):
        return None  # e.g. a/wal/manifest/…: no database may have that path (docs/design/names.md)
    return (db_path, object_id) if key == manifest_key(db_path, object_id) else None


DELETED_MARKER = "deleted"


def deleted_marker_key(db_path: str, tombstone_id: int) -> str:
    """``<db>/gc/deleted.<20-digit id>``: the empty marker a deletion writes beside its tombstone
    manifest ``tombstone_id``, so that one LIST tells a deleted database from a live one."""
    return join(normalize_db_path(db_path), GC_DIR, f"{DELETED_MARKER}.{tombstone_id:0{ID_DIGITS}d}")


def parse_deleted_marker_key(key: str) -> tuple[str, int] | None:
    """``(database path, tombstone id)`` if ``key`` is a deletion marker of some database, else None."""
    head, _, name = key.rpartition("/")
    stem, _, digits = name.partition(".")
    if stem != DELETED_MARKER or not _ID.match(digits):
        return None
    if head == GC_DIR:
        db_path = ""
    elif head.endswith("/" + GC_DIR):
        db_path = head[: -len(GC_DIR) - 1]
    else:
        return None
    if not is_valid_db_path(db_path):
        return None
    return (db_path, int(digits)) if key == deleted_marker_key(db_path, int(digits)) else None


def compactions_key(db_path: str, compactions_id: int) -> str:
    """``<db>/compactions/<20-digit id>.compactions``."""
    return _sequenced_key(normalize_db_path(db_path), COMPACTIONS_DIR, compactions_id, COMPACTIONS_SUFFIX)


def parse_own_manifest_key(db_path: str, key: str) -> int | None:
    """The id if ``key`` is a manifest of the database at ``db_path`` itself (full key), else None."""
    return _parse_sequenced(normalize_db_path(db_path), MANIFEST_DIR, MANIFEST_SUFFIX, key)


def parse_compactions_key(db_path: str, key: str) -> int | None:
    """The id if ``key`` is a ``.compactions`` file of the database at ``db_path`` (full key)."""
    return _parse_sequenced(normalize_db_path(db_path), COMPACTIONS_DIR, COMPACTIONS_SUFFIX, key)


def wal_key(db_path: str, wal_id: int) -> str:
    """``<db>/wal/<20-digit id>.sst``."""
    return join(normalize_db_path(db_path), WAL_DIR, f"{wal_id:0{ID_DIGITS}d}.sst")


def parse_wal_key(db_path: str, key: str) -> int | None:
    """The id if ``key`` is a WAL SST (or fence) of the database at ``db_path`` (full key), else None."""
    object_id = _id_of(key.rsplit("/", 1)[-1], "sst")
    return object_id if object_id is not None and key == wal_key(db_path, object_id) else None


def sst_key(db_path: str, sst_id: ULID) -> str:
    """The key of SST ``sst_id`` of the database at ``db_path``."""
    return join(db_path, COMPACTED_DIR, f"{sst_id}.sst")


def parse_sst_key(db_path: str, key: str) -> ULID | None:
    """The SST id if ``key`` is an SST under the database's own ``compacted/`` (full key), else None."""
    name = key.rsplit("/", 1)[-1]
    if not name.endswith(".sst"):
        return None
    try:
        sst_id = ULID.from_str(name[: -len(".sst")])
    except ValueError:
        return None
    return sst_id if key == sst_key(normalize_db_path(db_path), sst_id) else None


def own_directory(db_path: str, directory: str) -> str:
    """The listing prefix of one of the database's own directories: ``<db>/<directory>/``."""
    return join(normalize_db_path(db_path), directory) + "/"


def resolve_sst_path(manifest: Manifest, db_path: str, sst: CompactedSst) -> str:
    """Where ``sst`` of ``manifest`` (the database at ``db_path``) is stored: under the external
    database that lists it, else under ``db_path`` (docs/design/clones-and-destroy.md)."""
    owner = manifest.owner_of(sst)
    return sst_key(db_path if owner is None else owner.path, sst.physical_id)


# WAL SSTs fetched at once by read_many (replay): on S3 each GET waits ~20-50 ms, so fetching one
# after another makes a reopen after a few hundred WAL SSTs take many seconds. Bounded so that at
# most this many segments are held in memory ahead of the one being applied.
WAL_FETCH_PARALLELISM = 16

Entry = tuple[bytes, int, int, bytes]


class WalStore:
    def __init__(self, store: ObjectStore, db_path: str) -> None:
        self.store = store
        self.db_path = normalize_db_path(db_path)
        self.directory = join(self.db_path, WAL_DIR)

    def key(self, wal_id: int) -> str:
        return wal_key(self.db_path, wal_id)

    def list_ids(self, after: int = 0) -> list[int]:
        """WAL ids greater than ``after``, ascending."""
        return [wal_id for wal_id, _ in self.list_sizes(after)]

    def list_sizes(self, after: int = 0) -> list[tuple[int, int]]:
        """``(id, object size)`` of the WAL SSTs with ids greater than ``after``, ascending; one LIST.

        Keys are compared in full: the objects of a database nested in this one's ``wal/`` directory
        (a database named ``<db>/wal``) are not this database's WAL."""
        found = []
        for meta in self.store.list(self.directory + "/", start_after=self.key(after) if after else None):
            wal_id = parse_wal_key(self.db_path, meta.key)
            if wal_id is not None and wal_id > after:
                found.append((wal_id, meta.size))
        return found

    def max_seq(self, wal_id: int, size: int) -> int | None:
        """The highest sequence number in WAL ``wal_id`` of ``size`` bytes; None for a fence."""
        if size == 0:
            return None
        return SstReader.open(self.store, self.key(wal_id), size=size).info.max_seq

    def create(self, wal_id: int, data: bytes, put_id: str | None = None) -> bool:
        """Create WAL ``wal_id``; False if the id exists (someone fenced us, or wrote it first).

        A retry of a create whose outcome stayed unknown (it raised) passes the same ``put_id``:
        finding the object stored with that put id means the earlier attempt landed — success.
        """
        key = self.key(wal_id)
        put_id = put_id or new_put_id()
        try:
            try:
                self.store.put(key, data, PutMode.create(), put_id=put_id)
            except PutOutcomeUnknownError:
                resolve_put_outcome(self.store, key, data, PutMode.create(), put_id)
        except PreconditionFailedError:
            return self._holds(key, put_id)
        return True

    def _holds(self, key: str, put_id: str) -> bool:
        try:
            return self.store.head(key).put_id == put_id
        except ObjectNotFoundError:
            return False

    def write(self, wal_id: int, table: pa.Table, put_id: str | None = None) -> bool:
        data, _ = encode_sst(table, order="seq")
        return self.create(wal_id, data, put_id)

    def fence(self, after: int) -> int:
        """Create an empty fence object at the first free id above every existing WAL; return it."""
        candidate = max([after, *self.list_ids(after)]) + 1
        while not self.create(candidate, b""):
            candidate += 1
        return candidate

    def read(self, wal_id: int) -> Iterator[Entry]:
        """The entries of WAL ``wal_id`` in seq order; nothing for a fence. One GET."""
        return self._fetch(wal_id).scan()

    def read_many(
        self, segments: Iterable[tuple[int, int]], parallelism: int | None = None
    ) -> Iterator[tuple[int, Iterator[Entry]]]:
        """``(id, entries)`` of each ``(id, size)`` of ``segments`` (from :meth:`list_sizes`), in order.

        Up to ``parallelism`` (default :data:`WAL_FETCH_PARALLELISM`) WAL SSTs are fetched at once,
        each with one GET and in order of need (the next ones while the caller applies this one); a
        fence (size 0) costs no request. Stopping early (or an error) cancels the fetches not yet
        started.
        """
        window = max(1, WAL_FETCH_PARALLELISM if parallelism is None else parallelism)
        pending: list[tuple[int, Future[_WalSegment] | None]] = []
        todo = iter(segments)
        with ThreadPoolExecutor(window, thread_name_prefix="slate-ops-wal-fetch") as pool:
            try:
                while True:
                    while len(pending) < window:
                        step = next(todo, None)
                        if step is None:
                            break
                        wal_id, size = step
                        pending.append((wal_id, None if size == 0 else pool.submit(self._fetch, wal_id)))
                    if not pending:
                        return
                    wal_id, future = pending.pop(0)
                    yield wal_id, iter(()) if future is None else future.result().scan()
            finally:
                for _, future in pending:
                    if future is not None:
                        future.cancel()

    def _fetch(self, wal_id: int) -> _WalSegment:
        """WAL ``wal_id`` read whole with one GET (a WAL SST is read whole anyway): no HEAD, no
        ranged GETs for footer, index and blocks."""
        key = self.key(wal_id)
        return _WalSegment(self.store.url, key, self.store.get(key))

    def size(self, wal_id: int) -> int | None:
        """The size of WAL ``wal_id`` by one HEAD (0: a fence), or None if it does not exist."""
        try:
            return self.store.head(self.key(wal_id)).size
        except ObjectNotFoundError:
            return None


class _WalSegment:
    """One fetched WAL SST; :meth:`scan` decodes it from memory (nothing for a fence)."""

    __slots__ = ("_got", "_key", "_url")

    def __init__(self, url: str, key: str, got: GetResult) -> None:
        self._url = url
        self._key = key
        self._got = got

    def scan(self) -> Iterator[Entry]:
        if not self._got.data:
            return iter(())
        view = _FetchedObject(self._url, self._key, self._got)
        return SstReader.open(view, self._key, size=len(self._got.data)).scan()


class _FetchedObject:
    """A read-only store view serving one already fetched object from memory, for SstReader."""

    def __init__(self, url: str, key: str, got: GetResult) -> None:
        self.url = url
        self._key = key
        self._got = got

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        self._check(key)
        data = self._got.data
        return GetResult(data if byte_range is None else data[byte_range[0] : byte_range[1]], self._got.meta)

    def head(self, key: str) -> ObjectMeta:
        self._check(key)
        return self._got.meta

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[ObjectMeta]:
        raise NotImplementedError("a fetched WAL SST is read only")

    def put(self, key: str, data: bytes, mode: PutMode | None = None, put_id: str | None = None) -> PutResult:
        raise NotImplementedError("a fetched WAL SST is read only")

    def delete(self, key: str) -> None:
        raise NotImplementedError("a fetched WAL SST is read only")

    def _check(self, key: str) -> None:
        if key != self._key:
            raise ObjectNotFoundError(f"{key} is not the fetched WAL SST {self._key}", key)


__all__ = [
    "COMPACTED_DIR",
    "COMPACTIONS_DIR",
    "COMPACTIONS_SUFFIX",
    "GC_DIR",
    "MANIFEST_DIR",
    "MANIFEST_SUFFIX",
    "OWN_DIRECTORIES",
    "WAL_DIR",
    "WalStore",
    "compactions_key",
    "deleted_marker_key",
    "join",
    "manifest_key",
    "normalize_db_path",
    "own_directory",
    "parse_compactions_key",
    "parse_deleted_marker_key",
    "parse_manifest_key",
    "parse_own_manifest_key",
    "parse_sst_key",
    "parse_wal_key",
    "resolve_sst_path",
    "sst_key",
    "wal_key",
]
