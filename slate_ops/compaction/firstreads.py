"""The first blocks of a compaction's inputs, read while the compaction is planned.

The first subcompaction starts at the beginning of the key space, so the first block run of every
input is known as soon as its tail (footer, index) is read, before the cuts are planned.
:class:`FirstReads` starts that GET then, beside the other tails and the manifest re-read, and the
local executor's subcompactions take the fetched blocks instead of requesting them again: the
round trip that used to come before any merge is paid during planning (issue 23, item 4).

Bounded: per input at most ``max_run`` bytes (the executor's own GET size) and an equal share of
``budget`` bytes. The compactor passes 1.25 x ``max_subcompaction_bytes`` (20 MiB by default): the
first subcompaction's inputs, which the executor fetches and holds as soon as it starts anyway, with
a quarter's margin because the first cut lands a little past an equal share of every input (more
would delay the first merge by the transfer of bytes it does not need). A read nobody takes (a
guessed input the latest manifest does not compact, blocks beyond what the subcompactions read)
costs its GET and its memory until :meth:`FirstReads.close`; a failed one is fetched again by the
executor. Blocks are verified when decoded, wherever they came from: a wrong guess can never change
a result.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from concurrent.futures import CancelledError, Executor, Future
from dataclasses import dataclass

from slate_ops.errors import SlateOpsError
from slate_ops.manifest.model import KeyRange
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime
from slate_ops.sst import SstReader


@dataclass(frozen=True)
class _Read:
    """Blocks ``first..end-1`` of one SST, fetched (or being fetched) with one GET."""

    first: int
    end: int
    blocks: Future[dict[int, memoryview]]


class FirstReads:
    """The first-block GETs of one compaction's inputs, on ``reads``: a pool of ``concurrency``
    threads that planning opens the inputs on and the executor then fetches with
    (:class:`~slate_ops.compaction.subcompaction.CompactionIo`), so that all of one compaction's
    GETs together stay within that bound. A fetch waiting for a first read never deadlocks the
    pool: every first read is queued (the pool is first in, first out) before the executor starts.
    Thread-safe; :meth:`close` it when the compaction ends (nothing it started outlives that)."""

    def __init__(
        self, budget: int, max_run: int, concurrency: int, *, clock: Runtime = SYSTEM_RUNTIME
    ) -> None:
        self.budget = budget
        self.max_run = max_run
        self.reads: Executor = clock.executor(concurrency, "slate-ops-compaction-get")
        self._lock = threading.Lock()
        self._reads: dict[str, _Read] = {}
        self._reserved = 0
        self._closed = False
        self._kept: frozenset[str] | None = None  # None until keep(): any input may start

    @property
    def reserved_bytes(self) -> int:
        """Stored bytes requested so far (at most ``budget``)."""
        with self._lock:
            return self._reserved

    def start(self, key: str, reader: SstReader, visible: KeyRange | None, inputs: int) -> None:
        """Start fetching the first blocks of SST ``key`` (one of ``inputs`` inputs) from the start
        of ``visible``: up to an equal share of the budget, unless the budget is spent."""
        share = min(self.max_run, self.budget // max(1, inputs))
        start, end = (None, None) if visible is None else (visible.start, visible.end)
        runs = reader.plan_runs(start, end, share)
        if not runs:
            return
        i, j = runs[0]
        size = reader.run_bytes(i, j)
        with self._lock:
            dropped = self._kept is not None and key not in self._kept
            if self._closed or dropped or key in self._reads or self._reserved + size > self.budget:
                return
            self._reserved += size
            self._reads[key] = _Read(i, j, self.reads.submit(reader.fetch_run, i, j))

    def keep(self, keys: Collection[str]) -> None:
        """Forget the reads of every SST but ``keys`` (the inputs the latest manifest confirmed);
        those not started yet are cancelled, and no other starts from now on."""
        with self._lock:
            self._kept = frozenset(keys)
            dropped = [read for key, read in self._reads.items() if key not in keys]
            self._reads = {key: read for key, read in self._reads.items() if key in keys}
        for read in dropped:
            read.blocks.cancel()

    def covered(self, key: str, i: int, j: int) -> int:
        """The end of the blocks from ``i`` (up to ``j``) that a read started here covers (``i``:
        none), without waiting for it."""
        with self._lock:
            read = self._reads.get(key)
        if read is None or not read.first <= i < read.end:
            return i
        return min(j, read.end)

    def fetched(self, key: str, i: int, j: int) -> dict[int, memoryview]:
        """The framed blocks of SST ``key`` from ``i`` (up to ``j``) fetched here, without gaps:
        empty if block ``i`` was not, or if its GET failed (the caller fetches what is missing).
        Waits for a GET still in flight."""
        with self._lock:
            read = self._reads.get(key)
        if read is None or not read.first <= i < read.end:
            return {}
        try:
            blocks = read.blocks.result()
        except (SlateOpsError, CancelledError):
            return {}
        return {b: blocks[b] for b in range(i, min(j, read.end))}

    def close(self) -> None:
        """Cancel the GETs not started, wait for the running ones and drop every fetched block."""
        with self._lock:
            self._closed = True
            self._reads = {}
        self.reads.shutdown(wait=True, cancel_futures=True)
