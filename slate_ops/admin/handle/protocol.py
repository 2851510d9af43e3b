"""The operations of one database, whichever engine wrote it: what the CLI and the Dagster ops call
(docs/design/slatedb-engine.md, §6 capability table and §7 decisions). Report types are slate_ops'
own, so a JSON report or a launchpad config written for one engine works on the other. What an
engine cannot do raises :class:`~slate_ops.errors.UnsupportedOnEngineError` naming the operation
and what to do.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import pyarrow as pa

    from slate_ops.admin.db import DbDetail, DbStatus
    from slate_ops.admin.destroy import DestroyReport
    from slate_ops.admin.gc_health import GcHealth
    from slate_ops.admin.handle.state import CompactionPlan, DbState
    from slate_ops.admin.history import ManifestChange
    from slate_ops.admin.rescale import RescaleReport
    from slate_ops.admin.rollback import RollbackReport
    from slate_ops.admin.shape import LsmShape
    from slate_ops.admin.split_keys import SplitSuggestion
    from slate_ops.admin.tag_policy import TagPolicy, TagPolicyReport
    from slate_ops.admin.tags import Tag
    from slate_ops.admin.verify import CheckResult
    from slate_ops.compaction import CompactionReport, CompactorOptions, Executor
    from slate_ops.config import CheckpointCreateResult, CheckpointOptions
    from slate_ops.engines.detect import Engine
    from slate_ops.gc import GcOptions, GcReport
    from slate_ops.gc.checkpoints import CheckpointExpiryReport
    from slate_ops.manifest.model import Checkpoint
    from slate_ops.objstore.base import ObjectStore
    from slate_ops.objstore.metering import RequestCounts

__all__ = ["DatabaseHandle"]


@runtime_checkable
class DatabaseHandle(Protocol):
    """One database in one store; every method reads the store afresh (no cached state)."""

    @property
    def path(self) -> str: ...

    @property
    def store(self) -> ObjectStore: ...

    @property
    def engine(self) -> Engine: ...

    @property
    def last_requests(self) -> RequestCounts:
        """What this handle's latest maintenance operation cost in object-store requests and bytes
        (:mod:`slate_ops.admin.handle.metered`); reports that have a ``requests`` field carry the
        same. On SlateDB, only the requests made through slate_ops' store."""
        ...

    # --- state (asset metadata, checks, sensors) ---

    def describe(self) -> DbStatus:
        """The current manifest's summary."""
        ...

    def describe_detail(self) -> DbDetail:
        """The summary with checkpoints, tags and external databases listed."""
        ...

    def shape(self) -> LsmShape:
        """L0 and sorted runs with their sizes and key ranges."""
        ...

    def history(self, *, limit: int | None = None) -> list[ManifestChange]:
        """What each retained manifest version changed, newest first."""
        ...

    def verify(self, *, l0_threshold: int = 4, l0_max_ssts: int = 8) -> list[CheckResult]:
        """The asset checks' findings (one result per check)."""
        ...

    def state_since(self, known_id: int | None = None, *, probe: bool = False) -> DbState | None:
        """The current state as an asset records it (summary, LSM shape, checkpoint and tag names),
        or None when the latest manifest is still ``known_id`` (the manifest sensor's poll: one
        LIST then, nothing read; with ``probe``, one GET of manifest ``known_id + 1`` instead, which
        the caller may ask for only while ``known_id`` was confirmed the latest less than GC's
        ``min_age`` floor ago: :func:`slate_ops.admin.fleet.latest_manifest_since`)."""
        ...

    # --- checkpoints ---

    def list_checkpoints(self, name: str | None = None) -> list[Checkpoint]: ...

    def create_checkpoint(self, options: CheckpointOptions | None = None) -> CheckpointCreateResult: ...

    def refresh_checkpoint(
        self, checkpoint_id: uuid.UUID, lifetime: timedelta | None = None
    ) -> Checkpoint: ...

    def delete_checkpoint(self, checkpoint_id: uuid.UUID, *, dry_run: bool = True) -> Checkpoint: ...

    def expire_checkpoints(self, *, dry_run: bool = True) -> CheckpointExpiryReport:
        """Remove checkpoints whose lifetime has passed (never tags)."""
        ...

    # --- tags (named checkpoints without expiry, unique per database) ---

    def list_tags(self) -> pa.Table: ...

    def create_tag(self, name: str, *, checkpoint: uuid.UUID | None = None, replace: bool = False) -> Tag: ...

    def delete_tag(self, name: str, *, dry_run: bool = True) -> Tag: ...

    def apply_tag_policy(self, policy: TagPolicy, *, dry_run: bool = True) -> TagPolicyReport: ...

    def rollback_to_tag(self, name: str, *, dry_run: bool = True) -> RollbackReport:
        """Roll the database itself back (slate_ops only; SlateDB: restore to a new database)."""
        ...

    # --- clones and rescaling ---

    def clone_to(self, target_path: str, *, checkpoint: uuid.UUID | None = None) -> DbStatus:
        """Create ``target_path`` as a clone of this database (at ``checkpoint``, or now)."""
        ...

    def restore_to_new(
        self, target_path: str, *, checkpoint: uuid.UUID | None = None, tag: str | None = None
    ) -> DbStatus:
        """A new database holding this one's data at a checkpoint or tag (a clone)."""
        ...

    def split(
        self, split_keys: Sequence[bytes], target_paths: Sequence[str], *, flush_wal: bool = False
    ) -> RescaleReport:
        """Split into ``target_paths`` at ``split_keys``. ``flush_wal``: first move writes still only
        in the WAL into L0 by opening the database as its writer (FENCES a running writer); without
        it such a database is refused (a split carries no WAL)."""
        ...

    def flush_wal(self) -> None:
        """Move the writes still only in the WAL into L0: open the database as its writer (FENCES a
        running writer), flush, close (``slate-ops flush``; what :meth:`split`'s ``flush_wal`` does
        first)."""
        ...

    def suggest_split_keys(self, n: int, *, checkpoint: uuid.UUID | None = None) -> list[bytes]: ...

    def explain_split_keys(self, n: int, *, checkpoint: uuid.UUID | None = None) -> SplitSuggestion: ...

    # --- compaction ---

    def needs_compaction(self, options: CompactorOptions | None = None, *, full: bool = False) -> bool:
        """Whether :meth:`compact` would do anything now (the sensor's question)."""
        ...

    def plan_compaction(
        self, options: CompactorOptions | None = None, *, full: bool = False
    ) -> CompactionPlan | None:
        """What :meth:`compact` would pick now (a dry run's report); None: nothing to compact."""
        ...

    def compact(
        self,
        *,
        full: bool = False,
        executor: Executor | None = None,
        options: CompactorOptions | None = None,
    ) -> CompactionReport | None:
        """One compaction; None when there is nothing to compact."""
        ...

    # --- GC and destroy ---

    def gc_plan(self, options: GcOptions | None = None) -> GcReport:
        """What :meth:`run_gc` would delete: the dry-run report, writing nothing."""
        ...

    def run_gc(self, options: GcOptions | None = None, *, dry_run: bool = True) -> GcReport: ...

    def gc_health(self, options: GcOptions | None = None, *, intervals: int = 3) -> GcHealth:
        """Whether GC keeps up: fails when garbage has been eligible for longer than ``options``'
        interval x ``intervals``, or no GC advanced a boundary that long while garbage waits
        (:mod:`slate_ops.admin.gc_health`). Reads only (dry-run plans)."""
        ...

    def destroy(self, *, soft: bool = True, dry_run: bool = True) -> DestroyReport: ...
