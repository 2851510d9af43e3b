"""The background flusher's acknowledgements, in a thread of their own (docs/design/engine.md, "One WAL PUT
in flight").

The flusher thread writes round ``k``'s WAL SSTs and asks for a confirmation; it does not wait for it, so
round ``k + 1``'s WAL PUT (the writes that arrived meanwhile) runs while round ``k`` is being confirmed.
Still one WAL PUT in flight, and one confirmation: each starts after the WAL SSTs it acknowledges were
created (:meth:`WalBuffer.acknowledge` reads what is written before it confirms). A fence or a deletion
found by a confirmation fails the writer (recorded by the acknowledgement) and ends this thread, so
nothing is acknowledged after it.
"""

from __future__ import annotations

import logging
import threading

from slate_ops.engine.wal_buffer import WalBuffer
from slate_ops.engine.writer_status import WriterStatus
from slate_ops.errors import FencedError

log = logging.getLogger(__name__)


class WalConfirmer:
    """Acknowledges what the flusher wrote, one confirmation at a time, off the flusher's thread.

    ``retry_s``: how long it sleeps without a request before it looks again (a confirmation that
    failed on a store error is retried then, as the flusher retries its round).
    """

    def __init__(self, wal: WalBuffer, status: WriterStatus, name: str, *, retry_s: float) -> None:
        self._wal = wal
        self._status = status
        self._retry_s = retry_s
        self._requested = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def request(self) -> None:
        """WAL SSTs were written: acknowledge them (now, or right after the confirmation in flight)."""
        self._requested.set()

    def stop(self) -> None:
        """Stop after the confirmation in flight, if any (the caller acknowledges what is left)."""
        self._stopping.set()
        self._requested.set()
        if self._thread.ident is not None:
            self._thread.join()

    def _run(self) -> None:
        while True:
            self._requested.wait(self._retry_s)
            self._requested.clear()
            if self._stopping.is_set() or self._status.failure is not None:
                return
            try:
                self._wal.acknowledge()
            except FencedError:
                return  # recorded on the writer by the acknowledgement: every waiter raises it
            except Exception as error:  # a store error: the writes stay unacknowledged, retried
                log.warning("confirming the WAL of %s failed, will retry: %s", self._status.location, error)
