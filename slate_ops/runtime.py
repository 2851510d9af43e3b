"""The one source of time, ids, randomness and thread pools, injected wherever a clock goes.

Everything in slate_ops that reads the wall clock, measures elapsed time, makes a UUID or a ULID,
draws a random number or runs calls on a thread pool asks a :class:`Runtime` for it; nothing else
calls ``time.time``, ``time.monotonic``, ``uuid.uuid4``, ``ULID()``, ``random`` or
``ThreadPoolExecutor`` (ruff's ``banned-api`` rule, TID251 in pyproject.toml, holds slate_ops to
it; tests/test_runtime.py forbids ``ULID()``, which the rule cannot ban without banning the type).
:data:`SYSTEM_RUNTIME` is the real one; :class:`ManualRuntime` moves only when told, draws every id
from one seeded generator and runs pooled calls on the caller's thread (:class:`InlineExecutor`:
requests in program order, not in thread-timing order), so a test or a simulation replays a seed
exactly without patching anything. (SlateDB does the same by lint: no ``SystemTime``, ``Instant``
or ``thread_rng`` outside its injected clock and seeded random source.)

The argument that carries it keeps its old name: every ``clock=`` parameter takes a runtime.

What stays outside it, on purpose (docs/design/runtime.md, "Determinism"):

* Real waits: ``time.sleep`` and ``Event.wait`` for another process or thread (a Spark daemon,
  SlateDB's own compactor, a fault-injected latency). A :class:`ManualRuntime` does not move while
  a thread sleeps, so a blocking wait whose deadline came from its ``monotonic()`` would never
  expire; waits on real processes take their deadline from :data:`SYSTEM_RUNTIME`.
* ``time.perf_counter`` for how long something took, shown to a person (logs, benchmark rows).
* Request tokens: :func:`slate_ops.objstore.base.new_put_id` and temporary file names come from the
  OS, since they must be unique across every process that writes the store (two runtimes with one
  seed would repeat them); they are only ever compared with themselves.
* SlateDB's binding (slate_ops.engines.slatedb): SlateDB's GC and compactor run on the real clock,
  so the plan that predicts them reads :data:`SYSTEM_RUNTIME`.
* Spark tasks (a bulk load's, a compaction's) run in other processes: they name their SSTs with
  :data:`SYSTEM_RUNTIME`, the worker's real clock (a bulk load weighs those ids' times against the
  driver's).
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

from ulid import ULID, ULIDGenerator

DEFAULT_START = 1_700_000_000.0

_R = TypeVar("_R")


class Clock(Protocol):
    """What code that only reads the time needs of a runtime."""

    def now(self) -> float:
        """Seconds since the Unix epoch."""
        ...


class Runtime(Clock, Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (deadlines, intervals, cache ages)."""
        ...

    def new_uuid(self) -> uuid.UUID:
        """A random (version 4) UUID: checkpoint, put and writer ids."""
        ...

    def new_ulid(self) -> ULID:
        """A ULID timestamped by :meth:`now`: SST, view and compaction ids."""
        ...

    def random(self) -> random.Random:
        """The random source for jitter, sampling and the like (seeded in a manual runtime)."""
        ...

    def executor(self, max_workers: int, name: str) -> Executor:
        """A pool for up to ``max_workers`` concurrent calls (I/O fetches, uploads, merges); threads
        named after ``name``. The caller shuts it down (``with`` block)."""
        ...


class InlineExecutor(Executor):
    """Runs each submitted call at once on the caller's thread: its future is done when ``submit``
    returns (the call's exception stored in it). The order of every request is the program's
    order, so a simulation replays a seed; work that needs another submitted call to make progress
    would wait forever, which is why slate_ops's pooled tasks never wait on each other."""

    def submit(self, fn: Callable[..., _R], /, *args: Any, **kwargs: Any) -> Future[_R]:
        future: Future[_R] = Future()
        future.set_running_or_notify_cancel()
        try:
            result = fn(*args, **kwargs)
        except BaseException as error:
            future.set_exception(error)
        else:
            future.set_result(result)
        return future


class SystemRuntime:
    """The real clocks, ``uuid4`` and ULIDs from the OS's randomness."""

    def __init__(self) -> None:
        self._random = random.Random()

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def new_uuid(self) -> uuid.UUID:
        return uuid.uuid4()

    def new_ulid(self) -> ULID:
        return ULID()

    def random(self) -> random.Random:
        return self._random

    def executor(self, max_workers: int, name: str) -> Executor:
        return ThreadPoolExecutor(max_workers, thread_name_prefix=name)


class ManualRuntime:
    """A runtime whose time moves only when told to and whose ids come from ``seed``: two runtimes
    built alike and driven alike hand out the same times, UUIDs and ULIDs."""

    def __init__(self, start: float = DEFAULT_START, *, seed: int = 0) -> None:
        self._now = start
        self._lock = threading.Lock()
        self._ids = random.Random(seed)
        self._random = random.Random(seed + 1)
        self._ulids = ULIDGenerator(clock=lambda: int(self._now * 1000), randomness=self._ulid_randomness)

    def _ulid_randomness(self, _timestamp: int) -> bytes:
        return self._ids.randbytes(10)

    def now(self) -> float:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        return self.now()

    def new_uuid(self) -> uuid.UUID:
        with self._lock:
            return uuid.UUID(int=self._ids.getrandbits(128), version=4)

    def new_ulid(self) -> ULID:
        with self._lock:
            return self._ulids.generate()

    def random(self) -> random.Random:
        return self._random

    def executor(self, max_workers: int, name: str) -> Executor:
        """An :class:`InlineExecutor`: calls run one after another, in the order they are submitted."""
        del max_workers, name
        return InlineExecutor()

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds

    def set(self, now: float) -> None:
        with self._lock:
            self._now = now


def seeded_random(seed: int | bytes) -> random.Random:
    """A random source that draws the same numbers for the same ``seed`` (fault injection)."""
    return random.Random(seed)


class FixedNow:
    """``base`` with its wall clock stopped at ``now``: one time for a whole run, whatever its
    retries (a GC run's expiry, a tag policy's due period). Monotonic time, ids and randomness still
    come from ``base``, so a fixed time never repeats ids."""

    def __init__(self, base: Runtime, now: float) -> None:
        self._base = base
        self._now = now

    def now(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._base.monotonic()

    def new_uuid(self) -> uuid.UUID:
        return self._base.new_uuid()

    def new_ulid(self) -> ULID:
        return self._base.new_ulid()

    def random(self) -> random.Random:
        return self._base.random()

    def executor(self, max_workers: int, name: str) -> Executor:
        return self._base.executor(max_workers, name)


SYSTEM_RUNTIME = SystemRuntime()
