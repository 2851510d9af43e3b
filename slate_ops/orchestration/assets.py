"""One asset per configured database: materializing it creates the database if missing and records
its state; the manifest sensor (:mod:`~slate_ops.orchestration.checkpoints`) records the same state as
observations."""

# No `from __future__ import annotations` here: Dagster reads the config and resource annotations
# of decorated functions at runtime.

import dagster as dg

from slate_ops.admin import create_db, read_manifest
from slate_ops.admin.clone import ensure_clone
from slate_ops.errors import ConfigError
from slate_ops.manifest.model import Manifest
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import redact_url
from slate_ops.objstore.base import ObjectStore
from slate_ops.orchestration.config import DatabaseConfig, SlateOpsConfig
from slate_ops.orchestration.metadata import database_metadata
from slate_ops.orchestration.resources import SlateDatabasesResource

ASSET_PREFIX = "slate_ops"
GROUP_NAME = "slate_ops"
ORIGIN_TAG = "slate_ops/origin"
"""Asset tag saying how a database comes to exist: ``created``, ``clone`` or ``rescale``."""
RESCALE_ORIGIN = "rescale"

DATABASES_JOB = "slate_ops_databases_job"
"""Materializes every database asset: creates missing databases and records their state."""


def database_asset_key(name: str) -> dg.AssetKey:
    return dg.AssetKey([ASSET_PREFIX, name])


def build_database_asset(db: DatabaseConfig) -> dg.AssetsDefinition:
    """The asset ``slate_ops/<name>`` of ``db``."""
    name = db.name

    @dg.asset(
        key=database_asset_key(name),
        group_name=GROUP_NAME,
        description=db.description or f"slate_ops database {db.path!r}",
        metadata={"store_url": dg.MetadataValue.text(redact_url(db.store_url)), "path": db.path},
        deps=[database_asset_key(origin) for origin in origins(db)] or None,  # clone, split, merge lineage
        tags={ORIGIN_TAG: origin_of(db)},
    )
    def _database(slate: SlateDatabasesResource) -> dg.MaterializeResult[None]:
        current = slate.database(name)
        store = slate.open_store(name)
        if current.rescaled_from is not None:
            if read_manifest_or_none(current.path, store) is None:
                raise ConfigError(
                    f"database {name!r} ({current.path}) does not exist yet: a split or merge of "
                    f"{', '.join(current.rescaled_from)} creates it; launch rescale_job"
                )
        elif current.parent is None:
            create_db(current.path, store, exist_ok=True)
        else:
            ensure_clone(current.path, slate.database(current.parent).path, store, clock=slate.clock())
        state = read_manifest(current.path, store)
        return dg.MaterializeResult(metadata=database_metadata(current.path, state, slate.clock().now()))

    return _database


def origin_of(db: DatabaseConfig) -> str:
    """How ``db`` comes to exist (the value of its asset's :data:`ORIGIN_TAG`)."""
    if db.rescaled_from is not None:
        return RESCALE_ORIGIN
    return "clone" if db.parent is not None else "created"


def origins(db: DatabaseConfig) -> list[str]:
    """The configured databases ``db`` was cloned, split or merged from."""
    return [db.parent] if db.parent is not None else list(db.rescaled_from or ())


def read_manifest_or_none(path: str, store: ObjectStore) -> Manifest | None:
    latest = ManifestStore(store, path).read_latest()
    return None if latest is None else latest.value


def build_database_assets(config: SlateOpsConfig) -> list[dg.AssetsDefinition]:
    return [build_database_asset(db) for db in config.databases]


databases_job = dg.define_asset_job(
    DATABASES_JOB,
    # Shards and merges are created together by rescale_job, never one asset at a time.
    selection=dg.AssetSelection.groups(GROUP_NAME) - dg.AssetSelection.tag(ORIGIN_TAG, RESCALE_ORIGIN),
    executor_def=dg.in_process_executor,  # short steps: one process per run, not one per step
    description="Create every configured database that is missing (clones included; shards and "
    "merges come from rescale_job) and record its state.",
)
