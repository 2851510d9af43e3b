"""GC of the two sequenced namespaces, ``.manifest`` and ``.compactions``, with boundary files.

docs/design/gc.md, "The tasks" (SlateDB's "Advancing Boundaries"): the desired boundary is the
highest id among the namespace's files other than the latest whose ``last_modified`` is older than
``min_age``; GC advances the durable boundary to it *before* deleting anything, then deletes only
files at or behind the durable boundary that are older than ``min_age``, are not the latest, and
(manifests) are not kept by a live checkpoint or the issue-204 history (:mod:`slate_ops.gc.snapshot`).
Boundary files live under ``<db>/gc/``, which GC never lists, so they are never deleted.
"""

from __future__ import annotations

import logging
from typing import Protocol

from slate_ops.gc.deletion import delete_objects
from slate_ops.gc.options import Resource
from slate_ops.gc.report import ResourceReport
from slate_ops.gc.snapshot import timestamp
from slate_ops.gc.task import GcPlan, PlannedDeletion
from slate_ops.objstore.base import ObjectStore
from slate_ops.txn import SequencedFile

log = logging.getLogger(__name__)


class BoundedNamespace(Protocol):
    """A sequenced namespace's GC boundary (``SequencedStore.advance_boundary``)."""

    def advance_boundary(self, boundary: int) -> int: ...


def plan_sequenced(resource: Resource, files: list[SequencedFile], cutoff: float, keep: set[int]) -> GcPlan:
    """What SlateDB's GC boundary-file design (docs/design/gc.md) allows deleting from ``files`` (id order) at
    ``cutoff`` = now - min_age: the boundary to advance to, and the files behind it not in ``keep``."""
    old = [f for f in files[:-1] if timestamp(f) <= cutoff]  # files[-1] is the latest: always kept
    desired = max((f.id for f in old), default=None)
    reason = f"older than {resource}_min_age, not the latest, at or behind the boundary {desired}"
    if resource == "manifest":
        reason += ", pinned by no live checkpoint or the history"
    deletions = tuple(PlannedDeletion(f.meta, reason, f.id) for f in old if f.id not in keep)
    return GcPlan(resource, listed=len(files), deletions=deletions, boundary=desired)


def execute_sequenced(plan: GcPlan, sequence: BoundedNamespace, store: ObjectStore) -> ResourceReport:
    """Advance the boundary, then delete the plan's files at or behind it."""
    if plan.boundary is None:
        return ResourceReport.build(plan.resource, [], listed=plan.listed)
    try:
        boundary = sequence.advance_boundary(plan.boundary)
    except Exception as error:
        message = f"{plan.resource}: advancing the boundary to {plan.boundary} failed, nothing deleted: "
        return ResourceReport.build(
            plan.resource, [], listed=plan.listed, errors=[message + f"{type(error).__name__}: {error}"]
        )
    # Invariant 1 of SlateDB's GC boundary-file design (docs/design/gc.md).
    behind = [d.meta for d in plan.deletions if d.id is not None and d.id <= boundary]
    deleted, errors = delete_objects(store, behind, plan.resource)
    return ResourceReport.build(plan.resource, deleted, listed=plan.listed, boundary=boundary, errors=errors)
