"""The writer's WAL queue: segments of writes not yet in a WAL SST, their writing, and acknowledgement.

A write appends its entries to the last segment (under the writer's write lock, which orders sequence
numbers); :meth:`WalBuffer.write_queued` writes the sealed segments as WAL SSTs in order, one WAL writer
at a time, and :meth:`WalBuffer.acknowledge` raises the durable sequence number once the epoch is
confirmed ours after them (docs/design/engine.md, "The writer's parts").
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future

from slate_ops.engine.memtable import Memtable
from slate_ops.engine.wal_fence import WAL_FENCE_WINDOW, WalObjectKind, wal_object_kind
from slate_ops.engine.wal_store import WalStore
from slate_ops.engine.writer_status import WriterStatus
from slate_ops.errors import EpochCollisionError, FencedError, SlateOpsError
from slate_ops.manifest.model import Manifest
from slate_ops.objstore.base import ObjectStore, new_put_id
from slate_ops.runtime import InlineExecutor
from slate_ops.sst import entries_to_table
from slate_ops.txn.fencing import FenceableStore

log = logging.getLogger(__name__)

Entry = tuple[bytes, int, int, bytes]
WAL_ENTRY_OVERHEAD = 16
MAX_FENCE_SKIPS = 16
"""Empty WAL objects (fences of lower-epoch openers that then fail their post-fence check) a writer skips
in a row at its next WAL id before it gives up with :class:`EpochCollisionError`."""


class Segment:
    """WAL entries not yet written, all belonging to one memtable.

    ``put_id`` is used by every attempt to write the segment, so a retry after an attempt whose
    outcome stayed unknown recognises that attempt's object as its own (not a newer writer's).
    """

    __slots__ = ("entries", "memtable", "put_id", "size")

    def __init__(self, memtable: Memtable) -> None:
        self.memtable = memtable
        self.entries: list[Entry] = []
        self.size = 0
        self.put_id = new_put_id()


class WalBuffer:
    """The WAL queue of one writer, from its fence on.

    Locks, in this order: ``_writing`` (one WAL writer at a time; held across the WAL PUTs),
    ``_queue_lock`` (the segments and their byte count; never held across I/O), ``_durable`` (the
    acknowledged sequence number and the WAL SSTs not yet acknowledged; waiters wait on it).
    """

    def __init__(
        self,
        wal: WalStore,
        store: ObjectStore,
        fenced: FenceableStore[Manifest],
        status: WriterStatus,
        *,
        next_wal_id: int,
        memtable: Memtable,
        puts_in_flight: int = 1,
        puts: Executor | None = None,
    ) -> None:
        self._wal = wal
        self._store = store
        self._fenced = fenced
        self._status = status
        self._next_wal_id = next_wal_id  # the id after the landed prefix: the next segment's
        self._puts_in_flight = puts_in_flight if puts is not None else 1
        self._puts = puts  # runs the WAL PUTs when several are in flight
        self._queue_lock = threading.Lock()
        self._segments: list[Segment] = [Segment(memtable)]
        self._queued_bytes = 0  # of the segments not yet written
        self._writing = threading.Lock()
        self._written_seq = 0  # in WAL SSTs that exist, confirmed or not
        self._durable = threading.Condition()
        self._durable_seq = 0  # acknowledged: WAL written and the epoch confirmed after
        self._unacknowledged: list[tuple[int, int]] = []  # (WAL id, its last seq) not yet acknowledged
        self._withdrawn = False  # the database was deleted under us: WAL SSTs landing later are deleted

    def start_at(self, seq: int) -> None:
        """Everything up to ``seq`` (replayed at open) is durable already."""
        self._written_seq = self._durable_seq = seq

    # --- the queue (called under the writer's write lock) -----------------------------------------

    def append(self, entries: list[Entry], size: int) -> int:
        """Queue ``entries`` (``size`` bytes) in the current segment; the bytes now queued."""
        with self._queue_lock:
            segment = self._segments[-1]
            segment.entries += entries
            segment.size += size
            self._queued_bytes += size
            return self._queued_bytes

    def current_segment_bytes(self) -> int:
        return self._segments[-1].size

    def start_segment(self, memtable: Memtable) -> None:
        """The memtable was replaced by ``memtable``: later writes go to a segment of their own."""
        with self._queue_lock:
            self._segments.append(Segment(memtable))

    @property
    def queued_bytes(self) -> int:
        return self._queued_bytes

    def has_queued(self, memtable: Memtable) -> bool:
        """Whether writes of ``memtable`` are still queued for the WAL."""
        with self._queue_lock:
            return any(segment.memtable is memtable and segment.entries for segment in self._segments)

    # --- writing ----------------------------------------------------------------------------------

    @property
    def next_wal_id(self) -> int:
        return self._next_wal_id

    def write_queued(self, *, confirm: bool = True) -> None:
        """Write every WAL segment that holds entries as a WAL SST, oldest first; then acknowledge.

        Writers only append to the last segment, so the current one is sealed first; a segment
        leaves the queue only once its WAL SST and every earlier one exist, so a failed flush loses
        nothing. Up to ``puts_in_flight`` PUTs run at once (docs/design/engine.md, "Several WAL PUTs
        in flight"); their outcomes are taken in id order. A write may call it while the flusher
        encodes an L0 SST, whose memtable's segments are all written already. With ``confirm`` the
        writes now in WAL SSTs are then acknowledged (:meth:`acknowledge`), outside the WAL writer's
        lock, so a write that writes the WAL itself does not wait for the confirmation.
        """
        with self._writing:
            with self._queue_lock:
                if self._segments[-1].entries:
                    self._segments.append(Segment(self._segments[-1].memtable))
                sealed = self._segments[:-1]
            self._write_sealed(sealed)
        if confirm:
            self.acknowledge()

    def _write_sealed(self, sealed: list[Segment]) -> None:
        """Create the WAL SSTs of ``sealed`` (the queue's head, in order), several PUTs at a time.

        A segment's id is the next one after the landed prefix, so a retry after a store error
        re-creates every segment from the failed one at the same id with the same ``put_id`` (one
        that landed is recognised as ours). Never a PUT at an id ``>=`` the first unacknowledged
        WAL SST's ``+ WAL_FENCE_WINDOW`` (rule 2): blocked there with nothing in flight, this
        thread confirms what has landed. A taken id is resolved by :meth:`_resolve_taken` once the
        PUTs after it have ended.
        """
        in_flight: deque[tuple[Segment, int, Future[bool]]] = deque()
        front = 0  # the first segment of `sealed` not yet in the landed prefix
        dispatched = 0  # segments of `sealed` dispatched (all from `front` on are in flight)
        taken = 0  # ids found taken in a row
        try:
            while front < len(sealed):
                if not sealed[front].entries:  # nothing to write: leaves the queue in its turn
                    self._leave_queue(sealed[front])
                    front += 1
                    dispatched = max(dispatched, front)
                    continue
                next_id = self._next_wal_id + len(in_flight)
                while len(in_flight) < self._puts_in_flight and dispatched < len(sealed):
                    segment = sealed[dispatched]
                    if not segment.entries:  # takes no id; leaves the queue when it is the head
                        dispatched += 1
                        continue
                    if next_id >= self._reach():
                        break
                    if self._status.failure is not None:  # no WAL PUT starts once the writer failed
                        raise self._status.failure
                    in_flight.append((segment, next_id, self._submit(self._put, segment, next_id)))
                    next_id += 1
                    dispatched += 1
                if not in_flight:  # out of reach: confirm what landed, so the reach moves on
                    self.acknowledge()
                    continue
                segment, wal_id, future = in_flight.popleft()
                if future.result():
                    self._landed(segment, wal_id)
                    self._leave_queue(segment)
                    front += 1
                    taken = 0
                    continue
                later = bool(in_flight)
                self._settle(in_flight)
                taken += 1
                self._next_wal_id = self._resolve_taken(wal_id, later=later, give_up=taken > MAX_FENCE_SKIPS)
                dispatched = front
        finally:
            self._settle(in_flight)

    def _reach(self) -> int:
        """The first id this writer may not start a WAL PUT at (rule 2)."""
        with self._durable:
            first = self._unacknowledged[0][0] if self._unacknowledged else self._next_wal_id
        return first + WAL_FENCE_WINDOW

    def _submit(self, call: Callable[[Segment, int], bool], segment: Segment, wal_id: int) -> Future[bool]:
        if self._puts is None:  # one PUT at a time: in this thread, as a done future
            return InlineExecutor().submit(call, segment, wal_id)
        try:
            return self._puts.submit(call, segment, wal_id)
        except RuntimeError:  # the pool was shut down: the writer failed or closed meanwhile
            self._status.check_usable()
            raise

    def _put(self, segment: Segment, wal_id: int) -> bool:
        return self._wal.write(wal_id, entries_to_table(segment.entries), segment.put_id)

    def _settle(self, in_flight: deque[tuple[Segment, int, Future[bool]]]) -> None:
        """Wait for the PUTs still in flight and forget them (the ids are re-issued or abandoned);
        one that landed in a database deleted under us is withdrawn."""
        landed = []
        while in_flight:
            _, wal_id, future = in_flight.popleft()
            with contextlib.suppress(Exception):
                if future.result():
                    landed.append(wal_id)
        with self._durable:
            withdrawn = self._withdrawn
        if withdrawn:
            self._withdraw(landed)

    def _resolve_taken(self, wal_id: int, *, later: bool, give_up: bool) -> int:
        """Our WAL id ``wal_id`` was taken: the id to write its segment at now.

        A higher epoch (or a deleted database) in the manifest raises FencedError. At our own epoch:
        a window fence (a lower-epoch opener that fails its post-fence check) makes the ids up to
        ``wal_id + WAL_FENCE_WINDOW - 1`` unreachable, so the segment and every later one are
        re-issued after them (those that landed inside are orphans, never acknowledged); a legacy
        empty fence is skipped when no later PUT was started, data is another process with our
        epoch (:class:`EpochCollisionError`) — never retried for ever (docs/design/coordination.md,
        "Fencing under races"; docs/design/engine.md, "Several WAL PUTs in flight").
        """
        with self._status.failing_when_fenced():
            self._fenced.confirm()  # FencedError: a newer writer bumps the epoch before fencing
            size = self._wal.size(wal_id)
            if size is None:
                return wal_id  # vanished meanwhile: try the id again
            kind = wal_object_kind(size)
            if give_up or kind is WalObjectKind.DATA or (kind is WalObjectKind.LEGACY_FENCE and later):
                raise EpochCollisionError(
                    self._status.location, "writer", self._fenced.epoch, self._wal.key(wal_id)
                )
        skip_to = wal_id + (WAL_FENCE_WINDOW if kind is WalObjectKind.WINDOW_FENCE else 1)
        log.info(
            "%s is a lower-epoch opener's %s at writer epoch %d; the WAL continues at id %d",
            self._wal.key(wal_id),
            kind.value,
            self._fenced.epoch,
            skip_to,
        )
        return skip_to

    def _landed(self, segment: Segment, wal_id: int) -> None:
        """WAL ``wal_id`` (``segment``'s) landed and every earlier one of ours before it."""
        self._next_wal_id = wal_id + 1
        segment.memtable.max_wal_id = wal_id
        with self._durable:
            withdrawn = self._withdrawn
            if not withdrawn:
                self._unacknowledged.append((wal_id, segment.entries[-1][1]))
        if withdrawn:  # in flight while a confirmation found the database deleted
            self._withdraw([wal_id])
        self._written_seq = max(self._written_seq, segment.entries[-1][1])

    def _leave_queue(self, segment: Segment) -> None:
        with self._queue_lock:
            assert self._segments[0] is segment, "WAL segments leave the queue in order"
            self._segments.pop(0)
            self._queued_bytes -= segment.size

    def write_inline(self) -> None:
        """Write the queued segments in this (writing) thread; the flusher retries store errors and
        its next pass acknowledges them (:meth:`acknowledge`)."""
        try:
            with self._status.failing_when_fenced():
                self.write_queued(confirm=False)
        except FencedError:
            raise
        except SlateOpsError as error:
            log.debug("inline WAL write of %s failed, the flusher retries: %s", self._status.location, error)

    # --- acknowledging ----------------------------------------------------------------------------

    @property
    def durable_seq(self) -> int:
        return self._durable_seq

    def acknowledge(self, *, always: bool = False) -> None:
        """Raise ``durable_seq`` to the writes in WAL SSTs, once the epoch is confirmed ours.

        The confirmation (:meth:`FenceableStore.confirm`, one round trip) starts after those WAL SSTs
        were created, so a newer writer (or a deletion) that could have missed them shows in it:
        :class:`FencedError` then, and nothing is acknowledged. One confirmation covers every WAL SST
        written before it started. ``always`` confirms even with nothing to acknowledge (close).
        """
        written = self._written_seq
        if written <= self._durable_seq and not always:
            return
        with self._status.failing_when_fenced():
            self._fenced.confirm()
        with self._durable:
            if self._status.failure is not None:  # failed meanwhile (a fence seen by another thread)
                raise self._status.failure
            self._durable_seq = max(self._durable_seq, written)
            self._unacknowledged = [w for w in self._unacknowledged if w[1] > self._durable_seq]
            self._durable.notify_all()

    def await_durable(self, seq: int) -> None:
        """Wait until write ``seq`` is acknowledged (or the writer failed)."""
        with self._durable:
            while self._durable_seq < seq:
                self._status.check_usable()
                self._durable.wait(0.05)

    def notify(self) -> None:
        """Wake every waiter (durability, room for writes): something they wait on changed."""
        with self._durable:
            self._durable.notify_all()

    def wait(self, timeout: float, until: Callable[[], bool]) -> None:
        """Wait at most ``timeout`` for a :meth:`notify`, unless ``until()`` holds already."""
        with self._durable:
            if not until():
                self._durable.wait(timeout)

    def withdraw_unacknowledged(self) -> None:
        """The database was destroyed or deleted under this writer: delete the WAL SSTs it wrote since
        its last acknowledgement (none of their writes was acknowledged), so nothing of them is left
        after a hard destroy and a database created at the path afterwards does not replay them. Best
        effort: a new database that already replayed one (it was created while this writer still
        wrote) is beyond what a removal by hand can promise."""
        with self._durable:
            withdrawn, self._unacknowledged = self._unacknowledged, []
            self._withdrawn = True  # and a WAL PUT in flight now is deleted when it lands
        self._withdraw([wal_id for wal_id, _ in withdrawn])

    def _withdraw(self, wal_ids: list[int]) -> None:
        for wal_id in wal_ids:
            with contextlib.suppress(SlateOpsError):
                self._store.delete(self._wal.key(wal_id))
        if wal_ids:
            log.warning(
                "the database at %s was deleted under its writer: deleted its %d unacknowledged WAL SST(s)",
                self._status.location,
                len(wal_ids),
            )
