"""The binding (``slatedb.uniffi``, imported lazily: :func:`binding`) and the one event-loop owner
that every async binding call runs on (:class:`LoopOwner`, :data:`LOOP`).

One daemon thread owns one asyncio loop for the process; a sync caller -- a Dagster op, the CLI, a
Spark task, any thread, including one whose own loop is running -- submits the coroutine with
``asyncio.run_coroutine_threadsafe`` and blocks on the result. Nothing calls ``asyncio.run`` per
operation and nothing calls the binding's process-global ``uniffi_set_event_loop``. A process
forked after the binding ran hangs on its first call (measured), so the owner raises
:class:`~slate_ops.errors.SlateDbForkError` there instead.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from slate_ops.errors import SLATEDB_PINNED_VERSION as PINNED_VERSION
from slate_ops.errors import SlateDbBindingMissingError, SlateDbForkError

__all__ = ["LOOP", "PINNED_VERSION", "LoopOwner", "binding"]

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
        loop = self._ensure()
        if threading.get_ident() == self.thread_ident:
            coro.close()
            raise RuntimeError(
                "LoopOwner.run called from the loop's own thread (a coroutine on the loop calling "
                "a sync SlateDB function); await the binding directly there"
            )
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)


LOOP = LoopOwner()
