"""The operator API: what the CLI and the Dagster ops call. Every function takes ``(path, store)``."""

from slate_ops.admin.checkpoints import (
    CheckpointExpiryReport,
    create_checkpoint,
    delete_checkpoint,
    expire_checkpoints,
    list_checkpoints,
    refresh_checkpoint,
)
from slate_ops.admin.db import (
    DbStatus,
    ManifestFile,
    create_db,
    describe_db,
    list_manifests,
    read_manifest,
)
from slate_ops.admin.shape import LsmShape, RunSummary, SstSummary, lsm_shape, shape_of

__all__ = [
    "CheckpointExpiryReport",
    "DbStatus",
    "LsmShape",
    "ManifestFile",
    "RunSummary",
    "SstSummary",
    "create_checkpoint",
    "create_db",
    "delete_checkpoint",
    "describe_db",
    "expire_checkpoints",
    "list_checkpoints",
    "list_manifests",
    "lsm_shape",
    "read_manifest",
    "refresh_checkpoint",
    "shape_of",
]
