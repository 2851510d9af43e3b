"""Which checkpoint each in-flight read uses, so that a replaced checkpoint is removed only once idle.

SlateDB's GC once deleted an SST that a running read still used (issue 604). Here every scan pins
the checkpoint of the state it reads; when the writer or reader re-establishes its checkpoint, the
old one is retired and removed from the manifest only when no scan holds it any more.
"""

from __future__ import annotations

import threading
import uuid
import weakref
from collections.abc import Iterator
from typing import TypeVar

T = TypeVar("T")


class CheckpointPins:
    def __init__(self) -> None:
        self._active: dict[uuid.UUID, int] = {}
        self._retired: set[uuid.UUID] = set()
        self._lock = threading.Lock()

    def acquire(self, checkpoint_id: uuid.UUID) -> None:
        with self._lock:
            self._active[checkpoint_id] = self._active.get(checkpoint_id, 0) + 1

    def release(self, checkpoint_id: uuid.UUID) -> None:
        with self._lock:
            count = self._active.get(checkpoint_id, 0) - 1
            if count > 0:
                self._active[checkpoint_id] = count
            else:
                self._active.pop(checkpoint_id, None)

    def is_active(self, checkpoint_id: uuid.UUID) -> bool:
        with self._lock:
            return checkpoint_id in self._active

    def pinned(self, checkpoint_id: uuid.UUID, scan: Iterator[T]) -> Iterator[T]:
        """``scan``, holding a pin on ``checkpoint_id`` from now until it ends or is dropped.

        The pin is taken at once (the caller holds the lock that orders it against checkpoint
        replacement) and released when the scan finishes, is closed, or is garbage collected —
        even if it was never started.
        """
        self.acquire(checkpoint_id)

        def run() -> Iterator[T]:
            try:
                yield from scan
            finally:
                release()

        iterator = run()
        release = weakref.finalize(iterator, self.release, checkpoint_id)
        return iterator

    def retire(self, checkpoint_id: uuid.UUID) -> None:
        with self._lock:
            self._retired.add(checkpoint_id)

    def removable(self) -> set[uuid.UUID]:
        """Retired checkpoints that no scan holds: safe to remove from the manifest."""
        with self._lock:
            return {c for c in self._retired if c not in self._active}

    def forget(self, checkpoint_ids: set[uuid.UUID]) -> None:
        """Call after a commit removed ``checkpoint_ids``."""
        with self._lock:
            self._retired -= checkpoint_ids
