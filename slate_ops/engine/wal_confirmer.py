"""The background flusher's acknowledgements, in threads of their own (docs/design/engine.md, "The
writer's WAL pipeline").

The flusher thread takes the WAL SSTs that landed (in id order, the landed prefix) and asks for a
confirmation; it does not wait for it, so later WAL PUTs (the writes that arrived meanwhile) run while
these are being confirmed. Each confirmation starts after the WAL SSTs it acknowledges were taken
(:meth:`WalBuffer.acknowledge` reads what is written before it confirms). A fence or a deletion found by a
confirmation fails the writer (recorded by the acknowledgement), so nothing is acknowledged after it.

The confirmations run on a pool from the writer's runtime, one worker per WAL PUT in flight: threads of
their own under the system runtime; under a :class:`~slate_ops.runtime.ManualRuntime` (the simulation,
the interleavings explorer) inline in the flusher's thread, so their store calls keep one order.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Executor

from slate_ops.engine.wal_buffer import WalBuffer
from slate_ops.engine.writer_status import WriterStatus
from slate_ops.errors import FencedError

log = logging.getLogger(__name__)


class WalConfirmer:
    """Acknowledges what the flusher wrote, one confirmation at a time, off the flusher's thread.

    ``pool``: the writer's runtime's executor with one worker per WAL PUT in flight
    (``wal_puts_in_flight``; one: confirmations never overlap). A request starts a confirmation only
    for writes that landed after the last one started (``_covered``), and queues at most one, which
    covers every WAL SST written before it starts. A confirmation that fails on a store error leaves
    its writes unacknowledged; the flusher's next round requests another.
    """

    def __init__(self, wal: WalBuffer, status: WriterStatus, pool: Executor) -> None:
        self._wal = wal
        self._status = status
        self._pool = pool
        self._lock = threading.Lock()
        self._queued = False
        self._covered = 0  # written_seq when the last confirmation started: it acknowledges at least that
        self._stopped = False

    def request(self) -> None:
        """WAL SSTs were written: acknowledge them (now, or once a worker is free). Nothing to do when
        every write in WAL SSTs is acknowledged, or covered by a confirmation that started after it
        was written and is still running."""
        with self._lock:
            if self._queued or self._stopped or self._status.failure is not None:
                return
            if self._wal.written_seq <= max(self._wal.durable_seq, self._covered):
                return
            self._queued = True
        self._pool.submit(self._confirm)

    def stop(self) -> None:
        """Wait for the confirmation in flight, if any (the caller acknowledges what is left)."""
        with self._lock:
            self._stopped = True
        self._pool.shutdown(wait=True)

    def abandon(self) -> None:
        """The writer failed: confirm nothing more, and let the pool's thread end without waiting
        for it (this may run on that very thread, from the failing confirmation)."""
        with self._lock:
            self._stopped = True
        self._pool.shutdown(wait=False)

    def _confirm(self) -> None:
        with self._lock:
            self._queued = False  # a request from now on is a new confirmation, after this one
            self._covered = max(self._covered, self._wal.written_seq)  # acknowledge reads no less
        if self._status.failure is not None:
            return
        try:
            self._wal.acknowledge()
        except FencedError:
            pass  # recorded on the writer by the acknowledgement: every waiter raises it
        except Exception as error:  # a store error: the writes stay unacknowledged, retried
            with self._lock:
                self._covered = self._wal.durable_seq  # the next request confirms them again
            log.warning("confirming the WAL of %s failed, will retry: %s", self._status.location, error)
