"""Lineage as Dagster data versions: what a clone or shard depends on in the database it came from.

A clone is made from a checkpoint of its parent, a shard from its source's state at the split; after
that the child holds its own references and never reads the parent's later writes. So the parent's
writes, compactions, GC runs and tags are nothing its children depend on, and Dagster must not badge
the children "Unsynced" when the parent is materialized again. What they do depend on is *which*
database the parent is: its store, its path, how it came to exist and, recursively, what it came
from. That is a database asset's data version, its **lineage version** (:func:`lineage_version`):
every materialization of a database records it, the asset's own (``MaterializeResult.data_version``)
and the ones maintenance, rescaling and cloning log (:func:`lineage_tags`). A child is then stale
exactly when the database one of its origins names became another database (another store, path or
origin, say) after the child was made from it.

A materialization an op logs for a database (maintenance, a rescale, a clone) carries provenance
tags like an asset's own: the code version (the run id, as Dagster uses for assets without one) and,
for each origin, the data version the child was made from. Maintenance does not remake a child from
its origin, so that provenance is carried forward from the child's previous materialization; only a
database recorded for the first time (a shard a split just made) takes its origins' current versions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

import dagster as dg

from slate_ops.objstore import redact_url
from slate_ops.orchestration.config import DatabaseConfig, SlateOpsConfig

LINEAGE_SCHEME = "slate_ops-lineage-1"
"""Hashed first into every lineage version: changing what a lineage version covers changes it."""

# The tags of Dagster's data provenance (dagster._core.definitions.data_version; no public names):
# what an asset's own materialization carries and dg.DataProvenance.from_tags reads back.
DATA_VERSION_TAG = "dagster/data_version"
CODE_VERSION_TAG = "dagster/code_version"
USER_PROVIDED_TAG = "dagster/data_version_is_user_provided"  # ours, not hashed by Dagster
INPUT_DATA_VERSION_TAG = "dagster/input_data_version"  # + "/<origin asset key>"
INPUT_EVENT_POINTER_TAG = "dagster/input_event_pointer"  # + "/<origin asset key>"
NULL_EVENT_POINTER = "NULL"
"""The input event pointer of an origin that has no materialization."""


def lineage_version(config: SlateOpsConfig, name: str) -> dg.DataVersion:
    """The lineage version of database ``name`` of ``config``: a hash of its store (credentials
    redacted), its path, how it comes to exist (created, clone, split or merge) and the lineage
    versions of the databases it came from. Writes, compaction, GC, checkpoints and tags leave it
    unchanged."""
    return dg.DataVersion(_lineage_digest(config, name, ()))


def _lineage_digest(config: SlateOpsConfig, name: str, seen: tuple[str, ...]) -> str:
    db = config.database(name)
    parts = [LINEAGE_SCHEME, redact_url(db.store_url), db.path, _origin_kind(db)]
    for origin in _origins(db):
        if origin in seen:  # a cycle the config validation would refuse; never recurse forever
            parts.append(f"cycle:{origin}")
            continue
        parts.append(f"{origin}={_lineage_digest(config, origin, (*seen, name))}")
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


def _origin_kind(db: DatabaseConfig) -> str:
    if db.parent is not None:
        return "clone"
    if db.rescaled_from is not None:
        return "split" if len(db.rescaled_from) == 1 else "merge"
    return "created"


def _origins(db: DatabaseConfig) -> list[str]:
    return [db.parent] if db.parent is not None else list(db.rescaled_from or ())


def lineage_tags(
    instance: dg.DagsterInstance,
    key: dg.AssetKey,
    version: dg.DataVersion,
    origin_keys: Sequence[dg.AssetKey],
    code_version: str,
) -> dict[str, str]:
    """The tags of a materialization of database asset ``key`` that an op logs: its lineage
    ``version`` as the data version, ``code_version``, and the provenance of each origin (``origin_keys``):
    carried forward from ``key``'s previous materialization when that one recorded the origin (the
    database was not remade from it), else the origin's current data version in ``instance``."""
    previous = _latest_materialization(instance, key)
    provenance = (
        None if previous is None else dg.DataProvenance.from_tags(previous.event_log_entry.tags or {})
    )
    tags = {CODE_VERSION_TAG: code_version, DATA_VERSION_TAG: version.value, USER_PROVIDED_TAG: "true"}
    for origin in origin_keys:
        if provenance is not None and provenance.has_input_asset(origin):
            data_version = provenance.input_data_versions[origin].value
            storage_id = provenance.input_storage_ids[origin]
        else:
            record = _latest_materialization(instance, origin)
            data_version, storage_id = _version_of(record)
        tags[f"{INPUT_DATA_VERSION_TAG}/{origin.to_user_string()}"] = data_version
        tags[f"{INPUT_EVENT_POINTER_TAG}/{origin.to_user_string()}"] = (
            NULL_EVENT_POINTER if storage_id is None else str(storage_id)
        )
    return tags


def _latest_materialization(instance: dg.DagsterInstance, key: dg.AssetKey) -> dg.EventLogRecord | None:
    records = instance.fetch_materializations(key, limit=1, ascending=False).records
    return records[0] if records else None


def _version_of(record: dg.EventLogRecord | None) -> tuple[str, int | None]:
    """The data version and storage id of an origin's materialization record (Dagster's INITIAL for
    a materialization without a data version, NULL for none)."""
    if record is None:
        return "NULL", None
    tags: Mapping[str, str] = record.event_log_entry.tags or {}
    return tags.get(DATA_VERSION_TAG, "INITIAL"), record.storage_id
