"""GC of a soft-destroyed database (docs/design/gc.md, "Garbage Collector" step 2, "Deleting a Database").

Once ``destroyed_at_s + db_delete_grace`` has passed and no checkpoint is live, GC first removes the
final checkpoints this database (a clone) holds on its parents, then deletes every object under the
path, the current manifest last, so a crash part-way leaves a destroyed manifest that the next run
finishes. After that the GC of the database is done. A hard destroy (:mod:`slate_ops.admin.destroy`)
runs the same two steps at once.
"""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass

from slate_ops.errors import DbNotFoundError
from slate_ops.gc.report import DeletedObject
from slate_ops.manifest.model import Manifest
from slate_ops.manifest.store import MANIFEST_DIR, ManifestStore, VersionedManifest
from slate_ops.objstore.base import ObjectMeta, ObjectStore
from slate_ops.txn.paths import normalize_db_path

log = logging.getLogger(__name__)

_NESTED_MANIFEST = re.compile(rf"^(.+)/{MANIFEST_DIR}/\d{{20}}\.manifest$")


def release_external_checkpoints(manifest: Manifest, store: ObjectStore) -> list[tuple[str, uuid.UUID]]:
    """Remove ``manifest``'s final checkpoint from every external database; returns what was removed.

    Idempotent: a checkpoint already gone, or an external database that no longer exists (or was
    destroyed), is skipped. Used by hard destroy and by GC for destroyed clones.
    """
    released: list[tuple[str, uuid.UUID]] = []
    for ed in manifest.external_dbs:
        external = ManifestStore(store, ed.path)
        if _release(external, ed.final_checkpoint_id):
            released.append((external.path, ed.final_checkpoint_id))
    return released


def _release(external: ManifestStore, checkpoint_id: uuid.UUID) -> bool:
    """Remove one checkpoint from ``external``; False if it (or the database) is already gone."""
    found = False

    def drop(current: VersionedManifest) -> Manifest | None:
        nonlocal found
        found = current.value.checkpoint(checkpoint_id) is not None
        if not found:
            return None
        keep = tuple(c for c in current.value.checkpoints if c.id != checkpoint_id)
        return current.value.with_changes(checkpoints=keep)

    try:
        if external.read_latest() is None:
            return False
        external.update(drop)
    except DbNotFoundError:  # deleted while we looked
        return False
    return found


def delete_db_objects(path: str, store: ObjectStore, *, dry_run: bool = False) -> list[ObjectMeta]:
    """Delete every object of the database at ``path``, the current (highest) manifest last.

    Returns the objects in deletion order (``dry_run``: those that would be deleted). Objects of
    another database nested under ``path`` (a directory holding its own ``manifest/``) are left
    alone. A crash part-way leaves the current manifest, so the database still reads as destroyed
    and a re-run finishes the job.
    """
    db = normalize_db_path(path)
    prefix = f"{db}/" if db else ""
    metas = list(store.list(prefix))
    nested = {
        m.group(1) + "/"
        for meta in metas
        if (m := _NESTED_MANIFEST.match(meta.key[len(prefix) :])) is not None
    }
    sequence = ManifestStore(store, db).sequence
    ours: list[ObjectMeta] = []
    manifests: list[tuple[int, ObjectMeta]] = []
    for meta in metas:
        relative = meta.key[len(prefix) :]
        if any(relative.startswith(root) for root in nested):
            continue
        manifest_id = sequence.parse_id(meta.key)
        if manifest_id is None:
            ours.append(meta)
        else:
            manifests.append((manifest_id, meta))
    if nested:
        log.warning("destroying %s leaves the nested database(s) %s alone", db, sorted(nested))
    ordered = ours + [meta for _, meta in sorted(manifests, key=lambda item: item[0])]
    if not dry_run:
        for meta in ordered:
            store.delete(meta.key)
    return ordered


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
