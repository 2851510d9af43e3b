"""One SlateDB database through the binding's ``Admin``, with sync methods (:class:`SlateDbAdmin`):
checkpoints, manifests, a GC plan computed the way SlateDB's collector decides and a run that
executes it, compaction requests followed to a terminal state, ``delete_db`` and clones
(projection = a split shard, union = a merge). docs/design/slatedb-engine.md has the mapping.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from slate_ops.engines.slatedb.gc_plan import (
    GcPlan,
    GcPlanning,
    GcPolicy,
    ListedObject,
    live_checkpoints,
)
from slate_ops.engines.slatedb.loop import DEFAULT_TIMEOUTS, LOOP, CallKind, CallTimeouts, LoopOwner, binding
from slate_ops.engines.slatedb.store import binding_path, binding_store, store_prefix
from slate_ops.engines.slatedb.views import (
    CheckpointView,
    ManifestView,
    _checkpoint,
    _manifest_view,
)
from slate_ops.errors import ObjectStoreError, SlateDbError, SlateDbTimeoutError
from slate_ops.layout import (
    COMPACTED_DIR,
    COMPACTIONS_DIR,
    MANIFEST_DIR,
    MANIFEST_SUFFIX,
    WAL_DIR,
    boundary_key,
    own_directory,
    parse_compactions_key,
    parse_own_manifest_key,
    parse_sst_key,
    parse_wal_key,
)
from slate_ops.objstore import LocalStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import SYSTEM_RUNTIME

T = TypeVar("T")
K = TypeVar("K")

DIRECTORIES = ("manifest", "wal", "wal_fence", "compacted", "compactions")


@dataclass(frozen=True)
class GcRunReport:
    plan: GcPlan
    deleted: tuple[str, ...]  # listed before the run, gone after
    created: tuple[str, ...]  # listed after, not before (a manifest for expired checkpoints, boundary files)
    unplanned: tuple[str, ...] = field(default=())  # deleted but not in the plan
    not_deleted: tuple[str, ...] = field(default=())  # planned but still there

    @property
    def matches_plan(self) -> bool:
        return not self.unplanned and not self.not_deleted


@dataclass(frozen=True)
class CompactionOutcome:
    """What :meth:`SlateDbHandle.request_compaction` saw: the compaction id, its last status
    (SUBMITTED, SCHEDULED, RUNNING, COMPACTED, COMPLETED, FAILED, or NOTHING_TO_DO), whether any
    compactor picked it up, how many sources it named and how long it was followed."""

    compaction_id: str | None
    status: str
    picked_up: bool
    sources: int
    seconds: float


@dataclass(frozen=True)
class CompactionView:
    """One compaction as SlateDB records it in ``compactions/``: its ULID id, status (SUBMITTED,
    SCHEDULED, RUNNING, COMPACTED, COMPLETED, FAILED), whether SlateDB counts it active, bytes
    processed, its output SSTs ``(sst id, estimated size)``, its sources (``l0:<view id>``,
    ``sr:<run id>``: slate_ops' naming) and destination sorted run."""

    id: str
    status: str
    active: bool
    bytes_processed: int
    output_ssts: tuple[tuple[str, int], ...]
    sources: tuple[str, ...]
    destination: int | None

    @property
    def terminal(self) -> bool:
        return self.status in ("COMPLETED", "FAILED")


def _compaction_view(c: Any) -> CompactionView:
    spec = c.spec
    sources: list[str] = []
    destination = None
    if spec.is_TIERED():
        destination = int(spec.destination)
        for src in spec.sources:
            sources.append(f"l0:{src[0]}" if src.is_SST_VIEW() else f"sr:{src[0]}")
    return CompactionView(
        id=c.id,
        status=c.status.name,
        active=bool(c.active),
        bytes_processed=int(c.bytes_processed),
        output_ssts=tuple((h.id.value, int(h.estimated_size_bytes)) for h in c.output_ssts),
        sources=tuple(sources),
        destination=destination,
    )


# --- clones -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CloneSource:
    """One source of a clone: a database path, optionally at a checkpoint, optionally projected
    to ``[start, end)`` (None bounds are open)."""

    path: str
    checkpoint: str | None = None
    start: bytes | None = None
    end: bytes | None = None

    def binding_spec(self, sdb: Any, prefix: str = "") -> Any:
        """The binding's ``CloneSourceSpec`` of this source, its path under the store's ``prefix``."""
        rng = None
        if self.start is not None or self.end is not None:
            rng = sdb.KeyRange(start=self.start, start_inclusive=True, end=self.end, end_inclusive=False)
        path = f"{prefix}/{self.path.strip('/')}" if prefix else self.path  # the store's prefix
        return sdb.CloneSourceSpec(path=path, checkpoint=self.checkpoint, projection_range=rng)


class SlateDbAdmin:
    """One SlateDB database at ``db_path`` in ``store``, with sync methods.

    ``store`` is a slate_ops :class:`~slate_ops.objstore.base.ObjectStore` (or a local directory,
    for a :class:`~slate_ops.objstore.LocalStore` on it): slate_ops lists through it (the GC plan),
    the binding gets the same location through :func:`binding_store`. Every method runs the
    binding on :data:`LOOP`; binding errors become :class:`SlateDbError` naming the database and
    the operation. No call waits longer than its kind's bound in ``timeouts``
    (:class:`~slate_ops.engines.slatedb.loop.CallTimeouts`: 60 s for metadata, 900 s for a GC run,
    ``delete_db`` or a clone); past it the call is cancelled and
    :class:`~slate_ops.errors.SlateDbTimeoutError` raised. On S3 a bucket that does not exist is
    refused here, before the binding is called (:func:`binding_store`).
    """

    def __init__(
        self,
        db_path: str,
        store: ObjectStore | str | Path,
        loop: LoopOwner = LOOP,
        *,
        timeouts: CallTimeouts = DEFAULT_TIMEOUTS,
    ) -> None:
        self.db_path = db_path.strip("/")
        self.store: ObjectStore = LocalStore(store) if isinstance(store, (str, Path)) else store
        self._loop = loop
        self.timeouts = timeouts
        self._store = binding_store(self.store)
        self._prefix = store_prefix(self.store)  # an S3 store's prefix: the binding's paths carry it
        self.binding_path = binding_path(self.store, self.db_path)
        self._admin = binding().AdminBuilder(self.binding_path, self._store).build()

    @property
    def binding_admin(self) -> Any:
        """The binding's ``Admin`` of this database, for calls this class does not wrap."""
        return self._admin

    @property
    def object_store(self) -> Any:
        """The binding's ObjectStore for :attr:`root` (to open a ``Db`` or ``DbReader`` on it)."""
        return self._store

    def _run(self, operation: str, coro: Coroutine[Any, Any, T], kind: CallKind = "metadata") -> T:
        """``coro`` on the loop, bounded by ``self.timeouts`` for ``kind``
        (:meth:`LoopOwner.call`). When a metadata call times out, the GC boundary is looked at
        (one LIST, one GET) so the error names it when it is the cause."""
        try:
            return self._loop.call(self.db_path, operation, coro, self.timeouts.of(kind))
        except SlateDbTimeoutError as e:
            found = self._boundary_at_or_above_latest() if kind == "metadata" else None
            if found is None:
                raise
            raise SlateDbTimeoutError(self.db_path, operation, e.timeout_s, found) from e

    def _boundary_at_or_above_latest(self) -> str | None:
        """Why a metadata call hangs, when it is the known cause: ``gc/manifest.boundary`` at or
        above the latest manifest id (measured on 0.17.0: the binding's manifest reads then never
        return). None when it is not, or cannot be told."""
        try:
            raw = self.store.get(boundary_key(self.db_path, MANIFEST_SUFFIX)).data
            boundary = int(raw.decode("ascii").strip())
            ids = [i for i, _ in self._list_parsed(MANIFEST_DIR, parse_own_manifest_key)]
        except (ObjectStoreError, UnicodeDecodeError, ValueError):  # not found, unreadable
            return None
        if not ids or boundary < max(ids):
            return None
        return (
            f"Cause: {boundary_key(self.db_path, MANIFEST_SUFFIX)} is {boundary}, at or above the latest "
            f"manifest id {max(ids)}; SlateDB's binding does not return from reading the manifest "
            "then. A GC may already have deleted the current manifest: run `slate-ops verify` on "
            "the database (boundaries_below_latest), and restore it from a backup or checkpoint, "
            "or set the boundary below the latest id if the manifests are intact"
        )

    # checkpoints

    def list_checkpoints(self, name: str | None = None) -> list[CheckpointView]:
        return [_checkpoint(c) for c in self._run("list_checkpoints", self._admin.list_checkpoints(name))]

    def create_checkpoint(
        self, lifetime_s: float | None = None, source: str | None = None, name: str | None = None
    ) -> tuple[str, int]:
        """A detached checkpoint: ``(id, manifest_id)``."""
        sdb = binding()
        opts = sdb.CheckpointOptions(
            lifetime_ms=None if lifetime_s is None else int(lifetime_s * 1000), source=source, name=name
        )
        r = self._run("create_checkpoint", self._admin.create_detached_checkpoint(opts))
        return r.id, r.manifest_id

    def refresh_checkpoint(self, checkpoint_id: str, lifetime_s: float | None) -> None:
        ms = None if lifetime_s is None else int(lifetime_s * 1000)
        self._run("refresh_checkpoint", self._admin.refresh_checkpoint(checkpoint_id, ms))

    def delete_checkpoint(self, checkpoint_id: str) -> None:
        self._run("delete_checkpoint", self._admin.delete_checkpoint(checkpoint_id))

    # manifests

    def read_manifest(self, manifest_id: int | None = None) -> ManifestView | None:
        m = self._run("read_manifest", self._admin.read_manifest(manifest_id))
        return None if m is None else self._view(m)

    def list_manifests(self, start: int | None = None, end: int | None = None) -> list[ManifestView]:
        return [self._view(m) for m in self._run("list_manifests", self._admin.list_manifests(start, end))]

    def _view(self, m: Any) -> ManifestView:
        """The manifest's view, an external database's path relative to :attr:`store` (the binding
        records it with an S3 store's prefix)."""
        view = _manifest_view(m)
        if not self._prefix or not view.external_dbs:
            return view
        cut = len(self._prefix) + 1
        externals = tuple(
            dataclasses.replace(e, path=e.path[cut:]) if e.path.startswith(self._prefix + "/") else e
            for e in view.external_dbs
        )
        return dataclasses.replace(view, external_dbs=externals)

    # listing (the GC plan's input)

    def _list(self, directory: str) -> list[ListedObject]:
        """The objects directly in ``<db>/<directory>/``, in key order (one LIST)."""
        prefix = own_directory(self.db_path, directory)
        return [
            ListedObject(m.key, m.size, int(m.last_modified.timestamp() * 1000))
            for m in self.store.list(prefix)
            if "/" not in m.key[len(prefix) :]
        ]

    def _list_parsed(
        self, directory: str, parse: Callable[[str, str], K | None]
    ) -> list[tuple[K, ListedObject]]:
        """``(id, object)`` of the objects of ``<db>/<directory>/`` that ``parse`` (a parser of
        :mod:`slate_ops.layout`) takes for this database's own, in key order; others are skipped."""
        parsed = ((parse(self.db_path, o.key), o) for o in self._list(directory))
        return [(object_id, o) for object_id, o in parsed if object_id is not None]

    def list_objects(self) -> dict[str, int]:
        """Every object under the database's path: key -> size."""
        return {m.key: m.size for m in self.store.list(f"{self.db_path}/")}

    # GC

    def gc_plan(self, policy: GcPolicy = GcPolicy(), now_ms: int | None = None) -> GcPlan:  # noqa: B008 (frozen)
        """The objects one ``run_gc_once`` with ``policy`` would delete at ``now_ms``, decided as
        SlateDB 0.17's collector decides (:class:`~slate_ops.engines.slatedb.gc_plan.GcPlanning`:
        one step per directory, each with its rule). This reads: the latest manifest and the ones live
        checkpoints pin, then, for each directory the policy collects, its listing (and for compacted
        SSTs the ``.compactions`` state first)."""
        now = int(SYSTEM_RUNTIME.now() * 1000) if now_ms is None else now_ms  # SlateDB's GC: real time
        latest = self.read_manifest()
        if latest is None:
            raise SlateDbError(self.db_path, "gc_plan", FileNotFoundError("no manifest"))
        planning = GcPlanning(self.db_path, policy, now, latest, self._referenced_manifests(latest, now))
        if policy.manifest is not None:
            planning.manifests(self._list_parsed(MANIFEST_DIR, parse_own_manifest_key), policy.manifest)
        if policy.wal is not None or policy.wal_fence is not None:
            planning.wal(self._list_parsed(WAL_DIR, parse_wal_key))
        if policy.compacted is not None:
            cutoff = planning.compacted_cutoff(self._recent_compaction_ids(), policy.compacted)
            planning.compacted(self._list_parsed(COMPACTED_DIR, parse_sst_key), cutoff)
        if policy.compactions is not None:
            planning.compactions(
                self._list_parsed(COMPACTIONS_DIR, parse_compactions_key), policy.compactions
            )
        return planning.plan()

    def _referenced_manifests(self, latest: ManifestView, now_ms: int) -> dict[int, ManifestView]:
        """``latest`` and the manifests its checkpoints live at ``now_ms`` pin, by id (one read each;
        a pinned manifest that is gone is left out)."""
        referenced = {latest.id: latest}
        for c in live_checkpoints(latest, now_ms):
            if c.manifest_id not in referenced:
                m = self.read_manifest(c.manifest_id)
                if m is not None:
                    referenced[c.manifest_id] = m
        return referenced

    def _recent_compaction_ids(self) -> list[str]:
        """The ids of the compactions in the latest ``.compactions`` file (none if there is none)."""
        compactions = self._run("read_compactions", self._admin.read_compactions(None))
        return [c.id for c in compactions.recent_compactions] if compactions is not None else []

    def _gc_options(self, policy: GcPolicy, extra_ms: int) -> Any:
        sdb = binding()

        def d(age: float | None) -> Any:
            if age is None:
                return None
            return sdb.GarbageCollectorDirectoryOptions(min_age_ms=int(age * 1000) + extra_ms, dry_run=False)

        return sdb.GarbageCollectorOptions(
            manifest_options=d(policy.manifest),
            wal_options=d(policy.wal),
            wal_fence_options=d(policy.wal_fence),
            compacted_options=d(policy.compacted),
            compactions_options=d(policy.compactions),
            detach_options=None,
        )

    def run_gc(self, plan: GcPlan) -> GcRunReport:
        """Run ``run_gc_once`` for :attr:`GcPlan.policy`, with each ``min_age`` lengthened by the
        time since the plan so the run's cutoff is the plan's (nothing that aged past it since
        then is taken), and report what the listing shows deleted against the plan. Clone
        detaching is not run (``detach_options`` None)."""
        before = self.list_objects()
        extra = max(0, int(SYSTEM_RUNTIME.now() * 1000) - plan.now_ms)
        self._run("run_gc_once", self._admin.run_gc_once(self._gc_options(plan.policy, extra)), "gc")
        after = self.list_objects()
        deleted = tuple(sorted(set(before) - set(after)))
        created = tuple(sorted(set(after) - set(before)))
        planned = plan.keys()
        return GcRunReport(
            plan,
            deleted,
            created,
            unplanned=tuple(k for k in deleted if k not in planned),
            not_deleted=tuple(sorted(k for k in planned if k in after)),
        )

    # compaction

    def request_compaction(
        self,
        sorted_run: int | None = None,
        *,
        timeout_s: float = 30.0,
        poll_s: float = 0.05,
        clock: Callable[[], float] = SYSTEM_RUNTIME.monotonic,  # SlateDB's compactor: real time
    ) -> CompactionOutcome:
        """Submit a compaction of every L0 SST view (and ``sorted_run`` if given) into sorted run
        ``sorted_run`` (0 when None), then follow it until COMPLETED or FAILED or ``timeout_s``.

        SlateDB compacts only where a compactor runs (a writer's embedded one or a standalone one):
        a compaction still SUBMITTED at the timeout is reported as ``picked_up=False``.
        """
        sdb = binding()
        m = self.read_manifest()
        if m is None:
            raise SlateDbError(self.db_path, "compact", FileNotFoundError("no manifest"))
        sources = [sdb.SourceId.SST_VIEW(v.view_id) for v in m.l0]
        if sorted_run is not None:
            sources.append(sdb.SourceId.SORTED_RUN(sorted_run))
        if not sources:
            return CompactionOutcome(None, "NOTHING_TO_DO", True, 0, 0.0)
        dest = 0 if sorted_run is None else sorted_run
        spec = sdb.CompactionSpec.TIERED(segment=b"", sources=sources, destination=dest)
        start = clock()
        c = self._run("submit_compaction", self._admin.submit_compaction(spec))
        seen_beyond_submitted = False
        terminal = (sdb.CompactionStatus.COMPLETED, sdb.CompactionStatus.FAILED)
        while True:
            got = self._run("read_compaction", self._admin.read_compaction(c.id, None))
            if got is not None:
                c = got
            if c.status != sdb.CompactionStatus.SUBMITTED:
                seen_beyond_submitted = True
            if c.status in terminal or clock() - start >= timeout_s:
                break
            time.sleep(poll_s)
        return CompactionOutcome(c.id, c.status.name, seen_beyond_submitted, len(sources), clock() - start)

    def compactions(self) -> list[CompactionView]:
        """The compactions SlateDB's latest ``compactions/`` file records (its recent ones; empty
        when there is no file)."""
        got = self._run("read_compactions", self._admin.read_compactions(None))
        return [] if got is None else [_compaction_view(c) for c in got.recent_compactions]

    def read_compaction(self, compaction_id: str) -> CompactionView | None:
        """One compaction by id, from the latest ``compactions/`` file (None: not recorded)."""
        got = self._run("read_compaction", self._admin.read_compaction(compaction_id, None))
        return None if got is None else _compaction_view(got)

    def submit_compaction(
        self, l0_view_ids: Sequence[str], sorted_runs: Sequence[int], destination: int
    ) -> CompactionView:
        """Submit a tiered compaction of the L0 SST views ``l0_view_ids`` and the sorted runs
        ``sorted_runs`` into sorted run ``destination`` (SlateDB's rule: a new id above every run
        for L0 alone, else the oldest source run's id). Returns it as SUBMITTED; a compactor (a
        writer's embedded one or a standalone one) must pick it up."""
        sdb = binding()
        sources = [sdb.SourceId.SST_VIEW(v) for v in l0_view_ids]
        sources += [sdb.SourceId.SORTED_RUN(r) for r in sorted_runs]
        spec = sdb.CompactionSpec.TIERED(segment=b"", sources=sources, destination=destination)
        return _compaction_view(self._run("submit_compaction", self._admin.submit_compaction(spec)))

    # destroy

    def delete_db(self, confirm: bool = False) -> list[str]:
        """``delete_db``: with ``confirm`` False the paths it would delete, nothing deleted (keys
        relative to :attr:`store`, as its listing names them)."""
        cut = len(self._prefix) + 1 if self._prefix else 0
        return sorted(p[cut:] for p in self._run("delete_db", self._admin.delete_db(confirm), "delete"))

    # clones

    def clone_from(self, sources: Sequence[CloneSource]) -> ManifestView:
        """Make this (new) database a clone of ``sources``: one source is a clone (projected if it
        has a range: one shard of a split), several a union (a merge; their ranges must not
        overlap). Returns the new manifest."""
        if not sources:
            raise ValueError("a clone needs at least one source")
        sdb = binding()
        builder = self._admin.create_clone_builder_from_source(sources[0].binding_spec(sdb, self._prefix))
        for s in sources[1:]:
            builder.with_source(s.binding_spec(sdb, self._prefix))
        self._run("clone", builder.build(), "clone")
        m = self.read_manifest()
        assert m is not None
        return m
