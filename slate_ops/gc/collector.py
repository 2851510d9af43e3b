"""The garbage collector of one database (docs/design/gc.md, "One run"; SlateDB's *Checkpoints and
Clones*, "Garbage Collector", and its GC boundary-file design).

One run (:meth:`GarbageCollector.run_once`):

1. **Snapshot**: list and read the manifests (latest, live checkpoints', the issue-204 history),
   then the ``.compactions`` state, then list the WAL and compacted SSTs — in that order, so an object
   written after the snapshot began is younger than every cutoff.
2. **Destroyed database**: if it is due (:mod:`slate_ops.gc.destroyed`), delete it and stop: its
   tombstone manifest stays, fencing stale processes. A path whose latest manifest is a tombstone
   (deleted already) only has an interrupted deletion's leftovers deleted.
3. **Plan** every task (:class:`~slate_ops.gc.task.GcTask`, docs/design/gc.md, "One task interface")
   from the snapshot alone, writing nothing: a dry run reports these plans and stops.
4. Real run: execute the tasks that change references (checkpoint expiry), then re-read the newest
   manifests and narrow every other plan by what they (or a checkpoint that became live meanwhile)
   reference — a plan only ever shrinks.
5. **Execute** the narrowed plans in task order: manifests and ``.compactions`` (boundary first), WAL
   SSTs, compacted SSTs, clone detaching; each deletes exactly its plan's objects, so on an
   unchanged state a dry run and a real run report the same objects.

Errors: each task's failure is recorded in the report (and logged) and the other tasks still run
on their own plans; at the end a run with errors raises :class:`GcFailedError` carrying the report.
A run never fails silently and never deletes more because something failed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, TypeVar

from slate_ops.compaction.state import CompactionsState, CompactionsStore
from slate_ops.errors import DbNotFoundError, GcFailedError, ObjectNotFoundError, SlateDbManifestError
from slate_ops.gc.checkpoints import expire_checkpoints
from slate_ops.gc.clones import detach, detachable
from slate_ops.gc.compacted import plan_compacted, running_since
from slate_ops.gc.deletion import delete_objects
from slate_ops.gc.destroyed import delete_destroyed, due_for_deletion
from slate_ops.gc.listing import list_compacted, list_wal
from slate_ops.gc.options import GcOptions, Resource
from slate_ops.gc.references import Protection
from slate_ops.gc.report import GcReport, ResourceReport
from slate_ops.gc.sequenced import execute_sequenced, plan_sequenced
from slate_ops.gc.snapshot import Snapshot, pinned_since, read_snapshot
from slate_ops.gc.task import GcPlan, GcTask, PlannedDeletion, TaskOutcome
from slate_ops.gc.wal import plan_wal
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.local import db_not_found
from slate_ops.runtime import SYSTEM_RUNTIME, FixedNow, Runtime
from slate_ops.txn import SequencedFile
from slate_ops.txn.boundary import METRICS

log = logging.getLogger(__name__)

T = TypeVar("T")


class GarbageCollector:
    """Deletes what no manifest that matters references any more; see the module docstring."""

    def __init__(
        self,
        path: str,
        store: ObjectStore,
        options: GcOptions | None = None,
        *,
        clock: Runtime = SYSTEM_RUNTIME,
    ) -> None:
        self.options = options or GcOptions()
        self.store = store
        self.clock = clock
        self.manifest_store = ManifestStore(store, path, clock=clock)
        self.path = self.manifest_store.path
        self.compactions_store = CompactionsStore(store, self.path, clock=clock)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_report: GcReport | None = None
        self.last_error: BaseException | None = None

    # --- one run ----------------------------------------------------------------------------------

    def run_once(self, *, dry_run: bool) -> GcReport:
        """One GC run; raises :class:`DbNotFoundError` if there is no database and
        :class:`GcFailedError` (with the report) if any task failed."""
        run = _Run(self, dry_run)
        report = run.execute()
        self.last_report = report
        if report.errors:
            for error in report.errors:
                log.error("GC of %s: %s", self.manifest_store.location, error)
            raise GcFailedError(
                f"GC of {self.manifest_store.location} finished with {len(report.errors)} error(s): "
                + "; ".join(report.errors),
                report,
            )
        log.info(
            "GC of %s%s: deleted %d object(s), expired %d checkpoint(s), detached %d clone(s)%s",
            self.manifest_store.location, " (dry run)" if dry_run else "", len(report.deleted_keys()),
            len(report.checkpoints_expired), len(report.clones_detached),
            ", database destroyed" if report.destroyed else "",
        )  # fmt: skip
        return report

    # --- long-running -----------------------------------------------------------------------------

    def run(self, stop: threading.Event | None = None) -> GcReport | None:
        """Run every ``interval`` until ``stop`` is set, the database was deleted, or it is missing.

        A failed run is logged at error level (``last_error`` keeps it) and retried next interval.
        Returns the last report.
        """
        stop = stop or self._stopping
        interval = self.options.interval.total_seconds()
        while not stop.is_set():
            try:
                report = self.run_once(dry_run=False)  # the long-running service acts
                self.last_error = None
            except DbNotFoundError as error:
                log.info("GC of %s stops: %s", self.manifest_store.location, error)
                return self.last_report
            except GcFailedError as error:
                self.last_error = error
            except Exception as error:  # never let the loop die silently
                self.last_error = error
                log.exception("GC of %s failed; retrying in %.0fs", self.manifest_store.location, interval)
            else:
                if report.destroyed:
                    log.info("GC of %s deleted the destroyed database; done", self.manifest_store.location)
                    return report
            stop.wait(interval)
        return self.last_report

    def start(self) -> GarbageCollector:
        """Run :meth:`run` on a daemon thread; :meth:`close` stops it."""
        self._thread = threading.Thread(target=self.run, name=f"slate-ops-gc:{self.path}", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()


class _Run:
    """The state of one run: the snapshot, the plans, and what went wrong."""

    def __init__(self, gc: GarbageCollector, dry_run: bool) -> None:
        self.gc = gc
        self.options = gc.options
        self.store = gc.store
        self.dry_run = dry_run
        self.clock = gc.clock
        self.now = self.clock.now()
        self.started = self.clock.monotonic()
        self.errors: list[str] = []
        self.notes: list[str] = []

    def history(self) -> list[float]:
        return [self.cutoff("wal"), self.cutoff("compacted")]

    def cutoff(self, resource: str) -> float:
        age: timedelta = getattr(self.options, f"{resource}_min_age")
        return self.now - age.total_seconds()

    def attempt(self, what: str, step: Callable[[], T]) -> T | None:
        try:
            return step()
        except Exception as error:
            self.errors.append(f"{what}: {type(error).__name__}: {error}")
            return None

    def report(
        self, snapshot: Snapshot | None, outcomes: Sequence[TaskOutcome] = (), **fields: Any
    ) -> GcReport:
        if outcomes:
            fields.update(
                resources=tuple(o.report for o in outcomes if o.report is not None),
                checkpoints_expired=tuple(c for o in outcomes for c in o.expired),
                clones_detached=tuple(p for o in outcomes for p in o.detached),
            )
        return GcReport(
            path=self.gc.path,
            dry_run=self.dry_run,
            started_at=datetime.fromtimestamp(self.now, UTC),
            duration_s=self.clock.monotonic() - self.started,
            manifest_id=None if snapshot is None else snapshot.latest.id,
            notes=tuple(self.notes),
            errors=tuple(self.errors),
            metrics=METRICS.snapshot(),
            **fields,
        )

    def execute(self) -> GcReport:
        runs = self.options.runs
        history = self.history()
        try:
            snapshot = read_snapshot(self.gc.manifest_store, self.now, history_cutoffs=history)
        except DbNotFoundError:
            current = self.gc.manifest_store.read_current()
            if current is not None and current.value.is_tombstone and runs("database"):
                return self.destroy(None)  # deleted: finish what an interrupted deletion left
            raise
        except SlateDbManifestError:
            raise  # not our database: refused whole, before any task (nothing to report)
        except Exception as error:
            self.errors.append(f"reading the manifests: {type(error).__name__}: {error}")
            return self.report(None)
        if snapshot is None:
            raise db_not_found(
                self.gc.manifest_store.store,
                f"no database at {self.gc.manifest_store.location}: no manifest; nothing to collect.",
            )
        self.errors += snapshot.problems
        latest = snapshot.latest.value
        grace = self.options.db_delete_grace.total_seconds()
        if latest.destroyed_at_s is not None:
            if runs("database") and due_for_deletion(latest, self.now, grace):
                return self.destroy(snapshot)
            self.notes.append(
                f"destroyed at {latest.destroyed_at_s}; deleted once {grace:.0f}s have passed and no "
                "checkpoint is live"
            )

        # 3. plan every task, from the snapshot alone
        tasks = self.tasks(snapshot)
        plans: list[tuple[GcTask, GcPlan]] = []
        for task in tasks:
            plan = self.attempt(f"{task.resource}: listing", task.plan)
            if plan is not None:
                plans.append((task, plan))
        if self.dry_run:  # the dry run is the plans
            return self.report(snapshot, [plan.preview() for _, plan in plans])

        # 4. tasks that change what is referenced (checkpoint expiry) run first; then the re-check
        outcomes: list[TaskOutcome] = []
        for task, plan in plans:
            if task.changes_references:
                outcomes.append(self.run_task(task, plan))
        recheck = self.attempt("re-reading the manifests before deleting", lambda: self.recheck(snapshot))
        if recheck is None:  # cannot prove the plans are still safe: delete nothing
            return self.report(snapshot, outcomes)
        newer, newer_ids = recheck

        # 5. execute the narrowed plans, in task order
        for task, plan in plans:
            if not task.changes_references:
                outcomes.append(self.run_task(task, task.narrow(plan, newer, newer_ids)))
        return self.report(snapshot, outcomes)

    def tasks(self, snapshot: Snapshot) -> list[GcTask]:
        """The run's tasks, in execution order, for the resources the options run."""
        runs = self.options.runs
        compactions: tuple[list[SequencedFile], CompactionsState] | None = None
        if runs("compactions") or runs("compacted"):  # read once, before the compacted SSTs are listed
            compactions = self.attempt("compactions: reading the state", self.read_compactions)
        tasks: list[GcTask] = []
        if runs("manifest"):
            tasks.append(_ManifestTask(self, snapshot))
        if runs("compactions") and compactions is not None:
            tasks.append(_CompactionsTask(self, compactions[0]))
        if runs("wal"):
            tasks.append(_WalTask(self, snapshot))
        if runs("compacted") and compactions is not None:
            tasks.append(_CompactedTask(self, snapshot, compactions[1]))
        if runs("clones") and not snapshot.problems:
            tasks.append(_ClonesTask(self, snapshot))
        if runs("checkpoints"):
            tasks.append(_CheckpointsTask(self, snapshot))
        return tasks

    def run_task(self, task: GcTask, plan: GcPlan) -> TaskOutcome:
        outcome = self.attempt(task.resource, lambda: task.execute(plan))
        if outcome is None:
            return TaskOutcome()
        self.errors += outcome.errors
        return outcome

    def read_compactions(self) -> tuple[list[SequencedFile], CompactionsState]:
        sequence = self.gc.compactions_store.sequence
        files = sequence.list()
        if not files:
            return files, CompactionsState()
        try:
            return files, sequence.read(files[-1].id).value
        except ObjectNotFoundError:
            return files, self.gc.compactions_store.read()

    def recheck(self, snapshot: Snapshot) -> tuple[Protection, set[int]]:
        """References that appeared after the snapshot: the newest manifests and new live checkpoints."""
        manifests = self.gc.manifest_store
        newer = manifests.sequence.list(start_after_id=snapshot.latest.id)
        extra = Protection(self.gc.path)
        extra_ids: set[int] = set()
        earliest = min(self.cutoff(r) for r in ("manifest", "wal", "compacted"))
        for file in newer:  # usually none, or the one our checkpoint expiry committed
            try:
                manifest = manifests.read(file.id).value
            except ObjectNotFoundError:
                continue  # superseded and collected meanwhile; its successor is read too
            extra.add(manifest, as_latest=True)
            for manifest_id in pinned_since([manifest], earliest):
                extra_ids.add(manifest_id)
                pinned = snapshot.manifests.get(manifest_id)  # usually read already: no request
                extra.add(pinned or manifests.read(manifest_id).value, as_latest=False)
        return extra, extra_ids

    def destroy(self, snapshot: Snapshot | None) -> GcReport:
        """Step 2: the database's deletion (:func:`~slate_ops.gc.destroyed.delete_database`, the code
        path a hard destroy runs too); ``snapshot`` is None when it was deleted already (a tombstone)."""
        grace = self.options.db_delete_grace.total_seconds()
        outcome = self.attempt(
            "database",
            lambda: delete_destroyed(
                self.gc.path, self.store, now=self.now, grace_s=grace, dry_run=self.dry_run
            ),
        )
        if outcome is None:
            return self.report(snapshot)
        self.notes += [f"released final checkpoint on {r}" for r in outcome.released]
        self.notes.append(f"tombstone {outcome.tombstone} {'to be written' if self.dry_run else 'kept'}")
        return self.report(snapshot, destroyed=True, destroyed_objects=outcome.deleted)


# --- the tasks (docs/design/gc.md, "One task interface"; slate_ops.gc.task) ---------------------


class _ManifestTask:
    """``.manifest`` files behind the boundary, except the latest and what checkpoints and the history pin."""

    resource: ClassVar[Resource] = "manifest"
    changes_references: ClassVar[bool] = False

    def __init__(self, run: _Run, snapshot: Snapshot) -> None:
        self.run, self.snapshot = run, snapshot

    def plan(self) -> GcPlan:
        keep = self.snapshot.kept_manifests(self.run.history())
        return plan_sequenced("manifest", list(self.snapshot.files), self.run.cutoff("manifest"), keep)

    def narrow(self, plan: GcPlan, newer: Protection, newer_ids: set[int]) -> GcPlan:
        return plan.keeping(lambda d: d.id in newer_ids)

    def execute(self, plan: GcPlan) -> TaskOutcome:
        report = execute_sequenced(plan, self.run.gc.manifest_store.sequence, self.run.store)
        return TaskOutcome(report, errors=report.errors)


class _CompactionsTask:
    """``.compactions`` files behind the boundary, except the latest."""

    resource: ClassVar[Resource] = "compactions"
    changes_references: ClassVar[bool] = False

    def __init__(self, run: _Run, files: list[SequencedFile]) -> None:
        self.run, self.files = run, files

    def plan(self) -> GcPlan:
        return plan_sequenced("compactions", self.files, self.run.cutoff("compactions"), set())

    def narrow(self, plan: GcPlan, newer: Protection, newer_ids: set[int]) -> GcPlan:
        return plan  # no manifest references a .compactions file

    def execute(self, plan: GcPlan) -> TaskOutcome:
        report = execute_sequenced(plan, self.run.gc.compactions_store.sequence, self.run.store)
        return TaskOutcome(report, errors=report.errors)


class _Deleting:
    """Execution of the WAL and compacted tasks: delete the plan's objects, each failure recorded."""

    resource: ClassVar[Resource]
    run: _Run

    def execute(self, plan: GcPlan) -> TaskOutcome:
        deleted, errors = delete_objects(self.run.store, [d.meta for d in plan.deletions], self.resource)
        report = ResourceReport.build(self.resource, deleted, listed=plan.listed, errors=errors)
        return TaskOutcome(report, errors=tuple(errors))


class _WalTask(_Deleting):
    """WAL SSTs no manifest that matters replays (and, with ``delete_wal_fences``, empty fences)."""

    resource: ClassVar[Resource] = "wal"
    changes_references: ClassVar[bool] = False

    def __init__(self, run: _Run, snapshot: Snapshot) -> None:
        self.run, self.snapshot = run, snapshot

    def plan(self) -> GcPlan:
        files = list_wal(self.run.store, self.run.gc.path)
        cutoff = self.run.cutoff("wal")
        delete_fences = self.run.options.delete_wal_fences
        planned = plan_wal(files, self.snapshot.protection(cutoff), cutoff, delete_fences=delete_fences)
        return GcPlan("wal", listed=len(files), deletions=tuple(planned))

    def narrow(self, plan: GcPlan, newer: Protection, newer_ids: set[int]) -> GcPlan:
        return plan.keeping(lambda d: d.id is None or newer.keeps_wal(d.id))


COMPACTED_REASON = (
    "an own SST that no manifest that matters references, written before the cutoff and before any "
    "running compaction started"
)


class _CompactedTask(_Deleting):
    """This database's SSTs no manifest that matters references, older than any running compaction."""

    resource: ClassVar[Resource] = "compacted"
    changes_references: ClassVar[bool] = False

    def __init__(self, run: _Run, snapshot: Snapshot, state: CompactionsState) -> None:
        self.run, self.snapshot, self.state = run, snapshot, state

    def plan(self) -> GcPlan:
        files = list_compacted(self.run.store, self.run.gc.path)
        running = running_since(self.state, self.snapshot.latest.value.compactor_epoch)
        cutoff = self.run.cutoff("compacted")
        min_age = self.run.options.compacted_min_age.total_seconds()
        planned = plan_compacted(files, self.snapshot.protection(cutoff), cutoff, running, min_age)
        deletions = tuple(PlannedDeletion(meta, COMPACTED_REASON) for meta in planned)
        return GcPlan("compacted", listed=len(files), deletions=deletions)

    def narrow(self, plan: GcPlan, newer: Protection, newer_ids: set[int]) -> GcPlan:
        return plan.keeping(lambda d: newer.keeps_sst(d.meta.key))


class _ClonesTask:
    """External databases that no protected manifest reads any more: release, then drop the entry."""

    resource: ClassVar[Resource] = "clones"
    changes_references: ClassVar[bool] = False

    def __init__(self, run: _Run, snapshot: Snapshot) -> None:
        self.run, self.snapshot = run, snapshot

    def plan(self) -> GcPlan:
        latest = self.snapshot.latest.value
        manifests = (latest, *self.snapshot.checkpointed())
        in_use = {e.path for m in manifests for e in m.external_dbs if e.sst_ids}
        return GcPlan("clones", detach=tuple(detachable(latest, in_use)))

    def narrow(self, plan: GcPlan, newer: Protection, newer_ids: set[int]) -> GcPlan:
        return replace(plan, detach=tuple(e for e in plan.detach if e.path not in newer.external_paths))

    def execute(self, plan: GcPlan) -> TaskOutcome:
        if not plan.detach:
            return TaskOutcome()
        return TaskOutcome(
            detached=tuple(detach(self.run.gc.manifest_store, self.run.store, list(plan.detach)))
        )


class _CheckpointsTask:
    """Checkpoints whose expiry time has passed at the run's ``now``; runs before the re-check."""

    resource: ClassVar[Resource] = "checkpoints"
    changes_references: ClassVar[bool] = True

    def __init__(self, run: _Run, snapshot: Snapshot) -> None:
        self.run, self.snapshot = run, snapshot

    def plan(self) -> GcPlan:
        expired = tuple(c for c in self.snapshot.latest.value.checkpoints if c.is_expired(self.run.now))
        return GcPlan("checkpoints", checkpoints=expired)

    def narrow(self, plan: GcPlan, newer: Protection, newer_ids: set[int]) -> GcPlan:
        return plan

    def execute(self, plan: GcPlan) -> TaskOutcome:
        if not plan.checkpoints:
            return TaskOutcome()
        # re-evaluated inside the manifest CAS: a checkpoint refreshed since the plan is kept
        result = expire_checkpoints(
            self.run.gc.path,
            self.run.store,
            dry_run=False,
            clock=FixedNow(self.run.clock, self.run.now),  # the run's one now: expiry agrees with the plan
        )
        return TaskOutcome(expired=result.expired)
