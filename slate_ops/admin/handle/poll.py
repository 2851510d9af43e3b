"""The manifest sensors' poll over a mixed fleet: :func:`state_since` of a database whose engine may
still be unknown, at the cost of a poll of a slate_ops database (unchanged: one LIST, or with
``probe`` one GET; changed: one LIST and one GET, with ``probe`` one GET more when more than one
manifest was written since), without a separate engine detection."""

from __future__ import annotations

from slate_ops.admin.handle import open as open_handle
from slate_ops.admin.handle.slate_ops_handle import SlateOpsHandle
from slate_ops.admin.handle.state import DbState
from slate_ops.engines.detect import Engine
from slate_ops.errors import SlateDbManifestError
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime

__all__ = ["state_since"]


def state_since(
    path: str,
    store: ObjectStore,
    engine: Engine | str | None,
    known_id: int | None,
    *,
    probe: bool = False,
    clock: Runtime = SYSTEM_RUNTIME,
) -> DbState | None:
    """``DatabaseHandle.state_since(known_id, probe=probe)`` of the database at ``path``.

    ``engine`` given: that engine's handle. None (detect): the manifests are listed (both engines
    name them alike; ``probe``: manifest ``known_id + 1`` is probed first) and, if one is newer than
    ``known_id``, read as slate_ops'; a SlateDB manifest
    (:class:`~slate_ops.errors.SlateDbManifestError`, told by its bytes) is then read through the
    handle :func:`slate_ops.admin.open` detects (which names an unsupported SlateDB version)."""
    if engine is not None:
        return open_handle(path, store, engine, clock=clock).state_since(known_id, probe=probe)
    try:
        return SlateOpsHandle(path, store, clock=clock).state_since(known_id, probe=probe)
    except SlateDbManifestError:
        return open_handle(path, store, None, clock=clock).state_since(None)
