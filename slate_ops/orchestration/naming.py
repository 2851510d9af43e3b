"""How one fleet's Dagster objects are named and wired: the resource keys they use, the prefix of
their names and the user's override hooks (:class:`Naming`).

Every domain module builds its ops, jobs, schedules and sensors from a :class:`Naming`
(``build(naming)``); :func:`slate_ops.orchestration.build_definitions` makes one from its
arguments, and the module-level objects (``maintenance_job``, ``compact_op``, ...) are the build of
:data:`DEFAULT`. Ops, assets, checks, sensors and schedules declare ``required_resource_keys`` and
fetch their resources by key (:meth:`Naming.slate`, :meth:`Naming.pyspark`), so the keys are the
caller's choice; the prefix goes in front of every job, schedule, sensor, partitions definition,
check op, asset key and group name, so two fleets live in one deployment.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import dagster as dg

from slate_ops.errors import ConfigError

if TYPE_CHECKING:
    from dagster_pyspark import LazyPySparkResource

    from slate_ops.orchestration.config import DatabaseConfig
    from slate_ops.orchestration.resources import SlateDatabasesResource

ASSET_PREFIX = "slate_ops"
"""The asset key component every database's asset has: ``[ASSET_PREFIX, <db>]`` (prefixed fleets:
``[<prefix>, ASSET_PREFIX, <db>]``)."""

GROUP_NAME = "slate_ops"
"""The asset group of the databases (prefixed fleets: ``<prefix>slate_ops``)."""

PARTITIONS_NAME = "slate_ops_databases"
"""The dynamic partitions of the per-database jobs (prefixed fleets: ``<prefix>slate_ops_databases``)."""

FLEET_TAG = "slate_ops/fleet"
"""Run tag naming the prefix of the fleet whose sensor or schedule requested the run (prefixed fleets
only): two fleets may have databases of the same name."""

_PREFIX = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class ResourceKeys:
    """The resource keys slate_ops' definitions require (choose them so they do not collide with
    the project's own resources)."""

    slate: str = "slate_ops"
    """The :class:`~slate_ops.orchestration.resources.SlateDatabasesResource`."""
    pyspark: str = "slate_ops_pyspark"
    """The ``LazyPySparkResource`` (:func:`~slate_ops.orchestration.resources.local_pyspark_resource`)."""

    def __post_init__(self) -> None:
        for which, key in (("slate", self.slate), ("pyspark", self.pyspark)):
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                raise ConfigError(
                    f"resource key {which}={key!r} is not a Dagster name: use letters, digits and _, "
                    "not starting with a digit"
                )
        if self.slate == self.pyspark:
            raise ConfigError(f"resource keys slate and pyspark are both {self.slate!r}; give two keys")


@dataclass(frozen=True)
class StepCall:
    """One op's step, as the :attr:`Hooks.run_step` hook sees it."""

    op_name: str
    """The op (e.g. ``maintenance_compact``, ``compact_op``)."""
    database: str
    """The database the step works on (a clone's parent; a rescale's first source)."""
    context: dg.OpExecutionContext
    _run: Callable[[], Any] = field(repr=False)

    def run(self) -> Any:
        """Run the step; returns its result (return it from the hook)."""
        return self._run()


@dataclass(frozen=True)
class Hooks:
    """Override points of the built definitions."""

    asset_spec: Callable[[DatabaseConfig, dg.AssetSpec], dg.AssetSpec] | None = None
    """Given a database and slate_ops' default spec (key, deps, tags, metadata, group, description),
    the spec to use (another key, owners, kinds, ...); the database's checks, observations and
    materializations follow its key. The key must not depend on the spec's ``deps``."""
    run_step: Callable[[StepCall], Any] | None = None
    """Wraps every op's step: call ``call.run()`` and return its result (default: just that). For
    logging, metrics, approval gates."""


@dataclass(frozen=True)
class Naming:
    """One fleet's resource keys, name prefix and hooks; the domain modules' ``build`` functions
    take it."""

    keys: ResourceKeys = ResourceKeys()
    prefix: str = ""
    hooks: Hooks = Hooks()

    def __post_init__(self) -> None:
        if self.prefix and not _PREFIX.fullmatch(self.prefix):
            raise ConfigError(
                f"prefix {self.prefix!r} is not a Dagster name prefix: use letters, digits and _, "
                "starting with a letter (e.g. 'eu_')"
            )

    def name(self, base: str) -> str:
        """The prefixed name of a job, schedule, sensor, op or check op."""
        return f"{self.prefix}{base}"

    @property
    def group(self) -> str:
        return self.name(GROUP_NAME)

    @property
    def partitions_name(self) -> str:
        return self.name(PARTITIONS_NAME)

    @property
    def partitions(self) -> dg.DynamicPartitionsDefinition:
        """The dynamic partitions of this fleet's per-database jobs (one object per name)."""
        return _partitions(self.partitions_name)

    def default_asset_key(self, name: str) -> dg.AssetKey:
        """``[slate_ops, <name>]``, or ``[<prefix without trailing _>, slate_ops, <name>]``."""
        head = [self.prefix.rstrip("_")] if self.prefix else []
        return dg.AssetKey([*head, ASSET_PREFIX, name])

    def asset_spec(self, db: DatabaseConfig, default: dg.AssetSpec) -> dg.AssetSpec:
        """``default`` (slate_ops' spec of ``db``) through the :attr:`Hooks.asset_spec` hook."""
        hook = self.hooks.asset_spec
        return default if hook is None else hook(db, default)

    def asset_key_of(self, db: DatabaseConfig) -> dg.AssetKey:
        """The key of ``db``'s asset (through the hook, with the default spec's key)."""
        hook = self.hooks.asset_spec
        key = self.default_asset_key(db.name)
        return key if hook is None else hook(db, dg.AssetSpec(key)).key

    def asset_key(self, slate: SlateDatabasesResource, name: str) -> dg.AssetKey:
        """The key of database ``name``'s asset (a discovered one has no asset: the default key)."""
        if self.hooks.asset_spec is None or not slate.configured(name):
            return self.default_asset_key(name)
        return self.asset_key_of(slate.config.database(name))

    def slate(self, context: Any) -> SlateDatabasesResource:
        """The ``SlateDatabasesResource`` of a run, sensor or schedule context.

        (Sensors and schedules invoked directly, as tests do, also get the required resources as
        keyword arguments from Dagster; theirs take ``**_resources`` and ignore them.)"""
        return getattr(context.resources, self.keys.slate)  # type: ignore[no-any-return]

    def pyspark(self, context: Any) -> LazyPySparkResource:
        """The pyspark resource of a run context."""
        return getattr(context.resources, self.keys.pyspark)  # type: ignore[no-any-return]

    @property
    def slate_keys(self) -> set[str]:
        return {self.keys.slate}

    @property
    def all_keys(self) -> set[str]:
        return {self.keys.slate, self.keys.pyspark}

    def run_step(self, context: dg.OpExecutionContext, database: str, run: Callable[[], Any]) -> Any:
        """``run()`` through the :attr:`Hooks.run_step` hook."""
        hook = self.hooks.run_step
        if hook is None:
            return run()
        return hook(StepCall(context.op_def.name, database, context, run))

    def tags(self) -> Mapping[str, str]:
        """Tags the fleet's requested runs carry besides ``slate_ops/db`` (its prefix, if any)."""
        return {FLEET_TAG: self.prefix.rstrip("_")} if self.prefix else {}


@functools.cache
def _partitions(name: str) -> dg.DynamicPartitionsDefinition:
    return dg.DynamicPartitionsDefinition(name=name)


DEFAULT = Naming()
"""The unprefixed fleet with the default resource keys: the module-level objects."""


@dataclass(frozen=True)
class Domain:
    """What a domain module's ``build(naming)`` makes: its jobs, schedules and sensors, each by its
    unprefixed name, and its ops by name."""

    jobs: Mapping[str, dg.JobDefinition] = field(default_factory=dict)
    schedules: Mapping[str, dg.ScheduleDefinition] = field(default_factory=dict)
    sensors: Mapping[str, dg.SensorDefinition] = field(default_factory=dict)
    ops: Mapping[str, dg.OpDefinition] = field(default_factory=dict)
