"""The writer's part of the manifest: its epoch (fencing), its commits, its writer checkpoint and polling.

Every commit goes through :class:`WriterManifest`, under its own lock, which is held across the
manifest PUT so that no scan pins a checkpoint while it is being replaced; the writer's write lock is
never held then, so writes go on during a commit (docs/design/engine.md, "The writer's parts").
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Iterator

from slate_ops.config import CheckpointOptions
from slate_ops.engine.lsm import LsmState, SstReaders, sst_set
from slate_ops.engine.pins import CheckpointPins
from slate_ops.engine.writer_status import WriterStatus
from slate_ops.errors import DbAlreadyExistsError
from slate_ops.manifest.checkpoints import with_new_checkpoint
from slate_ops.manifest.model import Checkpoint, Manifest, WriterCheckpoint
from slate_ops.manifest.store import WRITER_EPOCH, ManifestStore, VersionedManifest, require_usable
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime
from slate_ops.txn.fencing import FenceableStore

T = tuple[bytes, bytes]


class WriterManifest:
    """The manifest as one writer sees and changes it, from its epoch claim on.

    ``_lock`` orders commits against scans pinning the writer checkpoint; it guards
    ``_checkpoint_id`` and ``_lsm`` (read lock-free by gets: each is replaced whole).
    """

    def __init__(
        self, manifests: ManifestStore, readers: SstReaders, clock: Runtime, status: WriterStatus
    ) -> None:
        self._manifests = manifests
        self._readers = readers
        self._clock = clock
        self._status = status
        self._pins = CheckpointPins()
        self._lock = threading.Lock()
        if manifests.read_latest() is None:
            with contextlib.suppress(DbAlreadyExistsError):  # another process created it meanwhile
                manifests.create_initial(Manifest(initialized=True))
        self._checkpoint_id = clock.new_uuid()
        self._last_poll = SYSTEM_RUNTIME.monotonic()
        self._fenced, claimed = manifests.claim(WRITER_EPOCH, self._establish_writer_checkpoint)
        self.claimed = claimed.value
        self._lsm = LsmState(claimed.value, manifests.path, readers)

    # --- what the writer reads --------------------------------------------------------------------

    @property
    def fenced(self) -> FenceableStore[Manifest]:
        """The manifest store at this writer's epoch (refuses updates once fenced)."""
        return self._fenced

    @property
    def epoch(self) -> int:
        return self._fenced.epoch

    @property
    def lsm(self) -> LsmState:
        return self._lsm

    @property
    def checkpoint_id(self) -> uuid.UUID:
        return self._checkpoint_id

    def pinned_scan(self, scan: Callable[[LsmState], Iterator[T]]) -> Iterator[T]:
        """``scan(lsm)`` of the current state, pinning the writer checkpoint of that state until it ends."""
        with self._lock:
            return self._pins.pinned(self._checkpoint_id, scan(self._lsm))

    def confirm(self) -> None:
        """Check that the manifest still shows our epoch (FencedError otherwise)."""
        with self._status.failing_when_fenced():
            self._fenced.confirm()

    def destroyed_under_us(self) -> bool:
        """Whether the manifest that fenced us marks the database destroyed (soft or hard destroy):
        nobody will ever replay this writer's WAL SSTs then."""
        latest = self._manifests.sequence.cached()
        return latest is not None and latest.value.destroyed_at_s is not None

    # --- the writer checkpoint --------------------------------------------------------------------

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

    def release(self) -> None:
        """Remove the writer checkpoint (and replaced ones no scan holds) from the manifest."""
        ours = {self._checkpoint_id} | self._pins.removable()
        with self._status.failing_when_fenced():
            self._fenced.update(
                lambda current: current.value.with_changes(
                    checkpoints=tuple(c for c in current.value.checkpoints if c.id not in ours)
                )
            )

    # --- commits ----------------------------------------------------------------------------------

    def commit(self, change: Callable[[Manifest], Manifest], *, reestablish: bool) -> VersionedManifest:
        """Commit ``change`` with the epoch check; re-establish the writer checkpoint if asked.

        The replaced checkpoint is removed in the same commit unless a scan still holds it (then a
        later commit removes it). The manifest lock is held throughout, so no scan can pin the old
        state while it is being replaced; writes do not take it.
        """
        with self._lock:
            old = self._checkpoint_id
            new = self._clock.new_uuid() if reestablish else old
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
                with self._status.failing_when_fenced():
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
            self._lsm = LsmState(committed.value, self._manifests.path, self._readers)
        self._readers.retain(self._lsm.object_keys())
        return committed

    def poll(self) -> None:
        """See the compactor's changes; re-establish the checkpoint when L0 or the runs changed."""
        with self._status.failing_when_fenced():
            latest = self._fenced.refresh()
        self._last_poll = SYSTEM_RUNTIME.monotonic()
        if sst_set(latest.value) != sst_set(self._lsm.manifest):
            self.commit(lambda manifest: manifest, reestablish=True)
        elif self._pins.removable():
            self.commit(lambda manifest: manifest, reestablish=False)

    def poll_due(self, interval_s: float) -> bool:
        # The background poll's interval is real time, as the flusher thread's waits are
        # (docs/design/runtime.md); a manual-runtime test polls with poll_manifest().
        return SYSTEM_RUNTIME.monotonic() - self._last_poll >= interval_s

    def add_checkpoint(self, options: CheckpointOptions, last_wal: int) -> tuple[uuid.UUID, int]:
        """Commit a new checkpoint of the latest manifest; readers of it replay the WAL up to
        ``last_wal``. Its id and the manifest id it pins."""
        checkpoint_id = self._clock.new_uuid()

        def add(current: VersionedManifest) -> Manifest:
            manifest = with_new_checkpoint(
                current, options, checkpoint_id, self._clock.now(), self._manifests.location
            )
            return manifest.with_changes(wal_id_last_seen=max(manifest.wal_id_last_seen, last_wal))

        with self._status.failing_when_fenced():
            committed = self._fenced.update(add)
        created = committed.value.checkpoint(checkpoint_id)
        assert created is not None
        return checkpoint_id, created.manifest_id
