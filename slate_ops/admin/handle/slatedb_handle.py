"""A SlateDB database behind the admin handle: :class:`SlateDbHandle` maps the SlateDB engine
(:class:`slate_ops.engines.slatedb.SlateDbAdmin`) onto slate_ops' report types (:class:`DbStatus`,
:class:`Checkpoint`, :class:`GcReport`, :class:`DestroyReport`, ...), so JSON shapes do not depend
on the engine. slate_ops' rules are kept on top of SlateDB's: reserved checkpoint names, tag and
final-checkpoint protection, refreshing an expired checkpoint refused, dry runs by default. A GC dry
run is slate_ops' plan (SlateDB's own dry run writes); a real run is SlateDB's ``run_gc_once`` with
the plan's policy, reported by what the listing shows deleted. What SlateDB cannot do raises
:class:`UnsupportedOnEngineError`.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pyarrow as pa

from slate_ops.admin.checkpoints import (
    require_creatable_name,
    require_deletable,
    require_refreshable,
)
from slate_ops.admin.db import DbDetail, DbStatus
from slate_ops.admin.destroy import DestroyReport
from slate_ops.admin.gc_health import GcHealth, assess_gc_health, health_options, slatedb_plan_at
from slate_ops.admin.handle import (
    slatedb_compaction,
    slatedb_rescale,
    slatedb_state,
    slatedb_tags,
    slatedb_verify,
)
from slate_ops.admin.handle.metered import metered
from slate_ops.admin.handle.state import (
    CompactionPlan,
    DbState,
    latest_manifest_id_since,
    state_from_reports,
)
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
from slate_ops.engines.slatedb import (
    DEFAULT_TIMEOUTS,
    CallTimeouts,
    CheckpointView,
    GcPolicy,
    ManifestView,
    SlateDbAdmin,
)
from slate_ops.errors import (
    DbNotFoundError,
    GcFailedError,
    InvalidDeletionError,
    UnsupportedOnEngineError,
)
from slate_ops.gc import GcOptions, GcReport
from slate_ops.gc.checkpoints import CheckpointExpiryReport
from slate_ops.gc.report import DeletedObject, ResourceReport
from slate_ops.layout import normalize_db_path
from slate_ops.manifest.checkpoints import checkpoint_not_found, expiry_time, live_checkpoint
from slate_ops.manifest.model import Checkpoint, Manifest
from slate_ops.objstore import LocalStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.metering import ZERO, RequestCounts
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime

__all__ = ["SlateDbHandle"]


# SlateDB's GC directories -> slate_ops' GC resource names (GcReport.resources).
_RESOURCE_OF = {
    "manifest": "manifest",
    "wal": "wal",
    "wal_fence": "wal",
    "compacted": "compacted",
    "compactions": "compactions",
}


# Measured on 0.17.0 (tests/admin/test_gc_health.py): once a boundary file exists, run_gc_once on
# a local directory fails (only logs) to advance it, so it never deletes manifests or .compactions
# files there again.
_LOCAL_BOUNDARY_NOTE = (
    "SlateDB 0.17's GC cannot advance an existing boundary file on a local directory (object_store's "
    "LocalFileSystem does not implement PutMode::Update): after its first run it no longer deletes "
    "manifests or .compactions files there",
)


class SlateDbHandle:
    """A SlateDB database, through :class:`slate_ops.engines.slatedb.SlateDbAdmin`, with
    slate_ops' report types and rules (module docstring)."""

    engine = Engine.SLATEDB
    compaction_timeout_s = slatedb_compaction.DEFAULT_TIMEOUT_S
    """How long :meth:`compact` waits for SlateDB's compactor to finish (per instance)."""

    def __init__(
        self,
        path: str,
        store: ObjectStore,
        *,
        clock: Runtime = SYSTEM_RUNTIME,
        timeouts: CallTimeouts = DEFAULT_TIMEOUTS,
    ) -> None:
        """``timeouts``: the longest each kind of binding call may take before
        :class:`~slate_ops.errors.SlateDbTimeoutError` (:class:`CallTimeouts`)."""
        self.path = normalize_db_path(path)
        self.store = store
        self.clock = clock
        self.db = SlateDbAdmin(self.path, store, timeouts=timeouts)
        self.last_requests: RequestCounts = ZERO
        """What the latest metered operation cost through slate_ops' store (the binding's own
        requests are not seen: :data:`~slate_ops.admin.handle.metered.BINDING_UNCOUNTED`)."""

    def on_store(self, store: ObjectStore) -> SlateDbHandle:
        """This handle with slate_ops' requests going through ``store``; the binding keeps its own
        client (:func:`~slate_ops.admin.handle.metered.metered`)."""
        scoped = copy.copy(self)
        scoped.store = store
        scoped.db = copy.copy(self.db)
        scoped.db.store = store
        return scoped

    @property
    def location(self) -> str:
        """The database as error messages name it."""
        return f"SlateDB database {self.path} in {self.store.url}"

    def current_manifest(self) -> ManifestView:
        """SlateDB's latest manifest (one read); DbNotFoundError when there is none."""
        m = self.db.read_manifest()
        if m is None:
            raise DbNotFoundError(f"no database at {self.path!r} in {self.store.url}: no manifest")
        return m

    # describe

    def describe(self) -> DbStatus:
        """SlateDB's manifest as :class:`DbStatus`. ``ssts`` counts SST objects (an SST seen through
        several views counts once), ``sst_bytes`` sums SlateDB's estimated sizes of those;
        ``destroyed_at_s`` is always None (SlateDB has no soft destroy)."""
        return self.status_of(self.current_manifest())

    def status_of(self, m: ManifestView) -> DbStatus:
        """:meth:`describe` of the manifest ``m`` (read already)."""
        now = self.clock.now()
        sizes = m.sst_sizes()
        return DbStatus(
            path=self.path,
            manifest_id=m.id,
            initialized=m.initialized,
            destroyed_at_s=None,
            writer_epoch=m.writer_epoch,
            compactor_epoch=m.compactor_epoch,
            l0_ssts=len(m.l0),
            sorted_runs=len(m.sorted_runs),
            ssts=len(sizes),
            sst_bytes=sum(sizes.values()),
            checkpoints=len(m.checkpoints),
            expired_checkpoints=sum(
                1 for c in m.checkpoints if c.expire_time_s is not None and c.expire_time_s <= now
            ),
            external_dbs=len(m.external_dbs),
        )

    def state_since(self, known_id: int | None = None, *, probe: bool = False) -> DbState | None:
        """None after one LIST (``probe``: one GET) when the latest manifest is still ``known_id``;
        else the state of one manifest read (4 requests on S3): its :meth:`describe`, :meth:`shape`
        and :meth:`list_checkpoints` (SlateDB's tags are named checkpoints with slate_ops' tag
        prefix)."""
        if latest_manifest_id_since(self.path, self.store, known_id, probe=probe) is None:
            return None
        m = self.current_manifest()
        return state_from_reports(
            self.status_of(m), slatedb_state.shape_of(m), [_checkpoint(c) for c in m.checkpoints]
        )

    # checkpoints

    def list_checkpoints(self, name: str | None = None) -> list[Checkpoint]:
        """The current manifest's checkpoints (expired ones included until GC removes them)."""
        return [_checkpoint(c) for c in self.current_manifest().checkpoints if name is None or c.name == name]

    def _find(self, checkpoint_id: uuid.UUID) -> Checkpoint:
        found = next((c for c in self.list_checkpoints() if c.id == checkpoint_id), None)
        if found is None:
            raise checkpoint_not_found(checkpoint_id, self.location)
        return found

    def live_checkpoint(self, checkpoint_id: uuid.UUID, now: float | None = None) -> Checkpoint:
        """The checkpoint, refusing a missing or an expired one as ours are
        (:func:`slate_ops.manifest.checkpoints.live_checkpoint`)."""
        listed = Manifest(checkpoints=tuple(self.list_checkpoints()))
        return live_checkpoint(listed, checkpoint_id, self.clock.now() if now is None else now, self.location)

    @metered
    def create_checkpoint(self, options: CheckpointOptions | None = None) -> CheckpointCreateResult:
        options = options or CheckpointOptions()
        require_creatable_name(options.name)
        lifetime_s = None
        if options.lifetime is not None:
            expiry_time(0, options.lifetime)  # refuses a non-positive or too long lifetime, as ours
            lifetime_s = options.lifetime.total_seconds()
        source = None
        if options.source is not None:
            source = str(self.live_checkpoint(options.source).id)
        cid, manifest_id = self.db.create_checkpoint(lifetime_s=lifetime_s, source=source, name=options.name)
        return CheckpointCreateResult(id=uuid.UUID(cid), manifest_id=manifest_id)

    @metered
    def refresh_checkpoint(self, checkpoint_id: uuid.UUID, lifetime: timedelta | None = None) -> Checkpoint:
        now = self.clock.now()
        expire_time_s = expiry_time(now, lifetime)
        checkpoint = self.live_checkpoint(checkpoint_id, now)
        require_refreshable(checkpoint, expire_time_s, self.location)
        self.db.refresh_checkpoint(str(checkpoint_id), None if lifetime is None else lifetime.total_seconds())
        return self._find(checkpoint_id)

    @metered
    def delete_checkpoint(self, checkpoint_id: uuid.UUID, *, dry_run: bool = True) -> Checkpoint:
        checkpoint = self._find(checkpoint_id)
        require_deletable(checkpoint, self.location)
        if not dry_run:
            self.db.delete_checkpoint(str(checkpoint_id))
        return checkpoint

    # GC

    def _policy(self, options: GcOptions) -> GcPolicy:
        def age(resource: str, value: timedelta) -> float | None:
            return value.total_seconds() if resource in options.resources else None

        return GcPolicy(
            manifest=age("manifest", options.manifest_min_age),
            wal=age("wal", options.wal_min_age),
            wal_fence=age("wal", options.wal_min_age) if options.delete_wal_fences else None,
            compacted=age("compacted", options.compacted_min_age),
            compactions=age("compactions", options.compactions_min_age),
        )

    @metered
    def gc_plan(self, options: GcOptions | None = None) -> GcReport:
        return self.run_gc(options, dry_run=True)

    @metered
    def run_gc(self, options: GcOptions | None = None, *, dry_run: bool = True) -> GcReport:
        """One GC run as a :class:`GcReport`: the dry run is the plan (what SlateDB's collector
        would delete now, and the checkpoints it would first remove as expired), the real run is
        ``run_gc_once`` with the plan's policy, reporting what the listing shows it deleted.

        Not run on SlateDB databases: clone detaching (``clones``) and a soft-destroyed database's
        deletion (``database``) -- noted in ``notes`` when asked for. SlateDB always removes expired
        checkpoints before each task. Raises :class:`GcFailedError` with the report when the run
        left planned objects in place.
        """
        options = options or GcOptions()
        started = self.clock.monotonic()
        plan = self.db.gc_plan(self._policy(options))
        notes = list(plan.notes)
        if "clones" in options.resources:
            notes.append(
                "clone detaching is not run on SlateDB databases yet (docs/design/slatedb-engine.md)"
            )
        if "checkpoints" not in options.resources and plan.expired_checkpoints:
            notes.append("SlateDB removes expired checkpoints before every GC task; it cannot be turned off")
        planned = {d.key: d for d in plan.deletions}
        deleted_keys: set[str] = set(planned)
        errors: list[str] = []
        if not dry_run:
            run = self.db.run_gc(plan)
            deleted_keys = set(run.deleted)
            errors += [f"{k}: planned but not deleted" for k in run.not_deleted]
            notes += [f"{k}: deleted by SlateDB but not in the plan" for k in run.unplanned]
        listed = dict(plan.listed)
        by_resource: dict[str, list[DeletedObject]] = {}
        for key in sorted(deleted_keys):
            d = planned.get(key)
            directory = d.directory if d is not None else key[len(self.path) + 1 :].split("/", 1)[0]
            when = datetime.fromtimestamp((d.last_modified_ms if d else plan.now_ms) / 1000, tz=UTC)
            by_resource.setdefault(_RESOURCE_OF.get(directory, directory), []).append(
                DeletedObject(key, d.size if d else 0, when)
            )
        resources = tuple(
            ResourceReport.build(
                resource,
                by_resource.get(resource, []),
                listed=sum(n for directory, n in listed.items() if _RESOURCE_OF[directory] == resource),
            )
            for resource in ("manifest", "wal", "compacted", "compactions")
            if resource in options.resources or by_resource.get(resource)
        )
        report = GcReport(
            path=self.path,
            dry_run=dry_run,
            started_at=datetime.fromtimestamp(plan.now_ms / 1000, tz=UTC),
            duration_s=self.clock.monotonic() - started,
            manifest_id=plan.manifest_id,
            resources=resources,
            checkpoints_expired=tuple(_checkpoint(c) for c in plan.expired_checkpoint_views),
            notes=tuple(notes),
            errors=tuple(errors),
        )
        if errors:
            raise GcFailedError(f"GC of {self.location} failed: {'; '.join(errors)}", report)
        return report

    def gc_health(self, options: GcOptions | None = None, *, intervals: int = 3) -> GcHealth:
        """:mod:`slate_ops.admin.gc_health` with slate_ops' plan of ``run_gc_once`` as the GC's
        rules; SlateDB writes the same ``gc/*.boundary`` files as ours (measured on 0.17.0)."""
        options = health_options(options)
        # A boundary at or above the latest id: the binding's manifest reads never return (measured),
        # so nothing is planned and the check fails on that.
        boundaries = slatedb_verify.check_boundaries(self.store, self.path)
        return assess_gc_health(
            self.path,
            self.engine.value,
            self.store,
            now=self.clock.now(),
            gc_interval_s=options.interval.total_seconds(),
            intervals=intervals,
            plan_at=(
                slatedb_plan_at(self.db, self._policy(options), _RESOURCE_OF)
                if boundaries.passed
                else lambda _: []
            ),
            notes=_LOCAL_BOUNDARY_NOTE if isinstance(self.store, LocalStore) else (),
            problems=boundaries.problems,
        )

    # destroy

    @metered
    def destroy(self, *, soft: bool = True, dry_run: bool = True) -> DestroyReport:
        """A hard destroy through SlateDB's ``delete_db`` (``soft=False``): the dry run lists every
        object it would delete and changes nothing; the real run releases the checkpoints it pinned
        in parents and deletes everything. Refused, as ours, while unexpired checkpoints exist
        (:class:`InvalidDeletionError`; a clone's final checkpoint, a reader's, a writer's
        compactor's): SlateDB's ``delete_db`` does not check them. SlateDB has no soft destroy:
        :class:`UnsupportedOnEngineError`."""
        if soft:
            raise UnsupportedOnEngineError(
                self.path,
                Engine.SLATEDB.value,
                "a soft destroy",
                "SlateDB has no tombstone manifest; use a hard destroy (soft=False, `destroy --hard`)",
            )
        m = self.current_manifest()
        now = self.clock.now()
        active = [c for c in m.checkpoints if c.expire_time_s is None or c.expire_time_s > now]
        if active:  # slate_ops' rule for a hard destroy (admin.destroy), kept on SlateDB too
            listed = ", ".join(c.id + (f" ({c.name})" if c.name else "") for c in active)
            raise InvalidDeletionError(
                f"cannot hard-destroy {self.location}: {len(active)} unexpired checkpoint(s) still "
                f"need its data: {listed}. Close writers and readers, destroy its clones, delete or let "
                "the checkpoints expire. Nothing was deleted."
            )
        released = tuple(
            (e.path, uuid.UUID(e.final_checkpoint_id)) for e in m.external_dbs if e.final_checkpoint_id
        )
        deleted = self.db.delete_db(confirm=not dry_run)
        return DestroyReport(
            path=self.path,
            soft=False,
            dry_run=dry_run,
            destroyed_at_s=None if dry_run else int(self.clock.now()),
            deleted=tuple(deleted),
            released_parent_checkpoints=released,
        )

    # --- not yet on SlateDB (issue 21 in progress): each raises UnsupportedOnEngineError ---

    def _not_yet(self, operation: str) -> UnsupportedOnEngineError:
        return UnsupportedOnEngineError(
            self.path, Engine.SLATEDB.value, operation, "not available on SlateDB databases yet"
        )

    def describe_detail(self) -> DbDetail:
        """:meth:`describe` with views and own/external SST objects told apart (slatedb_state)."""
        return slatedb_state.detail(self)

    def shape(self) -> LsmShape:
        """L0 and sorted runs from SlateDB's manifest (``num_entries`` 0: not in its manifest)."""
        return slatedb_state.shape(self)

    def history(self, *, limit: int | None = None) -> list[ManifestChange]:
        """What each manifest version SlateDB's GC kept changed, newest first (slatedb_state)."""
        return slatedb_state.history(self, limit)

    @metered
    def verify(self, *, l0_threshold: int = 4, l0_max_ssts: int = 8) -> list[CheckResult]:
        """Our six checks (same names) from SlateDB's manifest and objects (slatedb_verify)."""
        return slatedb_verify.verify(
            self.db,
            self.current_manifest,
            now=self.clock.now(),
            l0_threshold=l0_threshold,
            l0_max_ssts=l0_max_ssts,
        )

    # expiry and tags (slatedb_tags: tags are ``tag:`` checkpoints slate_ops keeps unique)

    @metered
    def expire_checkpoints(self, *, dry_run: bool = True) -> CheckpointExpiryReport:
        return slatedb_tags.expire_checkpoints(self, dry_run=dry_run)

    def list_tags(self) -> pa.Table:
        return slatedb_tags.list_tags(self)

    @metered
    def create_tag(self, name: str, *, checkpoint: uuid.UUID | None = None, replace: bool = False) -> Tag:
        return slatedb_tags.create_tag(self, name, checkpoint=checkpoint, replace=replace)

    @metered
    def delete_tag(self, name: str, *, dry_run: bool = True) -> Tag:
        return slatedb_tags.delete_tag(self, name, dry_run=dry_run)

    @metered
    def apply_tag_policy(self, policy: TagPolicy, *, dry_run: bool = True) -> TagPolicyReport:
        return slatedb_tags.apply_tag_policy(self, policy, dry_run=dry_run)

    def rollback_to_tag(self, name: str, *, dry_run: bool = True) -> RollbackReport:
        """Refused: SlateDB has no API to rewrite a database's manifest to an older state."""
        raise UnsupportedOnEngineError(
            self.path,
            Engine.SLATEDB.value,
            "a rollback in place",
            f"SlateDB cannot roll a database back in place; restore tag {name!r} to a new database "
            "with restore_to_new(target, tag=...) (`slate-ops restore --tag NAME --into NEW`) and switch "
            "to it",
        )

    # clones and rescaling (slatedb_rescale: SlateDB clones after slate_ops' checks)

    @metered
    def clone_to(self, target_path: str, *, checkpoint: uuid.UUID | None = None) -> DbStatus:
        return slatedb_rescale.clone_to(self, target_path, checkpoint)

    @metered
    def restore_to_new(
        self, target_path: str, *, checkpoint: uuid.UUID | None = None, tag: str | None = None
    ) -> DbStatus:
        return slatedb_rescale.restore_to_new(self, target_path, checkpoint, tag)

    @metered
    def split(
        self, split_keys: Sequence[bytes], target_paths: Sequence[str], *, flush_wal: bool = False
    ) -> RescaleReport:
        """Projection clones at one checkpoint. ``flush_wal``: first empty the WAL replay range by
        opening the database as its writer (FENCES a running writer: stop it first)."""
        return slatedb_rescale.split(self, split_keys, target_paths, flush_wal)

    @metered
    def merge_with(
        self, other_paths: Sequence[str], target_path: str, *, flush_wal: bool = False
    ) -> RescaleReport:
        """Merge this database and ``other_paths`` into ``target_path`` (a union clone);
        ``flush_wal`` as for :meth:`split`."""
        return slatedb_rescale.merge_with(self, other_paths, target_path, flush_wal)

    @metered
    def flush_wal(self) -> None:
        """Empty the WAL replay range so that a split or merge is accepted: open the database as
        its writer, flush, close, twice (:func:`~slate_ops.engines.slatedb.clones.flush_wal_to_l0`;
        FENCES a running writer: stop it first)."""
        slatedb_rescale.flush_wal(self)

    def suggest_split_keys(self, n: int, *, checkpoint: uuid.UUID | None = None) -> list[bytes]:
        return slatedb_rescale.suggest_split_keys(self, n, checkpoint)

    def explain_split_keys(self, n: int, *, checkpoint: uuid.UUID | None = None) -> SplitSuggestion:
        """Split keys at SST boundaries of the manifest's views (their first keys and sizes)."""
        return slatedb_rescale.explain_split_keys(self, n, checkpoint)

    def plan_compaction(
        self, options: CompactorOptions | None = None, *, full: bool = False
    ) -> CompactionPlan | None:
        """What :meth:`compact` would submit (``slatedb_compaction.pick``, one manifest read): its L0
        views' and sorted runs' SSTs and their sizes as SlateDB's manifest records them."""
        m = self.current_manifest()
        chosen = slatedb_compaction.pick(m, options or CompactorOptions(), full=full)
        if chosen is None:
            return None
        views = {v.view_id: v for v in m.l0}
        picked = [views[i] for i in chosen.l0_view_ids]
        picked += [v for r in m.sorted_runs if r.id in chosen.sorted_runs for v in r.ssts]
        return CompactionPlan(
            kind=chosen.kind,
            manifest_id=m.id,
            sources=len(chosen.l0_view_ids) + len(chosen.sorted_runs),
            input_ssts=tuple(v.sst_id for v in picked),
            bytes_to_read=sum(v.size for v in picked),
        )

    # compaction (slatedb_compaction: submitted to SlateDB's compactor, followed, reported)

    def needs_compaction(self, options: CompactorOptions | None = None, *, full: bool = False) -> bool:
        """Our trigger on SlateDB's manifest: L0 at ``options.min_sources``; ``full``: anything to merge."""
        return (
            slatedb_compaction.pick(self.current_manifest(), options or CompactorOptions(), full=full)
            is not None
        )

    @metered
    def compact(
        self,
        *,
        full: bool = False,
        executor: Executor | None = None,
        options: CompactorOptions | None = None,
    ) -> CompactionReport | None:
        """A compaction by SlateDB's compactor, which must be running (a writer's embedded one or a
        standalone one): :class:`NoCompactorError` when none picks it up in time. ``executor`` does
        not apply (noted in the report)."""
        return slatedb_compaction.compact(
            self.db, full=full, executor=executor, options=options, timeout_s=self.compaction_timeout_s
        )


def _checkpoint(c: CheckpointView) -> Checkpoint:
    """A SlateDB checkpoint as slate_ops' :class:`Checkpoint`."""
    return Checkpoint(
        id=uuid.UUID(c.id),
        manifest_id=c.manifest_id,
        create_time_s=c.create_time_s,
        expire_time_s=c.expire_time_s,
        name=c.name,
    )
