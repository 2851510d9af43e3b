"""The Dagster resources: ``slate``, the configured databases, their stores and the clock; and
``pyspark``, a lazily started Spark session (``local[2]``, or a cluster's master) for the
compactions that ask for Spark.

Environments are config-driven: each environment (laptop, staging, production) has its own
databases file, chosen with ``$SLATE_OPS_CONFIG``, so the same definitions run everywhere and only
the file (store URLs, paths) differs. Credentials stay out of the file: the S3 credential fields of
the resource are set with ``dagster.EnvVar`` (:meth:`SlateDatabasesResource.from_environment`), so
the UI shows the variable's name, never its value, and the run resolves it from its environment;
unset, the store itself reads the same ``SLATE_OPS_S3_*`` variables and then boto3's usual chain
(:mod:`slate_ops.objstore.credentials`, the one order of every entry point: README "S3
credentials"). The
``pyspark`` resource takes the same credentials from the ``slate`` resource it is given and sets them
as the session's ``spark.slate_ops.s3.*`` settings, from which every Spark job ships them to its
tasks (:mod:`slate_ops.spark.credentials`): Spark workers need no credentials of their own.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, cast

import dagster as dg
from dagster_pyspark import LazyPySparkResource
from dagster_pyspark.resources import spark_session_from_config
from pydantic import ConfigDict, Field

from slate_ops import admin
from slate_ops.admin.fleet import Discovery, holds_manifests
from slate_ops.admin.fleet import discover as discover_databases
from slate_ops.admin.handle import DatabaseHandle
from slate_ops.engine import DbReader
from slate_ops.errors import ConfigError
from slate_ops.objstore import ObjectStore, open_store, redact_url
from slate_ops.orchestration.config import (
    S3_CREDENTIAL_ENV,
    DatabaseConfig,
    SlateOpsConfig,
    discovered_name,
    discovered_path,
)
from slate_ops.orchestration.request_meter import metered
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime
from slate_ops.spark import LOCAL_CONFIG, S3Credentials, register

RESOURCE_KEY = "slate_ops"
"""The default key of :class:`SlateDatabasesResource` (``ResourceKeys().slate``; see
:class:`~slate_ops.orchestration.naming.ResourceKeys` to choose another)."""

PYSPARK_RESOURCE_KEY = "slate_ops_pyspark"
"""The default key of the pyspark resource (``ResourceKeys().pyspark``)."""

SPARK_MASTER_ENV = "SLATE_OPS_SPARK_MASTER"
"""The Spark master of the definitions' ``pyspark`` resource (e.g. ``spark://host:7077``);
unset: ``local[2]``."""


class S3CredentialFields(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The S3 credential fields both resources have (``slate`` for its stores, ``pyspark`` for its
    tasks'), each set with ``dagster.EnvVar`` so the UI shows variable names, never values."""

    # A refused value (a store_url with a password, a credential) must not be echoed by pydantic in
    # the run's failure event; the validators' own messages show URLs redacted.
    model_config = ConfigDict(hide_input_in_errors=True)

    s3_access_key_id: str | None = Field(
        default=None,
        description="S3 access key id of every s3:// store; set with "
        f"EnvVar({S3_CREDENTIAL_ENV['s3_access_key_id']!r}). Unset: the store reads the SLATE_OPS_S3_* "
        "variables, else boto3's chain.",
    )
    s3_secret_access_key: str | None = Field(
        default=None,
        description=f"S3 secret key; set with EnvVar({S3_CREDENTIAL_ENV['s3_secret_access_key']!r}).",
    )
    s3_session_token: str | None = Field(
        default=None,
        description=f"S3 session token; set with EnvVar({S3_CREDENTIAL_ENV['s3_session_token']!r}).",
    )

    def credential_fields(self) -> dict[str, Any]:
        """The three fields as given (an ``EnvVar`` stays one), to configure another resource."""
        return {
            "s3_access_key_id": self.s3_access_key_id,
            "s3_secret_access_key": self.s3_secret_access_key,
            "s3_session_token": self.s3_session_token,
        }

    def s3_credentials(self) -> S3Credentials:
        """The credentials (resolved) as Spark jobs take them."""
        return S3Credentials(**self._store_credentials())

    def _store_credentials(self) -> dict[str, str | None]:
        values = {
            "access_key_id": self.s3_access_key_id,
            "secret_access_key": self.s3_secret_access_key,
            "session_token": self.s3_session_token,
        }
        # Outside a run (e.g. a resource built by from_environment and used directly) the fields
        # still hold the EnvVar, whose text is the variable's name.
        return {k: v.get_value() if isinstance(v, dg.EnvVar) else v for k, v in values.items()}


class SlateDatabasesResource(S3CredentialFields):
    """The configured databases; assets, ops, sensors and schedules take it as ``slate``."""

    config: SlateOpsConfig = Field(description="The databases config (see docs/orchestration.md).")

    @classmethod
    def from_environment(cls, config: SlateOpsConfig) -> SlateDatabasesResource:
        """The resource for ``config`` whose credential fields are ``dagster.EnvVar`` of the
        ``SLATE_OPS_S3_*`` variables that are set (an unset EnvVar would fail every run)."""
        credentials = {field: dg.EnvVar(var) for field, var in S3_CREDENTIAL_ENV.items() if var in os.environ}
        return cls(config=config, **credentials)

    def database_names(self) -> list[str]:
        """The names of the fleet: the configured databases, then the discovered ones."""
        return [db.name for db in self.fleet()]

    def fleet(self, discovered_paths: Sequence[str] | None = None) -> list[DatabaseConfig]:
        """The configured databases, then the discovered ones (:meth:`discovered`)."""
        return [*self.config.databases, *self.discovered(discovered_paths)]

    def configured(self, name: str) -> bool:
        """Whether ``name`` is listed in the config (so it has an asset), not only discovered."""
        return any(db.name == name for db in self.config.databases)

    def discover(self) -> Discovery:
        """One discovery LIST of the config's ``discover`` store and prefix (which must be set)."""
        discover = self.config.discover
        if discover is None:
            raise ConfigError("the config sets no discover store and prefix")
        return discover_databases(
            open_store(discover.store_url, **self._store_credentials()), discover.prefix
        )

    def discovered(self, paths: Sequence[str] | None = None) -> list[DatabaseConfig]:
        """The databases at ``paths`` (default: :meth:`discover`'s, one LIST) under the config's
        ``discover`` store and prefix, with the default policies; a path or name that a listed
        database already has is left out (the listed entry keeps its settings and lineage). Two paths
        with one name: the one whose name is its own path (:func:`discovered_path`) wins, else the
        first."""
        discover = self.config.discover
        if discover is None:
            return []
        if paths is None:
            paths = self.discover().paths
        listed = self._listed_locations()
        names = {db.name for db in self.config.databases}
        own = {discovered_name(p, discover.prefix) for p in paths if _is_own_path(p, discover.prefix)}
        found: list[DatabaseConfig] = []
        for path in paths:
            name = discovered_name(path, discover.prefix)
            if name is None or name in names or (discover.store_url, path.strip("/")) in listed:
                continue
            if name in own and not _is_own_path(path, discover.prefix):
                continue  # its name is another path's own
            names.add(name)
            found.append(DatabaseConfig(name=name, store_url=discover.store_url, path=path))
        return found

    def database(self, name: str) -> DatabaseConfig:
        """The database called ``name``, configured or else discovered;
        :class:`~slate_ops.errors.ConfigError` if neither.

        A discovered name without ``_`` can only be its own path under the prefix
        (:func:`discovered_path`): resolved with no request, the handle's own read finding the
        database (:class:`~slate_ops.errors.DbNotFoundError`, naming it, if it is gone). A name with
        ``_`` (which stands for any character but letters and digits): one LIST of its own path's
        ``manifest/`` directory; no manifest there, the discovery LIST."""
        try:
            return self.config.database(name)
        except ConfigError:
            if self.config.discover is None:
                raise
        discover = self.config.discover
        path = discovered_path(name, discover.prefix)
        listed = self._listed_locations()
        if (
            path is not None
            and (discover.store_url, path) not in listed
            and ("_" not in name or self._holds_manifests(discover.store_url, path))
        ):
            return DatabaseConfig(name=name, store_url=discover.store_url, path=path)
        for db in self.discovered():
            if db.name == name:
                return db
        raise ConfigError(
            f"no database named {name!r} is configured or discovered under {discover.prefix!r} in "
            f"{redact_url(discover.store_url)}"
        )

    def _listed_locations(self) -> set[tuple[str, str]]:
        """``(store_url, path)`` of every configured database: a discovered one there is left out."""
        return {(db.store_url, db.path.strip("/")) for db in self.config.databases}

    def _holds_manifests(self, store_url: str, path: str) -> bool:
        return holds_manifests(metered(open_store(store_url, **self._store_credentials())), path)

    def open_store(self, name: str) -> ObjectStore:
        """Open the object store that holds database ``name`` (S3 with the resource's credentials)."""
        return self.store_for(self.database(name))

    def store_for(self, db: DatabaseConfig) -> ObjectStore:
        """The store of ``db``, opened from its own config with the resource's credentials (no
        lookup by name: for a discovered database, that would list the discovery prefix again). Inside
        a maintenance step, metered by the step (:func:`~slate_ops.orchestration.request_meter.metered`)."""
        return metered(open_store(db.store_url, **self._store_credentials()))

    def handle(self, name: str) -> DatabaseHandle:
        """The admin handle of database ``name`` (:meth:`handle_for`)."""
        return self.handle_for(self.database(name))

    def handle_for(self, db: DatabaseConfig, store: ObjectStore | None = None) -> DatabaseHandle:
        """``slate_ops.admin.open`` of ``db`` (in ``store``, default :meth:`store_for`) with its
        ``engine:`` (``auto``: detected from its latest manifest, one LIST and one GET; forced: no
        read): every op, check and sensor acts on a database only through this handle."""
        return admin.open(
            db.path,
            store if store is not None else self.store_for(db),
            db.engine_override(),
            clock=self.clock(),
        )

    def open_reader(self, name: str, checkpoint_id: uuid.UUID | None = None) -> DbReader:
        """A :class:`DbReader` of database ``name`` with its ``checkpoints.reader_lifetime``."""
        db = self.database(name)
        return DbReader.open(
            db.path, self.store_for(db), checkpoint_id, db.reader_options(), clock=self.clock()
        )

    def clock(self) -> Runtime:
        """The clock that decides which checkpoints have expired."""
        return SYSTEM_RUNTIME

    def with_clock(self, clock: Runtime) -> SlateDatabasesResource:
        """This resource with another clock (for tests).

        The clock lives in a subclass rather than a private attribute because Dagster rebuilds
        resources from their config before a run, which would drop private state.
        """
        base = type(self)
        clocked = cast(
            type[SlateDatabasesResource],
            type(
                f"{base.__name__}WithClock", (base,), {"clock": lambda _self: clock, "__module__": __name__}
            ),
        )
        return clocked(config=self.config, **self.credential_fields())


def _is_own_path(path: str, prefix: str) -> bool:
    """Whether ``path``'s discovered name is its own path under ``prefix`` (:func:`discovered_path`)."""
    name = discovered_name(path, prefix)
    return name is not None and discovered_path(name, prefix) == path.strip("/")


class LocalPySparkResource(LazyPySparkResource, S3CredentialFields):
    """A :class:`LazyPySparkResource` that exports ``PYSPARK_PYTHON`` and ``SPARK_LOCAL_IP`` first
    and gives the session its S3 credentials.

    PySpark reads both variables from the environment when it starts the JVM and its Python workers
    (the ``spark.pyspark.python`` conf does not reach the driver's ``pythonExec``), so they are set
    just before the session is created, i.e. only in runs that use Spark. The session is built with
    ``spark_config`` plus the ``spark.slate_ops.s3.*`` settings of the credential fields (resolved in
    the run; :func:`local_pyspark_resource` copies the ``slate`` resource's ``EnvVar``), which the
    Spark jobs of :mod:`slate_ops.spark` ship to their tasks. They stay out of ``spark_config``, so
    Dagster's UI shows only the variables' names. (The fields are copied rather than ``slate``
    nested: a nested resource makes Dagster initialise this one as a generator, which
    ``build_op_context`` refuses outside a ``with`` block.)
    """

    pyspark_python: str = Field(
        default_factory=lambda: sys.executable, description="PYSPARK_PYTHON: the workers' Python."
    )
    local_ip: str = Field(default="127.0.0.1", description="SPARK_LOCAL_IP: the address Spark binds to.")

    def session_config(self) -> dict[str, Any]:
        """``spark_config`` plus the ``spark.slate_ops.s3.*`` settings of the credentials."""
        return {**self.spark_config, **self.s3_credentials().spark_conf()}

    def _init_session(self) -> None:
        # LazyPySparkResource builds the session from spark_config here; add the credentials, and
        # format("slate_ops") bound to them.
        if self._spark_session is None:
            self._spark_session = spark_session_from_config(self.session_config())  # type: ignore[no-untyped-call]
            register(self._spark_session)

    def _export_environment(self) -> None:
        os.environ["PYSPARK_PYTHON"] = self.pyspark_python
        os.environ["SPARK_LOCAL_IP"] = self.local_ip

    @property
    def spark_session(self) -> Any:
        self._export_environment()
        return super().spark_session

    @property
    def spark_context(self) -> Any:
        self._export_environment()
        return super().spark_context


def local_pyspark_resource(
    slate: SlateDatabasesResource | None = None,
    *,
    master: str | None = None,
    config: Mapping[str, str] | None = None,
) -> LocalPySparkResource:
    """The ``pyspark`` resource: a lazily started session on ``master`` (default
    ``$SLATE_OPS_SPARK_MASTER``, else ``local[2]``) with ``slate_ops.spark``'s small-machine settings
    (bound to 127.0.0.1, no UI) and ``config`` on top; its tasks use ``slate``'s S3 credential
    fields (None: the workers' own boto3 chain).

    A standalone master (``spark://host:7077``) works as is when its workers run on this machine;
    workers on other machines must reach the driver: set ``local_ip`` and ``spark.driver.host`` /
    ``spark.driver.bindAddress`` in ``config`` to an address they can connect to.
    """
    master = master or os.environ.get(SPARK_MASTER_ENV) or "local[2]"
    settings = {
        **LOCAL_CONFIG,
        "spark.master": master,
        "spark.app.name": "slate_ops-compaction",
        **(config or {}),
    }
    credentials = slate.credential_fields() if slate is not None else {}
    return LocalPySparkResource(spark_config=settings, **credentials)
