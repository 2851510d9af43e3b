"""GC boundary objects (SlateDB's GC boundary-file design (docs/design/gc.md)):
``<db>/gc/<namespace>.boundary``, an ASCII u64, inclusive.

A boundary ``B`` means ids ``<= B`` of the namespace may already be deleted, so a writer that just
created such an id must not report success. GC advances the boundary before deleting; it never
moves backward and is never deleted.

Observability (docs/design/gc.md, "Observability"): every boundary object counts its checks (and their
latency), rejected stale writes, advance attempts, conflicts and failures in ``metrics``; the same
counts are summed process-wide in :data:`METRICS`. Each rejected stale write and each failed advance
logs a warning.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from slate_ops.errors import (
    BoundaryMissingError,
    BoundaryViolationError,
    CorruptObjectError,
    InvalidArgumentError,
    ObjectNotFoundError,
    PreconditionFailedError,
    PutOutcomeUnknownError,
)
from slate_ops.layout import boundary_key, join, sequenced_key
from slate_ops.objstore.base import ObjectStore, PutMode, new_put_id, resolve_put_outcome

log = logging.getLogger(__name__)

MAX_U64 = 2**64 - 1


@dataclass
class BoundaryMetrics:
    """Counters of boundary checks and advances; thread-safe. ``snapshot()`` reads them at once."""

    checks: int = 0
    check_seconds_total: float = 0.0
    check_seconds_max: float = 0.0
    stale_writes_rejected: int = 0
    advance_attempts: int = 0
    advance_conflicts: int = 0
    advance_failures: int = 0
    advances: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record_check(self, seconds: float, rejected: bool) -> None:
        with self._lock:
            self.checks += 1
            self.check_seconds_total += seconds
            self.check_seconds_max = max(self.check_seconds_max, seconds)
            self.stale_writes_rejected += int(rejected)

    def count(self, name: str) -> None:
        """Add one to the counter ``name`` (``advance_attempts``, ``advance_conflicts``, ...)."""
        with self._lock:
            setattr(self, name, getattr(self, name) + 1)

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return {
                "checks": self.checks,
                "check_seconds_total": self.check_seconds_total,
                "check_seconds_max": self.check_seconds_max,
                "stale_writes_rejected": self.stale_writes_rejected,
                "advance_attempts": self.advance_attempts,
                "advance_conflicts": self.advance_conflicts,
                "advance_failures": self.advance_failures,
                "advances": self.advances,
            }

    def reset(self) -> None:
        with self._lock:
            self.checks = self.stale_writes_rejected = 0
            self.advance_attempts = self.advance_conflicts = self.advance_failures = self.advances = 0
            self.check_seconds_total = self.check_seconds_max = 0.0


METRICS = BoundaryMetrics()
"""Process-wide totals of every :class:`BoundaryObject` (each also keeps its own ``metrics``)."""


class BoundaryObject:
    def __init__(self, store: ObjectStore, db_path: str, namespace: str) -> None:
        self._store = store
        self.key = boundary_key(db_path, namespace)
        self._namespace = namespace
        self._db_path = db_path
        self._directory = join(db_path, namespace)
        self._seen = False
        self._lock = threading.Lock()
        self.metrics = BoundaryMetrics()

    def _count(self, name: str) -> None:
        self.metrics.count(name)
        METRICS.count(name)

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
        started = time.perf_counter()
        rejected = False
        try:
            boundary, _ = self.read()
            rejected = object_id <= boundary
        finally:
            elapsed = time.perf_counter() - started
            self.metrics.record_check(elapsed, rejected)
            METRICS.record_check(elapsed, rejected)
        if rejected:
            log.warning("stale write %s rejected: id %d <= boundary %d", object_path, object_id, boundary)
            raise BoundaryViolationError(object_path, object_id, boundary)

    def advance(self, boundary: int, max_attempts: int = 32) -> int:
        """Durably raise the boundary to at least ``boundary``; returns the durable value."""
        if not 0 <= boundary <= MAX_U64:
            raise InvalidArgumentError(f"boundary {boundary} is not a u64")
        try:
            return self._advance(boundary, max_attempts)
        except Exception as error:
            self._count("advance_failures")
            log.warning("advancing %s to %d failed: %s", self.key, boundary, error)
            raise

    def _advance(self, boundary: int, max_attempts: int) -> int:
        for _ in range(max_attempts):
            current, etag = self.read()
            if boundary <= current:
                return current
            mode = PutMode.create() if etag is None else PutMode.if_match(etag)
            data = str(boundary).encode("ascii")
            put_id = new_put_id()
            self._count("advance_attempts")
            try:
                try:
                    self._store.put(self.key, data, mode, put_id=put_id)
                except PutOutcomeUnknownError:
                    resolve_put_outcome(self._store, self.key, data, mode, put_id)
            except PreconditionFailedError:
                self._count("advance_conflicts")
                log.info("boundary %s advance raced another GC; re-reading", self.key)
                continue
            with self._lock:
                self._seen = True
            self._count("advances")
            return boundary
        raise PreconditionFailedError(
            f"could not advance {self.key} to {boundary} after {max_attempts} conflicting attempts", self.key
        )

    def _parse(self, data: bytes) -> int:
        text = data.decode("ascii", errors="replace").strip()
        if not text.isdigit() or int(text) > MAX_U64:
            raise CorruptObjectError(
                self.key,
                f"boundary must be an ASCII u64, found {data[:40]!r}",
                # The newest id is always safe: GC never deletes the newest version, so it is at
                # least the lost boundary, and every new version gets a higher id.
                f"Stop every writer, compactor and GC of the database, then overwrite {self.key} "
                f"with the id of the newest {self._directory}/*.{self._namespace} file as ASCII "
                f"digits (e.g. 12 for {sequenced_key(self._db_path, self._namespace, 12, self._namespace)})",
            )
        return int(text)
