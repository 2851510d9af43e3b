"""GC health of one database, whichever engine wrote it: is a garbage collector keeping up?

SlateDB #2089 ("GC had been dead for six days") was visible only as one log line every ten minutes.
:func:`assess_gc_health` turns it into a check that fails on either of two pieces of evidence:

* **overdue garbage**: objects a GC run would delete, and would already have deleted
  ``interval x intervals`` ago (eligible under the policy's min ages at ``now - interval x N``):
  their count, bytes and the oldest one's age. A GC on schedule deletes garbage within about one
  interval of its min age, so this garbage means GC is not running (or failing);
* **a stale boundary**: no GC has advanced a ``gc/*.boundary`` file for longer than
  ``interval x N`` while garbage has waited for more than one interval (eligible at
  ``now - interval``). An idle database with nothing to collect passes whatever its boundary's age
  (GC advances a boundary only when it deletes). Both engines write the same boundary files
  (``gc/manifest.boundary``, ``gc/compactions.boundary``; SlateDB 0.17's ``run_gc_once`` measured:
  written on its first deletion, not rewritten when nothing is deleted). Without a boundary file
  (no GC ever deleted anything) the oldest waiting garbage is the evidence, and ``notes`` says so.

"Eligible at time t" is the engine's own GC plan (a dry run that writes nothing) with its clock at
``t``: the same rules a real run applies, so the check never counts what GC rightly keeps
(referenced SSTs, checkpointed manifests, the latest manifest). Cost: one or two dry-run plans and
two HEADs (SlateDB: also two LISTs and two GETs, the boundary pre-check of
:func:`slate_ops.admin.handle.slatedb_verify.check_boundaries`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from slate_ops.admin.collect import run_gc
from slate_ops.clock import UTC_SECONDS, render_utc
from slate_ops.errors import InvalidArgumentError, ObjectNotFoundError
from slate_ops.gc import GcOptions
from slate_ops.layout import BOUNDARY_NAMESPACES, boundary_key
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import SYSTEM_RUNTIME, FixedNow

if TYPE_CHECKING:
    from slate_ops.engines.slatedb import GcPolicy, SlateDbAdmin

__all__ = [
    "DEFAULT_INTERVALS",
    "HEALTH_RESOURCES",
    "Garbage",
    "GcHealth",
    "assess_gc_health",
    "health_options",
    "last_boundary_advance",
    "slate_ops_plan_at",
    "slatedb_plan_at",
]

DEFAULT_INTERVALS = 3
"""N: how many GC intervals garbage may wait beyond its min age before the check fails."""

HEALTH_RESOURCES = frozenset({"manifest", "wal", "compacted", "compactions"})
"""The GC resources whose garbage the check counts (not checkpoints, clones or a destroyed database)."""


@dataclass(frozen=True)
class Garbage:
    """One object a GC run would delete: its key, GC resource, size and last-modified (Unix s)."""

    key: str
    resource: str
    size: int
    last_modified_s: float


@dataclass(frozen=True)
class GcHealth:
    """Whether GC keeps up with a database (module docstring). ``passed`` is False when
    ``problems`` is not empty.

    ``overdue_*``: garbage eligible for longer than ``overdue_after_s`` (= ``gc_interval_s x
    intervals``) beyond its min age; ``waiting_count``: garbage eligible for longer than one
    interval; ``last_gc_at``: the newest last-modified of the ``gc/*.boundary`` files (None: no GC
    ever advanced one), ``since_last_gc_s`` its age; ``evidence``: ``boundary`` or, without a
    boundary file, ``oldest_garbage``."""

    path: str
    engine: str
    passed: bool
    checked_at: datetime
    gc_interval_s: float
    intervals: int
    overdue_after_s: float
    overdue_count: int
    overdue_bytes: int
    oldest_overdue_key: str | None
    oldest_overdue_age_s: float | None
    waiting_count: int
    last_gc_at: datetime | None
    since_last_gc_s: float | None
    evidence: str
    overdue_by_resource: dict[str, int] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def last_boundary_advance(store: ObjectStore, path: str) -> float | None:
    """When GC last advanced a boundary file of ``path`` (Unix s; two HEADs), None if none exists."""
    times: list[float] = []
    for namespace in BOUNDARY_NAMESPACES:
        try:
            times.append(store.head(boundary_key(path, namespace)).last_modified.timestamp())
        except ObjectNotFoundError:
            continue
    return max(times, default=None)


def health_options(options: GcOptions | None) -> GcOptions:
    """``options`` limited to :data:`HEALTH_RESOURCES` (all of them when it names none)."""
    options = options or GcOptions()
    kept = frozenset(r for r in options.resources if r in HEALTH_RESOURCES) or HEALTH_RESOURCES
    return options.model_copy(update={"resources": kept})


def slate_ops_plan_at(path: str, store: ObjectStore, options: GcOptions) -> Callable[[float], list[Garbage]]:
    """``plan_at`` for a slate_ops database: the GC dry run (writes nothing) with its clock at ``t``."""

    def plan_at(t: float) -> list[Garbage]:
        report = run_gc(path, store, options, dry_run=True, clock=FixedNow(SYSTEM_RUNTIME, t))
        return [
            Garbage(d.key, r.resource, d.size, d.last_modified.timestamp())
            for r in report.resources
            if r.resource in HEALTH_RESOURCES
            for d in r.deleted
        ]

    return plan_at


def slatedb_plan_at(
    db: SlateDbAdmin, policy: GcPolicy, resource_of: dict[str, str]
) -> Callable[[float], list[Garbage]]:
    """``plan_at`` for a SlateDB database: slate_ops' plan of ``run_gc_once`` at ``t`` (writes
    nothing; SlateDB's own dry run writes). ``resource_of`` maps SlateDB's GC directories to
    slate_ops' resource names."""

    def plan_at(t: float) -> list[Garbage]:
        plan = db.gc_plan(policy, now_ms=int(t * 1000))
        return [
            Garbage(d.key, resource_of.get(d.directory, d.directory), d.size, d.last_modified_ms / 1000)
            for d in plan.deletions
        ]

    return plan_at


def assess_gc_health(
    path: str,
    engine: str,
    store: ObjectStore,
    *,
    now: float,
    gc_interval_s: float,
    intervals: int,
    plan_at: Callable[[float], Sequence[Garbage]],
    notes: Sequence[str] = (),
    problems: Sequence[str] = (),
) -> GcHealth:
    """The :class:`GcHealth` of ``path`` at ``now`` (Unix s). ``plan_at(t)`` is the engine's GC plan
    at time ``t`` (what a run then would delete); ``gc_interval_s`` the GC's interval, ``intervals``
    N (module docstring); ``problems`` found by the caller fail the check too."""
    if intervals < 1 or gc_interval_s <= 0:
        raise InvalidArgumentError(
            f"GC health of {path}: intervals ({intervals}) and the GC interval ({gc_interval_s} s) "
            "must be positive"
        )
    overdue_after = gc_interval_s * intervals
    overdue = sorted(plan_at(now - overdue_after), key=lambda g: (g.last_modified_s, g.key))
    # Garbage overdue by N intervals has waited more than one too: skip the second plan then.
    waiting = overdue if overdue else plan_at(now - gc_interval_s)
    last_gc = last_boundary_advance(store, path)
    since = None if last_gc is None else max(0.0, now - last_gc)
    found = list(problems)
    all_notes = list(notes)
    by_resource: dict[str, int] = {}
    for g in overdue:
        by_resource[g.resource] = by_resource.get(g.resource, 0) + 1
    oldest = overdue[0] if overdue else None
    if oldest is not None:
        found.append(
            f"{len(overdue)} object(s) ({sum(g.size for g in overdue)} bytes: "
            + ", ".join(f"{n} {r}" for r, n in sorted(by_resource.items()))
            + f") of database {path} have been eligible for GC for more than {_span(overdue_after)} "
            f"(GC interval {_span(gc_interval_s)} x {intervals}); the oldest, {oldest.key}, was last "
            f"modified {_span(now - oldest.last_modified_s)} ago. Is a garbage collector running for it?"
        )
    if last_gc is None:
        evidence = "oldest_garbage"
        all_notes.append(
            "no gc/*.boundary file: no GC has ever deleted anything here; the oldest eligible garbage "
            "is the evidence"
        )
        if waiting and not overdue:
            first = min(waiting, key=lambda g: g.last_modified_s)
            found.append(
                f"no GC has ever advanced a boundary of database {path}, and {len(waiting)} object(s) "
                f"have been eligible for GC for more than one interval ({_span(gc_interval_s)}); the "
                f"oldest, {first.key}, was last modified {_span(now - first.last_modified_s)} ago"
            )
    else:
        evidence = "boundary"
        if since is not None and since > overdue_after and waiting:
            found.append(
                f"no GC has advanced a boundary of database {path} for {_span(since)} (last at "
                f"{render_utc(last_gc, UTC_SECONDS)}; allowed {_span(overdue_after)}), while "
                f"{len(waiting)} object(s) have been eligible for GC for more than one interval"
            )
    if not waiting:
        all_notes.append("nothing has waited for GC longer than one interval")
    return GcHealth(
        path=path,
        engine=engine,
        passed=not found,
        checked_at=datetime.fromtimestamp(now, tz=UTC),
        gc_interval_s=gc_interval_s,
        intervals=intervals,
        overdue_after_s=overdue_after,
        overdue_count=len(overdue),
        overdue_bytes=sum(g.size for g in overdue),
        oldest_overdue_key=None if oldest is None else oldest.key,
        oldest_overdue_age_s=None if oldest is None else now - oldest.last_modified_s,
        waiting_count=len(waiting),
        last_gc_at=None if last_gc is None else datetime.fromtimestamp(last_gc, tz=UTC),
        since_last_gc_s=since,
        evidence=evidence,
        overdue_by_resource=by_resource,
        problems=tuple(found),
        notes=tuple(all_notes),
    )


def _span(seconds: float) -> str:
    """A duration for people: ``6d 0h``, ``2h 5m``, ``30m 0s``, ``12.0s``."""
    s = max(0.0, seconds)
    if s >= 86400:
        return f"{int(s // 86400)}d {int(s % 86400 // 3600)}h"
    if s >= 3600:
        return f"{int(s // 3600)}h {int(s % 3600 // 60)}m"
    if s >= 60:
        return f"{int(s // 60)}m {int(s % 60)}s"
    return f"{s:.1f}s"
