"""Sequenced objects: the one commit primitive for ``.manifest`` and ``.compactions`` files.

Versions are objects ``<dir>/<20-digit id>.<suffix>``; the highest id is current (docs/design/coordination.md,
"Manifest Files"). An update applies a change to the latest version and creates ``id + 1`` with
create-if-absent: the file name is the commit point. A lost race re-reads and re-applies. After a create
succeeds, the namespace's GC boundary is checked (SlateDB's GC boundary-file design (docs/design/gc.md)): an
id at or behind it is a failed write, never a silent success.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from slate_ops.errors import (
    BoundaryViolationError,
    CommitRetriesExhaustedError,
    CorruptObjectError,
    ObjectNotFoundError,
    PreconditionFailedError,
    PutOutcomeUnknownError,
    SequenceConflictError,
)
from slate_ops.objstore.base import ObjectMeta, ObjectStore, PutMode, new_put_id, resolve_put_outcome
from slate_ops.txn.boundary import BoundaryObject
from slate_ops.txn.paths import join

log = logging.getLogger(__name__)

T = TypeVar("T")
ID_DIGITS = 20


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
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self.directory = join(db_path, directory)
        self.suffix = suffix
        self._codec = codec
        self.boundary = boundary or BoundaryObject(store, db_path, suffix)
        self._probe_limit = probe_limit
        self._max_attempts = max_attempts
        self._name = re.compile(rf"^(\d{{{ID_DIGITS}}})\.{re.escape(suffix)}$")
        self._cache_ttl_s = cache_ttl_s
        self._monotonic = monotonic
        self._cached: Versioned[T] | None = None
        self._cached_at = 0.0
        self._lock = threading.Lock()

    # --- naming ---------------------------------------------------------------------------------

    def key(self, object_id: int) -> str:
        return join(self.directory, f"{object_id:0{ID_DIGITS}d}.{self.suffix}")

    def parse_id(self, key: str) -> int | None:
        name = key.rsplit("/", 1)[-1]
        match = self._name.match(name)
        return int(match.group(1)) if match and key == self.key(int(match.group(1))) else None

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
        path = self.key(object_id)
        return Versioned(object_id, self._codec.decode(self._store.get(path).data, path))

    def _try_read(self, object_id: int) -> Versioned[T] | None:
        try:
            return self.read(object_id)
        except ObjectNotFoundError:
            return None

    def read_latest(self) -> Versioned[T] | None:
        """The current version, or None if the namespace is empty."""
        with self._lock:
            cached = self._cached
            fresh = self._monotonic() - self._cached_at < self._cache_ttl_s
        if cached is not None and fresh:
            latest = self._probe_from(cached)
        else:
            latest = self._read_latest_by_list(cached)
        self._remember(latest)
        return latest

    def cached(self) -> Versioned[T] | None:
        """The last version this store read or committed, without any request."""
        with self._lock:
            return self._cached

    def _probe_from(self, known: Versioned[T]) -> Versioned[T] | None:
        latest = known
        for _ in range(self._probe_limit):
            following = self._try_read(latest.id + 1)
            if following is None:
                return latest
            latest = following
        return self._read_latest_by_list(latest)

    def _read_latest_by_list(self, floor: Versioned[T] | None) -> Versioned[T] | None:
        # A LIST and GET are not atomic: if the listed latest vanished (a destroy), list again.
        for _ in range(self._max_attempts):
            files = self.list(start_after_id=None if floor is None else floor.id)
            if not files:
                return floor
            latest = self._try_read(files[-1].id)
            if latest is not None:
                return latest
        raise CommitRetriesExhaustedError(f"{self.directory}: the latest version kept disappearing")

    def _expire_cache(self) -> None:
        with self._lock:
            self._cached_at = float("-inf")

    def _remember(self, version: Versioned[T] | None) -> None:
        with self._lock:
            if version is None or self._cached is None or version.id >= self._cached.id:
                self._cached = version
                self._cached_at = self._monotonic()

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
                self._store.put(path, data, PutMode.create(), put_id=put_id)
            except PutOutcomeUnknownError:
                resolve_put_outcome(self._store, path, data, PutMode.create(), put_id)
        except PreconditionFailedError:
            raise SequenceConflictError(path) from None
        try:
            self.boundary.check(object_id, path)
        except CorruptObjectError as error:
            raise CorruptObjectError(
                error.path,
                error.reason,
                f"{error.fix}. {path} was written but could not be checked against the boundary, so "
                "it is not confirmed: check whether the operation took effect before retrying it",
            ) from error
        committed = Versioned(object_id, value)
        self._remember(committed)
        return committed

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
        """GC's step before deleting versions ``<= boundary`` (docs/design/gc.md, "Advancing Boundaries")."""
        return self.boundary.advance(boundary)
