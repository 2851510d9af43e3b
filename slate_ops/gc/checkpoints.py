"""Removing expired checkpoints (docs/design/gc.md, "The tasks"): a GC task, also an admin call."""

from __future__ import annotations

from dataclasses import dataclass, field

from slate_ops.manifest.model import Checkpoint, Manifest
from slate_ops.manifest.store import ManifestStore, VersionedManifest
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.metering import ZERO, RequestCounts
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime


@dataclass(frozen=True)
class CheckpointExpiryReport:
    """What :func:`expire_checkpoints` removed, or would remove with ``dry_run``."""

    dry_run: bool
    manifest_id: int  # the manifest examined (dry run) or committed
    expired: tuple[Checkpoint, ...]
    requests: RequestCounts = field(default=ZERO, compare=False)
    """The object-store requests and bytes this operation made (through the admin handle; zero
    when called directly)."""


def expire_checkpoints(
    path: str, store: ObjectStore, *, dry_run: bool = True, clock: Runtime = SYSTEM_RUNTIME
) -> CheckpointExpiryReport:
    """Remove every checkpoint whose expiry time has passed (docs/design/gc.md, "The tasks").

    Defaults to a dry run. A dry run and a real run of the same state report the same set; a
    checkpoint refreshed concurrently is re-evaluated on the retry and kept.
    """
    manifests = ManifestStore(store, path)
    if dry_run:
        current = manifests.read_latest_required()
        now = clock.now()
        expired = tuple(c for c in current.value.checkpoints if c.is_expired(now))
        return CheckpointExpiryReport(True, current.id, expired)

    found: list[Checkpoint] = []

    def expire(current: VersionedManifest) -> Manifest | None:
        now = clock.now()
        found[:] = [c for c in current.value.checkpoints if c.is_expired(now)]
        if not found:
            return None
        keep = tuple(c for c in current.value.checkpoints if not c.is_expired(now))
        return current.value.with_changes(checkpoints=keep)

    committed = manifests.update(expire)
    return CheckpointExpiryReport(False, committed.id, tuple(found))
