"""The one Dagster resource: the configured databases, their stores and the clock.

Environments are config-driven: each environment (laptop, staging, production) has its own
databases file, chosen with ``$SLATE_OPS_CONFIG``, so the same definitions run everywhere and only
the file (store URLs, paths) differs. Credentials stay out of the file: S3 stores take them from
boto3's usual chain (``AWS_*`` variables, profiles, instance roles).
"""

from __future__ import annotations

from typing import cast

import dagster as dg
from pydantic import Field

from slate_ops.clock import SYSTEM_CLOCK, Clock
from slate_ops.objstore import ObjectStore, open_store
from slate_ops.orchestration.config import DatabaseConfig, SlateOpsConfig

RESOURCE_KEY = "slate"


class SlateDatabasesResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The configured databases; assets, ops, sensors and schedules take it as ``slate``."""

    config: SlateOpsConfig = Field(description="The databases config (see docs/orchestration.md).")

    def database_names(self) -> list[str]:
        return [db.name for db in self.config.databases]

    def database(self, name: str) -> DatabaseConfig:
        """The database called ``name``; :class:`~slate_ops.errors.ConfigError` if unknown."""
        return self.config.database(name)

    def open_store(self, name: str) -> ObjectStore:
        """Open the object store that holds database ``name``."""
        return open_store(self.database(name).store_url)

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
        return clocked(config=self.config)
