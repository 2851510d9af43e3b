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
from dataclasses import dataclass
from typing import Protocol

from slate_ops.gc.deletion import delete_objects
from slate_ops.gc.report import DeletedObject, ResourceReport
from slate_ops.gc.snapshot import timestamp
from slate_ops.objstore.base import ObjectStore
from slate_ops.txn import SequencedFile

log = logging.getLogger(__name__)


class BoundedNamespace(Protocol):
    """A sequenced namespace's GC boundary (``SequencedStore.advance_boundary``)."""

    def advance_boundary(self, boundary: int) -> int: ...


@dataclass(frozen=True)
class SequencedPlan:
    resource: str
    listed: int
    desired_boundary: int | None
    candidates: tuple[SequencedFile, ...]

    def without(self, ids: set[int]) -> SequencedPlan:
        kept = tuple(f for f in self.candidates if f.id not in ids)
        return SequencedPlan(self.resource, self.listed, self.desired_boundary, kept)


def plan_sequenced(resource: str, files: list[SequencedFile], cutoff: float, keep: set[int]) -> SequencedPlan:
    """What SlateDB's GC boundary-file design (docs/design/gc.md) allows deleting from ``files`` (id order) at
    ``cutoff`` = now - min_age."""
    old = [f for f in files[:-1] if timestamp(f) <= cutoff]  # files[-1] is the latest: always kept
    desired = max((f.id for f in old), default=None)
    return SequencedPlan(resource, len(files), desired, tuple(f for f in old if f.id not in keep))


def execute_sequenced(
    plan: SequencedPlan, sequence: BoundedNamespace, store: ObjectStore, *, dry_run: bool
) -> ResourceReport:
    """Advance the boundary, then delete the plan's files at or behind it (dry run: neither)."""
    if plan.desired_boundary is None:
        return ResourceReport.build(plan.resource, [], listed=plan.listed)
    if dry_run:
        deleted = [DeletedObject.of(f.meta) for f in plan.candidates]
        return ResourceReport.build(
            plan.resource, deleted, listed=plan.listed, boundary=plan.desired_boundary
        )
    try:
        boundary = sequence.advance_boundary(plan.desired_boundary)
    except Exception as error:
        message = (
            f"{plan.resource}: advancing the boundary to {plan.desired_boundary} failed, nothing deleted: "
        )
        return ResourceReport.build(
            plan.resource, [], listed=plan.listed, errors=[message + f"{type(error).__name__}: {error}"]
        )
    # Invariant 1 of SlateDB's GC boundary-file design (docs/design/gc.md).
    behind = [f.meta for f in plan.candidates if f.id <= boundary]
    deleted, errors = delete_objects(store, behind, plan.resource)
    return ResourceReport.build(plan.resource, deleted, listed=plan.listed, boundary=boundary, errors=errors)
