"""What a database holds, read the way its users read it: its contents and its current manifest."""

from __future__ import annotations

from slate_ops import DbReader
from slate_ops.manifest.model import Manifest
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore.base import ObjectStore
from tests.support.engine import QUIET_READER


def contents(store: ObjectStore, path: str) -> dict[bytes, bytes]:
    """Everything a reader of the current state sees (WAL included)."""
    with DbReader.open(path, store, options=QUIET_READER) as reader:
        return dict(reader.scan())


def manifest(store: ObjectStore, path: str) -> Manifest:
    return ManifestStore(store, path).read_latest_required().value
