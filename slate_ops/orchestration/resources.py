"""The Dagster resources: ``slate``, the configured databases, their stores and the clock; and
``pyspark``, a lazily started local Spark session for the compactions that ask for Spark.

Environments are config-driven: each environment (laptop, staging, production) has its own
databases file, chosen with ``$SLATE_OPS_CONFIG``, so the same definitions run everywhere and only
the file (store URLs, paths) differs. Credentials stay out of the file: the S3 credential fields of
the resource are set with ``dagster.EnvVar`` (:meth:`SlateDatabasesResource.from_environment`), so
the UI shows the variable's name, never its value, and the run resolves it from its environment;
unset, S3 stores use boto3's usual chain (``AWS_*`` variables, profiles, instance roles).
"""

from __future__ import annotations

import os
import sys
import uuid
from typing import Any, cast

import dagster as dg
from dagster_pyspark import LazyPySparkResource
from pydantic import Field

from slate_ops.admin.reachability import discover_databases
from slate_ops.clock import SYSTEM_CLOCK, Clock
from slate_ops.engine import DbReader
from slate_ops.errors import ConfigError
from slate_ops.objstore import ObjectStore, open_store
from slate_ops.orchestration.config import (
    S3_CREDENTIAL_ENV,
    DatabaseConfig,
    SlateOpsConfig,
    discovered_name,
)
from slate_ops.spark import LOCAL_CONFIG

RESOURCE_KEY = "slate"

PYSPARK_RESOURCE_KEY = "pyspark"


class SlateDatabasesResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The configured databases; assets, ops, sensors and schedules take it as ``slate``."""

    config: SlateOpsConfig = Field(description="The databases config (see docs/orchestration.md).")
    s3_access_key_id: str | None = Field(
        default=None,
        description="S3 access key id of every s3:// store; set with "
        f"EnvVar({S3_CREDENTIAL_ENV['s3_access_key_id']!r}). Unset: boto3's chain.",
    )
    s3_secret_access_key: str | None = Field(
        default=None,
        description=f"S3 secret key; set with EnvVar({S3_CREDENTIAL_ENV['s3_secret_access_key']!r}).",
    )
    s3_session_token: str | None = Field(
        default=None,
        description=f"S3 session token; set with EnvVar({S3_CREDENTIAL_ENV['s3_session_token']!r}).",
    )

    @classmethod
    def from_environment(cls, config: SlateOpsConfig) -> SlateDatabasesResource:
        """The resource for ``config`` whose credential fields are ``dagster.EnvVar`` of the
        ``SLATE_OPS_S3_*`` variables that are set (an unset EnvVar would fail every run)."""
        credentials = {field: dg.EnvVar(var) for field, var in S3_CREDENTIAL_ENV.items() if var in os.environ}
        return cls(config=config, **credentials)

    def database_names(self) -> list[str]:
        """The names of the fleet: the configured databases, then the discovered ones."""
        return [db.name for db in self.fleet()]

    def fleet(self) -> list[DatabaseConfig]:
        """The configured databases, then the discovered ones (:meth:`discovered`)."""
        return [*self.config.databases, *self.discovered()]

    def configured(self, name: str) -> bool:
        """Whether ``name`` is listed in the config (so it has an asset), not only discovered."""
        return any(db.name == name for db in self.config.databases)

    def discovered(self) -> list[DatabaseConfig]:
        """The databases under the config's ``discover`` store and prefix (one LIST), with the default
        policies; a path or name that a listed database already has is left out (the listed entry
        keeps its settings and lineage)."""
        discover = self.config.discover
        if discover is None:
            return []
        store = open_store(discover.store_url, **self._credentials())
        listed = {(db.store_url, db.path.strip("/")) for db in self.config.databases}
        names = {db.name for db in self.config.databases}
        found: list[DatabaseConfig] = []
        for path in discover_databases(store, discover.prefix):
            name = discovered_name(path, discover.prefix)
            if name is None or name in names or (discover.store_url, path.strip("/")) in listed:
                continue
            names.add(name)
            found.append(DatabaseConfig(name=name, store_url=discover.store_url, path=path))
        return found

    def database(self, name: str) -> DatabaseConfig:
        """The database called ``name``, configured or else discovered;
        :class:`~slate_ops.errors.ConfigError` if neither."""
        try:
            return self.config.database(name)
        except ConfigError:
            if self.config.discover is None:
                raise
        for db in self.discovered():
            if db.name == name:
                return db
        discover = self.config.discover
        raise ConfigError(
            f"no database named {name!r} is configured or discovered under {discover.prefix!r} in "
            f"{redact(discover.store_url)}"
        )

    def open_store(self, name: str) -> ObjectStore:
        """Open the object store that holds database ``name`` (S3 with the resource's credentials)."""
        return open_store(self.database(name).store_url, **self._credentials())

    def open_reader(self, name: str, checkpoint_id: uuid.UUID | None = None) -> DbReader:
        """A :class:`DbReader` of database ``name`` with its ``checkpoints.reader_lifetime``."""
        db = self.database(name)
        return DbReader.open(
            db.path, self.open_store(name), checkpoint_id, db.reader_options(), clock=self.clock()
        )

    def _credentials(self) -> dict[str, str | None]:
        values = {
            "access_key_id": self.s3_access_key_id,
            "secret_access_key": self.s3_secret_access_key,
            "session_token": self.s3_session_token,
        }
        # Outside a run (e.g. a resource built by from_environment and used directly) the fields
        # still hold the EnvVar, whose text is the variable's name.
        return {k: v.get_value() if isinstance(v, dg.EnvVar) else v for k, v in values.items()}

    def clock(self) -> Clock:
        """The clock that decides which checkpoints have expired."""
        return SYSTEM_CLOCK

    def with_clock(self, clock: Clock) -> SlateDatabasesResource:
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
        fields: dict[str, Any] = {
            "s3_access_key_id": self.s3_access_key_id,
            "s3_secret_access_key": self.s3_secret_access_key,
            "s3_session_token": self.s3_session_token,
        }
        return clocked(config=self.config, **fields)


class LocalPySparkResource(LazyPySparkResource):
    """A :class:`LazyPySparkResource` that exports ``PYSPARK_PYTHON`` and ``SPARK_LOCAL_IP`` first.

    PySpark reads both from the environment when it starts the JVM and its Python workers (the
    ``spark.pyspark.python`` conf does not reach the driver's ``pythonExec``), so they are set just
    before the session is created, i.e. only in runs that use Spark.
    """

    pyspark_python: str = Field(
        default_factory=lambda: sys.executable, description="PYSPARK_PYTHON: the workers' Python."
    )
    local_ip: str = Field(default="127.0.0.1", description="SPARK_LOCAL_IP: the address Spark binds to.")

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


def local_pyspark_resource() -> LocalPySparkResource:
    """The ``pyspark`` resource: a lazily started ``local[2]`` session with ``slate_ops.spark``'s
    small-machine settings (bound to 127.0.0.1, no UI)."""
    return LocalPySparkResource(
        spark_config={**LOCAL_CONFIG, "spark.master": "local[2]", "spark.app.name": "slate_ops-compaction"}
    )


def redact(url: str) -> str:
    """``url`` without its query string (which may carry options); for messages."""
    return url.split("?", 1)[0]
