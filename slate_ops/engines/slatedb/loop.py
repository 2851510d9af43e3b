"""The binding (``slatedb.uniffi``, imported lazily: :func:`binding`) and the one event-loop owner
that every async binding call runs on (:class:`LoopOwner`, :data:`LOOP`).

One daemon thread owns one asyncio loop for the process; a sync caller -- a Dagster op, the CLI, a
Spark task, any thread, including one whose own loop is running -- submits the coroutine with
``asyncio.run_coroutine_threadsafe`` and blocks on the result. Nothing calls ``asyncio.run`` per
operation and nothing calls the binding's process-global ``uniffi_set_event_loop``. A process
forked after the binding ran hangs on its first call (measured), so the owner raises
:class:`~slate_ops.errors.SlateDbForkError` there instead.

No call waits forever: the binding has calls that never return (measured on 0.17.0: ``read_manifest``
and ``list_checkpoints`` while ``gc/manifest.boundary`` is at or above the latest manifest id; any
call against a bucket that does not exist, retried for more than 15 minutes).
:meth:`LoopOwner.call` bounds each call by its kind's :class:`CallTimeouts` entry, cancels the
coroutine when the bound passes (the binding then drops its Rust future) and raises
:class:`~slate_ops.errors.SlateDbTimeoutError`.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import threading
from collections.abc import Coroutine
from concurrent.futures import TimeoutError as FutureTimeoutError
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from slate_ops.errors import SLATEDB_PINNED_VERSION as PINNED_VERSION
from slate_ops.errors import (
    SlateDbBindingMissingError,
    SlateDbError,
    SlateDbForkError,
    SlateDbTimeoutError,
    SlateOpsError,
)

__all__ = ["DEFAULT_TIMEOUTS", "LOOP", "PINNED_VERSION", "CallKind", "CallTimeouts", "LoopOwner", "binding"]

T = TypeVar("T")


_binding: Any = None
_binding_lock = threading.Lock()


def binding() -> Any:
    """The ``slatedb.uniffi`` module, imported on first use; :class:`SlateDbBindingMissingError`
    without it."""
    global _binding
    if _binding is None:
        with _binding_lock:
            if _binding is None:
                try:
                    _binding = importlib.import_module("slatedb.uniffi")
                except ImportError as e:
                    raise SlateDbBindingMissingError(e) from e
    return _binding


# --- how long a binding call may take -----------------------------------------------------------

CallKind = Literal["metadata", "scan", "gc", "delete", "clone", "writer"]


@dataclass(frozen=True)
class CallTimeouts:
    """The longest one binding call of each kind may take, in seconds, before it is cancelled and
    :class:`~slate_ops.errors.SlateDbTimeoutError` is raised (docs/design/slatedb-engine.md,
    "One owner of the event loop"). Give other values to ``SlateDbAdmin(..., timeouts=)`` or
    ``SlateDbHandle(..., timeouts=)``.

    * ``metadata``: one manifest, checkpoint or compactions read or write, a compaction submit or
      one poll of it (a compaction is followed by polls, each bounded here, until the follow's own
      timeout -- ``SlateDbHandle.compaction_timeout_s``);
    * ``scan``: opening a ``DbReader``, one batch of a scan, closing it;
    * ``gc``: one ``run_gc_once`` (lists and deletes every collected directory);
    * ``delete``: ``delete_db`` (lists, and deletes every object of the database);
    * ``clone``: building a clone (reads each source's manifest, writes the clone's);
    * ``writer``: opening the database as its writer, flushing and closing (``flush_wal_to_l0``:
      replays the WAL).
    """

    metadata: float = 60.0
    scan: float = 300.0
    gc: float = 900.0
    delete: float = 900.0
    clone: float = 900.0
    writer: float = 900.0

    def of(self, kind: CallKind) -> float:
        return float(getattr(self, kind))


DEFAULT_TIMEOUTS = CallTimeouts()


# --- the event-loop owner -------------------------------------------------------------------


class LoopOwner:
    """One asyncio loop on one daemon thread; :meth:`run` executes a coroutine on it from any
    other thread and returns its result (or raises its exception). In a process forked after
    the loop started, :meth:`run` raises :class:`SlateDbForkError` (see :meth:`_ensure`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = -1

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._pid not in (-1, os.getpid()):
                # Measured on 0.17.0: after the binding ran in the parent, a forked child hangs on
                # its first binding call (the Rust runtime's threads do not survive fork). Fail
                # instead of hanging.
                raise SlateDbForkError(self._pid, os.getpid())
            if self._loop is None or self._thread is None or not self._thread.is_alive():
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def serve() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                thread = threading.Thread(target=serve, name="slate_ops-slatedb-loop", daemon=True)
                thread.start()
                ready.wait()
                self._loop, self._thread, self._pid = loop, thread, os.getpid()
            return self._loop

    @property
    def thread_ident(self) -> int | None:
        return self._thread.ident if self._thread else None

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """``coro``'s result, run on the loop; past ``timeout`` seconds (None: no bound) the
        coroutine is cancelled and :class:`TimeoutError` raised."""
        loop = self._ensure()
        if threading.get_ident() == self.thread_ident:
            coro.close()
            raise RuntimeError(
                "LoopOwner.run called from the loop's own thread (a coroutine on the loop calling "
                "a sync SlateDB function); await the binding directly there"
            )
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result(timeout)
        except FutureTimeoutError:
            future.cancel()  # cancels the task on the loop: the binding frees its Rust future
            raise TimeoutError(f"not done after {timeout} s; cancelled") from None

    def call(
        self,
        db_path: str,
        operation: str,
        coro: Coroutine[Any, Any, T],
        timeout: float,
        causes: str | None = None,
    ) -> T:
        """:meth:`run` bounded by ``timeout`` for the database at ``db_path``: binding errors
        become :class:`SlateDbError`, the bound passing :class:`SlateDbTimeoutError` (with
        ``causes``, when known, instead of the usual list)."""
        try:
            return self.run(coro, timeout)
        except SlateOpsError:
            raise
        except TimeoutError as e:
            raise SlateDbTimeoutError(db_path, operation, timeout, causes) from e
        except Exception as e:
            raise SlateDbError(db_path, operation, e) from e


LOOP = LoopOwner()
