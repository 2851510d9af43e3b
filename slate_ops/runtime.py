"""The one source of time, ids and randomness, injected wherever a clock goes.

Everything in slate_ops that reads the wall clock, measures elapsed time, makes a UUID or a ULID, or
draws a random number asks a :class:`Runtime` for it; nothing else calls ``time.time``,
``time.monotonic``, ``uuid.uuid4``, ``ULID()`` or ``random`` (a ruff ``banned-api`` rule holds
everyone to it). :data:`SYSTEM_RUNTIME` is the real one; :class:`ManualRuntime` moves only when told
and draws every id from one seeded generator, so a test or a simulation replays a seed exactly
without patching anything. (SlateDB does the same by lint: no ``SystemTime``, ``Instant`` or
``thread_rng`` outside its injected clock and seeded random source.)
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from typing import Protocol

from ulid import ULID, ULIDGenerator

DEFAULT_START = 1_700_000_000.0


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

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds

    def set(self, now: float) -> None:
        with self._lock:
            self._now = now


SYSTEM_RUNTIME = SystemRuntime()
