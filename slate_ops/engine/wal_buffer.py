"""The writer's WAL queue: segments of writes not yet in a WAL SST, their writing, and acknowledgement.

A write appends its entries to the last segment (under the writer's write lock, which orders sequence
numbers); :meth:`WalBuffer.write_queued` writes the sealed segments as WAL SSTs, one WAL writer at a
time with up to ``wal_puts_in_flight`` PUTs in flight, taking their outcomes in id order (the landed
prefix), and :meth:`WalBuffer.acknowledge` raises the durable sequence number once the epoch is
confirmed ours after them (docs/design/engine.md, "The writer's parts", "The writer's WAL pipeline").
"""

from __future__ import annotations

import contextlib
import functools
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

    __slots__ = ("entries", "in_flight", "memtable", "put_id", "size")

    def __init__(self, memtable: Memtable) -> None:
        self.memtable = memtable
        self.entries: list[Entry] = []
        self.size = 0
        self.put_id = new_put_id()
        self.in_flight = False  # its PUT started and its outcome not yet taken


class WalBuffer:
    """The WAL queue of one writer, from its fence on.

    Locks, in this order: ``_writing`` (one WAL writer at a time: starts PUTs and takes their outcomes;
    held while a waiting caller's PUTs are in flight), ``_queue_lock`` (the segments and their byte
    count; never held across I/O), ``_durable`` (the acknowledged sequence number, the WAL SSTs not yet
    acknowledged and those landed past the prefix; waiters wait on it; PUTs' completions take it).
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
        on_put_done: Callable[[], None] = lambda: None,
    ) -> None:
        self._wal = wal
        self._store = store
        self._fenced = fenced
        self._status = status
        self._next_wal_id = next_wal_id  # the id after the landed prefix: the next segment's
        self._puts_in_flight = puts_in_flight if puts is not None else 1
        self._puts = puts  # runs the WAL PUTs when several are in flight
        self._on_put_done = on_put_done
        self._in_flight: deque[tuple[Segment, int, Future[bool]]] = deque()  # id order, from _next_wal_id
        self._queue_lock = threading.Lock()
        self._segments: list[Segment] = [Segment(memtable)]
        self._queued_bytes = 0  # of the segments not yet written
        self._writing = threading.Lock()
        self._written_seq = 0  # in WAL SSTs that exist, confirmed or not
        self._durable = threading.Condition()
        self._durable_seq = 0  # acknowledged: WAL written and the epoch confirmed after
        self._unacknowledged: list[tuple[int, int]] = []  # (WAL id, its last seq) not yet acknowledged
        self._withdrawn = False  # the database was deleted under us: WAL SSTs landing later are deleted
        self._landed_unprocessed: set[int] = set()  # WAL ids landed beyond the landed prefix

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

    def write_queued(self, *, confirm: bool = True, wait: bool = True) -> None:
        """Write every WAL segment that holds entries as a WAL SST, oldest first; then acknowledge.

        Writers only append to the last segment, so the current one is sealed first; a segment
        leaves the queue only once its WAL SST and every earlier one exist, so a failed flush loses
        nothing. Up to ``puts_in_flight`` PUTs run at once, their outcomes taken in id order
        (docs/design/engine.md, "The writer's WAL pipeline"). ``wait=False`` (the background
        flusher) starts what it may and returns without waiting for a PUT: PUTs that end wake it
        (``on_put_done``) and its next call takes them; the current segment is then sealed only when
        a PUT can start at once, so writes arriving meanwhile group into the next one. A write may
        call it while the flusher encodes an L0 SST, whose memtable's segments are all written
        already. With ``confirm`` the writes now in WAL SSTs are then acknowledged
        (:meth:`acknowledge`), outside the WAL writer's lock, so a write that writes the WAL itself
        does not wait for the confirmation.
        """
        with self._writing:
            self._pump(wait)
        if confirm:
            self.acknowledge()

    def _pump(self, wait: bool) -> None:
        """Start WAL PUTs and take the ones that ended, in id order (under ``_writing``).

        A segment's id is the next one after the landed prefix, so a retry after a store error
        re-creates every segment from the failed one at the same id with the same ``put_id`` (one
        that landed is recognised as ours). Never a PUT at an id ``>=`` the first unacknowledged
        WAL SST's ``+ WAL_FENCE_WINDOW`` (rule 2): blocked there with nothing in flight, this thread
        confirms what has landed. A taken id is resolved (:meth:`_resolve_taken`) once every PUT
        after it has ended.
        """
        if wait or (len(self._in_flight) < self._puts_in_flight and self._undispatched() is None):
            self._seal()
        taken = 0  # ids found taken in a row
        started: set[Future[bool]] = set()  # the PUTs this call started
        try:
            while True:
                self._leave_empty_head()
                started.update(self._dispatch())
                if not self._in_flight:
                    if self._undispatched() is None:
                        return
                    self.acknowledge()  # out of reach: confirm what landed, so the reach moves on
                    continue
                segment, wal_id, future = self._in_flight[0]
                if not wait and not future.done():
                    return
                if wait and future not in started and future.exception() is not None:
                    self._settle()  # an earlier round's PUT failed (a store error): this call retries it
                    continue
                if future.result():
                    self._in_flight.popleft()
                    self._landed(segment, wal_id)
                    taken = 0
                    continue
                later = len(self._in_flight) > 1
                self._settle()
                taken += 1
                self._next_wal_id = self._resolve_taken(wal_id, later=later, give_up=taken > MAX_FENCE_SKIPS)
        except BaseException:
            self._settle()  # a store error: retried at the same ids (landed ones are recognised)
            raise

    def _seal(self) -> None:
        with self._queue_lock:
            if self._segments[-1].entries:
                self._segments.append(Segment(self._segments[-1].memtable))

    def _undispatched(self) -> Segment | None:
        """The oldest sealed segment with entries and no PUT in flight."""
        with self._queue_lock:
            sealed = self._segments[:-1]
        return next((s for s in sealed if s.entries and not s.in_flight), None)

    def _leave_empty_head(self) -> None:
        """Sealed segments without entries at the head leave the queue (they take no WAL id)."""
        with self._queue_lock:
            while len(self._segments) > 1 and not self._segments[0].entries:
                self._segments.pop(0)

    def _dispatch(self) -> list[Future[bool]]:
        """Start PUTs of sealed segments, in order, while fewer than ``puts_in_flight`` are in
        flight and the next id is within reach; the PUTs started."""
        started: list[Future[bool]] = []
        while len(self._in_flight) < self._puts_in_flight and not self._failed_in_flight():
            segment = self._undispatched()
            wal_id = self._next_wal_id + len(self._in_flight)
            if segment is None or wal_id >= self._reach():
                break
            if self._status.failure is not None:  # no WAL PUT starts once the writer failed
                raise self._status.failure
            segment.in_flight = True
            future = self._submit(segment, wal_id)
            self._in_flight.append((segment, wal_id, future))
            future.add_done_callback(functools.partial(self._put_done, wal_id))
            started.append(future)
        return started

    def _failed_in_flight(self) -> bool:
        """Whether a PUT in flight already ended without landing (taken, or a store error): no later
        one starts before it is resolved (with an inline pool that keeps today's order of calls)."""
        return any(
            future.done() and (future.exception() is not None or not future.result())
            for _, _, future in self._in_flight
        )

    def _reach(self) -> int:
        """The first id this writer may not start a WAL PUT at (rule 2)."""
        with self._durable:
            first = self._unacknowledged[0][0] if self._unacknowledged else self._next_wal_id
        return first + WAL_FENCE_WINDOW

    def _submit(self, segment: Segment, wal_id: int) -> Future[bool]:
        if self._puts is None:  # one PUT at a time: in this thread, as a done future
            return InlineExecutor().submit(self._put, segment, wal_id)
        try:
            return self._puts.submit(self._put, segment, wal_id)
        except RuntimeError:  # the pool was shut down: the writer failed or closed meanwhile
            self._status.check_usable()
            raise

    def _put(self, segment: Segment, wal_id: int) -> bool:
        return self._wal.write(wal_id, entries_to_table(segment.entries), segment.put_id)

    def _put_done(self, wal_id: int, future: Future[bool]) -> None:
        """A PUT ended (in the pool's thread): one that landed in a database deleted under us is
        withdrawn at once; the flusher is woken to take it."""
        landed = not future.cancelled() and future.exception() is None and future.result()
        with self._durable:
            withdraw = landed and self._withdrawn
            if landed and not withdraw and wal_id >= self._next_wal_id:  # not yet taken by _landed
                self._landed_unprocessed.add(wal_id)
        if withdraw:  # in flight while a confirmation found the database deleted
            self._withdraw([wal_id])
        if self._puts is not None:
            self._on_put_done()

    def _settle(self) -> None:
        """Wait for the PUTs still in flight and forget them: their ids are re-issued (a landed one
        is then recognised by its put id) or abandoned inside a window fence (orphans)."""
        while self._in_flight:
            segment, wal_id, future = self._in_flight.popleft()
            segment.in_flight = False
            with contextlib.suppress(Exception):
                future.result()
            with self._durable:
                self._landed_unprocessed.discard(wal_id)

    def _resolve_taken(self, wal_id: int, *, later: bool, give_up: bool) -> int:
        """Our WAL id ``wal_id`` was taken: the id to write its segment at now.

        A higher epoch (or a deleted database) in the manifest raises FencedError. At our own epoch:
        a window fence (a lower-epoch opener that fails its post-fence check) makes the ids up to
        ``wal_id + WAL_FENCE_WINDOW - 1`` unreachable, so the segment and every later one are
        re-issued after them (those that landed inside are orphans, never acknowledged); a legacy
        empty fence is skipped when no later PUT was started; data is another process with our
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
        """WAL ``wal_id`` (``segment``'s, the queue's head) landed, every earlier one of ours before
        it: the segment leaves the queue and its writes count as written."""
        segment.memtable.max_wal_id = wal_id
        with self._durable:
            self._next_wal_id = wal_id + 1
            self._landed_unprocessed.discard(wal_id)
            if not self._withdrawn:  # else withdrawn when it landed (_put_done)
                self._unacknowledged.append((wal_id, segment.entries[-1][1]))
        self._written_seq = max(self._written_seq, segment.entries[-1][1])
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

    @property
    def written_seq(self) -> int:
        """The last write in the landed prefix of WAL SSTs (acknowledged or not)."""
        return self._written_seq

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
            withdrawn = [wal_id for wal_id, _ in self._unacknowledged] + sorted(self._landed_unprocessed)
            self._unacknowledged, self._landed_unprocessed = [], set()
            self._withdrawn = True  # and a WAL PUT in flight now is deleted when it lands
        self._withdraw(withdrawn)

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
