"""Group 6, other operator mistakes: creating over an existing database, a missing manifest version,
destroying a database with a live checkpoint, bad paths and store URLs."""

from __future__ import annotations

from slate_ops import admin
from slate_ops.config import CheckpointOptions
from slate_ops.errors import (
    DbAlreadyExistsError,
    InvalidArgumentError,
    InvalidDeletionError,
    ObjectNotFoundError,
)
from tests.reliability.bad_inputs.catalogue import Env, Setup, case, cli
from tests.reliability.bad_inputs.states import build

group = "operator mistakes"
case(
    group,
    "create_db on an existing database",
    build,
    lambda env: admin.create_db("db", env.store),
    DbAlreadyExistsError,
    "/db",
    "--exist-ok",
)
case(
    group,
    "CLI create-db on an existing database",
    build,
    cli("--path", "db", "create-db"),
    1,
    "/db",
    "--exist-ok",
)
case(
    group,
    "read a manifest version that does not exist",
    build,
    lambda env: admin.read_manifest("db", env.store, 999),
    ObjectNotFoundError,
    "manifest 999",
    "list-manifests",
)
case(
    group,
    "CLI read-manifest -i of a missing version",
    build,
    cli("--path", "db", "read-manifest", "-i", "999"),
    1,
    "manifest 999",
    "list-manifests",
)


def _live_checkpoint(env: Env) -> None:
    build(env)
    env.vars["live"] = str(admin.create_checkpoint("db", env.store, CheckpointOptions(lifetime="1h")).id)


case(
    group,
    "CLI destroy --hard with a live checkpoint",
    _live_checkpoint,
    cli("--path", "db", "destroy", "--hard"),
    1,
    "{live}",
    "Nothing was deleted",
)
case(
    group,
    "destroy --hard with a live checkpoint",
    _live_checkpoint,
    lambda env: admin.destroy("db", env.store, soft=False, dry_run=False),
    InvalidDeletionError,
    "{live}",
)
case(
    group,
    "database path with '..'",
    build,
    lambda env: admin.describe_db("../db", env.store),
    InvalidArgumentError,
    "'../db'",
    "must not contain",
)


def store_url(url: str) -> Setup:
    def setup(env: Env) -> None:
        env.vars["url"] = url

    return setup


case(
    group,
    "CLI unknown store scheme",
    store_url("ftp://host/x"),
    cli("--path", "db", "describe"),
    1,
    "ftp",
    "known schemes: file://, memory://, s3://",
)
case(
    group,
    "CLI S3 URL without a bucket",
    store_url("s3://"),
    cli("--path", "db", "describe"),
    1,
    "names no bucket",
    "s3://bucket/prefix",
)
case(
    group,
    "CLI S3 URL with an unknown option",
    store_url("s3://b/p?endpoint=http://x"),
    cli("--path", "db", "describe"),
    1,
    "endpoint",
    "known: endpoint_url",
)
