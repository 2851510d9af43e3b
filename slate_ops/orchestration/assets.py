"""One asset per configured database: materializing it creates the database if missing and records
its state; :mod:`~slate_ops.orchestration.sensors` records the same state as observations."""

# No `from __future__ import annotations` here: Dagster reads the config and resource annotations
# of decorated functions at runtime.

from typing import Any
from urllib.parse import urlsplit

import dagster as dg

from slate_ops.admin import DbStatus, LsmShape, create_db, read_manifest, shape_of
from slate_ops.admin.clone import ensure_clone
from slate_ops.admin.db import status_of
from slate_ops.admin.shape import shape_rows
from slate_ops.admin.tags import find_tags, is_tag
from slate_ops.errors import ConfigError
from slate_ops.manifest.model import Manifest
from slate_ops.manifest.store import ManifestStore, VersionedManifest
from slate_ops.objstore.base import ObjectStore
from slate_ops.orchestration.config import DatabaseConfig, SlateOpsConfig
from slate_ops.orchestration.resources import SlateDatabasesResource

ASSET_PREFIX = "slate_ops"
GROUP_NAME = "slate_ops"
ORIGIN_TAG = "slate_ops/origin"
"""Asset tag saying how a database comes to exist: ``created``, ``clone`` or ``rescale``."""
RESCALE_ORIGIN = "rescale"


def database_asset_key(name: str) -> dg.AssetKey:
    return dg.AssetKey([ASSET_PREFIX, name])


def status_metadata(status: DbStatus) -> dict[str, dg.MetadataValue]:
    """The manifest summary of ``describe_db`` as asset metadata."""
    metadata: dict[str, dg.MetadataValue] = {
        "manifest_id": dg.MetadataValue.int(status.manifest_id),
        "initialized": dg.MetadataValue.bool(status.initialized),
        "writer_epoch": dg.MetadataValue.int(status.writer_epoch),
        "compactor_epoch": dg.MetadataValue.int(status.compactor_epoch),
        "l0_ssts": dg.MetadataValue.int(status.l0_ssts),
        "sorted_runs": dg.MetadataValue.int(status.sorted_runs),
        "ssts": dg.MetadataValue.int(status.ssts),
        "sst_bytes": dg.MetadataValue.int(status.sst_bytes),
        "checkpoints": dg.MetadataValue.int(status.checkpoints),
        "expired_checkpoints": dg.MetadataValue.int(status.expired_checkpoints),
        "external_dbs": dg.MetadataValue.int(status.external_dbs),
    }
    if status.destroyed_at_s is not None:
        metadata["destroyed_at_s"] = dg.MetadataValue.int(status.destroyed_at_s)
    return metadata


def database_metadata(path: str, current: VersionedManifest, now: float) -> dict[str, dg.MetadataValue]:
    """What an observation or materialization records of manifest ``current``: :func:`status_metadata`
    plus ``lsm_shape`` (:func:`shape_markdown`), ``checkpoint_names`` (tags left out), ``tag_count``
    and ``tag_names``. Built from this one manifest: no further reads."""
    manifest = current.value
    checkpoints = [c.name or str(c.id) for c in manifest.checkpoints if not is_tag(c)]
    tags = [t.name for t in find_tags(manifest)]
    return {
        **status_metadata(status_of(path, current, now)),
        "lsm_shape": dg.MetadataValue.md(shape_markdown(shape_of(current.id, manifest))),
        "checkpoint_names": dg.MetadataValue.text(", ".join(checkpoints) or "-"),
        "tag_count": dg.MetadataValue.int(len(tags)),
        "tag_names": dg.MetadataValue.text(", ".join(tags) or "-"),
    }


def shape_markdown(shape: LsmShape) -> str:
    """A Markdown table of ``shape``: one row per L0 SST and per sorted run, newest first."""
    title = f"Manifest {shape.manifest_id}: {len(shape.l0)} L0 SST(s), {len(shape.sorted_runs)} sorted run(s)"
    rows = shape_rows(shape)
    if not rows:
        return f"{title}."
    lines = [
        f"{title}:",
        "",
        "| level | id | SSTs | first key | last key | bytes | entries |",
        "| --- | --- | ---: | --- | --- | ---: | ---: |",
    ]
    for row in rows:
        cells = [row["level"], row["id"], row["ssts"], row["first_key"], row["last_key"]]
        cells += [row["bytes"], row["entries"]]
        lines.append("| " + " | ".join(_md_cell(c) for c in cells) + " |")
    return "\n".join(lines)


def _md_cell(value: Any) -> str:
    return "-" if value is None else str(value).replace("|", "\\|")


def shape_metadata(shape: LsmShape) -> dict[str, dg.MetadataValue]:
    """The shape as asset metadata, with the same counter names as the manifest sensor's observations."""
    sst_bytes = sum(s.size_bytes for s in shape.l0) + sum(r.size_bytes for r in shape.sorted_runs)
    return {
        "manifest_id": dg.MetadataValue.int(shape.manifest_id),
        "l0_ssts": dg.MetadataValue.int(len(shape.l0)),
        "sorted_runs": dg.MetadataValue.int(len(shape.sorted_runs)),
        "ssts": dg.MetadataValue.int(len(shape.l0) + sum(r.ssts for r in shape.sorted_runs)),
        "sst_bytes": dg.MetadataValue.int(sst_bytes),
        "lsm_shape": dg.MetadataValue.md(shape_markdown(shape)),
    }


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


def redact_url(url: str) -> str:
    """``url`` without its query string, which may carry credentials."""
    parts = urlsplit(url)
    return parts._replace(query="…" if parts.query else "", fragment="").geturl()
