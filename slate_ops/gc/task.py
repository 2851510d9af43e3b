"""One interface for every GC task (docs/design/gc.md, "One task interface").

After SlateDB's ``GcTask`` (``slatedb/src/garbage_collector``: one task per resource, each with a
``resource()`` name), with SlateDB's single ``collect(now)`` split in two so that the dry run is
literally the plan:

* :meth:`GcTask.plan` lists and decides what to delete, with a reason per object, and **writes
  nothing** (it may read: the WAL and compacted tasks list their namespaces);
* :meth:`GcTask.narrow` (a real run only) drops what references found after planning protect; a plan
  only ever shrinks;
* :meth:`GcTask.execute` carries the plan out: advances the boundary first (``.manifest`` and
  ``.compactions``), deletes exactly the plan's objects, expires the plan's checkpoints, detaches the
  plan's clones.

A dry run reports :meth:`GcPlan.preview` of each plan and executes nothing, so on an unchanged state a
dry run and a real run report the same objects.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import ClassVar, Protocol

from slate_ops.gc.options import Resource
from slate_ops.gc.references import Protection
from slate_ops.gc.report import DeletedObject, ResourceReport
from slate_ops.manifest.model import Checkpoint, ExternalDb
from slate_ops.objstore.base import ObjectMeta

NAMESPACES: tuple[Resource, ...] = ("manifest", "compactions", "wal", "compacted")
"""The resources whose tasks delete objects; each gets a :class:`ResourceReport` in the GcReport."""


@dataclass(frozen=True)
class PlannedDeletion:
    """One object a plan deletes, and why. ``id`` is its WAL or sequenced id (None for SSTs)."""

    meta: ObjectMeta
    reason: str
    id: int | None = None


@dataclass(frozen=True)
class GcPlan:
    """What one task does in this run, decided by :meth:`GcTask.plan` without writing anything.

    ``deletions`` are the objects to delete; ``boundary`` the GC boundary to advance to before any
    of them (sequenced namespaces; None: no advance, and nothing to delete); ``checkpoints`` the
    checkpoints to expire; ``detach`` the external databases to detach from. ``listed`` counts the
    objects the task considered.
    """

    resource: Resource
    listed: int = 0
    deletions: tuple[PlannedDeletion, ...] = ()
    boundary: int | None = None
    checkpoints: tuple[Checkpoint, ...] = ()
    detach: tuple[ExternalDb, ...] = ()

    @property
    def keys(self) -> set[str]:
        return {d.meta.key for d in self.deletions}

    def keeping(self, kept: Callable[[PlannedDeletion], bool]) -> GcPlan:
        """This plan without the deletions ``kept`` protects (boundary unchanged)."""
        return replace(self, deletions=tuple(d for d in self.deletions if not kept(d)))

    def preview(self) -> TaskOutcome:
        """The dry run: what :meth:`GcTask.execute` of this plan does when nothing fails."""
        report = None
        if self.resource in NAMESPACES:
            deleted = [DeletedObject.of(d.meta) for d in self.deletions]
            report = ResourceReport.build(self.resource, deleted, listed=self.listed, boundary=self.boundary)
        return TaskOutcome(report, self.checkpoints, tuple(e.path for e in self.detach))


@dataclass(frozen=True)
class TaskOutcome:
    """What a task did (dry run: would do): the namespace's report, expired checkpoints, detached
    clones, and the errors it recorded (also in ``report.errors``)."""

    report: ResourceReport | None = None
    expired: tuple[Checkpoint, ...] = ()
    detached: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()


class GcTask(Protocol):
    """One resource's garbage collection in one run; see the module docstring.

    ``changes_references``: its execution commits a manifest that changes what is referenced
    (checkpoint expiry), so it runs before the other tasks' plans are narrowed and executed.
    An exception from :meth:`plan` skips the task (recorded as ``"<resource>: listing: ..."``); one
    from :meth:`execute` is recorded as ``"<resource>: ..."``; the other tasks still run.
    """

    changes_references: ClassVar[bool]

    @property
    def resource(self) -> Resource: ...

    def plan(self) -> GcPlan | None:
        """What to do, from the run's snapshot and this task's listing; writes nothing. None: the
        task has nothing to decide this run (its inputs are missing)."""
        ...

    def narrow(self, plan: GcPlan, newer: Protection, newer_ids: set[int]) -> GcPlan:
        """``plan`` without what ``newer`` (references committed after the snapshot) or the manifest
        ids ``newer_ids`` (pinned by them) keep."""
        ...

    def execute(self, plan: GcPlan) -> TaskOutcome:
        """Carry ``plan`` out: deletes only the plan's objects, never more."""
        ...
