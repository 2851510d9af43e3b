"""The garbage collector of one database (docs/design/gc.md, "One run"; SlateDB's *Checkpoints and
Clones*, "Garbage Collector", and its GC boundary-file design).

One run (:meth:`GarbageCollector.run_once`):

1. **Snapshot**: list and read the manifests (latest, live checkpoints', the issue-204 history),
   then the ``.compactions`` state, then list the WAL and compacted SSTs — in that order, so an object
   written after the snapshot began is younger than every cutoff.
2. **Destroyed database**: if it is due (:mod:`slate_ops.gc.destroyed`), delete it and stop: its
   tombstone manifest stays, fencing stale processes. A path whose latest manifest is a tombstone
   (deleted already) only has an interrupted deletion's leftovers deleted.
3. **Plan** every task from the snapshot alone: this is the dry-run answer.
4. Real run only: expire checkpoints, then re-read the newest manifests and drop from the plan
   anything they (or a checkpoint that became live meanwhile) reference — the plan only ever shrinks.
5. **Execute**: manifests and ``.compactions`` (boundary first), WAL SSTs, compacted SSTs, clone
   detaching. A dry run takes the same path with every deletion and commit skipped, so on an
   unchanged state a dry run and a real run report the same objects.

Errors: each task's failure is recorded in the report (and logged) and the other tasks still run
on their own plans; at the end a run with errors raises :class:`GcFailedError` carrying the report.
A run never fails silently and never deletes more because something failed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from slate_ops.clock import SYSTEM_CLOCK, Clock, ManualClock
from slate_ops.compaction.state import CompactionsState, CompactionsStore
from slate_ops.errors import DbNotFoundError, GcFailedError, ObjectNotFoundError, SlateDbManifestError
from slate_ops.gc.checkpoints import expire_checkpoints
from slate_ops.gc.clones import detach, detachable
from slate_ops.gc.compacted import plan_compacted, running_since
from slate_ops.gc.deletion import delete_objects
from slate_ops.gc.destroyed import delete_destroyed, due_for_deletion
from slate_ops.gc.listing import list_compacted, list_wal
from slate_ops.gc.options import GcOptions
from slate_ops.gc.references import Protection
from slate_ops.gc.report import DeletedObject, GcReport, ResourceReport
from slate_ops.gc.sequenced import BoundedNamespace, SequencedPlan, execute_sequenced, plan_sequenced
from slate_ops.gc.snapshot import Snapshot, pinned_since, read_snapshot
from slate_ops.gc.wal import plan_wal, still_deletable_wal
from slate_ops.manifest.model import Checkpoint, ExternalDb
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore.base import ObjectMeta, ObjectStore
from slate_ops.objstore.local import db_not_found
from slate_ops.txn import SequencedFile
from slate_ops.txn.boundary import METRICS

log = logging.getLogger(__name__)

T = TypeVar("T")


class GarbageCollector:
    """Deletes what no manifest that matters references any more; see the module docstring."""

    def __init__(
        self, path: str, store: ObjectStore, options: GcOptions | None = None, *, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.options = options or GcOptions()
        self._store = store
        self._clock = clock
        self._manifests = ManifestStore(store, path)
        self.path = self._manifests.path
        self._compactions = CompactionsStore(store, self.path)
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
                log.error("GC of %s: %s", self._manifests.location, error)
            raise GcFailedError(
                f"GC of {self._manifests.location} finished with {len(report.errors)} error(s): "
                + "; ".join(report.errors),
                report,
            )
        log.info(
            "GC of %s%s: deleted %d object(s), expired %d checkpoint(s), detached %d clone(s)%s",
            self._manifests.location, " (dry run)" if dry_run else "", len(report.deleted_keys()),
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
                log.info("GC of %s stops: %s", self._manifests.location, error)
                return self.last_report
            except GcFailedError as error:
                self.last_error = error
            except Exception as error:  # never let the loop die silently
                self.last_error = error
                log.exception("GC of %s failed; retrying in %.0fs", self._manifests.location, interval)
            else:
                if report.destroyed:
                    log.info("GC of %s deleted the destroyed database; done", self._manifests.location)
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
        self.store = gc._store
        self.dry_run = dry_run
        self.now = gc._clock.now()
        self.started = time.monotonic()
        self.errors: list[str] = []
        self.notes: list[str] = []

    def cutoff(self, resource: str) -> float:
        age: timedelta = getattr(self.options, f"{resource}_min_age")
        return self.now - age.total_seconds()

    def attempt(self, what: str, step: Callable[[], T]) -> T | None:
        try:
            return step()
        except Exception as error:
            self.errors.append(f"{what}: {type(error).__name__}: {error}")
            return None

    def report(self, snapshot: Snapshot | None, **fields: Any) -> GcReport:
        return GcReport(
            path=self.gc.path,
            dry_run=self.dry_run,
            started_at=datetime.fromtimestamp(self.now, UTC),
            duration_s=time.monotonic() - self.started,
            manifest_id=None if snapshot is None else snapshot.latest.id,
            notes=tuple(self.notes),
            errors=tuple(self.errors),
            metrics=METRICS.snapshot(),
            **fields,
        )

    def execute(self) -> GcReport:
        runs = self.options.runs
        history = [self.cutoff("wal"), self.cutoff("compacted")]
        try:
            snapshot = read_snapshot(self.gc._manifests, self.now, history_cutoffs=history)
        except DbNotFoundError:
            current = self.gc._manifests.read_current()
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
                self.gc._manifests.store,
                f"no database at {self.gc._manifests.location}: no manifest; nothing to collect.",
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

        # 3. plan, from the snapshot alone
        manifest_plan = compactions_plan = None
        wal_files = sst_files = None
        wal_plan = sst_plan = None
        detach_plan: list[ExternalDb] | None = None
        if runs("manifest"):
            keep = snapshot.kept_manifests(history)
            manifest_plan = plan_sequenced("manifest", list(snapshot.files), self.cutoff("manifest"), keep)
        state: CompactionsState | None = None
        if runs("compactions") or runs("compacted"):
            listed = self.attempt("compactions: reading the state", self.read_compactions)
            if listed is not None:
                files, state = listed
                if runs("compactions"):
                    compactions_plan = plan_sequenced("compactions", files, self.cutoff("compactions"), set())
        if runs("wal"):
            wal_files = self.attempt("wal: listing", lambda: list_wal(self.store, self.gc.path))
            if wal_files is not None:
                wal_plan = plan_wal(
                    wal_files,
                    snapshot.protection(self.cutoff("wal")),
                    self.cutoff("wal"),
                    delete_fences=self.options.delete_wal_fences,
                )
        if runs("compacted") and state is not None:
            sst_files = self.attempt("compacted: listing", lambda: list_compacted(self.store, self.gc.path))
            if sst_files is not None:
                running = running_since(state, latest.compactor_epoch)
                protection = snapshot.protection(self.cutoff("compacted"))
                sst_plan = plan_compacted(
                    sst_files,
                    protection,
                    self.cutoff("compacted"),
                    running,
                    self.options.compacted_min_age.total_seconds(),
                )
        if runs("clones") and not snapshot.problems:
            in_use = {e.path for m in (latest, *snapshot.checkpointed()) for e in m.external_dbs if e.sst_ids}
            detach_plan = detachable(latest, in_use)

        # 4. expire checkpoints; a real run then re-checks what appeared meanwhile
        expired: tuple[Checkpoint, ...] = ()
        if runs("checkpoints") and any(c.is_expired(self.now) for c in latest.checkpoints):
            result = self.attempt(
                "checkpoints",
                lambda: expire_checkpoints(
                    self.gc.path,
                    self.store,
                    dry_run=self.dry_run,
                    clock=ManualClock(self.now),  # the run's one now: expiry agrees with the plan
                ),
            )
            expired = result.expired if result is not None else ()
        if not self.dry_run:
            recheck = self.attempt("re-reading the manifests before deleting", lambda: self.recheck(snapshot))
            if recheck is None:  # cannot prove the plan is still safe: delete nothing
                return self.report(snapshot, checkpoints_expired=expired)
            extra, extra_ids = recheck
            manifest_plan = manifest_plan.without(extra_ids) if manifest_plan is not None else None
            if wal_plan is not None and wal_files is not None:
                wal_plan = still_deletable_wal(wal_files, wal_plan, extra)
            if sst_plan is not None:
                sst_plan = [m for m in sst_plan if not extra.keeps_sst(m.key)]
            if detach_plan is not None:
                detach_plan = [e for e in detach_plan if e.path not in extra.external_paths]

        # 5. execute
        resources: list[ResourceReport] = []
        for plan, namespace in (
            (manifest_plan, self.gc._manifests.sequence),
            (compactions_plan, self.gc._compactions.sequence),
        ):
            if plan is not None:
                resources.append(self.sequenced(plan, namespace))
        if wal_plan is not None and wal_files is not None:
            resources.append(self.delete("wal", wal_plan, len(wal_files)))
        if sst_plan is not None and sst_files is not None:
            resources.append(self.delete("compacted", sst_plan, len(sst_files)))
        detached: tuple[str, ...] = ()
        if detach_plan:
            if self.dry_run:
                detached = tuple(e.path for e in detach_plan)
            else:
                done = self.attempt("clones", lambda: detach(self.gc._manifests, self.store, detach_plan))
                detached = tuple(done or ())
        return self.report(
            snapshot, resources=tuple(resources), checkpoints_expired=expired, clones_detached=detached
        )

    def read_compactions(self) -> tuple[list[SequencedFile], CompactionsState]:
        sequence = self.gc._compactions.sequence
        files = sequence.list()
        if not files:
            return files, CompactionsState()
        try:
            return files, sequence.read(files[-1].id).value
        except ObjectNotFoundError:
            return files, self.gc._compactions.read()

    def recheck(self, snapshot: Snapshot) -> tuple[Protection, set[int]]:
        """References that appeared after the snapshot: the newest manifests and new live checkpoints."""
        manifests = self.gc._manifests
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

    def sequenced(self, plan: SequencedPlan, namespace: BoundedNamespace) -> ResourceReport:
        report = execute_sequenced(plan, namespace, self.store, dry_run=self.dry_run)
        self.errors += report.errors
        return report

    def delete(self, resource: str, planned: list[ObjectMeta], listed: int) -> ResourceReport:
        if self.dry_run:
            return ResourceReport.build(resource, [DeletedObject.of(m) for m in planned], listed=listed)
        deleted, errors = delete_objects(self.store, planned, resource)
        self.errors += errors
        return ResourceReport.build(resource, deleted, listed=listed, errors=errors)

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
