"""Frozen memtables to L0 SSTs, and the backpressure that bounds them (docs/design/engine.md, "The
writer's parts").

A memtable frozen by the writer waits here until it is flushed: encoded as an L0 SST, written, and
committed through the :class:`~slate_ops.engine.writer_manifest.WriterManifest`. Flushes wait while L0
holds ``l0_max_ssts`` SSTs; writes wait (:meth:`MemtableFlusher.wait_for_room`) once memtables hold
``max_unflushed_bytes`` while frozen ones wait.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from slate_ops.engine.memtable import Memtable
from slate_ops.engine.options import DbOptions, seconds
from slate_ops.engine.wal_buffer import WalBuffer
from slate_ops.engine.writer_manifest import WriterManifest
from slate_ops.engine.writer_status import WriterStatus
from slate_ops.errors import BackpressureTimeoutError, DbClosedError
from slate_ops.layout import sst_key
from slate_ops.manifest.model import CompactedSst, Manifest, SstView
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime
from slate_ops.sst import encode_sst

log = logging.getLogger(__name__)

STALL_WARNING_INTERVAL_S = 60.0
"""A writer stalled on L0 warns at once, then at most this often while it stays stalled."""


class MemtableFlusher:
    """The frozen memtables of one writer, oldest first, and their flushes to L0.

    ``_lock`` guards the frozen list and its byte count (gets read a copy lock-free); flushes run
    one at a time under the writer's flush lock; ``_stall_lock`` guards the stall warning's time.
    """

    def __init__(
        self,
        path: str,
        store: ObjectStore,
        options: DbOptions,
        clock: Runtime,
        *,
        wal: WalBuffer,
        manifest: WriterManifest,
        status: WriterStatus,
        stopping: threading.Event,
        wake: Callable[[], None],
        has_compactor: Callable[[], bool],
    ) -> None:
        self._path = path
        self._store = store
        self._options = options
        self._clock = clock
        self._wal = wal
        self._manifest = manifest
        self._status = status
        self._stopping = stopping
        self._wake = wake
        self._has_compactor = has_compactor
        self._lock = threading.Lock()
        self._frozen: list[Memtable] = []
        self._frozen_bytes = 0  # with the mutable memtable's, bounded by max_unflushed_bytes
        self._stall_lock = threading.Lock()
        self._last_stall_warning: float | None = None

    @property
    def frozen(self) -> list[Memtable]:
        """The frozen memtables, oldest first (a copy)."""
        return list(self._frozen)

    @property
    def frozen_bytes(self) -> int:
        return self._frozen_bytes

    def add(self, memtable: Memtable) -> None:
        """Take a frozen memtable (the writer froze it under its write lock)."""
        with self._lock:
            self._frozen.append(memtable)
            self._frozen_bytes += memtable.frozen_bytes
        self._wake()

    # --- flushing ---------------------------------------------------------------------------------

    def flush(
        self, *, blocking: bool, acknowledge: Callable[[], None] | None = None, wait: bool = True
    ) -> None:
        """Write the queued WAL, then flush frozen memtables to L0, oldest first; waits for L0 room
        only when ``blocking``.

        After each WAL write ``acknowledge`` is called (by default :meth:`WalBuffer.acknowledge`,
        here; the background flusher passes its confirmer's request). A memtable goes to L0 only
        once all its WAL SSTs exist, so the commit's ``replay_after_wal_id`` covers every WAL SST
        holding its writes. A memtable frozen while the WAL was being written (a write filled it, or
        ``flush_memtable`` froze it) still has its last segment queued: that is written first.
        Flushing it to L0 before would leave the segment to be written afterwards, after the replay
        point, though L0 holds its writes. ``wait=False`` (the background flusher) leaves WAL PUTs
        in flight to its next round, except those of a frozen memtable, which are waited for.
        """
        acknowledge = acknowledge or self._wal.acknowledge
        self._wal.write_queued(confirm=False, wait=wait)
        acknowledge()
        while self._frozen:
            memtable = self._frozen[0]
            while self._wal.has_queued(memtable):
                self._wal.write_queued(confirm=False)
                acknowledge()
            if not self._await_l0_room(blocking):
                return
            sst_id = self._clock.new_ulid()
            data, info = encode_sst(memtable.to_table())
            self._store.put(sst_key(self._path, sst_id), data)
            self._manifest.commit(self._l0_flushed(memtable, CompactedSst(sst_id, info)), reestablish=True)
            with self._lock:
                self._frozen.pop(0)
                self._frozen_bytes -= memtable.frozen_bytes
            self._wal.notify()

    def _l0_flushed(self, memtable: Memtable, sst: CompactedSst) -> Callable[[Manifest], Manifest]:
        """The writer's half of an L0 flush, applied to whatever manifest is latest."""
        view = SstView(self._clock.new_ulid(), sst.id)
        next_wal_id = self._wal.next_wal_id

        def change(manifest: Manifest) -> Manifest:
            return manifest.with_changes(
                ssts=(*manifest.ssts, sst),
                l0=(view, *manifest.l0),
                replay_after_wal_id=max(manifest.replay_after_wal_id, memtable.max_wal_id),
                last_l0_seq=max(manifest.last_l0_seq, memtable.last_seq),
                next_wal_sst_id=max(manifest.next_wal_sst_id, next_wal_id),
            )

        return change

    def merge_runs(self, mutable: Memtable) -> None:
        """Merge the packed runs of the memtables, off the write path (under the flush lock, as
        ``to_table`` in L0 flushes), so gets search a few runs per memtable."""
        for memtable in (mutable, *self._frozen):
            while memtable.merge_runs():
                pass

    # --- backpressure -----------------------------------------------------------------------------

    def _await_l0_room(self, blocking: bool) -> bool:
        limit = self._options.l0_max_ssts
        if len(self._manifest.lsm.manifest.l0) < limit:
            return True
        # A real wait for another thread: on real time even under a manual runtime, whose clock
        # would never reach the deadline (docs/design/runtime.md).
        deadline = SYSTEM_RUNTIME.monotonic() + seconds(self._options.backpressure_timeout)
        while True:
            self._manifest.poll()
            if len(self._manifest.lsm.manifest.l0) < limit:
                return True
            self.warn_if_l0_full()
            if not blocking:
                return False
            remaining = deadline - SYSTEM_RUNTIME.monotonic()
            if remaining <= 0:
                raise BackpressureTimeoutError(
                    f"L0 of {self._status.location} holds {len(self._manifest.lsm.manifest.l0)} SSTs "
                    f"(l0_max_ssts={limit}) and no compactor reduced it within "
                    f"{self._options.backpressure_timeout}; run a compactor or raise l0_max_ssts"
                )
            if self._stopping.wait(min(remaining, seconds(self._options.manifest_poll_interval))):
                raise DbClosedError(
                    f"the writer of {self._status.location} was closed while waiting for L0 room"
                )

    def over_unflushed_limit(self, mutable_bytes: int) -> bool:
        """Whether memtables (mutable and frozen) exceed ``max_unflushed_bytes`` while frozen ones
        wait for L0: only their flushes can free memory (a lone mutable memtable freezes at
        ``l0_sst_size_bytes`` instead)."""
        total = self._frozen_bytes + mutable_bytes
        return total > self._options.max_unflushed_bytes and bool(self._frozen)

    def wait_for_room(self, mutable_bytes: Callable[[], int]) -> None:
        """Wait (a write, before it takes the write lock) until memtables are below the limit."""
        deadline = SYSTEM_RUNTIME.monotonic() + seconds(self._options.backpressure_timeout)
        while self.over_unflushed_limit(mutable_bytes()):
            self._status.check_usable()
            self.warn_if_l0_full()
            remaining = deadline - SYSTEM_RUNTIME.monotonic()
            if remaining <= 0:
                raise BackpressureTimeoutError(
                    f"writes to {self._status.location} stalled: "
                    f"{self._frozen_bytes + mutable_bytes()} bytes of memtables "
                    f"({len(self._frozen)} frozen) wait for L0 (max_unflushed_bytes="
                    f"{self._options.max_unflushed_bytes}); run a compactor or raise the limits"
                )
            self._wake()
            self._wal.wait(min(remaining, 0.1), lambda: not self.over_unflushed_limit(mutable_bytes()))

    def warn_if_l0_full(self) -> None:
        """Say at once that flushes wait on L0 — and why: without a compactor they wait for good.

        Logged when a flush or a write first waits on a full L0, then at most every
        :data:`STALL_WARNING_INTERVAL_S` while the stall lasts (not once per write).
        """
        l0, limit = len(self._manifest.lsm.manifest.l0), self._options.l0_max_ssts
        if l0 < limit:
            return
        with self._stall_lock:
            now, last = SYSTEM_RUNTIME.monotonic(), self._last_stall_warning
            if last is not None and now - last < STALL_WARNING_INTERVAL_S:
                return
            self._last_stall_warning = now
        if not self._has_compactor():
            cause = (
                "no compactor runs in this process: run one — `slate-ops compact`, the Dagster "
                "compaction job, or Db.open(..., compactor=slate_ops.compaction.embedded()) — "
                "or raise l0_max_ssts"
            )
        else:
            cause = "the embedded compactor has not reduced it yet (compaction is behind the writes)"
        log.warning(
            "writes to %s stall: L0 holds %d SSTs (l0_max_ssts=%d), so no memtable is flushed; writes "
            "wait once memtables hold max_unflushed_bytes=%d and fail with BackpressureTimeoutError "
            "after %s. %s",
            self._status.location,
            l0,
            limit,
            self._options.max_unflushed_bytes,
            self._options.backpressure_timeout,
            cause,
        )
