"""The operator API: what the CLI and the Dagster ops call. Every function takes ``(path, store)``."""

from slate_ops.admin.checkpoints import (
    CheckpointExpiryReport,
    create_checkpoint,
    delete_checkpoint,
    expire_checkpoints,
    list_checkpoints,
    refresh_checkpoint,
)
from slate_ops.admin.clone import create_clone, open_from_checkpoint
from slate_ops.admin.collect import run_gc
from slate_ops.admin.compact import compact
from slate_ops.admin.db import (
    DbDetail,
    DbStatus,
    ManifestFile,
    SstCounts,
    create_db,
    describe_db,
    describe_db_detail,
    list_manifests,
    read_manifest,
    sst_counts,
)
from slate_ops.admin.destroy import DestroyReport, destroy
from slate_ops.admin.fleet import DbListing, list_dbs
from slate_ops.admin.handle import DatabaseHandle, SlateDbHandle, SlateOpsHandle, open
from slate_ops.admin.history import ManifestChange, manifest_history
from slate_ops.admin.reachability import check_references as check_references
from slate_ops.admin.rescale import NewDatabase, RescaleReport, merge, split
from slate_ops.admin.rollback import DiscardedSst, DiscardedWal, RollbackReport, rollback_to_tag
from slate_ops.admin.shape import LsmShape, RunSummary, SstSummary, lsm_shape, shape_of
from slate_ops.admin.split_keys import (
    SplitSuggestion,
    balanced_ranges,
    explain_split_keys,
    suggest_split_keys,
)
from slate_ops.admin.tag_policy import TagDeletion, TagPolicy, TagPolicyReport, apply_tag_policy
from slate_ops.admin.tags import Tag, create_tag, delete_tag, list_tags
from slate_ops.admin.verify import CheckResult, Severity, verify_db

__all__ = [
    "CheckResult",
    "CheckpointExpiryReport",
    "DatabaseHandle",
    "DbDetail",
    "DbListing",
    "DbStatus",
    "DestroyReport",
    "DiscardedSst",
    "DiscardedWal",
    "LsmShape",
    "ManifestChange",
    "ManifestFile",
    "NewDatabase",
    "RescaleReport",
    "RollbackReport",
    "RunSummary",
    "Severity",
    "SlateDbHandle",
    "SlateOpsHandle",
    "SplitSuggestion",
    "SstCounts",
    "SstSummary",
    "Tag",
    "TagDeletion",
    "TagPolicy",
    "TagPolicyReport",
    "apply_tag_policy",
    "balanced_ranges",
    "compact",
    "create_checkpoint",
    "create_clone",
    "create_db",
    "create_tag",
    "delete_checkpoint",
    "delete_tag",
    "describe_db",
    "describe_db_detail",
    "destroy",
    "expire_checkpoints",
    "explain_split_keys",
    "list_checkpoints",
    "list_dbs",
    "list_manifests",
    "list_tags",
    "lsm_shape",
    "manifest_history",
    "merge",
    "open",
    "open_from_checkpoint",
    "read_manifest",
    "refresh_checkpoint",
    "rollback_to_tag",
    "run_gc",
    "shape_of",
    "split",
    "sst_counts",
    "suggest_split_keys",
    "verify_db",
]
