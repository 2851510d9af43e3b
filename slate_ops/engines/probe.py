"""Which engine a database in a store belongs to: one LIST of its manifests and one GET.

Both engines keep ``<db>/manifest/<20-digit id>.manifest``, so the same LIST finds a database of
either kind (as ``admin.list_dbs`` finds ours); the latest manifest's bytes then decide
(:func:`slate_ops.engines.detect.detect_manifest`). No binding import.
"""

from __future__ import annotations

from dataclasses import dataclass

from slate_ops.engines.detect import Detection, detect_manifest
from slate_ops.errors import DbNotFoundError
from slate_ops.layout import manifest_key, normalize_db_path, parse_own_manifest_key
from slate_ops.objstore.base import ObjectStore

__all__ = ["Probe", "probe_db"]


@dataclass(frozen=True)
class Probe:
    """A database's engine, read from its latest manifest ``manifest_id`` at ``key``."""

    path: str
    manifest_id: int
    key: str
    detection: Detection


def probe_db(path: str, store: ObjectStore) -> Probe:
    """The engine of the database at ``path``: :class:`DbNotFoundError` when it has no manifest,
    :class:`~slate_ops.errors.CorruptObjectError` when its latest manifest is neither engine's."""
    db = normalize_db_path(path)
    prefix = manifest_key(db, 0).rsplit("/", 1)[0] + "/"
    ids = [i for m in store.list(prefix) if (i := parse_own_manifest_key(db, m.key)) is not None]
    if not ids:
        raise DbNotFoundError(
            f"no database at {path!r} in {store.url}: no manifest under {prefix}. Check the store URL "
            "and path, or create it with `slate-ops create-db`."
        )
    latest = max(ids)
    key = manifest_key(db, latest)
    return Probe(db, latest, key, detect_manifest(store.get(key).data, key))
