"""Invariants over the whole family of databases (the lifecycle part of tests/reliability/simulation.py).

* **references**: :func:`slate_ops.admin.reachability.check_references` over every database the
  simulation knows (main, the admin actor's clones, every lifecycle database not yet gone) finds
  nothing: every SST a live database can read exists, every external entry of an initialised
  database is pinned by an unexpired checkpoint on the external database with the entry's
  ``final_checkpoint_id``, and no two entries share a final checkpoint;
* **content**: every live, initialised, not destroyed lifecycle database reads exactly its model,
  and every tag on one reads what the database held when the tag was created;
* **verify_db**: no error-severity problem on any live lifecycle database;
* **GC finishes destroys**: after the final maintenance, a destroyed database that GC may delete (the
  grace period over, no live checkpoint) is gone;
* **a finished deletion leaves only its fences**: after a hard destroy returns, the path holds
  exactly what a deletion keeps by design (:func:`deletion_leftovers`), nothing a re-run would
  still delete, and no database a reader opens.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from slate_ops import admin
from slate_ops.admin.reachability import (
    MISSING_EXTERNAL_DB,
    UNPINNED_EXTERNAL,
    ReferenceProblem,
    check_references,
)
from slate_ops.admin.verify import Severity
from slate_ops.layout import (
    COMPACTED_DIR,
    COMPACTIONS_DIR,
    MANIFEST_DIR,
    WAL_DIR,
    deleted_marker_key,
    own_directory,
    parse_boundary_key,
    parse_compactions_key,
    parse_own_manifest_key,
    parse_wal_key,
)
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore.base import ObjectStore
from tests.reliability.sim.runtime import InvariantViolation, diff

if TYPE_CHECKING:
    from tests.reliability.sim.context import SimContext
    from tests.reliability.sim.family import Member


def check_reachable(ctx: SimContext) -> None:
    """``check_references`` over every database the simulation knows finds no problem (but see
    :func:`_interrupted_detach`)."""
    paths = ctx.known_paths()
    now = ctx.clock.now()
    found = check_references(ctx.inner, paths, now=now)
    problems = [p for p in found if not _interrupted_detach(ctx, p, now)]
    ctx.checks["references_reachable"] += 1
    ctx.figures["references_tolerated_interrupted_detach"] += len(found) - len(problems)
    if problems:
        shown = "\n    ".join(str(p) for p in problems[:6])
        raise ctx.violation(
            f"check_references over {len(paths)} database(s) found {len(problems)} problem(s):\n    {shown}"
        )


def read(
    ctx: SimContext, path: str, checkpoint_id: uuid.UUID | None = None, *, what: str
) -> dict[bytes, bytes]:
    """A fresh reader's scan of ``path`` (at ``checkpoint_id``); failing to read is a violation (an
    SST or a manifest it needs is gone)."""
    try:
        return ctx.oracle_read(path, checkpoint_id)
    except InvariantViolation:
        raise
    except Exception as error:
        raise ctx.violation(f"{what} cannot be read: {type(error).__name__}: {error}") from error


def check_member(ctx: SimContext, member: Member) -> None:
    """A live lifecycle database reads exactly its model."""
    observed = read(ctx, member.path, what=f"{member.path} ({member.describe()})")
    ctx.checks["family_reads_its_model"] += 1
    if observed != member.model.current:
        raise ctx.violation(
            f"{member.path} ({member.describe()}) does not read its model: "
            f"{diff(observed, member.model.current)}"
        )


def check_tags(ctx: SimContext, member: Member) -> None:
    """Every tag of a live lifecycle database reads what the database held when it was tagged."""
    for tag in member.tags.values():
        observed = read(ctx, member.path, tag.checkpoint_id, what=f"tag {tag.name} of {member.path}")
        ctx.checks["family_tag_unchanged"] += 1
        if observed != tag.content:
            raise ctx.violation(
                f"tag {tag.name} of {member.path} reads differently than when created: "
                f"{diff(observed, tag.content)}"
            )


def verify_member(ctx: SimContext, member: Member) -> None:
    results = admin.verify_db(member.path, ctx.inner, l0_max_ssts=1_000_000, clock=ctx.clock, max_workers=1)
    ctx.checks["verify_db"] += 1
    errors = [p for r in results if not r.passed and r.severity is Severity.ERROR for p in r.problems]
    if errors:
        raise ctx.violation(f"verify_db({member.path}) reports: {errors[:4]}")


def check_destroyed_reclaimed(ctx: SimContext, member: Member) -> None:
    """After the final maintenance, a destroyed database that GC may delete is gone."""
    latest = ManifestStore(ctx.inner, member.path).read_latest()
    ctx.checks["gc_finishes_destroys"] += 1
    if latest is None:
        return
    now = ctx.clock.now()
    manifest = latest.value
    if manifest.destroyed_at_s is None:
        raise ctx.violation(f"{member.path} was destroyed, but its manifest has no destroyed_at_s")
    live = [c for c in manifest.checkpoints if not c.is_expired(now)]
    due = now >= manifest.destroyed_at_s + ctx.gc_options().db_delete_grace.total_seconds()
    if due and not live:
        raise ctx.violation(
            f"{member.path} was destroyed at {manifest.destroyed_at_s}, its grace period is over and no "
            "checkpoint is live, but GC left it in place"
        )


def deletion_leftovers(store: ObjectStore, path: str) -> list[str]:
    """What a finished deletion of ``path`` (hard destroy, or GC of a destroyed database) left beyond
    what it keeps by design; empty when all is well. Judged from the objects, not from the deletion's
    report (docs/design/clones-and-destroy.md, "Deleting a Database"):

    * no manifest at all (the path never held a database), or exactly one: a tombstone;
    * in ``wal/`` at most the WAL fence, the tombstone's ``replay_after_wal_id`` (none when that is 0:
      a database never initialised has its WAL deleted whole);
    * no SST in ``compacted/``; at most one ``.compactions`` file (the claim that fences compactors);
    * in ``gc/`` only the marker ``deleted.<tombstone id>`` and GC boundaries;
    * nothing else under the path (a nested database's objects would be, but the family has none).

    A stale process's orphan (say a WAL object below the fence written after the deletion) is not
    allowed either: no actor of the simulation holds a family database across a lifecycle step.
    """
    manifests = ManifestStore(store, path)
    keys = sorted(meta.key for meta in store.list(path + "/"))
    manifest_ids = [mid for key in keys if (mid := parse_own_manifest_key(path, key)) is not None]
    if not manifest_ids:
        return [f"{key} (no manifest is left)" for key in keys]
    problems: list[str] = []
    if len(manifest_ids) > 1:
        problems.append(f"{len(manifest_ids)} manifests {manifest_ids}, not one tombstone")
    tombstone_id = max(manifest_ids)
    tombstone = manifests.read(tombstone_id).value
    if not tombstone.is_tombstone:
        problems.append(f"manifest {tombstone_id} is not a tombstone: the database is readable")
    fence = tombstone.replay_after_wal_id
    compactions = 0
    for key in keys:
        if key.startswith(own_directory(path, MANIFEST_DIR)) and parse_own_manifest_key(path, key):
            continue
        wal_id = parse_wal_key(path, key)
        if wal_id is not None and wal_id == fence != 0:
            continue
        if parse_compactions_key(path, key) is not None:
            compactions += 1
            if compactions == 1:
                continue
        if key == deleted_marker_key(path, tombstone_id) or parse_boundary_key(path, key) is not None:
            continue
        where = next(
            (d for d in (WAL_DIR, COMPACTED_DIR, COMPACTIONS_DIR) if key.startswith(own_directory(path, d))),
            "elsewhere",
        )
        problems.append(f"{key} ({where})")
    return problems


def _interrupted_detach(ctx: SimContext, problem: ReferenceProblem, now: float) -> bool:
    """An ``unpinned_external`` or ``missing_external_db`` problem of a database none of whose
    unprotected entries (in the latest manifest and in every live checkpoint's) lists an SST: what an
    interrupted GC detach leaves by design (it releases the final checkpoint first, then drops the
    entry, and the next run drops it: slate_ops/gc/clones.py), also after the external database,
    now unpinned, was hard-destroyed. Nothing is read through such an entry, so nothing is at risk."""
    if problem.kind not in (UNPINNED_EXTERNAL, MISSING_EXTERNAL_DB):
        return False
    manifests = ManifestStore(ctx.inner, problem.database)
    latest = manifests.read_latest()
    if latest is None:
        return False
    versions = [latest.value]
    versions += [
        manifests.read(c.manifest_id).value for c in latest.value.checkpoints if not c.is_expired(now)
    ]
    unprotected = []
    for entry in (e for m in versions for e in m.external_dbs):
        external = ManifestStore(ctx.inner, entry.path).read_latest()
        final = None if external is None else external.value.checkpoint(entry.final_checkpoint_id)
        if final is None or final.is_expired(now):
            unprotected.append(entry)
    return bool(unprotected) and not any(e.sst_ids for e in unprotected)
