"""What one GC run deleted (or, in a dry run, would delete), per resource, and what failed."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from slate_ops.manifest.model import Checkpoint
from slate_ops.objstore.base import ObjectMeta
from slate_ops.objstore.metering import ZERO, RequestCounts


@dataclass(frozen=True)
class DeletedObject:
    key: str
    size: int
    last_modified: datetime

    @classmethod
    def of(cls, meta: ObjectMeta) -> DeletedObject:
        return cls(meta.key, meta.size, meta.last_modified)


@dataclass(frozen=True)
class ResourceReport:
    """One namespace: the objects deleted (would-delete in a dry run), the boundary, the errors.

    ``boundary`` is the namespace's GC boundary after the run (``.manifest`` and ``.compactions``
    only): in a dry run, the value the run would advance it to (None: no advance needed).
    """

    resource: str
    deleted: tuple[DeletedObject, ...] = ()
    count: int = 0
    bytes: int = 0
    listed: int = 0
    boundary: int | None = None
    errors: tuple[str, ...] = ()

    @classmethod
    def build(
        cls,
        resource: str,
        deleted: list[DeletedObject],
        *,
        listed: int,
        boundary: int | None = None,
        errors: list[str] | None = None,
    ) -> ResourceReport:
        ordered = tuple(sorted(deleted, key=lambda d: d.key))
        return cls(
            resource=resource,
            deleted=ordered,
            count=len(ordered),
            bytes=sum(d.size for d in ordered),
            listed=listed,
            boundary=boundary,
            errors=tuple(errors or ()),
        )


@dataclass(frozen=True)
class GcReport:
    """Everything one :meth:`GarbageCollector.run_once` did.

    ``destroyed`` is True when the database was (dry run: would be) deleted whole; its objects are
    then in ``destroyed_objects`` and the per-resource reports are empty. ``metrics`` are the
    process-wide boundary counters (docs/design/gc.md, "Observability") at the end of the run.
    """

    path: str
    dry_run: bool
    started_at: datetime
    duration_s: float
    manifest_id: int | None
    resources: tuple[ResourceReport, ...] = ()
    checkpoints_expired: tuple[Checkpoint, ...] = ()
    clones_detached: tuple[str, ...] = ()
    destroyed: bool = False
    destroyed_objects: tuple[DeletedObject, ...] = ()
    notes: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    metrics: dict[str, float] = field(default_factory=dict)
    requests: RequestCounts = field(default=ZERO, compare=False)
    """The object-store requests and bytes this operation made (through the admin handle; zero
    when called directly)."""

    @property
    def ok(self) -> bool:
        return not self.errors

    def resource(self, name: str) -> ResourceReport | None:
        return next((r for r in self.resources if r.resource == name), None)

    def deleted_keys(self) -> set[str]:
        """Every object key deleted (would be deleted), across all resources and the destroy."""
        keys = {d.key for r in self.resources for d in r.deleted}
        return keys | {d.key for d in self.destroyed_objects}
