"""GC boundary objects (spec 002): ``<db>/gc/<namespace>.boundary``, an ASCII u64, inclusive.

A boundary ``B`` means ids ``<= B`` of the namespace may already be deleted, so a writer that just
created such an id must not report success. GC advances the boundary before deleting; it never
moves backward and is never deleted.
"""

from __future__ import annotations

import logging
import threading

from slate_ops.errors import (
    BoundaryMissingError,
    BoundaryViolationError,
    CorruptObjectError,
    InvalidArgumentError,
    ObjectNotFoundError,
    PreconditionFailedError,
    PutOutcomeUnknownError,
)
from slate_ops.objstore.base import ObjectStore, PutMode, new_put_id, resolve_put_outcome
from slate_ops.txn.paths import join

log = logging.getLogger(__name__)

MAX_U64 = 2**64 - 1


class BoundaryObject:
    def __init__(self, store: ObjectStore, db_path: str, namespace: str) -> None:
        self._store = store
        self.key = join(db_path, "gc", f"{namespace}.boundary")
        self._seen = False
        self._lock = threading.Lock()

    def read(self) -> tuple[int, str | None]:
        """The durable boundary and its etag; ``(0, None)`` if the file never existed."""
        try:
            result = self._store.get(self.key)
        except ObjectNotFoundError:
            if self._seen:
                raise BoundaryMissingError(
                    f"{self.key} existed earlier and is now missing; GC never deletes boundary files. "
                    "Stop writers and GC and restore it before continuing."
                ) from None
            return 0, None
        with self._lock:
            self._seen = True
        return self._parse(result.data), result.meta.etag

    def check(self, object_id: int, object_path: str) -> None:
        """Raise :class:`BoundaryViolationError` if ``object_id`` is at or behind the boundary."""
        boundary, _ = self.read()
        if object_id <= boundary:
            log.warning("stale write %s rejected: id %d <= boundary %d", object_path, object_id, boundary)
            raise BoundaryViolationError(object_path, object_id, boundary)

    def advance(self, boundary: int, max_attempts: int = 32) -> int:
        """Durably raise the boundary to at least ``boundary``; returns the durable value."""
        if not 0 <= boundary <= MAX_U64:
            raise InvalidArgumentError(f"boundary {boundary} is not a u64")
        for _ in range(max_attempts):
            current, etag = self.read()
            if boundary <= current:
                return current
            mode = PutMode.create() if etag is None else PutMode.if_match(etag)
            data = str(boundary).encode("ascii")
            put_id = new_put_id()
            try:
                try:
                    self._store.put(self.key, data, mode, put_id=put_id)
                except PutOutcomeUnknownError:
                    resolve_put_outcome(self._store, self.key, data, mode, put_id)
            except PreconditionFailedError:
                log.info("boundary %s advance raced another GC; re-reading", self.key)
                continue
            with self._lock:
                self._seen = True
            return boundary
        raise PreconditionFailedError(
            f"could not advance {self.key} to {boundary} after {max_attempts} conflicting attempts", self.key
        )

    def _parse(self, data: bytes) -> int:
        text = data.decode("ascii", errors="replace").strip()
        if not text.isdigit() or int(text) > MAX_U64:
            raise CorruptObjectError(self.key, f"boundary must be an ASCII u64, found {data[:40]!r}")
        return int(text)
