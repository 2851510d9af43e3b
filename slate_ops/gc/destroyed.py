"""GC of a soft-destroyed database (spec 000 "Garbage Collector" step 2, "Deleting a Database").

Once ``destroyed_at_s + db_delete_grace`` has passed and no checkpoint is live, GC first removes the
final checkpoints this database (a clone) holds on its parents, then deletes every object under the
path, the current manifest last — both through :mod:`slate_ops.admin.destroy`, so a crash part-way
leaves a destroyed manifest that the next run finishes. After that the GC of the database is done.
"""

from __future__ import annotations

from dataclasses import dataclass

from slate_ops.admin.destroy import delete_db_objects, release_external_checkpoints
from slate_ops.gc.report import DeletedObject
from slate_ops.manifest.model import Manifest
from slate_ops.objstore.base import ObjectStore


def due_for_deletion(manifest: Manifest, now: float, grace_s: float) -> bool:
    """Destroyed, the grace period over, and no live checkpoint (expired ones do not count)."""
    return (
        manifest.destroyed_at_s is not None
        and now >= manifest.destroyed_at_s + grace_s
        and not any(not c.is_expired(now) for c in manifest.checkpoints)
    )


@dataclass(frozen=True)
class DestroyOutcome:
    deleted: tuple[DeletedObject, ...]
    released: tuple[str, ...]  # "<parent path>: <checkpoint id>"


def delete_destroyed(path: str, store: ObjectStore, manifest: Manifest, *, dry_run: bool) -> DestroyOutcome:
    """Release the parents' final checkpoints, then delete everything (dry run: report only)."""
    if dry_run:
        released = [f"{e.path}: {e.final_checkpoint_id}" for e in manifest.external_dbs]
    else:
        released = [f"{p}: {c}" for p, c in release_external_checkpoints(manifest, store)]
    deleted = delete_db_objects(path, store, dry_run=dry_run)
    return DestroyOutcome(tuple(DeletedObject.of(m) for m in deleted), tuple(released))
