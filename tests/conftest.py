"""Shared helpers for the whole suite."""

from __future__ import annotations

from slate_ops.objstore import ObjectStore


def snapshot(store: ObjectStore, prefix: str = "") -> dict[str, str]:
    """Every object's key and etag: equal snapshots prove an operation wrote and deleted nothing."""
    return {meta.key: meta.etag for meta in store.list(prefix)}
