"""One asset per configured database: materializing it creates the database if missing and records
its state, with what its object-store requests cost per day by source
(:func:`~slate_ops.orchestration.cost_assets.database_cost_metadata`); the manifest sensor
(:mod:`~slate_ops.orchestration.checkpoints`) records the same state as observations."""

# No `from __future__ import annotations` here: Dagster reads the config and resource annotations
# of decorated functions at runtime.

import re

import dagster as dg
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

from slate_ops.admin import create_db
from slate_ops.admin.handle.state import latest_manifest_id_since
from slate_ops.errors import ConfigError, DbNotFoundError, SlateDbManifestError
from slate_ops.objstore import redact_url
from slate_ops.objstore.base import ObjectStore
from slate_ops.orchestration.config import DatabaseConfig, SlateOpsConfig
from slate_ops.orchestration.cost_assets import database_cost_metadata, fleet_cost_key
from slate_ops.orchestration.lineage import lineage_version
from slate_ops.orchestration.metadata import database_metadata
from slate_ops.orchestration.naming import ASSET_PREFIX as ASSET_PREFIX
from slate_ops.orchestration.naming import DEFAULT, Naming
from slate_ops.orchestration.naming import GROUP_NAME as GROUP_NAME
from slate_ops.orchestration.resources import SlateDatabasesResource

ORIGIN_TAG = "slate_ops/origin"
"""Asset tag saying how a database comes to exist: ``created``, ``clone`` or ``rescale``."""
RESCALE_ORIGIN = "rescale"

DATABASES_JOB = "slate_ops_databases_job"
"""Materializes every database asset: creates missing databases and records their state."""


def database_asset_key(name: str) -> dg.AssetKey:
    """The asset key of database ``name`` in the default (unprefixed) fleet: ``slate_ops/<name>``."""
    return DEFAULT.default_asset_key(name)


def default_asset_spec(db: DatabaseConfig, config: SlateOpsConfig, naming: Naming = DEFAULT) -> dg.AssetSpec:
    """slate_ops' spec of ``db``'s asset: its key, its origins as deps, group, tags, metadata."""
    return dg.AssetSpec(
        key=naming.default_asset_key(db.name),
        group_name=naming.group,
        description=db.description or f"slate_ops database {db.path!r}",
        metadata={"store_url": dg.MetadataValue.text(redact_url(db.store_url)), "path": db.path},
        # clone, split, merge lineage
        deps=[naming.asset_key_of(config.database(origin)) for origin in origins(db)],
        tags={ORIGIN_TAG: origin_of(db)},
    )


def database_asset_spec(db: DatabaseConfig, config: SlateOpsConfig, naming: Naming = DEFAULT) -> dg.AssetSpec:
    """The spec of ``db``'s asset: :func:`default_asset_spec` through ``naming``'s ``asset_spec`` hook."""
    return naming.asset_spec(db, default_asset_spec(db, config, naming))


def op_name_of(key: dg.AssetKey) -> str:
    """The op name of the asset ``key`` (its components joined by ``__``, other characters ``_``)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", "__".join(key.path))


def build_database_asset(
    db: DatabaseConfig, config: SlateOpsConfig | None = None, naming: Naming = DEFAULT
) -> dg.AssetsDefinition:
    """The asset of ``db`` (``slate_ops/<name>``, or as ``naming`` names it) in ``config`` (default:
    a config of ``db`` alone)."""
    name = db.name
    spec = database_asset_spec(db, config if config is not None else SlateOpsConfig(databases=[db]), naming)

    @dg.multi_asset(specs=[spec], name=op_name_of(spec.key), required_resource_keys=naming.slate_keys)
    def _database(context: dg.AssetExecutionContext) -> dg.MaterializeResult[None]:
        slate = naming.slate(context)
        current = slate.database(name)
        store = slate.open_store(name)
        if current.rescaled_from is not None:
            if not database_exists(current.path, store):
                raise ConfigError(
                    f"database {name!r} ({current.path}) does not exist yet: a split or merge of "
                    f"{', '.join(current.rescaled_from)} creates it; launch {naming.name('rescale_job')}"
                )
        elif current.parent is None:
            ensure_database(current, store)
        else:
            ensure_clone(slate, current, slate.database(current.parent), store)
        state = slate.handle_for(current, store).state_since(None)
        assert state is not None  # no known manifest: always read
        return dg.MaterializeResult(
            asset_key=spec.key,
            metadata={
                **database_metadata(state),
                **database_cost_metadata(context.instance, spec.key, name, slate.config),
            },
            data_version=lineage_version(slate.config, name),  # what children depend on: not every write
        )

    return _database


def origin_of(db: DatabaseConfig) -> str:
    """How ``db`` comes to exist (the value of its asset's :data:`ORIGIN_TAG`)."""
    if db.rescaled_from is not None:
        return RESCALE_ORIGIN
    return "clone" if db.parent is not None else "created"


def origins(db: DatabaseConfig) -> list[str]:
    """The configured databases ``db`` was cloned, split or merged from."""
    return [db.parent] if db.parent is not None else list(db.rescaled_from or ())


def database_exists(path: str, store: ObjectStore) -> bool:
    """Whether ``path`` holds a database of either engine (one LIST of its manifests)."""
    try:
        latest_manifest_id_since(path, store, None)
    except DbNotFoundError:
        return False
    return True


def ensure_clone(
    slate: SlateDatabasesResource, clone: DatabaseConfig, parent: DatabaseConfig, store: ObjectStore
) -> None:
    """Create the clone ``clone`` of ``parent`` through the parent's admin handle, or finish an
    interrupted one; nothing when it is already initialised (so a clone later detached from its
    parent by GC stays valid): one LIST, and a read of the clone's manifest when it exists."""
    if database_exists(clone.path, store) and slate.handle_for(clone, store).describe().initialized:
        return
    slate.handle_for(parent, store).clone_to(clone.path)


def ensure_database(db: DatabaseConfig, store: ObjectStore) -> None:
    """Create ``db`` as an empty slate_ops database if it is missing (a new database is slate_ops');
    an existing database of either engine is left as it is. slate_ops never creates a SlateDB
    database: one configured with ``engine: slatedb`` must exist (written by SlateDB)."""
    if db.engine == "slatedb":
        if not database_exists(db.path, store):
            raise ConfigError(
                f"SlateDB database {db.name!r} ({db.path}) does not exist in {redact_url(db.store_url)}: "
                "slate_ops maintains SlateDB databases but does not create them; open it with SlateDB's "
                "Db first, or set engine: auto to create a slate_ops database there"
            )
        return
    try:
        create_db(db.path, store, exist_ok=True)
    except SlateDbManifestError:  # a SlateDB database is there (engine: auto): maintain it as it is
        if db.engine == "slate_ops":
            raise


def build_database_assets(config: SlateOpsConfig, naming: Naming = DEFAULT) -> list[dg.AssetsDefinition]:
    return [build_database_asset(db, config, naming) for db in config.databases]


def build_databases_job(naming: Naming = DEFAULT) -> UnresolvedAssetJobDefinition:
    """``slate_ops_databases_job`` of the fleet ``naming`` names."""
    return dg.define_asset_job(
        naming.name(DATABASES_JOB),
        # Shards and merges are created together by rescale_job, never one asset at a time.
        # The fleet's cost asset reads the event log, not the databases: materialized on its own.
        selection=dg.AssetSelection.groups(naming.group)
        - dg.AssetSelection.tag(ORIGIN_TAG, RESCALE_ORIGIN)
        - dg.AssetSelection.assets(fleet_cost_key(naming)),
        executor_def=dg.in_process_executor,  # short steps: one process per run, not one per step
        description="Create every configured database that is missing (clones included; shards and "
        f"merges come from {naming.name('rescale_job')}) and record its state.",
    )


databases_job = build_databases_job()
