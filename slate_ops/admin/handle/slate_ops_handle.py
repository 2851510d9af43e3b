"""A slate_ops database behind the admin handle: every method is today's admin function with the
same arguments (no behaviour change)."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Sequence
from datetime import timedelta

import pyarrow as pa

from slate_ops.admin.checkpoints import (
    create_checkpoint,
    delete_checkpoint,
    list_checkpoints,
    refresh_checkpoint,
)
from slate_ops.admin.clone import create_clone
from slate_ops.admin.collect import run_gc
from slate_ops.admin.compact import compact
from slate_ops.admin.db import DbDetail, DbStatus, describe_db, describe_db_detail
from slate_ops.admin.destroy import DestroyReport, destroy
from slate_ops.admin.fleet import latest_manifest_since
from slate_ops.admin.gc_health import GcHealth, assess_gc_health, health_options, slate_ops_plan_at
from slate_ops.admin.handle.metered import metered
from slate_ops.admin.handle.state import CompactionPlan, DbState, plan_of_manifest, state_of_manifest
from slate_ops.admin.history import ManifestChange, manifest_history
from slate_ops.admin.rescale import RescaleReport, split
from slate_ops.admin.rollback import RollbackReport, rollback_to_tag
from slate_ops.admin.shape import LsmShape, lsm_shape
from slate_ops.admin.split_keys import SplitSuggestion, explain_split_keys, suggest_split_keys
from slate_ops.admin.tag_policy import TagPolicy, TagPolicyReport, apply_tag_policy
from slate_ops.admin.tags import TAG_PREFIX, Tag, create_tag, delete_tag, list_tags
from slate_ops.admin.verify import CheckResult, verify_db
from slate_ops.compaction import CompactionReport, CompactorOptions, Executor, propose
from slate_ops.config import CheckpointCreateResult, CheckpointOptions
from slate_ops.engine import Db
from slate_ops.engines.detect import Engine
from slate_ops.errors import TagNotFoundError
from slate_ops.gc import GcOptions, GcReport
from slate_ops.gc.checkpoints import CheckpointExpiryReport, expire_checkpoints
from slate_ops.layout import normalize_db_path
from slate_ops.manifest.model import Checkpoint
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.metering import ZERO, RequestCounts
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime

__all__ = ["SlateOpsHandle"]


class SlateOpsHandle:
    """A slate_ops database (:class:`~slate_ops.admin.handle.protocol.DatabaseHandle`)."""

    engine = Engine.SLATE_OPS

    def __init__(self, path: str, store: ObjectStore, *, clock: Runtime = SYSTEM_RUNTIME) -> None:
        self.path = normalize_db_path(path)
        self.store = store
        self.clock = clock
        self.last_requests: RequestCounts = ZERO
        """What the latest metered operation cost (its report's ``requests``, where it has one)."""

    def on_store(self, store: ObjectStore) -> SlateOpsHandle:
        """This handle working on ``store`` (:func:`~slate_ops.admin.handle.metered.metered`)."""
        scoped = copy.copy(self)
        scoped.store = store
        return scoped

    # state

    def describe(self) -> DbStatus:
        return describe_db(self.path, self.store, clock=self.clock)

    def describe_detail(self) -> DbDetail:
        return describe_db_detail(self.path, self.store, clock=self.clock)

    def shape(self) -> LsmShape:
        return lsm_shape(self.path, self.store)

    def history(self, *, limit: int | None = None) -> list[ManifestChange]:
        return manifest_history(self.path, self.store, limit=limit)

    @metered
    def verify(self, *, l0_threshold: int = 4, l0_max_ssts: int = 8) -> list[CheckResult]:
        return verify_db(
            self.path, self.store, l0_threshold=l0_threshold, l0_max_ssts=l0_max_ssts, clock=self.clock
        )

    def state_since(self, known_id: int | None = None, *, probe: bool = False) -> DbState | None:
        # One LIST (or with probe one GET) when unchanged; else one GET more, and everything from
        # that one manifest.
        current = latest_manifest_since(self.path, self.store, known_id, probe=probe)
        return None if current is None else state_of_manifest(self.path, current, self.clock.now())

    # checkpoints

    def list_checkpoints(self, name: str | None = None) -> list[Checkpoint]:
        return list_checkpoints(self.path, self.store, name)

    @metered
    def create_checkpoint(self, options: CheckpointOptions | None = None) -> CheckpointCreateResult:
        return create_checkpoint(self.path, self.store, options, clock=self.clock)

    @metered
    def refresh_checkpoint(self, checkpoint_id: uuid.UUID, lifetime: timedelta | None = None) -> Checkpoint:
        return refresh_checkpoint(self.path, self.store, checkpoint_id, lifetime, clock=self.clock)

    @metered
    def delete_checkpoint(self, checkpoint_id: uuid.UUID, *, dry_run: bool = True) -> Checkpoint:
        return delete_checkpoint(self.path, self.store, checkpoint_id, dry_run=dry_run)

    @metered
    def expire_checkpoints(self, *, dry_run: bool = True) -> CheckpointExpiryReport:
        return expire_checkpoints(self.path, self.store, dry_run=dry_run, clock=self.clock)

    # tags

    def list_tags(self) -> pa.Table:
        return list_tags(self.path, self.store)

    @metered
    def create_tag(self, name: str, *, checkpoint: uuid.UUID | None = None, replace: bool = False) -> Tag:
        return create_tag(
            self.path, self.store, name, checkpoint=checkpoint, replace=replace, clock=self.clock
        )

    @metered
    def delete_tag(self, name: str, *, dry_run: bool = True) -> Tag:
        return delete_tag(self.path, self.store, name, dry_run=dry_run)

    @metered
    def apply_tag_policy(self, policy: TagPolicy, *, dry_run: bool = True) -> TagPolicyReport:
        return apply_tag_policy(self.path, self.store, policy, dry_run=dry_run, clock=self.clock)

    @metered
    def rollback_to_tag(self, name: str, *, dry_run: bool = True) -> RollbackReport:
        return rollback_to_tag(self.path, self.store, name, dry_run=dry_run, clock=self.clock)

    # clones and rescaling

    @metered
    def clone_to(self, target_path: str, *, checkpoint: uuid.UUID | None = None) -> DbStatus:
        create_clone(target_path, self.path, self.store, checkpoint, clock=self.clock)
        return describe_db(target_path, self.store, clock=self.clock)

    @metered
    def restore_to_new(
        self, target_path: str, *, checkpoint: uuid.UUID | None = None, tag: str | None = None
    ) -> DbStatus:
        if tag is not None:
            found = list_checkpoints(self.path, self.store, TAG_PREFIX + tag)
            if not found:
                raise TagNotFoundError(
                    f"no tag {tag!r} in database {self.path} in {self.store.url}; "
                    "list them with `slate-ops list-tags`"
                )
            checkpoint = found[0].id
        return self.clone_to(target_path, checkpoint=checkpoint)

    @metered
    def split(
        self, split_keys: Sequence[bytes], target_paths: Sequence[str], *, flush_wal: bool = False
    ) -> RescaleReport:
        if flush_wal:
            self.flush_wal()
        return split(self.path, self.store, split_keys, target_paths, clock=self.clock)

    @metered
    def flush_wal(self) -> None:
        """Move writes still only in the WAL into L0: open the database as its writer (fencing a
        running one), flush its memtable, close (``slate-ops flush``; split's and merge's
        ``flush_wal``). A missing database raises :class:`DbNotFoundError` and creates nothing."""
        ManifestStore(self.store, self.path).read_latest_required()
        with Db.open(self.path, self.store, clock=self.clock) as db:
            db.flush_memtable()

    def suggest_split_keys(self, n: int, *, checkpoint: uuid.UUID | None = None) -> list[bytes]:
        return suggest_split_keys(self.path, self.store, n, checkpoint=checkpoint, clock=self.clock)

    def explain_split_keys(self, n: int, *, checkpoint: uuid.UUID | None = None) -> SplitSuggestion:
        return explain_split_keys(self.path, self.store, n, checkpoint=checkpoint, clock=self.clock)

    # compaction

    def needs_compaction(self, options: CompactorOptions | None = None, *, full: bool = False) -> bool:
        current = ManifestStore(self.store, self.path).read_latest_required()
        return propose(current.value, options or CompactorOptions(), full=full) is not None

    def plan_compaction(
        self, options: CompactorOptions | None = None, *, full: bool = False
    ) -> CompactionPlan | None:
        current = ManifestStore(self.store, self.path).read_latest_required()
        return plan_of_manifest(current, options or CompactorOptions(), full=full)

    @metered
    def compact(
        self,
        *,
        full: bool = False,
        executor: Executor | None = None,
        options: CompactorOptions | None = None,
    ) -> CompactionReport | None:
        return compact(self.path, self.store, full=full, executor=executor, options=options, clock=self.clock)

    # GC and destroy

    @metered
    def gc_plan(self, options: GcOptions | None = None) -> GcReport:
        return run_gc(self.path, self.store, options, dry_run=True, clock=self.clock)

    @metered
    def run_gc(self, options: GcOptions | None = None, *, dry_run: bool = True) -> GcReport:
        return run_gc(self.path, self.store, options, dry_run=dry_run, clock=self.clock)

    def gc_health(self, options: GcOptions | None = None, *, intervals: int = 3) -> GcHealth:
        options = health_options(options)
        return assess_gc_health(
            self.path,
            self.engine.value,
            self.store,
            now=self.clock.now(),
            gc_interval_s=options.interval.total_seconds(),
            intervals=intervals,
            plan_at=slate_ops_plan_at(self.path, self.store, options),
        )

    @metered
    def destroy(self, *, soft: bool = True, dry_run: bool = True) -> DestroyReport:
        return destroy(self.path, self.store, soft=soft, dry_run=dry_run, clock=self.clock)
