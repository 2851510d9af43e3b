"""Deleting a batch of objects: every failure is recorded, the rest still go."""

from __future__ import annotations

import logging

from slate_ops.gc.report import DeletedObject
from slate_ops.objstore.base import ObjectMeta, ObjectStore

log = logging.getLogger(__name__)


def delete_objects(
    store: ObjectStore, metas: list[ObjectMeta], resource: str
) -> tuple[list[DeletedObject], list[str]]:
    """Delete ``metas`` in key order; returns what was deleted and one message per failure."""
    deleted: list[DeletedObject] = []
    errors: list[str] = []
    for meta in sorted(metas, key=lambda m: m.key):
        try:
            store.delete(meta.key)
        except Exception as error:
            log.error("GC could not delete %s: %s", meta.key, error)
            errors.append(f"{resource}: deleting {meta.key} failed: {type(error).__name__}: {error}")
            continue
        deleted.append(DeletedObject.of(meta))
    return deleted, errors
