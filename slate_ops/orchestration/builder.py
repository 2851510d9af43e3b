"""slate_ops' Dagster definitions for a fleet, built to embed in any Dagster project:
:func:`build_definitions` (docs/orchestration.md, "Embedding slate_ops in your Dagster project").

It builds every domain (:data:`DOMAINS`: each module's ``build(naming)``) for one :class:`Naming`
(resource keys, name prefix, hooks), adds the fleet's assets, their checks and
``slate_ops_databases_job``, keeps the jobs, schedules and sensors asked for, and binds the two
resources unless the caller binds them itself.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import TypeVar

import dagster as dg
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

from slate_ops.errors import ConfigError
from slate_ops.orchestration import (
    checkpoints,
    clones,
    compaction,
    gc,
    maintenance,
    partitions,
    rescale,
    tags,
)
from slate_ops.orchestration.assets import DATABASES_JOB, build_database_assets, build_databases_job
from slate_ops.orchestration.checks import build_database_checks
from slate_ops.orchestration.config import SlateOpsConfig, load_config
from slate_ops.orchestration.cost_assets import build_fleet_cost_asset
from slate_ops.orchestration.naming import Domain, Hooks, Naming, ResourceKeys
from slate_ops.orchestration.resources import SlateDatabasesResource, local_pyspark_resource

DOMAINS: tuple[Callable[[Naming], Domain], ...] = (
    maintenance.build,
    checkpoints.build,
    compaction.build,
    clones.build,
    gc.build,
    rescale.build,
    tags.build,
    partitions.build,
)
"""Each domain's builder, in the order the code location lists them."""

JOB_NAMES: tuple[str, ...] = (
    DATABASES_JOB,
    maintenance.MAINTENANCE_JOB,
    checkpoints.CHECKPOINT_EXPIRY_JOB,
    compaction.COMPACTION_JOB,
    clones.CLONE_JOB,
    gc.GC_JOB,
    rescale.RESCALE_JOB,
    tags.TAG_POLICY_JOB,
)
"""Every job's unprefixed name (what ``build_definitions(jobs=...)`` takes)."""

SCHEDULE_NAMES: tuple[str, ...] = (
    maintenance.SCHEDULE_NAME,
    checkpoints.SCHEDULE_NAME,
    compaction.SCHEDULE_NAME,
    gc.SCHEDULE_NAME,
    tags.SCHEDULE_NAME,
)
"""Every schedule's unprefixed name."""

SENSOR_NAMES: tuple[str, ...] = (
    checkpoints.SENSOR_NAME,
    compaction.COMPACTION_SENSOR,
    partitions.SENSOR_NAME,
)
"""Every sensor's unprefixed name."""

T = TypeVar("T")

_DEFAULT_KEYS = ResourceKeys()
_NO_HOOKS = Hooks()


def build_definitions(
    config: SlateOpsConfig | None = None,
    *,
    resource_keys: ResourceKeys = _DEFAULT_KEYS,
    prefix: str = "",
    jobs: Collection[str] | None = None,
    schedules: Collection[str] | None = None,
    sensors: Collection[str] | None = None,
    resources: bool = True,
    hooks: Hooks = _NO_HOOKS,
) -> dg.Definitions:
    """slate_ops' Dagster definitions for the fleet ``config`` (None: :func:`load_config`,
    ``$SLATE_OPS_CONFIG`` or the embedded default), to use as a code location or to merge with a
    project's own (``dg.Definitions.merge(project_defs, build_definitions(...))``).

    - ``resource_keys``: the keys the definitions require (default ``slate_ops`` and
      ``slate_ops_pyspark``); with ``resources`` (the default) both are bound: the
      :class:`SlateDatabasesResource` of ``config`` (S3 credentials as ``EnvVar`` of the
      ``SLATE_OPS_S3_*`` variables that are set) and :func:`local_pyspark_resource`. ``resources=False``:
      the caller binds both keys itself.
    - ``prefix`` (e.g. ``"eu_"``): goes in front of every job, schedule, sensor, partitions
      definition, check op and group name; asset keys become ``[<prefix without trailing _>,
      "slate_ops", <db>]``. Two fleets with two prefixes live in one deployment: each has its own
      resources, so resource keys left at their defaults are prefixed too (``eu_slate_ops``,
      ``eu_slate_ops_pyspark``: :func:`fleet_resource_keys`); keys given explicitly stay as given.
    - ``jobs`` / ``schedules`` / ``sensors``: the unprefixed names to include (:data:`JOB_NAMES`,
      :data:`SCHEDULE_NAMES`, :data:`SENSOR_NAMES`); None: every one whose job is included. A name
      that is unknown, or a schedule or sensor whose job is left out, is a :class:`ConfigError`.
    - ``hooks``: :class:`Hooks` (the asset spec of each database; a wrapper of every op's step).

    The fleet's assets, their checks and the fleet's cost asset (``slate_ops_fleet_cost``) are
    always included.
    """
    config = config if config is not None else load_config()
    Naming(prefix=prefix)  # the prefix is checked before the keys made from it
    naming = Naming(keys=fleet_resource_keys(resource_keys, prefix), prefix=prefix, hooks=hooks)
    resource_keys = naming.keys
    domains = [build(naming) for build in DOMAINS]
    all_jobs: dict[str, dg.JobDefinition | UnresolvedAssetJobDefinition] = {
        DATABASES_JOB: build_databases_job(naming)
    }
    for domain in domains:
        all_jobs.update(domain.jobs)
    chosen_jobs = _choose("job", jobs, all_jobs)
    all_schedules = {name: s for domain in domains for name, s in domain.schedules.items()}
    all_sensors = {name: s for domain in domains for name, s in domain.sensors.items()}
    included = {all_jobs[name].name for name in chosen_jobs}
    chosen_schedules = _choose(
        "schedule", schedules, all_schedules, lambda s: [s.job_name], included, naming.prefix
    )
    chosen_sensors = _choose(
        "sensor",
        sensors,
        all_sensors,
        lambda s: [target.job_name for target in s.targets],
        included,
        naming.prefix,
    )
    bound: dict[str, object] = {}
    if resources:
        slate = SlateDatabasesResource.from_environment(config)
        bound = {
            resource_keys.slate: slate,
            # Spark tasks get slate's S3 credentials
            resource_keys.pyspark: local_pyspark_resource(slate),
        }
    return dg.Definitions(
        assets=[*build_database_assets(config, naming), build_fleet_cost_asset(naming)],
        asset_checks=build_database_checks(config, naming),
        jobs=list(chosen_jobs.values()),
        schedules=list(chosen_schedules.values()),
        sensors=list(chosen_sensors.values()),
        resources=bound,
    )


def fleet_resource_keys(keys: ResourceKeys, prefix: str) -> ResourceKeys:
    """The resource keys of a fleet with ``prefix``: ``keys``, except that a key left at its
    default (``slate_ops``, ``slate_ops_pyspark``) is prefixed, so each fleet binds its own."""
    default = ResourceKeys()
    return ResourceKeys(
        slate=prefix + keys.slate if keys.slate == default.slate else keys.slate,
        pyspark=prefix + keys.pyspark if keys.pyspark == default.pyspark else keys.pyspark,
    )


def _choose(
    kind: str,
    wanted: Collection[str] | None,
    available: Mapping[str, T],
    targets: Callable[[T], list[str]] | None = None,
    included: set[str] | None = None,
    prefix: str = "",
) -> dict[str, T]:
    """The ``available`` definitions named in ``wanted`` (None: every one whose target jobs are
    ``included``)."""
    if isinstance(wanted, str):
        raise ConfigError(f"{kind}s must be a list of names, not the string {wanted!r}")

    def missing_jobs(item: T) -> list[str]:
        if targets is None or included is None:
            return []
        return [job for job in targets(item) if job not in included]

    if wanted is None:
        return {name: item for name, item in available.items() if not missing_jobs(item)}
    unknown = [name for name in wanted if name not in available]
    if unknown:
        raise ConfigError(
            f"unknown slate_ops {kind} name(s): {', '.join(map(repr, unknown))}; valid (unprefixed): "
            f"{', '.join(available)}"
        )
    chosen = {name: available[name] for name in available if name in set(wanted)}
    for name, item in chosen.items():
        left_out = missing_jobs(item)
        if left_out:
            unprefixed = ", ".join(job.removeprefix(prefix) for job in left_out)
            raise ConfigError(
                f"slate_ops {kind} {name!r} targets {unprefixed}, which the jobs to include leave out; "
                f"add {unprefixed} to jobs or leave {name!r} out"
            )
    return chosen
