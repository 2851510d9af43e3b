"""Read-ahead for scans: block runs fetched in the background, bounded by bytes and by fetches.

A merged scan reads several SSTs at once (every L0 view, one SST of each sorted run at a time).
Fetched one after another, at S3 latency each GET would cost a round trip of its own. Here one
:class:`ReadAhead` per scan owns a small pool of fetch threads (at most ``max_fetches`` GETs at a
time); each source of the scan is a :class:`BlockStream` that keeps its next block runs in flight
while the scan decodes the current one, and opens (footer, index, bloom filter) the SSTs it will
need next before it reaches them.

Bytes requested and not yet taken by the scan (in flight or fetched and waiting) stay within
``max_bytes``, with one exception that keeps a merge from waiting on itself: a stream always fetches
the run it needs now, and its first run when the scan starts (so at most one run per stream over
the bound).
Closing the read-ahead cancels queued fetches; a GET already running finishes and is dropped.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import TypeVar

from slate_ops.runtime import SYSTEM_RUNTIME, Runtime
from slate_ops.sst.block import Block
from slate_ops.sst.reader import SstReader
from slate_ops.sst.writer import Entry

MiB = 1024 * 1024
# A stream's first run of an SST spans up to FIRST_RUN_BYTES (a scan abandoned early reads little
# more); the next ones grow by RUN_GROWTH up to the limits' run size. All that the byte bound
# admits are requested at once, so fewer, larger GETs mean fewer round trips for the same bytes.
FIRST_RUN_BYTES = 256 * 1024
RUN_GROWTH = 4
# Streams open (footer, index, bloom filter) this many SSTs beyond the one they are reading, so
# the next SSTs' runs can be requested before the scan reaches them (an SST's runs are planned
# from its index). Tails are not counted in the byte bound: ~1-3 % of an SST each.
OPEN_AHEAD = 4

T = TypeVar("T")


@dataclass(frozen=True)
class ReadAheadLimits:
    """How far a scan reads ahead: ``max_bytes`` requested but not yet scanned (0: no read-ahead,
    every run fetched when the scan reaches it), at most ``max_fetches`` GETs at a time."""

    max_bytes: int = 8 * MiB
    max_fetches: int = 8

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0

    @property
    def run_bytes(self) -> int:
        """The largest run one GET fetches (beyond one block): the bound shared by the fetches, so
        that ``max_fetches`` runs can be in flight at once."""
        return max(1, self.max_bytes // self.max_fetches)


class ReadAhead:
    """The background fetches of one scan, on ``clock``'s executor. Thread-safe; :meth:`close` it
    when the scan ends."""

    def __init__(self, limits: ReadAheadLimits, clock: Runtime = SYSTEM_RUNTIME) -> None:
        self.limits = limits
        self.clock = clock
        self._lock = threading.Lock()
        self._reserved = 0
        self._pool: Executor | None = None
        self._closed = False

    @property
    def reserved_bytes(self) -> int:
        """Bytes requested and not yet taken by the scan."""
        with self._lock:
            return self._reserved

    def submit(self, fn: Callable[[], SstReader]) -> Future[SstReader]:
        """Run ``fn`` (an SST open) on a fetch thread; not counted in the byte bound."""
        return self._executor().submit(fn)

    def fetch(
        self, reader: SstReader, run: tuple[int, int], *, force: bool
    ) -> Future[dict[int, memoryview]] | None:
        """Start fetching blocks ``run`` of ``reader``, or None if that would exceed the byte bound
        (``force``: start it regardless, the scan needs it now)."""
        size = reader.run_bytes(*run)
        with self._lock:
            if self._closed or (not force and self._reserved + size > self.limits.max_bytes):
                return None
            self._reserved += size
        return self._executor().submit(reader.fetch_run, *run)

    def taken(self, reader: SstReader, run: tuple[int, int]) -> None:
        """The scan has taken the result of a :meth:`fetch` (or given it up)."""
        with self._lock:
            self._reserved -= reader.run_bytes(*run)

    def _executor(self) -> Executor:
        with self._lock:
            if self._pool is None:
                self._pool = self.clock.executor(self.limits.max_fetches, "slate-ops-read-ahead")
            return self._pool

    def close(self) -> None:
        """Cancel queued fetches and let the fetch threads end (a running GET finishes first)."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


@dataclass(frozen=True)
class Segment:
    """One SST of a stream and the part of it to scan: ``open`` returns its reader (or a future of it)."""

    open: Callable[[], SstReader | Future[SstReader]]
    start: bytes | None
    end: bytes | None


@dataclass
class _Step:
    reader: SstReader
    segment: Segment
    run: tuple[int, int]
    cached: list[Block] | None  # blocks found in the block cache when planned: nothing to fetch
    future: Future[dict[int, memoryview]] | None = None


class BlockStream:
    """The entries of ``segments`` in order (each as :meth:`SstReader.scan` of its bounds would
    give them), with the next block runs fetched ahead through ``read_ahead``.

    Only the scan's thread calls it; the fetches run on the read-ahead's threads.
    """

    def __init__(self, read_ahead: ReadAhead, segments: list[Segment], *, fill_cache: bool = True) -> None:
        self._read_ahead = read_ahead
        self._segments = segments
        self._fill_cache = fill_cache
        self._opening: dict[int, Future[SstReader]] = {}
        self._next_segment = 0  # the first segment not yet planned
        self._ready: deque[_Step] = deque()  # fetching, fetched or cached: the next steps, in order
        self._planned: deque[_Step] = deque()  # after those: not fetched yet
        self._open_ahead(0)

    def start(self) -> None:
        """Wait until the first SST is open (its errors are raised here) and start fetching: its
        first run in any case, the next ones within the byte bound."""
        if self._segments:
            self._opening[0].result()
        self._fill(first=True)

    def __iter__(self) -> Iterator[Entry]:
        while True:
            step = self._take()
            if step is None:
                return
            reader, segment = step.reader, step.segment
            for block in self._blocks(step):
                yield from reader.rows(block, segment.start, segment.end)

    # --- planning and fetching ---------------------------------------------------------------

    def _open_ahead(self, index: int) -> None:
        for k in range(index, min(index + 1 + OPEN_AHEAD, len(self._segments))):
            if k not in self._opening:
                opened = self._segments[k].open()
                if isinstance(opened, SstReader):
                    done: Future[SstReader] = Future()
                    done.set_result(opened)
                    opened = done
                self._opening[k] = opened

    def _plan_next(self, *, wait: bool) -> bool:
        """Plan the steps of the next segment; False if none is left, or (unless ``wait``) its
        SST is not open yet."""
        while self._next_segment < len(self._segments):
            k = self._next_segment
            self._open_ahead(k)
            opening = self._opening[k]
            if not wait and not opening.done():
                return False
            reader = opening.result()
            self._next_segment += 1
            self._open_ahead(self._next_segment)
            del self._opening[k]
            segment = self._segments[k]
            runs = reader.scan_runs(segment.start, segment.end, FIRST_RUN_BYTES, RUN_GROWTH, self._run_bytes)
            if runs:
                self._planned.extend(_Step(reader, segment, (i, j), cached) for i, j, cached in runs)
                return True
        return False

    @property
    def _run_bytes(self) -> int:
        return self._read_ahead.limits.run_bytes

    def _fill(self, *, first: bool = False) -> None:
        """Start fetching the next planned runs while the byte bound allows (without waiting on an
        SST open); ``first``: the first run regardless of the bound."""
        while True:
            if not self._planned and not self._plan_next(wait=False):
                return
            step = self._planned[0]
            if step.cached is None:
                step.future = self._read_ahead.fetch(step.reader, step.run, force=first)
                if step.future is None:
                    return
                first = False
            self._ready.append(self._planned.popleft())

    def _take(self) -> _Step | None:
        if not self._ready:
            if not self._planned and not self._plan_next(wait=True):
                return None
            step = self._planned.popleft()
            if step.cached is None:
                step.future = self._read_ahead.fetch(step.reader, step.run, force=True)
            self._ready.append(step)
        return self._ready.popleft()

    def _blocks(self, step: _Step) -> Iterator[Block]:
        reader = step.reader
        i, j = step.run
        if step.cached is not None:
            yield from step.cached
            return
        if step.future is None:  # the read-ahead was closed: fetch here
            for b in range(i, j):
                yield reader.block(b)
            return
        try:
            framed = step.future.result()
        finally:
            self._read_ahead.taken(reader, step.run)
        self._fill()  # the next runs are fetched while this one is decoded
        for b in range(i, j):
            yield reader.decode_framed(b, framed[b], self._fill_cache)


def closing(scan: Iterator[T], close: Callable[[], object]) -> Iterator[T]:
    """``scan``, calling ``close`` once it ends, is closed, or is garbage collected (even unstarted)."""

    def run() -> Iterator[T]:
        try:
            yield from scan
        finally:
            finalizer()

    iterator = run()
    finalizer = weakref.finalize(iterator, close)
    return iterator
