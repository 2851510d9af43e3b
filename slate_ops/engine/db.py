"""The writer: WAL, memtables, L0 flushes, fencing and the writer checkpoint (docs/design/engine.md,
"Write path" to "Writer checkpoint").

Write path: a write takes the next sequence number, goes into the mutable memtable and the current
WAL segment. The flusher (a background thread, and any explicit ``flush``) writes sealed WAL
segments as WAL SSTs, in order; a memtable that reaches ``l0_sst_size_bytes`` is frozen together
with its WAL segment, so no WAL SST ever mixes two memtables, and flushed to an L0 SST once all its
WAL SSTs are durable. The L0 flush commits the manifest with ``replay_after_wal_id`` set to the
memtable's last WAL id, so reopening replays exactly the writes that are not in L0.

Fencing (SlateDB's manifest design (docs/design/coordination.md)): ``open`` bumps the writer epoch (removing
older writers' checkpoints and adding its own in the same commit), then creates an empty fence object at the
next WAL id and confirms the manifest after it: a newer epoch there fails the open before anything is
written. A durable write is acknowledged only after a manifest confirmation that started after its WAL SST
was written still shows our epoch (docs/design/coordination.md, "Fencing under races"). A fenced writer
finds its next WAL id taken, or a higher epoch in the manifest, the first time it writes the WAL or the
manifest or polls the manifest (the background thread does within ``wal_flush_interval`` of a write, and
every ``manifest_poll_interval``). That failure is recorded where it is observed, and from then on every
call — writes, reads, flushes, checkpoints, close — raises :class:`FencedError`. The new writer replays
every WAL SST below its fence, so nothing the old writer acknowledged as durable is lost; what can be lost
are non-durable writes it accepted before it observed the fence that were not yet in a WAL SST when the new
writer fenced the WAL.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from types import TracebackType
from typing import Protocol, Self

from ulid import ULID

from slate_ops.clock import SYSTEM_CLOCK, Clock
from slate_ops.config import CheckpointCreateResult, CheckpointOptions
from slate_ops.engine.batch import KIND_TOMBSTONE, KIND_VALUE, WriteBatch, check_key, check_range, check_value
from slate_ops.engine.bounds import check_read, check_write, clip_scan
from slate_ops.engine.ingest import ingest_order
from slate_ops.engine.lsm import LsmState, SstReaders, sst_set
from slate_ops.engine.memtable import Memtable
from slate_ops.engine.merge import lookup, prefix_end, scan_merged
from slate_ops.engine.options import CheckpointScope, DbOptions, seconds
from slate_ops.engine.pins import CheckpointPins
from slate_ops.errors import (
    BackpressureTimeoutError,
    DbAlreadyExistsError,
    DbClosedError,
    DbDeletedError,
    EpochCollisionError,
    FencedError,
    InvalidArgumentError,
    ObjectNotFoundError,
    SlateOpsError,
)
from slate_ops.layout import WalStore, sst_key
from slate_ops.manifest.checkpoints import with_new_checkpoint
from slate_ops.manifest.model import Checkpoint, CompactedSst, Manifest, SstView, WriterCheckpoint
from slate_ops.manifest.store import WRITER_EPOCH, ManifestStore, VersionedManifest, require_usable
from slate_ops.objstore.base import ObjectStore, new_put_id
from slate_ops.sst import BlockCache, encode_sst, entries_to_table

log = logging.getLogger(__name__)

Entry = tuple[bytes, int, int, bytes]
WAL_ENTRY_OVERHEAD = 16
WAL_INLINE_FACTOR = 2
"""A write finding this many times ``wal_buffer_bytes`` unwritten writes the WAL itself (the flusher
is behind, e.g. encoding an L0 SST), so the WAL queue stays bounded."""
STALL_WARNING_INTERVAL_S = 60.0
"""A writer stalled on L0 warns at once, then at most this often while it stays stalled."""
MAX_FENCE_SKIPS = 16
"""Empty WAL objects (fences of lower-epoch openers that then fail their post-fence check) a writer skips
in a row at its next WAL id before it gives up with :class:`EpochCollisionError`."""


class _Segment:
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


class BackgroundCompactor(Protocol):
    """A compactor running beside the writer in this process; the writer closes it on close."""

    def close(self) -> None: ...


CompactorStarter = Callable[[str, ObjectStore, Clock], BackgroundCompactor]
"""Starts a compactor for ``(path, store, clock)``: :func:`slate_ops.compaction.embedded` makes one.
The engine does not import the compaction layer (it sits above); the caller injects it, as
SlateDB's ``DbBuilder::with_compactor_builder`` does."""


class Db:
    """A writer of one database; use it as a context manager.

    ``Db(path, store, options)`` (or :meth:`open`, the same) opens the database at ``path`` for
    writing, creating it if missing, and fences older writers. ``compactor`` starts a compactor in
    this process too (``compactor=slate_ops.compaction.embedded(CompactorOptions(...))``); by
    default compaction runs elsewhere (a Dagster schedule, ``slate-ops compact``).
    """

    def __init__(
        self,
        path: str,
        store: ObjectStore,
        options: DbOptions | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
        compactor: CompactorStarter | None = None,
    ) -> None:
        options = options or DbOptions()
        self.options = options
        self._store = store
        self._clock = clock
        self._manifests = ManifestStore(store, path)
        self.path = self._manifests.path
        self._wal = WalStore(store, self.path)
        cache = BlockCache(options.block_cache_bytes) if options.block_cache_bytes else None
        self._readers = SstReaders(store, cache, options.read_ahead_limits())
        self._pins = CheckpointPins()

        self._write_lock = threading.Lock()
        self._flush_lock = threading.RLock()
        self._wal_lock = threading.Lock()  # one WAL writer at a time: the flusher, flush(), or a write
        self._durable = threading.Condition()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._failure: BaseException | None = None
        self._closed = False
        self._unacknowledged_wal: list[tuple[int, int]] = []  # (WAL id, its last seq) not yet acknowledged
        self._last_stall_warning: float | None = None
        self._stall_lock = threading.Lock()

        if self._manifests.read_latest() is None:
            with contextlib.suppress(DbAlreadyExistsError):  # another process created it meanwhile
                self._manifests.create_initial(Manifest(initialized=True))
        self._checkpoint_id = uuid.uuid4()
        self._fenced, claimed = self._manifests.claim(WRITER_EPOCH, self._establish_writer_checkpoint)
        try:
            self._open_claimed(claimed.value, path, store, clock, compactor)
        except BaseException:
            # Fencing the older writer stands, but a failed open (a damaged WAL SST) leaves no
            # writer checkpoint pinning the database.
            with contextlib.suppress(SlateOpsError):
                self._release_checkpoint()
            raise

    @classmethod
    def open(
        cls,
        path: str,
        store: ObjectStore,
        options: DbOptions | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
        compactor: CompactorStarter | None = None,
    ) -> Self:
        """Open (creating it if missing) the database at ``path`` for writing; fences older writers."""
        return cls(path, store, options, clock=clock, compactor=compactor)

    def _open_claimed(
        self,
        manifest: Manifest,
        path: str,
        store: ObjectStore,
        clock: Clock,
        compactor: CompactorStarter | None,
    ) -> None:
        self._lsm = LsmState(manifest, self.path, self._readers)

        fence_id = self._wal.fence(max(manifest.replay_after_wal_id, manifest.next_wal_sst_id - 1))
        # Post-fence epoch check (docs/design/coordination.md, "Fencing under races"): a newer writer
        # that claimed before our fence landed may have fenced below it; we then never write the WAL.
        self._fenced.confirm()
        self._next_wal_id = fence_id + 1
        self._last_seq = manifest.last_l0_seq
        self._memtable = Memtable()
        self._immutables: list[Memtable] = []
        self._unflushed_bytes = 0  # of the frozen memtables; with the mutable one's, bounded by
        # max_unflushed_bytes
        self._segments: list[_Segment] = [_Segment(self._memtable)]
        self._wal_queued_bytes = 0  # of the segments not yet written
        try:
            self._replay(manifest.replay_after_wal_id, fence_id)
        except ObjectNotFoundError:
            # A WAL SST listed a moment ago is gone: only a deletion (a destroy; a newer writer's L0
            # flush and GC) removes one, and each fences us first — say so (FencedError,
            # DbDeletedError) rather than report a missing object. Still ours: the WAL is damaged.
            self._fenced.confirm()
            raise
        self._durable_seq = self._last_seq  # acknowledged: WAL written and the epoch confirmed after
        self._written_seq = self._last_seq  # in WAL SSTs that exist, confirmed or not
        self._last_poll = time.monotonic()

        self._compactor = None if compactor is None else compactor(path, store, clock)
        self._thread = threading.Thread(
            target=self._background, name=f"slate-ops-flusher:{self.path}", daemon=True
        )
        self._thread.start()

    def _establish_writer_checkpoint(self, current: VersionedManifest, epoch: int) -> Manifest:
        """docs/design/engine.md, "Opening, fencing, recovery" (SlateDB's "Establishing Initial
        Checkpoint"): drop older writers' checkpoints, add ours."""
        require_usable(current.value, self._manifests.location)
        kept = tuple(c for c in current.value.checkpoints if not isinstance(c.metadata, WriterCheckpoint))
        ours = self._writer_checkpoint(self._checkpoint_id, current, epoch)
        return current.value.with_changes(checkpoints=(*kept, ours))

    def _writer_checkpoint(
        self, checkpoint_id: uuid.UUID, current: VersionedManifest, epoch: int
    ) -> Checkpoint:
        """The writer's checkpoint, pinning the version being written (docs/design/engine.md, "Writer
        checkpoint")."""
        return Checkpoint(
            id=checkpoint_id,
            manifest_id=current.id + 1,
            create_time_s=int(self._clock.now()),
            metadata=WriterCheckpoint(epoch),
        )

    def _replay(self, after: int, fence_id: int) -> None:
        """Re-apply the WAL SSTs between the manifest's replay point and our fence.

        One LIST gives their ids and sizes; they are fetched several at a time (one GET each, none
        for an empty fence object) and applied one after another in id order."""
        below_fence = [(wal_id, size) for wal_id, size in self._wal.list_sizes(after) if wal_id < fence_id]
        for wal_id, entries in self._wal.read_many(below_fence):
            for key, seq, kind, value in entries:
                self._memtable.put(key, seq, kind, value)
                self._last_seq = max(self._last_seq, seq)
            self._memtable.max_wal_id = wal_id
            if self._memtable.size_bytes >= self.options.l0_sst_size_bytes:
                self._freeze_locked()

    # --- writing ----------------------------------------------------------------------------------

    def put(self, key: bytes, value: bytes, *, await_durable: bool | None = None) -> None:
        self._apply(((check_key(key), KIND_VALUE, check_value(value)),), await_durable)

    def delete(self, key: bytes, *, await_durable: bool | None = None) -> None:
        self._apply(((check_key(key), KIND_TOMBSTONE, b""),), await_durable)

    def write(self, batch: WriteBatch, *, await_durable: bool | None = None) -> None:
        """Apply every operation of ``batch`` atomically, with one sequence number."""
        if not isinstance(batch, WriteBatch):
            raise InvalidArgumentError(
                f"write() takes a WriteBatch, got {type(batch).__name__}; build one with "
                "WriteBatch().put(key, value).delete(key)"
            )
        if batch.ops:
            self._apply(batch.ops, await_durable)

    def _apply(
        self,
        ops: tuple[tuple[bytes, int, bytes], ...] | list[tuple[bytes, int, bytes]],
        await_durable: bool | None,
    ) -> None:
        if self._over_unflushed_limit():
            self._wait_for_unflushed_room()
        check_write(self._lsm.manifest.visible_range, (key for key, _, _ in ops), self._manifests.location)
        with self._write_lock:
            self._check_usable()
            seq = self._last_seq = self._last_seq + 1
            memtable = self._memtable
            segment = self._segments[-1]
            size = segment.size
            for key, kind, value in ops:
                memtable.put(key, seq, kind, value)
                segment.entries.append((key, seq, kind, value))
                size += len(key) + len(value) + WAL_ENTRY_OVERHEAD
            self._wal_queued_bytes += size - segment.size
            segment.size = size
            if memtable.size_bytes >= self.options.l0_sst_size_bytes:
                self._freeze_locked()
            elif size >= self.options.wal_buffer_bytes:
                self._wake.set()
        if self._wal_queued_bytes >= WAL_INLINE_FACTOR * self.options.wal_buffer_bytes:
            self._write_wal_inline()
        if self.options.await_durable if await_durable is None else await_durable:
            self._await_durable(seq)

    def _freeze_locked(self) -> None:
        """Seal the mutable memtable (and its WAL segment) for flushing; start a new one."""
        if not len(self._memtable):
            return
        self._memtable.freeze()  # packed from here on: it is accounted at its frozen size
        self._immutables.append(self._memtable)
        self._unflushed_bytes += self._memtable.frozen_bytes
        self._memtable = Memtable()
        self._segments.append(_Segment(self._memtable))
        self._wake.set()

    def _write_wal_inline(self) -> None:
        """Write the queued WAL segments in this (writing) thread; the flusher retries store errors.

        The flusher's next pass acknowledges them (:meth:`_acknowledge`)."""
        try:
            self._guard(lambda: self._flush_wal(confirm=False))
        except FencedError:
            raise
        except SlateOpsError as error:
            log.debug(
                "inline WAL write of %s failed, the flusher retries: %s", self._manifests.location, error
            )

    def _over_unflushed_limit(self) -> bool:
        """Whether memtables (mutable and frozen) exceed ``max_unflushed_bytes`` while frozen ones
        wait for L0: only their flushes can free memory (a lone mutable memtable freezes at
        ``l0_sst_size_bytes`` instead)."""
        total = self._unflushed_bytes + self._memtable.size_bytes
        return total > self.options.max_unflushed_bytes and bool(self._immutables)

    def _wait_for_unflushed_room(self) -> None:
        deadline = time.monotonic() + seconds(self.options.backpressure_timeout)
        with self._durable:
            while self._over_unflushed_limit():
                self._check_usable()
                self._warn_if_l0_full()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise BackpressureTimeoutError(
                        f"writes to {self._manifests.location} stalled: "
                        f"{self._unflushed_bytes + self._memtable.size_bytes} bytes of memtables "
                        f"({len(self._immutables)} frozen) wait for L0 (max_unflushed_bytes="
                        f"{self.options.max_unflushed_bytes}); run a compactor or raise the limits"
                    )
                self._wake.set()
                self._durable.wait(min(remaining, 0.1))

    def _warn_if_l0_full(self) -> None:
        """Say at once that flushes wait on L0 — and why: without a compactor they wait for good.

        Logged when a flush or a write first waits on a full L0, then at most every
        :data:`STALL_WARNING_INTERVAL_S` while the stall lasts (not once per write).
        """
        l0, limit = len(self._lsm.manifest.l0), self.options.l0_max_ssts
        if l0 < limit:
            return
        with self._stall_lock:
            now, last = time.monotonic(), self._last_stall_warning
            if last is not None and now - last < STALL_WARNING_INTERVAL_S:
                return
            self._last_stall_warning = now
        if self._compactor is None:
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
            self._manifests.location,
            l0,
            limit,
            self.options.max_unflushed_bytes,
            self.options.backpressure_timeout,
            cause,
        )

    def _await_durable(self, seq: int) -> None:
        self._wake.set()
        with self._durable:
            while self._durable_seq < seq:
                self._check_usable()
                self._durable.wait(0.05)
        self._check_usable()

    # --- reading ----------------------------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        key = check_key(key)
        self._check_usable()  # a fenced writer's memtable holds writes that are lost
        check_read(self._lsm.manifest.visible_range, key, self._manifests.location)
        # Lock-free, in this order: a freeze appends to the frozen list before replacing the
        # memtable, and an L0 flush publishes the new state before dropping the frozen memtable.
        memtable = self._memtable
        immutables = list(self._immutables)
        return lookup(key, (memtable, *reversed(immutables)), self._lsm)

    def scan(self, start: bytes | None = None, end: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """``(key, value)`` pairs with ``start <= key < end`` in key order, as of the call.

        The mutable memtable's scan is a snapshot taken under the write lock (its small unsealed
        part is copied, its packed runs are immutable), so later writes never show up half-way (a
        batch is seen whole or not at all); frozen memtables and SSTs are immutable. The scan pins the
        writer checkpoint of the state it reads until it ends.
        """
        start, end = check_range(start, end)
        start, end = clip_scan(self._lsm.manifest.visible_range, start, end, self._manifests.location)
        with self._write_lock:
            self._check_usable()
            sources = [self._memtable.scan(start, end)]  # a snapshot (Memtable.scan)
            sources += [m.scan(start, end) for m in reversed(self._immutables)]
            merged = scan_merged(sources, self._lsm, start, end)
            return self._pins.pinned(self._checkpoint_id, merged)

    def scan_prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        prefix = check_key(prefix)
        return self.scan(prefix, prefix_end(prefix))

    # --- flushing ---------------------------------------------------------------------------------

    def flush(self) -> None:
        """Make every write so far durable in the WAL: written, and the epoch confirmed ours after
        that (a fenced writer, or one whose database was deleted, raises :class:`FencedError`)."""
        self._check_usable()
        with self._flush_lock:
            self._guard(self._flush_wal)

    def flush_memtable(self) -> None:
        """Move every write so far into L0 SSTs: afterwards the WAL is fully compacted."""
        self._check_usable()
        with self._write_lock:
            self._freeze_locked()
        with self._flush_lock:
            self._guard(lambda: self._flush_memtables(blocking=True))

    def _guard(self, work: Callable[[], None]) -> None:
        with self._failing_when_fenced():
            work()

    @contextlib.contextmanager
    def _failing_when_fenced(self) -> Iterator[None]:
        """Record a FencedError where it is observed, before it propagates: from then on every call
        raises it, and no write is accepted once any caller (or the flusher) has seen the fence."""
        try:
            yield
        except FencedError as error:
            self._fail(error)
            if isinstance(error, DbDeletedError) or self._destroyed_under_us():
                self._withdraw_unacknowledged()
            raise

    def _destroyed_under_us(self) -> bool:
        """Whether the manifest that fenced us marks the database destroyed (soft or hard destroy):
        nobody will ever replay this writer's WAL SSTs then."""
        latest = self._manifests.sequence.cached()
        return latest is not None and latest.value.destroyed_at_s is not None

    def _flush_wal(self, *, confirm: bool = True) -> None:
        """Write every WAL segment that holds entries as a WAL SST, oldest first; then acknowledge.

        Writers only append to the last segment, so the current one is sealed first; a segment
        leaves the queue only once its WAL SST exists, so a failed flush loses nothing. Runs under
        ``_wal_lock`` only (not ``_flush_lock``): a write may call it while the flusher encodes an
        L0 SST, whose memtable's segments are all written already. With ``confirm`` the writes now
        in WAL SSTs are then acknowledged (:meth:`_acknowledge`), outside the WAL lock, so a write
        that writes the WAL itself does not wait for the confirmation.
        """
        with self._wal_lock:
            with self._write_lock:
                if self._segments[-1].entries:
                    self._segments.append(_Segment(self._memtable))
                sealed = len(self._segments) - 1
            for _ in range(sealed):
                segment = self._segments[0]
                if segment.entries:
                    self._write_wal_segment(segment)
                with self._write_lock:
                    self._segments.pop(0)
                    self._wal_queued_bytes -= segment.size
        if confirm:
            self._acknowledge()

    def _acknowledge(self, *, always: bool = False) -> None:
        """Raise ``durable_seq`` to the writes in WAL SSTs, once the epoch is confirmed ours.

        The confirmation (:meth:`FenceableStore.confirm`, one round trip) starts after those WAL SSTs
        were created, so a newer writer (or a deletion) that could have missed them shows in it:
        :class:`FencedError` then, and nothing is acknowledged. One confirmation covers every WAL SST
        written before it started. ``always`` confirms even with nothing to acknowledge (close).
        """
        written = self._written_seq
        if written <= self._durable_seq and not always:
            return
        with self._failing_when_fenced():
            self._fenced.confirm()
        with self._durable:
            self._durable_seq = max(self._durable_seq, written)
            self._unacknowledged_wal = [w for w in self._unacknowledged_wal if w[1] > self._durable_seq]
            self._durable.notify_all()

    def _withdraw_unacknowledged(self) -> None:
        """The database was destroyed or deleted under this writer: delete the WAL SSTs it wrote since
        its last acknowledgement (none of their writes was acknowledged), so nothing of them is left
        after a hard destroy and a database created at the path afterwards does not replay them. Best
        effort: a new database that already replayed one (it was created while this writer still
        wrote) is beyond what a removal by hand can promise."""
        with self._durable:
            withdrawn, self._unacknowledged_wal = self._unacknowledged_wal, []
        for wal_id, _ in withdrawn:
            with contextlib.suppress(SlateOpsError):
                self._store.delete(self._wal.key(wal_id))
        if withdrawn:
            log.warning(
                "the database at %s was deleted under its writer: deleted its %d unacknowledged WAL SST(s)",
                self._manifests.location,
                len(withdrawn),
            )

    def _write_wal_segment(self, segment: _Segment) -> None:
        """Create the segment's WAL SST at the next WAL id.

        The id taken: a higher epoch (or a deleted database) in the manifest raises FencedError; at
        our own epoch an empty object is the fence of a lower-epoch opener that fails its post-fence
        check, so the id is skipped; data at our epoch is another process with the same epoch
        (:class:`EpochCollisionError`) — never retried (docs/design/coordination.md, "Fencing under
        races").
        """
        table = entries_to_table(segment.entries)
        for _ in range(MAX_FENCE_SKIPS + 1):
            wal_id = self._next_wal_id
            if self._wal.write(wal_id, table, segment.put_id):
                break
            with self._failing_when_fenced():
                self._fenced.confirm()  # FencedError: a newer writer bumps the epoch before fencing
                size = self._wal.size(wal_id)
                if size is None:
                    continue  # vanished meanwhile: try the id again
                if size:
                    raise EpochCollisionError(
                        self._manifests.location, "writer", self._fenced.epoch, self._wal.key(wal_id)
                    )
            log.info(
                "%s is a lower-epoch opener's fence at writer epoch %d; the WAL continues after it",
                self._wal.key(wal_id),
                self._fenced.epoch,
            )
            self._next_wal_id = wal_id + 1
        else:
            with self._failing_when_fenced():
                raise EpochCollisionError(
                    self._manifests.location, "writer", self._fenced.epoch, self._wal.key(self._next_wal_id)
                )
        self._next_wal_id = wal_id + 1
        segment.memtable.max_wal_id = wal_id
        with self._durable:
            self._unacknowledged_wal.append((wal_id, segment.entries[-1][1]))
        self._written_seq = max(self._written_seq, segment.entries[-1][1])

    def _flush_memtables(self, *, blocking: bool) -> None:
        """Flush frozen memtables to L0, oldest first; waits for L0 room only when ``blocking``.

        A memtable goes to L0 only once all its WAL SSTs exist, so the commit's
        ``replay_after_wal_id`` covers every WAL SST holding its writes. A memtable frozen while
        the WAL was being written (a write filled it, or ``flush_memtable`` froze it) still has its
        last segment queued: that is written first. Flushing it to L0 before would leave the
        segment to be written afterwards, after the replay point, though L0 holds its writes.
        """
        self._flush_wal()
        while self._immutables:
            memtable = self._immutables[0]
            while self._wal_pending(memtable):
                self._flush_wal()
            if not self._await_l0_room(blocking):
                return
            sst_id = ULID()
            data, info = encode_sst(memtable.to_table())
            self._store.put(sst_key(self.path, sst_id), data)
            self._commit(self._l0_flushed(memtable, CompactedSst(sst_id, info)), reestablish=True)
            with self._write_lock:
                self._immutables.pop(0)
                self._unflushed_bytes -= memtable.frozen_bytes
            with self._durable:
                self._durable.notify_all()

    def _wal_pending(self, memtable: Memtable) -> bool:
        """Whether writes of ``memtable`` are still queued for the WAL."""
        with self._write_lock:
            return any(segment.memtable is memtable and segment.entries for segment in self._segments)

    def _l0_flushed(self, memtable: Memtable, sst: CompactedSst) -> Callable[[Manifest], Manifest]:
        """The writer's half of an L0 flush, applied to whatever manifest is latest."""
        view = SstView(ULID(), sst.id)
        next_wal_id = self._next_wal_id

        def change(manifest: Manifest) -> Manifest:
            return manifest.with_changes(
                ssts=(*manifest.ssts, sst),
                l0=(view, *manifest.l0),
                replay_after_wal_id=max(manifest.replay_after_wal_id, memtable.max_wal_id),
                last_l0_seq=max(manifest.last_l0_seq, memtable.last_seq),
                next_wal_sst_id=max(manifest.next_wal_sst_id, next_wal_id),
            )

        return change

    def _await_l0_room(self, blocking: bool) -> bool:
        limit = self.options.l0_max_ssts
        if len(self._lsm.manifest.l0) < limit:
            return True
        deadline = time.monotonic() + seconds(self.options.backpressure_timeout)
        while True:
            self._poll_manifest()
            if len(self._lsm.manifest.l0) < limit:
                return True
            self._warn_if_l0_full()
            if not blocking:
                return False
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BackpressureTimeoutError(
                    f"L0 of {self._manifests.location} holds {len(self._lsm.manifest.l0)} SSTs "
                    f"(l0_max_ssts={limit}) and no compactor reduced it within "
                    f"{self.options.backpressure_timeout}; run a compactor or raise l0_max_ssts"
                )
            if self._stopping.wait(min(remaining, seconds(self.options.manifest_poll_interval))):
                raise DbClosedError(
                    f"the writer of {self._manifests.location} was closed while waiting for L0 room"
                )

    # --- the manifest -----------------------------------------------------------------------------

    def _commit(self, change: Callable[[Manifest], Manifest], *, reestablish: bool) -> VersionedManifest:
        """Commit ``change`` with the epoch check; re-establish the writer checkpoint if asked.

        The replaced checkpoint is removed in the same commit unless a scan still holds it (then a
        later commit removes it). The write lock is held throughout, so no scan can pin the old
        state while it is being replaced; writes wait for the one manifest commit.
        """
        with self._write_lock:
            old = self._checkpoint_id
            new = uuid.uuid4() if reestablish else old
            removable = self._pins.removable()
            if reestablish and not self._pins.is_active(old):
                removable.add(old)

            def apply(current: VersionedManifest) -> Manifest:
                manifest = change(current.value)
                checkpoints = tuple(c for c in manifest.checkpoints if c.id not in removable)
                if reestablish:
                    checkpoints += (self._writer_checkpoint(new, current, self._fenced.epoch),)
                return manifest.with_changes(checkpoints=checkpoints)

            try:
                with self._failing_when_fenced():
                    committed = self._fenced.update(apply)
            except BaseException:
                if reestablish:
                    # The commit may have landed although it failed (a put whose response was lost
                    # and could not be settled): the next commit removes the checkpoint it added,
                    # which would otherwise pin that manifest for as long as this writer lives.
                    self._pins.retire(new)
                raise
            self._pins.forget(removable)
            if reestablish and old not in removable:
                self._pins.retire(old)
            self._checkpoint_id = new
            self._lsm = LsmState(committed.value, self.path, self._readers)
        self._readers.retain(self._lsm.object_keys())
        return committed

    def _poll_manifest(self) -> None:
        """See the compactor's changes; re-establish the checkpoint when L0 or the runs changed."""
        with self._failing_when_fenced():
            latest = self._fenced.refresh()
        self._last_poll = time.monotonic()
        if sst_set(latest.value) != sst_set(self._lsm.manifest):
            self._commit(lambda manifest: manifest, reestablish=True)
        elif self._pins.removable():
            self._commit(lambda manifest: manifest, reestablish=False)

    # --- ingesting SSTs written elsewhere (slate_ops.engine.ingest) -------------------------------

    def reserve_ingest_seq(self) -> int:
        """Flush every write into L0, then reserve a sequence number above all stored data.

        The number is above ``last_l0_seq`` and above the ``max_seq`` of every SST the manifest lists
        (clones and unions may bring SSTs with higher numbers). A write through this writer after
        this call makes :meth:`ingest_l0` refuse the number.
        """
        self.flush_memtable()
        with self._write_lock:
            self._check_usable()
            manifest = self._lsm.manifest
            floor = max([self._last_seq, manifest.last_l0_seq, *(s.info.max_seq for s in manifest.ssts)])
            self._last_seq = floor + 1
            return self._last_seq

    def ingest_l0(self, ssts: Sequence[CompactedSst], seq: int) -> VersionedManifest:
        """Commit ``ssts`` (key-ordered, non-overlapping, every row at ``seq``) as the newest L0 views.

        One manifest update under the writer's epoch adds the SSTs, puts one view per SST (in key
        order) in front of L0, raises ``last_l0_seq`` to ``seq`` and re-establishes the writer's
        checkpoint. Refused with :class:`InvalidArgumentError` before anything is written if ``seq``
        is not the number :meth:`reserve_ingest_seq` just reserved (a write went through since), if
        an SST holds another sequence number, or if two SSTs overlap. A fenced writer raises
        :class:`FencedError`; the SST files are then orphans that GC deletes.
        """
        ordered = ingest_order(ssts, seq)
        views = tuple(SstView(ULID(), s.id) for s in ordered)

        def change(manifest: Manifest) -> Manifest:
            return manifest.with_changes(
                ssts=(*manifest.ssts, *ordered),
                l0=(*views, *manifest.l0),
                last_l0_seq=max(manifest.last_l0_seq, seq),
            )

        with self._flush_lock:
            with self._write_lock:
                self._check_usable()
                if self._last_seq != seq or self._immutables or len(self._memtable):
                    raise InvalidArgumentError(
                        f"sequence number {seq} is not the one just reserved on the writer of "
                        f"{self.path!r} (its last is {self._last_seq}, or writes are not yet in L0); call "
                        "reserve_ingest_seq again and rewrite the SSTs"
                    )
            return self._commit(change, reestablish=True)  # a fence found here fails the writer

    def create_checkpoint(
        self, scope: CheckpointScope = CheckpointScope.ALL, options: CheckpointOptions | None = None
    ) -> CheckpointCreateResult:
        """A checkpoint of this database (docs/design/engine.md, "Creating a checkpoint")."""
        options = options or CheckpointOptions()
        self._check_usable()
        with self._flush_lock:
            if scope is CheckpointScope.ALL:
                with self._write_lock:
                    self._freeze_locked()
                self._guard(lambda: self._flush_memtables(blocking=False))
            checkpoint_id = uuid.uuid4()
            last_wal = self._next_wal_id - 1  # readers of the checkpoint replay the WAL up to here

            def add(current: VersionedManifest) -> Manifest:
                manifest = with_new_checkpoint(
                    current, options, checkpoint_id, self._clock.now(), self._manifests.location
                )
                return manifest.with_changes(wal_id_last_seen=max(manifest.wal_id_last_seen, last_wal))

            with self._failing_when_fenced():
                committed = self._fenced.update(add)
        created = committed.value.checkpoint(checkpoint_id)
        assert created is not None
        return CheckpointCreateResult(id=checkpoint_id, manifest_id=created.manifest_id)

    # --- background -------------------------------------------------------------------------------

    def _background(self) -> None:
        interval = seconds(self.options.wal_flush_interval)
        poll = seconds(self.options.manifest_poll_interval)
        while not self._stopping.is_set():
            self._wake.wait(interval)
            self._wake.clear()
            if self._stopping.is_set():
                return
            try:
                with self._flush_lock:
                    self._flush_memtables(blocking=False)
                    if time.monotonic() - self._last_poll >= poll:
                        self._poll_manifest()
                    self._merge_memtable_runs()
            except FencedError as error:
                log.error("%s", error)
                self._fail(error)
                return
            except Exception as error:  # transient store errors: keep the data, retry next tick
                log.warning("background flush of %s failed, will retry: %s", self._manifests.location, error)

    def _merge_memtable_runs(self) -> None:
        """Merge the packed runs of the memtables, off the write path (under ``_flush_lock``, as
        ``to_table`` in L0 flushes), so gets search a few runs per memtable."""
        for memtable in (self._memtable, *self._immutables):
            while memtable.merge_runs():
                pass

    def _fail(self, error: BaseException) -> None:
        if self._failure is None:
            self._failure = error
        with self._durable:
            self._durable.notify_all()

    def _check_open(self) -> None:
        if self._closed:
            raise DbClosedError(f"the writer of {self._manifests.location} is closed")

    def _check_usable(self) -> None:
        self._check_open()
        if self._failure is not None:
            raise self._failure

    # --- closing ----------------------------------------------------------------------------------

    def close(self) -> None:
        """Flush the WAL, confirm the epoch, release the writer checkpoint and stop.

        Raises FencedError if fenced, and DbDeletedError (a FencedError) if the database was deleted
        under the writer; nothing is committed then."""
        if self._closed:
            return
        if self._compactor is not None:
            self._compactor.close()
        self._stopping.set()
        self._wake.set()
        self._thread.join()
        try:
            self._check_usable()
            with self._flush_lock:
                self._guard(lambda: self._flush_wal(confirm=False))
                # The last writes are acknowledged, and the epoch confirmed before the release commits:
                # a stale writer of a deleted database raises here and commits nothing.
                self._acknowledge(always=True)
                self._guard(self._release_checkpoint)
        finally:
            self._closed = True

    def _release_checkpoint(self) -> None:
        ours = {self._checkpoint_id} | self._pins.removable()
        with self._failing_when_fenced():
            self._fenced.update(
                lambda current: current.value.with_changes(
                    checkpoints=tuple(c for c in current.value.checkpoints if c.id not in ours)
                )
            )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            try:
                self.close()
            except SlateOpsError:
                log.exception("closing %s after an error failed", self._manifests.location)

    @property
    def writer_epoch(self) -> int:
        return self._fenced.epoch

    @property
    def manifest(self) -> Manifest:
        """The manifest version this writer reads from."""
        return self._lsm.manifest
