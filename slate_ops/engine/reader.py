"""DbReader: a read-only client that never fences the writer (docs/design/engine.md, "DbReader").

With a checkpoint it reads that fixed state: the checkpoint's manifest plus the WAL SSTs up to
that manifest's ``wal_id_last_seen``. Without one it manages its own checkpoint: created at open
(lifetime from the options), re-established when the set of L0 SSTs or sorted runs changed (the
old one deleted once no scan uses it), refreshed once half its lifetime has passed, and otherwise
left alone — the reader writes the manifest only when its checkpoint must change, never on every
poll (SlateDB issue 1750). It tails the WAL into memtables bounded by ``max_memtable_bytes`` and
drops those that the manifest's ``replay_after_wal_id`` now covers.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from types import TracebackType
from typing import Self

from slate_ops.engine.batch import check_key, check_range
from slate_ops.engine.bounds import check_read, clip_scan
from slate_ops.engine.lsm import LsmState, SstReaders, sst_set
from slate_ops.engine.memtable import Memtable
from slate_ops.engine.merge import lookup, prefix_end, scan_merged
from slate_ops.engine.options import ReaderOptions, seconds
from slate_ops.engine.pins import CheckpointPins
from slate_ops.engine.wal_chain import walk_chain
from slate_ops.engine.wal_store import WalStore
from slate_ops.errors import DbClosedError, InvalidArgumentError, SlateOpsError
from slate_ops.manifest.checkpoints import expiry_time, live_checkpoint, with_expiry
from slate_ops.manifest.model import Checkpoint, Manifest
from slate_ops.manifest.store import ManifestStore, VersionedManifest, require_not_destroyed, require_usable
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime
from slate_ops.sst import BlockCache

log = logging.getLogger(__name__)


class DbReader:
    """A read-only client of one database; never fences the writer. Use it as a context manager."""

    def __init__(
        self,
        path: str,
        store: ObjectStore,
        checkpoint_id: uuid.UUID | None = None,
        options: ReaderOptions | None = None,
        *,
        clock: Runtime = SYSTEM_RUNTIME,
        background: bool = True,
    ) -> None:
        options = options or ReaderOptions()
        self.options = options
        self._clock = clock
        self._manifests = ManifestStore(store, path, clock=clock)
        self.path = self._manifests.path
        self._wal = WalStore(store, self.path, clock)
        cache = BlockCache(options.block_cache_bytes) if options.block_cache_bytes else None
        self._readers = SstReaders(store, cache, options.read_ahead_limits(), clock)
        self._pins = CheckpointPins()
        self._lock = threading.Lock()
        self._memtables: list[Memtable] = []  # oldest first
        self._wal_next = 1  # the chain position: the next WAL id the tail reads
        self._closed = False
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.manages_checkpoint = checkpoint_id is None
        if checkpoint_id is not None and not isinstance(checkpoint_id, uuid.UUID):
            raise InvalidArgumentError(
                f"checkpoint_id must be a uuid.UUID, got {type(checkpoint_id).__name__} {checkpoint_id!r}; "
                "convert it with uuid.UUID(text)"
            )

        if checkpoint_id is not None:
            latest = self._manifests.read_latest_required()
            require_not_destroyed(latest.value, self._manifests.location)
            checkpoint = live_checkpoint(latest.value, checkpoint_id, clock.now(), self._manifests.location)
            manifest = self._manifests.read(checkpoint.manifest_id).value
            self.checkpoint_id = checkpoint_id
            self._set_state(manifest)
            self.tail_wal(upto=manifest.wal_id_last_seen)
        else:
            self.checkpoint_id = self._clock.new_uuid()
            self._set_state(self._establish(self.checkpoint_id).value)
            try:
                self.tail_wal()
            except BaseException:
                self._drop_own_checkpoint()  # a failed open leaves no checkpoint behind
                raise
            if background:
                self._thread = threading.Thread(
                    target=self._poll_loop, name=f"slate-ops-reader:{self.path}", daemon=True
                )
                self._thread.start()

    @classmethod
    def open(
        cls,
        path: str,
        store: ObjectStore,
        checkpoint_id: uuid.UUID | None = None,
        options: ReaderOptions | None = None,
        *,
        clock: Runtime = SYSTEM_RUNTIME,
        background: bool = True,
    ) -> Self:
        """Open a reader of ``path``: at ``checkpoint_id``, else at a checkpoint of its own that it
        keeps current (the same as ``DbReader(...)``). ``background=False`` starts no poll thread:
        the reader then changes only when :meth:`poll` is called (the test seam)."""
        return cls(path, store, checkpoint_id, options, clock=clock, background=background)

    # --- reading ----------------------------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        key = check_key(key)
        self._check_open()
        check_read(self._lsm.manifest.visible_range, key, self._manifests.location)
        memtables = list(reversed(self._memtables))  # before the state: see Db.get
        return lookup(key, memtables, self._lsm)

    def scan(self, start: bytes | None = None, end: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """A scan as of the call; it pins the reader's checkpoint until it ends (see Db.scan)."""
        start, end = check_range(start, end)
        start, end = clip_scan(self._lsm.manifest.visible_range, start, end, self._manifests.location)
        with self._lock:
            self._check_open()
            # only the newest memtable still receives tailed WAL entries; a scan is a snapshot
            sources = [m.scan(start, end) for m in reversed(self._memtables)]
            merged = scan_merged(sources, self._lsm, start, end)
            return self._pins.pinned(self.checkpoint_id, merged)

    def scan_prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        prefix = check_key(prefix)
        return self.scan(prefix, prefix_end(prefix))

    @property
    def manifest(self) -> Manifest:
        return self._lsm.manifest

    @property
    def sst_object_keys(self) -> set[str]:
        """The keys of every SST object the reader's current state reads."""
        return self._lsm.object_keys()

    # --- the managed checkpoint -------------------------------------------------------------------

    def _establish(self, new_id: uuid.UUID, replacing: uuid.UUID | None = None) -> VersionedManifest:
        """Re-establish the reader's checkpoint (docs/design/engine.md, "DbReader"), also removing our
        idle replaced checkpoints.

        Called with the reader lock held (or before any scan exists), so no scan can pin
        ``replacing`` meanwhile.
        """
        listing = self._wal.list_sizes()
        removable = self._pins.removable()
        if replacing is not None and not self._pins.is_active(replacing):
            removable.add(replacing)
        now = self._clock.now()

        def apply(current: VersionedManifest) -> Manifest:
            manifest = current.value
            require_usable(manifest, self._manifests.location)
            ours = Checkpoint(
                id=new_id,
                manifest_id=current.id + 1,
                create_time_s=int(now),
                expire_time_s=expiry_time(now, self.options.checkpoint_lifetime),
            )
            kept = tuple(c for c in manifest.checkpoints if c.id not in removable)
            last_wal = walk_chain(listing, manifest.replay_after_wal_id).end - 1  # the chain's, not orphans
            return manifest.with_changes(
                checkpoints=(*kept, ours), wal_id_last_seen=max(manifest.wal_id_last_seen, last_wal)
            )

        committed = self._manifests.update(apply)
        self._pins.forget(removable)
        if replacing is not None and replacing not in removable:
            self._pins.retire(replacing)
        return committed

    def poll(self) -> None:
        """One maintenance round (the background thread calls it every ``manifest_poll_interval``)."""
        latest = self._manifests.read_latest_required()
        now = self._clock.now()
        ours = latest.value.checkpoint(self.checkpoint_id)
        # An expired checkpoint is re-established, never revived: GC may already have planned around it.
        if ours is None or ours.is_expired(now) or sst_set(latest.value) != sst_set(self._lsm.manifest):
            with self._lock:
                new = self._clock.new_uuid()
                committed = self._establish(new, replacing=self.checkpoint_id)
                self.checkpoint_id = new
                self._set_state_locked(committed.value)
            self._readers.retain(self._lsm.object_keys())
        elif self._needs_refresh(ours, now):
            lifetime = self.options.checkpoint_lifetime
            self._manifests.update(
                lambda current: with_expiry(current.value, self.checkpoint_id, expiry_time(now, lifetime))
            )
        self.tail_wal()

    def _needs_refresh(self, ours: Checkpoint, now: float) -> bool:
        """Less than half the lifetime is left. Never with no lifetime: the checkpoint then never
        expires (one given an expiry by hand is re-established once it has expired)."""
        lifetime = self.options.checkpoint_lifetime
        expires_at = ours.expires_at
        return lifetime is not None and expires_at is not None and expires_at - now < seconds(lifetime) / 2

    def _set_state(self, manifest: Manifest) -> None:
        with self._lock:
            self._set_state_locked(manifest)
        self._readers.retain(self._lsm.object_keys())

    def _set_state_locked(self, manifest: Manifest) -> None:
        self._lsm = LsmState(manifest, self.path, self._readers)
        covered = manifest.replay_after_wal_id
        self._memtables = [m for m in self._memtables if m.max_wal_id > covered]
        self._wal_next = max(self._wal_next, covered + 1)

    def tail_wal(self, upto: int | None = None) -> None:
        """Replay the WAL chain from where the tail stands (up to ``upto``) into bounded memtables.

        The walk ends at the first missing id (docs/design/engine.md, "Several WAL PUTs in flight"):
        WAL SSTs listed beyond a gap are not read until the gap fills, and the next call resumes there.
        :meth:`poll` calls it; a reader at a checkpoint reads up to the checkpoint's
        ``wal_id_last_seen`` once, at open, and is never tailed further."""
        walk = self._wal.chain(self._wal_next - 1, upto)
        for wal_id, entries in self._wal.read_many(walk.segments):
            applied = list(entries)
            with self._lock:
                if not self._memtables or self._memtables[-1].size_bytes >= self.options.max_memtable_bytes:
                    if self._memtables:
                        self._memtables[-1].freeze()  # full: packed from here on
                    self._memtables.append(Memtable())
                current = self._memtables[-1]
                for key, seq, kind, value in applied:
                    current.put(key, seq, kind, value)
                while current.merge_runs():
                    pass
                current.max_wal_id = wal_id
                self._wal_next = max(self._wal_next, wal_id + 1)
        with self._lock:
            self._wal_next = max(self._wal_next, walk.end)

    def _poll_loop(self) -> None:
        interval = seconds(self.options.manifest_poll_interval)
        while not self._stopping.wait(interval):
            try:
                self.poll()
            except SlateOpsError as error:
                log.warning("reader of %s: poll failed, will retry: %s", self._manifests.location, error)
            except Exception:
                log.exception("reader of %s: poll failed, will retry", self._manifests.location)

    # --- closing ----------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise DbClosedError(f"the reader of {self._manifests.location} is closed")

    def close(self) -> None:
        """Stop polling and delete the reader's own checkpoint (a given checkpoint is left alone)."""
        if self._closed:
            return
        self._stop()
        if self.manages_checkpoint:
            self._drop_own_checkpoint()

    def crash(self) -> None:
        """Stop like a killed process: polling stops, nothing is written; the reader's own
        checkpoint stays in the manifest until it expires. Every later call raises
        :class:`DbClosedError`."""
        if not self._closed:
            self._stop()

    @property
    def is_closed(self) -> bool:
        return self._closed

    def _stop(self) -> None:
        self._closed = True
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()

    def _drop_own_checkpoint(self) -> None:
        ours = {self.checkpoint_id} | self._pins.removable()
        self._manifests.update(
            lambda current: current.value.with_changes(
                checkpoints=tuple(c for c in current.value.checkpoints if c.id not in ours)
            )
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
