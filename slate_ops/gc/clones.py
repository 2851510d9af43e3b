"""Detaching a clone from an external database it no longer reads (docs/design/gc.md, "The tasks").

An external database whose ``sst_ids`` is empty in the latest manifest and in every live
checkpoint's manifest is no longer read by anything of this database: GC removes the clone's final
checkpoint from the external database (so that database's GC may reclaim the SSTs), then removes the
entry from this manifest. A crash in between leaves the entry; the next run finds the checkpoint
already gone and finishes.
"""

from __future__ import annotations

from slate_ops.gc.destroyed import release_external_checkpoints
from slate_ops.manifest.model import ExternalDb, Manifest
from slate_ops.manifest.store import ManifestStore, VersionedManifest
from slate_ops.objstore.base import ObjectStore


def detachable(latest: Manifest, in_use: set[str]) -> list[ExternalDb]:
    """The external databases of ``latest`` that no protected manifest lists SSTs of."""
    return [e for e in latest.external_dbs if not e.sst_ids and e.path not in in_use]


def detach(manifests: ManifestStore, store: ObjectStore, externals: list[ExternalDb]) -> list[str]:
    """Release each external database's final checkpoint, then drop the entries; returns their paths."""
    if not externals:
        return []
    for external in externals:
        release_external_checkpoints(Manifest(external_dbs=(external,)), store)
    paths = {e.path for e in externals}
    detached: list[str] = []

    def drop(current: VersionedManifest) -> Manifest | None:
        gone = [e for e in current.value.external_dbs if e.path in paths and not e.sst_ids]
        detached[:] = [e.path for e in gone]
        if not gone:
            return None
        keep = tuple(e for e in current.value.external_dbs if e not in gone)
        return current.value.with_changes(external_dbs=keep)

    manifests.update(drop)
    return detached
