"""Sequenced objects: the one commit primitive for ``.manifest`` and ``.compactions`` files.

Versions are objects ``<dir>/<20-digit id>.<suffix>``; the highest id is current (docs/design/coordination.md,
"Sequenced store"). An update applies a change to the latest version and creates ``id + 1`` with
create-if-absent: the file name is the commit point. A lost race re-reads and re-applies. After a create
succeeds, the namespace's GC boundary is checked (SlateDB's GC boundary-file design (docs/design/gc.md)): an
id at or behind it is a failed write, never a silent success.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from slate_ops.errors import (
    BoundaryViolationError,
    CommitRetriesExhaustedError,
    CorruptObjectError,
    NamespaceDeletedError,
    ObjectNotFoundError,
    PreconditionFailedError,
    PutOutcomeUnknownError,
    SequenceConflictError,
    SlateOpsError,
)
from slate_ops.layout import join, normalize_db_path, parse_sequenced_key, sequenced_key
from slate_ops.objstore.base import ObjectMeta, ObjectStore, PutMode, new_put_id, resolve_put_outcome
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime
from slate_ops.txn.boundary import BoundaryObject

log = logging.getLogger(__name__)

T = TypeVar("T")


class Codec(Protocol[T]):
    def encode(self, value: T) -> bytes: ...

    def decode(self, data: bytes, path: str) -> T: ...


@dataclass(frozen=True)
class Versioned(Generic[T]):
    """A value together with the sequence id it was read from or committed as."""

    id: int
    value: T


@dataclass(frozen=True)
class SequencedFile:
    id: int
    meta: ObjectMeta


class SequencedStore(Generic[T]):
    """Reads and commits one sequenced namespace under ``<db_path>/<directory>/``.

    Reading the latest version remembers the last id seen and probes the following ids with GET
    (``probe_limit`` at most) before falling back to LIST, so a reader whose cache is current pays one
    request. Updates start from the cached version: with no conflict an update costs the create and
    the boundary check.

    A probe miss only proves ``id + 1`` is absent, not that it was never written: GC may have
    deleted it. That cannot happen to an id created after the cache was last confirmed while the
    cache is younger than GC's minimum age, so a cache older than ``cache_ttl_s`` (keep it well below
    GC's min_age floor) is re-confirmed by LIST instead.

    A cached version that has vanished is never read as "still the latest": a LIST starts at the
    cached id itself, and finding neither it (with the etag this process read or wrote) nor anything
    newer raises :class:`NamespaceDeletedError` — the database was deleted
    (docs/design/coordination.md, "Fencing under races").
    """

    def __init__(
        self,
        store: ObjectStore,
        db_path: str,
        directory: str,
        suffix: str,
        codec: Codec[T],
        boundary: BoundaryObject | None = None,
        *,
        probe_limit: int = 4,
        max_attempts: int = 64,
        cache_ttl_s: float = 60.0,
        clock: Runtime = SYSTEM_RUNTIME,
    ) -> None:
        self._store = store
        self.db_path = normalize_db_path(db_path)
        self.directory = join(self.db_path, directory)
        self.suffix = suffix
        self._dir_name = directory
        self._codec = codec
        self.boundary = boundary or BoundaryObject(store, db_path, suffix)
        self._probe_limit = probe_limit
        self._max_attempts = max_attempts
        self._cache_ttl_s = cache_ttl_s
        self._clock = clock
        self._cached: Versioned[T] | None = None
        self._cached_etag: str | None = None  # of the cached version's object, as read or written
        self._cached_at = 0.0
        self._lock = threading.Lock()

    # --- naming ---------------------------------------------------------------------------------

    def key(self, object_id: int) -> str:
        return sequenced_key(self.db_path, self._dir_name, object_id, self.suffix)

    def parse_id(self, key: str) -> int | None:
        return parse_sequenced_key(self.db_path, self._dir_name, self.suffix, key)

    # --- reading --------------------------------------------------------------------------------

    def list(self, start_after_id: int | None = None) -> list[SequencedFile]:
        """All versions in id order (optionally only ids greater than ``start_after_id``)."""
        start_after = None if start_after_id is None else self.key(start_after_id)
        files = []
        for meta in self._store.list(self.directory + "/", start_after=start_after):
            object_id = self.parse_id(meta.key)
            if object_id is not None:
                files.append(SequencedFile(object_id, meta))
        return files

    def read(self, object_id: int) -> Versioned[T]:
        """Read one version; raises :class:`ObjectNotFoundError` if it does not exist."""
        return self._read_tagged(object_id)[0]

    def _read_tagged(self, object_id: int) -> _Tagged[T]:
        path = self.key(object_id)
        got = self._store.get(path)
        return Versioned(object_id, self._codec.decode(got.data, path)), got.meta.etag

    def _try_read(self, object_id: int) -> _Tagged[T] | None:
        try:
            return self._read_tagged(object_id)
        except ObjectNotFoundError:
            return None

    def read_latest(self) -> Versioned[T] | None:
        """The current version, or None if the namespace is empty.

        Raises :class:`NamespaceDeletedError` when a LIST shows that the cached version vanished (or
        was replaced) and nothing newer exists.
        """
        with self._lock:
            cached, etag = self._cached, self._cached_etag
            fresh = self._clock.monotonic() - self._cached_at < self._cache_ttl_s
        if cached is not None and fresh:
            latest, latest_etag = self._probe_from(cached, etag)
        else:
            latest, latest_etag = self._read_latest_by_list(cached, etag)
        self._remember(latest, latest_etag)
        return latest

    def confirm_latest(self) -> Versioned[T] | None:
        """The current version, confirmed by one request that starts after this call does.

        One LIST that starts AT the cached version ``M`` (:meth:`_read_latest_by_list`): ``M`` listed
        with the etag this process read or wrote and nothing after it confirms ``M`` (no GET);
        anything newer is read; ``M`` gone or replaced with nothing newer raises
        :class:`NamespaceDeletedError`. A single LIST sees one state of the directory. A HEAD of ``M``
        beside a GET of ``M + 1`` does not: the HEAD can land before a destroy and the GET after it
        has deleted both, which reads a deleted database as current (found by the interleaving
        explorer, tests/reliability/interleavings). Without a cached version it is a LIST from the
        start.
        """
        with self._lock:
            cached, etag = self._cached, self._cached_etag
        latest, latest_etag = self._read_latest_by_list(cached, etag)
        self._remember(latest, latest_etag)
        return latest

    def cached(self) -> Versioned[T] | None:
        """The last version this store read or committed, without any request."""
        with self._lock:
            return self._cached

    def probe_after(self, known_id: int) -> Versioned[T] | None:
        """Version ``known_id + 1`` if it exists now, else None: one GET, the probe of
        :meth:`read_latest`. A miss proves ``known_id`` still the latest only while GC cannot have
        deleted ``known_id + 1``: when ``known_id`` was confirmed the latest less than GC's
        ``min_age`` ago (the class's TTL rule; the manifest sensors' poll keeps its own)."""
        following = self._try_read(known_id + 1)
        return None if following is None else following[0]

    def _probe_from(self, known: Versioned[T], etag: str | None) -> _MaybeTagged[T]:
        latest, latest_etag = known, etag
        for _ in range(self._probe_limit):
            following = self._try_read(latest.id + 1)
            if following is None:
                return latest, latest_etag
            latest, latest_etag = following
        return self._read_latest_by_list(latest, latest_etag)

    def _read_latest_by_list(self, floor: Versioned[T] | None, floor_etag: str | None) -> _MaybeTagged[T]:
        """The latest version by one LIST that starts AT ``floor`` (the version last seen).

        The floor listed (with the same etag) and nothing after it: the floor is still the latest (no
        GET). Something after it: that is read (GC deletes old versions once newer ones exist). The
        floor gone or replaced and nothing after it: the namespace was deleted under this process —
        :class:`NamespaceDeletedError`, never "still the latest".
        """
        # A LIST and GET are not atomic: if the listed latest vanished (a destroy), list again.
        for _ in range(self._max_attempts):
            files = self.list(start_after_id=None if floor is None else floor.id - 1)
            if floor is not None:
                has_floor = bool(files) and files[0].id == floor.id
                newer = files[1:] if has_floor else files
                if not newer:
                    # The floor's object replaced (another etag) with nothing newer: deleted and
                    # re-created. (With newer versions, it is a stale write GC's boundary rejected.)
                    if has_floor and (floor_etag is None or _same_etag(files[0].meta.etag, floor_etag)):
                        return floor, floor_etag
                    raise NamespaceDeletedError(self.directory, floor.id)
            elif not files:
                return None, None
            latest = self._try_read(files[-1].id)
            if latest is not None:
                return latest
        raise CommitRetriesExhaustedError(f"{self.directory}: the latest version kept disappearing")

    def _expire_cache(self) -> None:
        with self._lock:
            self._cached_at = float("-inf")

    def _remember(self, version: Versioned[T] | None, etag: str | None) -> None:
        with self._lock:
            if version is None or self._cached is None or version.id >= self._cached.id:
                self._cached = version
                self._cached_etag = etag
                self._cached_at = self._clock.monotonic()

    # --- committing -----------------------------------------------------------------------------

    def create(self, object_id: int, value: T) -> Versioned[T]:
        """Commit ``value`` as version ``object_id`` with create-if-absent, then check the boundary.

        Raises :class:`SequenceConflictError` if the id exists and :class:`BoundaryViolationError` if
        GC's boundary already covers it (the create is then not a commit).
        """
        path = self.key(object_id)
        data = self._codec.encode(value)
        put_id = new_put_id()
        try:
            try:
                etag = self._store.put(path, data, PutMode.create(), put_id=put_id).etag
            except PutOutcomeUnknownError:
                etag = resolve_put_outcome(self._store, path, data, PutMode.create(), put_id).etag
        except PreconditionFailedError:
            raise SequenceConflictError(path) from None
        try:
            self.boundary.check(object_id, path)
        except BoundaryViolationError:
            self._withdraw(path)
            raise
        except CorruptObjectError as error:
            raise CorruptObjectError(
                error.path,
                error.reason,
                f"{error.fix}. {path} was written but could not be checked against the boundary, so "
                "it is not confirmed: check whether the operation took effect before retrying it",
            ) from error
        committed = Versioned(object_id, value)
        self._remember(committed, etag or None)
        return committed

    def _withdraw(self, path: str) -> None:
        """Delete our own create that the boundary rejected: it is no version (GC may already have
        deleted ids up to the boundary, or a deletion left a tombstone above it), and left in place a
        stale process's probe could read it. Best effort: GC collects it otherwise."""
        try:
            self._store.delete(path)
        except SlateOpsError as error:
            log.warning("could not delete the rejected stale write %s (GC collects it): %s", path, error)

    def update(self, change: Callable[[Versioned[T] | None], T | None]) -> Versioned[T] | None:
        """Apply ``change`` to the latest version and commit the result as the next id.

        ``change`` gets the latest version (None if the namespace is empty) and returns the new value,
        or None to commit nothing. It may raise to abort; it is re-run on every retry, so it must be
        a pure function of its input. The first attempt trusts the cached version; a lost race or a
        boundary violation re-reads the latest and tries again, up to ``max_attempts`` times.
        """
        current = self.cached() or self.read_latest()
        for attempt in range(1, self._max_attempts + 1):
            new_value = change(current)
            if new_value is None:
                return current
            next_id = 1 if current is None else current.id + 1
            try:
                return self.create(next_id, new_value)
            except SequenceConflictError as conflict:
                log.info("%s (attempt %d/%d); re-reading", conflict, attempt, self._max_attempts)
            except BoundaryViolationError as violation:
                # Our cache is older than GC's deletions, so probing from it proves nothing.
                log.warning("%s (attempt %d/%d); re-listing", violation, attempt, self._max_attempts)
                self._expire_cache()
            current = self.read_latest()
        raise CommitRetriesExhaustedError(
            f"gave up committing to {self.directory} after {self._max_attempts} conflicting attempts; "
            "another process commits continuously — retry later"
        )

    def advance_boundary(self, boundary: int) -> int:
        """GC's step before deleting versions ``<= boundary`` (docs/design/gc.md, "The tasks")."""
        return self.boundary.advance(boundary)


_Tagged = tuple[Versioned[T], str]
"""A version and the etag of its object."""
_MaybeTagged = tuple[Versioned[T] | None, str | None]


def _same_etag(a: str, b: str) -> bool:
    return a.strip('"') == b.strip('"')
