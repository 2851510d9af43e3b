"""Whether a writer may still be used: not closed, and no failure (a fence) observed.

Every part of the writer (:mod:`~slate_ops.engine.wal_buffer`, :mod:`~slate_ops.engine.flusher`,
:mod:`~slate_ops.engine.writer_manifest`) records a :class:`FencedError` here where it observes it, so
that from then on every call raises it (docs/design/engine.md, "The writer's parts").
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

from slate_ops.errors import DbClosedError, FencedError


class WriterStatus:
    """The writer's failure and closed flag; ``on_fenced`` callbacks run when a fence is observed."""

    def __init__(self, location: str) -> None:
        self.location = location
        self._lock = threading.Lock()  # the first failure wins
        self._failure: BaseException | None = None
        self._closed = False
        self._on_failure: list[Callable[[], None]] = []
        self._on_fenced: list[Callable[[FencedError], None]] = []

    def on_failure(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` after every :meth:`fail` (waiters wake and see the failure)."""
        self._on_failure.append(callback)

    def on_fenced(self, callback: Callable[[FencedError], None]) -> None:
        """Call ``callback`` with the error when :meth:`failing_when_fenced` observes a fence."""
        self._on_fenced.append(callback)

    @property
    def failure(self) -> BaseException | None:
        return self._failure

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        self._closed = True

    def fail(self, error: BaseException) -> None:
        """Record ``error`` (the first one recorded stays) and wake the waiters."""
        with self._lock:
            if self._failure is None:
                self._failure = error
        for callback in self._on_failure:
            callback()

    def check_open(self) -> None:
        if self._closed:
            raise DbClosedError(f"the writer of {self.location} is closed")

    def check_usable(self) -> None:
        self.check_open()
        if self._failure is not None:
            raise self._failure

    @contextlib.contextmanager
    def failing_when_fenced(self) -> Iterator[None]:
        """Record a FencedError where it is observed, before it propagates: from then on every call
        raises it, and no write is accepted once any caller (or the flusher) has seen the fence."""
        try:
            yield
        except FencedError as error:
            self.fail(error)
            for callback in self._on_fenced:
                callback(error)
            raise
