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
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor
from types import TracebackType
from typing import Protocol, Self

from slate_ops.config import CheckpointCreateResult, CheckpointOptions
from slate_ops.engine.batch import KIND_TOMBSTONE, KIND_VALUE, WriteBatch, check_key, check_range, check_value
from slate_ops.engine.bounds import check_read, check_write, clip_scan
from slate_ops.engine.flusher import MemtableFlusher
from slate_ops.engine.ingest import ingest_order
from slate_ops.engine.lsm import SstReaders
from slate_ops.engine.memtable import Memtable
from slate_ops.engine.merge import lookup, prefix_end, scan_merged
from slate_ops.engine.options import CheckpointScope, DbOptions, seconds
from slate_ops.engine.wal_buffer import WAL_ENTRY_OVERHEAD, Entry, WalBuffer
from slate_ops.engine.wal_chain import Segment
from slate_ops.engine.wal_confirmer import WalConfirmer
from slate_ops.engine.wal_store import WalStore, fence_chain_end
from slate_ops.engine.writer_manifest import WriterManifest
from slate_ops.engine.writer_status import WriterStatus
from slate_ops.errors import (
    DbDeletedError,
    FencedError,
    InvalidArgumentError,
    ObjectNotFoundError,
    SlateOpsError,
)
from slate_ops.manifest.model import CompactedSst, Manifest, SstView
from slate_ops.manifest.store import ManifestStore, VersionedManifest
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime
from slate_ops.sst import BlockCache

log = logging.getLogger(__name__)

WAL_INLINE_FACTOR = 2
"""A write finding this many times ``wal_buffer_bytes`` unwritten writes the WAL itself (the flusher
is behind, e.g. encoding an L0 SST), so the WAL queue stays bounded."""


class BackgroundCompactor(Protocol):
    """A compactor running beside the writer in this process; the writer closes it on close."""

    def close(self) -> None: ...


CompactorStarter = Callable[[str, ObjectStore, Runtime], BackgroundCompactor]
"""Starts a compactor for ``(path, store, clock)``: :func:`slate_ops.compaction.embedded` makes one.
The engine does not import the compaction layer (it sits above); the caller injects it, as
SlateDB's ``DbBuilder::with_compactor_builder`` does."""


class Db:
    """A writer of one database; use it as a context manager.

    ``Db(path, store, options)`` (or :meth:`open`, the same) opens the database at ``path`` for
    writing, creating it if missing, and fences older writers. ``compactor`` starts a compactor in
    this process too (``compactor=slate_ops.compaction.embedded(CompactorOptions(...))``); by
    default compaction runs elsewhere (a Dagster schedule, ``slate-ops compact``).

    It composes the writer's parts (docs/design/engine.md, "The writer's parts"): the
    :class:`WalBuffer`, the :class:`MemtableFlusher` and the :class:`WriterManifest`; it owns the
    mutable memtable and the sequence numbers, under ``_write_lock``, which is never held across
    object-store I/O. ``background=False`` starts no flusher thread: nothing is flushed until
    :meth:`step` (or an explicit flush) runs — the test seam (docs/design/engine.md, "The test seam").
    """

    def __init__(
        self,
        path: str,
        store: ObjectStore,
        options: DbOptions | None = None,
        *,
        clock: Runtime = SYSTEM_RUNTIME,
        compactor: CompactorStarter | None = None,
        background: bool = True,
    ) -> None:
        options = options or DbOptions()
        self.options = options
        self._clock = clock
        manifests = ManifestStore(store, path, clock=clock)
        self.path = manifests.path
        self._location = manifests.location
        wal = WalStore(store, self.path, clock)
        cache = BlockCache(options.block_cache_bytes) if options.block_cache_bytes else None
        self._status = WriterStatus(manifests.location)
        self._write_lock = threading.Lock()  # the mutable memtable, sequence numbers, WAL queue order
        self._flush_lock = threading.RLock()  # one flush round (WAL, L0, poll, checkpoint) at a time
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._background = background
        self._compactor: BackgroundCompactor | None = None
        self._thread: threading.Thread | None = None
        self._confirmer: WalConfirmer | None = None
        self._wal_puts: Executor | None = None

        self._manifest = WriterManifest(
            manifests, SstReaders(store, cache, options.read_ahead_limits(), clock), clock, self._status
        )
        try:
            self._open_claimed(self._manifest.claimed, wal, store, compactor)
        except BaseException:
            # Fencing the older writer stands, but a failed open (a damaged WAL SST) leaves no
            # writer checkpoint pinning the database.
            with contextlib.suppress(SlateOpsError):
                self._manifest.release()
            raise

    @classmethod
    def open(
        cls,
        path: str,
        store: ObjectStore,
        options: DbOptions | None = None,
        *,
        clock: Runtime = SYSTEM_RUNTIME,
        compactor: CompactorStarter | None = None,
        background: bool = True,
    ) -> Self:
        """Open (creating it if missing) the database at ``path`` for writing; fences older writers.

        ``background=False``: no flusher thread (see :meth:`step`)."""
        return cls(path, store, options, clock=clock, compactor=compactor, background=background)

    def _open_claimed(
        self, manifest: Manifest, wal: WalStore, store: ObjectStore, compactor: CompactorStarter | None
    ) -> None:
        fence = fence_chain_end(
            wal,
            manifest.replay_after_wal_id,
            self._manifest.confirm,
            self._location,
            "writer",
            manifest.writer_epoch,
        )
        # Post-fence epoch check (docs/design/coordination.md, "Fencing under races"): a newer writer
        # that claimed before our fence landed may have fenced below it; we then never write the WAL.
        self._manifest.confirm()
        self._last_seq = manifest.last_l0_seq
        self._memtable = Memtable()
        puts = self.options.wal_puts_in_flight
        self._wal_puts = self._clock.executor(puts, f"slate-ops-wal-put:{self.path}") if puts > 1 else None
        self._wal = WalBuffer(
            wal,
            store,
            self._manifest.fenced,
            self._status,
            next_wal_id=fence.first_id,
            memtable=self._memtable,
            puts_in_flight=puts,
            puts=self._wal_puts,
            on_put_done=self._wake.set,
        )
        self._flusher = MemtableFlusher(
            self.path,
            store,
            self.options,
            self._clock,
            wal=self._wal,
            manifest=self._manifest,
            status=self._status,
            stopping=self._stopping,
            wake=self._wake.set,
            has_compactor=lambda: self._compactor is not None,
        )
        self._status.on_failure(self._wal.notify)
        self._status.on_failure(self._stop_wal_puts)  # no WAL PUT starts once the writer failed
        self._status.on_fenced(self._on_fenced)
        try:
            self._replay(wal, fence.segments)
        except ObjectNotFoundError:
            # A WAL SST listed a moment ago is gone: only a deletion (a destroy; a newer writer's L0
            # flush and GC) removes one, and each fences us first — say so (FencedError,
            # DbDeletedError) rather than report a missing object. Still ours: the WAL is damaged.
            self._manifest.confirm()
            raise
        self._wal.start_at(self._last_seq)

        self._compactor = None if compactor is None else compactor(self.path, store, self._clock)
        if self._background:
            confirmations = self._clock.executor(
                self.options.wal_puts_in_flight, f"slate-ops-confirmer:{self.path}"
            )
            self._confirmer = WalConfirmer(self._wal, self._status, confirmations)
            self._status.on_failure(self._confirmer.abandon)  # its thread ends once the writer failed
            self._thread = threading.Thread(
                target=self._run_background, name=f"slate-ops-flusher:{self.path}", daemon=True
            )
            self._thread.start()

    def _replay(self, wal: WalStore, segments: Sequence[Segment]) -> None:
        """Re-apply the WAL SSTs of the chain below our fence (listed by the fence's LIST).

        They are fetched several at a time (one GET each) and applied one after another in id order."""
        for wal_id, entries in wal.read_many(segments):
            for key, seq, kind, value in entries:
                self._memtable.put(key, seq, kind, value)
                self._last_seq = max(self._last_seq, seq)
            self._memtable.max_wal_id = wal_id
            if self._memtable.size_bytes >= self.options.l0_sst_size_bytes:
                self._freeze_locked()

    def _on_fenced(self, error: FencedError) -> None:
        if isinstance(error, DbDeletedError) or self._manifest.destroyed_under_us():
            self._wal.withdraw_unacknowledged()

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
        if self._flusher.over_unflushed_limit(self._memtable.size_bytes):
            self._flusher.wait_for_room(lambda: self._memtable.size_bytes)
        check_write(self._manifest.lsm.manifest.visible_range, (key for key, _, _ in ops), self._location)
        with self._write_lock:
            self._status.check_usable()
            seq = self._last_seq = self._last_seq + 1
            memtable = self._memtable
            entries: list[Entry] = []
            size = 0
            for key, kind, value in ops:
                memtable.put(key, seq, kind, value)
                entries.append((key, seq, kind, value))
                size += len(key) + len(value) + WAL_ENTRY_OVERHEAD
            segment_size = self._wal.append(entries, size)
            if memtable.size_bytes >= self.options.l0_sst_size_bytes:
                self._freeze_locked()
            elif segment_size >= self.options.wal_buffer_bytes:
                self._wake.set()
        if self._wal.queued_bytes >= WAL_INLINE_FACTOR * self.options.wal_buffer_bytes:
            self._wal.write_inline()
        if self.options.await_durable if await_durable is None else await_durable:
            self._await_durable(seq)

    def _freeze_locked(self) -> None:
        """Seal the mutable memtable (and its WAL segment) for flushing; start a new one."""
        if not len(self._memtable):
            return
        self._memtable.freeze()  # packed from here on: it is accounted at its frozen size
        self._flusher.add(self._memtable)
        self._memtable = Memtable()
        self._wal.start_segment(self._memtable)

    def _await_durable(self, seq: int) -> None:
        if not self._background:
            # No flusher thread: do here, now, the round it would do (an error reaches the caller,
            # whose write is then applied but not acknowledged).
            with self._flush_lock:
                self._guard(lambda: self._flusher.flush(blocking=False))
            self._status.check_usable()
            if self._wal.durable_seq < seq:
                raise AssertionError(
                    f"the flush round left write {seq} not durable ({self._wal.durable_seq})"
                )
        self._wake.set()
        self._wal.await_durable(seq)
        self._status.check_usable()

    # --- reading ----------------------------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        key = check_key(key)
        self._status.check_usable()  # a fenced writer's memtable holds writes that are lost
        check_read(self._manifest.lsm.manifest.visible_range, key, self._location)
        # Lock-free, in this order: a freeze appends to the frozen list before replacing the
        # memtable, and an L0 flush publishes the new state before dropping the frozen memtable.
        memtable = self._memtable
        frozen = self._flusher.frozen
        return lookup(key, (memtable, *reversed(frozen)), self._manifest.lsm)

    def scan(self, start: bytes | None = None, end: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """``(key, value)`` pairs with ``start <= key < end`` in key order, as of the call.

        The mutable memtable's scan is a snapshot taken under the write lock (its small unsealed
        part is copied, its packed runs are immutable), so later writes never show up half-way (a
        batch is seen whole or not at all); frozen memtables and SSTs are immutable. The memtables
        are taken first, then the LSM state (an L0 flush publishes its state before it drops its
        memtable, so nothing falls between). The scan pins the writer checkpoint of the state it
        reads until it ends.
        """
        start, end = check_range(start, end)
        start, end = clip_scan(self._manifest.lsm.manifest.visible_range, start, end, self._location)
        with self._write_lock:
            self._status.check_usable()
            sources = [self._memtable.scan(start, end)]  # a snapshot (Memtable.scan)
            sources += [m.scan(start, end) for m in reversed(self._flusher.frozen)]
        return self._manifest.pinned_scan(lambda lsm: scan_merged(sources, lsm, start, end))

    def scan_prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        prefix = check_key(prefix)
        return self.scan(prefix, prefix_end(prefix))

    # --- flushing ---------------------------------------------------------------------------------

    def flush(self) -> None:
        """Make every write so far durable in the WAL: written, and the epoch confirmed ours after
        that (a fenced writer, or one whose database was deleted, raises :class:`FencedError`)."""
        self._status.check_usable()
        with self._flush_lock:
            self._guard(self._wal.write_queued)

    def flush_memtable(self) -> None:
        """Move every write so far into L0 SSTs: afterwards the WAL is fully compacted."""
        self._status.check_usable()
        with self._write_lock:
            self._freeze_locked()
        with self._flush_lock:
            self._guard(lambda: self._flusher.flush(blocking=True))

    def _guard(self, work: Callable[[], None]) -> None:
        with self._status.failing_when_fenced():
            work()

    # --- ingesting SSTs written elsewhere (slate_ops.engine.ingest) -------------------------------

    def reserve_ingest_seq(self) -> int:
        """Flush every write into L0, then reserve a sequence number above all stored data.

        The number is above ``last_l0_seq`` and above the ``max_seq`` of every SST the manifest lists
        (clones and unions may bring SSTs with higher numbers). A write through this writer after
        this call makes :meth:`ingest_l0` refuse the number.
        """
        self.flush_memtable()
        with self._write_lock:
            self._status.check_usable()
            manifest = self._manifest.lsm.manifest
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
        views = tuple(SstView(self._clock.new_ulid(), s.id) for s in ordered)

        def change(manifest: Manifest) -> Manifest:
            return manifest.with_changes(
                ssts=(*manifest.ssts, *ordered),
                l0=(*views, *manifest.l0),
                last_l0_seq=max(manifest.last_l0_seq, seq),
            )

        with self._flush_lock:
            with self._write_lock:
                self._status.check_usable()
                if self._last_seq != seq or self._flusher.frozen or len(self._memtable):
                    raise InvalidArgumentError(
                        f"sequence number {seq} is not the one just reserved on the writer of "
                        f"{self.path!r} (its last is {self._last_seq}, or writes are not yet in L0); call "
                        "reserve_ingest_seq again and rewrite the SSTs"
                    )
            return self._manifest.commit(change, reestablish=True)  # a fence found here fails the writer

    def create_checkpoint(
        self, scope: CheckpointScope = CheckpointScope.ALL, options: CheckpointOptions | None = None
    ) -> CheckpointCreateResult:
        """A checkpoint of this database (docs/design/engine.md, "Creating a checkpoint")."""
        options = options or CheckpointOptions()
        self._status.check_usable()
        with self._flush_lock:
            if scope is CheckpointScope.ALL:
                with self._write_lock:
                    self._freeze_locked()
                self._guard(lambda: self._flusher.flush(blocking=False))
            last_wal = self._wal.next_wal_id - 1  # readers of the checkpoint replay the WAL up to here
            checkpoint_id, manifest_id = self._manifest.add_checkpoint(options, last_wal)
        return CheckpointCreateResult(id=checkpoint_id, manifest_id=manifest_id)

    # --- background -------------------------------------------------------------------------------

    def _run_background(self) -> None:
        interval = seconds(self.options.wal_flush_interval)
        poll = seconds(self.options.manifest_poll_interval)
        confirmer = self._confirmer
        assert confirmer is not None  # started with the thread
        while not self._stopping.is_set():
            self._wake.wait(interval)
            self._wake.clear()
            if self._stopping.is_set() or self._status.failure is not None:
                return
            try:
                self._round(poll_after_s=poll, acknowledge=confirmer.request, wait=False)
            except FencedError as error:
                log.error("%s", error)
                self._status.fail(error)
                return
            except Exception as error:  # transient store errors: keep the data, retry next tick
                log.warning("background flush of %s failed, will retry: %s", self._location, error)

    def _round(
        self, *, poll_after_s: float, acknowledge: Callable[[], None] | None = None, wait: bool = True
    ) -> None:
        """One round of the flusher: the WAL, frozen memtables to L0 (not waiting for L0 room), a
        manifest poll if the last one is ``poll_after_s`` old, and merging memtable runs.

        ``acknowledge`` follows each WAL write: by default the confirmation runs here, before the
        round goes on; the flusher thread hands it to its confirmer instead, so the next round's WAL
        PUT overlaps it, and passes ``wait=False``: WAL PUTs still in flight are taken by a later
        round, woken when they end (docs/design/engine.md, "The writer's WAL pipeline")."""
        with self._flush_lock:
            self._flusher.flush(blocking=False, acknowledge=acknowledge, wait=wait)
            if self._manifest.poll_due(poll_after_s):
                self._manifest.poll()
            self._flusher.merge_runs(self._memtable)

    # --- the test seam (docs/design/engine.md, "The test seam") -----------------------------------

    def step(self) -> None:
        """Do one round of the flusher's work now, in this thread: write the queued WAL (and
        acknowledge it), flush frozen memtables to L0 if L0 has room, poll the manifest, merge
        memtable runs. A fence observed fails the writer, as in the flusher thread; other errors
        (a store fault) propagate and lose nothing (the next round retries)."""
        self._status.check_usable()
        self._guard(lambda: self._round(poll_after_s=0.0))

    def poll_manifest(self) -> None:
        """Poll the manifest now (what the flusher does every ``manifest_poll_interval``): see the
        compactor's changes and re-establish the writer checkpoint if L0 or the runs changed. A
        fence found fails the writer."""
        with self._flush_lock:
            self._manifest.poll()

    def crash(self) -> None:
        """Stop like a killed process: the threads stop, nothing is flushed or committed, in-memory
        state (unwritten WAL segments, memtables) is dropped and the writer checkpoint stays in the
        manifest. Every later call raises :class:`DbClosedError`."""
        if self._status.closed:
            return
        if self._compactor is not None:
            self._compactor.close()
        self._stop_thread()
        self._status.close()
        self._stop_wal_puts()

    def fail(self, error: BaseException) -> None:
        """Make every later call (and every waiter for durability) raise ``error``: what observing a
        fence does, for an injected failure."""
        self._status.fail(error)

    @property
    def durable_seq(self) -> int:
        """The last sequence number acknowledged as durable (its WAL SST and every earlier one exist
        and the epoch was confirmed after them)."""
        return self._wal.durable_seq

    @property
    def last_seq(self) -> int:
        """The last sequence number given to a write (or reserved for an ingest)."""
        return self._last_seq

    @property
    def next_wal_id(self) -> int:
        """The id the next WAL SST gets."""
        return self._wal.next_wal_id

    @property
    def writer_checkpoint_id(self) -> uuid.UUID:
        """The id of the writer checkpoint, which pins the manifest version the writer reads."""
        return self._manifest.checkpoint_id

    @property
    def sst_object_keys(self) -> set[str]:
        """The keys of every SST object the writer's current state reads."""
        return self._manifest.lsm.object_keys()

    @property
    def unflushed_bytes(self) -> int:
        """Bytes of the memtables (mutable and frozen), bounded by ``max_unflushed_bytes``."""
        return self._flusher.frozen_bytes + self._memtable.size_bytes

    @property
    def frozen_memtables(self) -> int:
        """How many frozen memtables wait for their L0 flush."""
        return len(self._flusher.frozen)

    @property
    def is_closed(self) -> bool:
        return self._status.closed

    # --- closing ----------------------------------------------------------------------------------

    def _stop_thread(self) -> None:
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        if self._confirmer is not None:
            self._confirmer.stop()

    def close(self) -> None:
        """Flush the WAL, confirm the epoch, release the writer checkpoint and stop.

        Raises FencedError if fenced, and DbDeletedError (a FencedError) if the database was deleted
        under the writer; nothing is committed then."""
        if self._status.closed:
            return
        if self._compactor is not None:
            self._compactor.close()
        self._stop_thread()
        try:
            self._status.check_usable()
            with self._flush_lock:
                self._guard(lambda: self._wal.write_queued(confirm=False))
                # The last writes are acknowledged, and the epoch confirmed before the release commits:
                # a stale writer of a deleted database raises here and commits nothing.
                self._wal.acknowledge(always=True)
                self._manifest.release()
        finally:
            self._status.close()
            self._stop_wal_puts()

    def _stop_wal_puts(self) -> None:
        if self._wal_puts is not None:
            self._wal_puts.shutdown(wait=False)  # idle: every WAL write waits for its own PUTs

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
                log.exception("closing %s after an error failed", self._location)

    @property
    def writer_epoch(self) -> int:
        return self._manifest.epoch

    @property
    def manifest(self) -> Manifest:
        """The manifest version this writer reads from."""
        return self._manifest.lsm.manifest
