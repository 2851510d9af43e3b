"""Rescaling in Dagster: ``rescale_op`` and ``rescale_job`` split a database into shards or merge
databases into one.

An operator launches ``rescale_job`` (UI launchpad or ``dg launch``) with the op config ``database``
or the tag ``slate_ops/db=<source>`` (a merge: the first source) and op config validated by
:class:`RescaleConfig`::

    ops:
      rescale_op:
        config:
          operation: split
          database: demo
          split_keys: ["k5000"]
          targets: [{name: demo_low}, {name: demo_high}]

Databases declared in the config with ``rescaled_from: [...]`` are assets downstream of their
sources; the op records an asset materialization for each new database, so shards appear in the
asset graph below the database they were split from. See docs/design/rescaling.md.
"""

# No `from __future__ import annotations` here: Dagster reads the config and resource annotations
# of decorated functions at runtime.

import re
from enum import Enum

import dagster as dg
from pydantic import Field

from slate_ops.admin import NewDatabase, RescaleReport
from slate_ops.admin.handle import merge
from slate_ops.errors import ConfigError
from slate_ops.keytext import parse_bytes, render_bytes
from slate_ops.layout import normalize_db_path
from slate_ops.orchestration import runs
from slate_ops.orchestration.checks import record_state
from slate_ops.orchestration.config import SlateOpsConfig
from slate_ops.orchestration.metadata import metadata_of
from slate_ops.orchestration.naming import DEFAULT, Domain, Naming
from slate_ops.orchestration.resources import SlateDatabasesResource
from slate_ops.orchestration.runs import DB_TAG

RESCALE_JOB = "rescale_job"
"""Name of the job that runs :func:`rescale_op`."""


class RescaleOperation(Enum):
    """Dagster's config schema shows enum member names, so they are the lowercase values."""

    split = "split"
    merge = "merge"


TARGET_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class NewDatabaseConfig(dg.Config):
    """A database the rescale creates."""

    name: str = Field(
        description="Asset name (slate_ops/<name>): a configured database with rescaled_from, or a new name "
        "(letters, digits and _)."
    )
    path: str | None = Field(
        default=None, description="Path in the source's store; defaults to the configured database's path."
    )

    def check(self) -> None:
        """:class:`ConfigError` if the name is not a database name; the path's own error
        (:class:`~slate_ops.errors.InvalidDatabaseNameError`) if it has a reserved component."""
        if not TARGET_NAME.fullmatch(self.name):
            raise ConfigError(
                f"rescale_op config: target name {self.name!r} is not a database name: use letters, digits "
                "and _, not starting with a digit"
            )
        if self.path is not None:
            normalize_db_path(self.path)  # no reserved component (docs/design/names.md); the error says why


class RescaleConfig(dg.Config):
    """Run config of :func:`rescale_op`.

    Dagster's config schema checks what it can express before the run starts: ``operation`` is an
    enum (``split`` / ``merge``), every field has its type, ``targets`` is required and an unknown
    field is refused (:class:`dagster.DagsterInvalidConfigError` at launch). The rules across fields
    (a split's keys and targets, a merge's sources and one target) it cannot express: the op checks
    them first (:meth:`check`), before reading the fleet, and fails with a
    :class:`~slate_ops.errors.ConfigError` that says what to fix, not a pydantic traceback."""

    operation: RescaleOperation = Field(description="split: one source into shards; merge: sources into one.")
    database: str | None = Field(
        default=None,
        description=f"split: the source database; defaults to the run's {DB_TAG} tag.",
    )
    sources: list[str] = Field(default_factory=list, description="merge: the configured source databases.")
    split_keys: list[str] = Field(
        default_factory=list, description="split: one or more increasing keys, UTF-8 text or hex:<hex>."
    )
    targets: list[NewDatabaseConfig] = Field(
        description="split: one per shard (one more than split_keys); merge: exactly one."
    )

    def check(self) -> None:
        """The rules across fields: :class:`ConfigError` naming the first one broken and the fix."""
        problem = self._problem()
        if problem is not None:
            raise ConfigError(f"rescale_op config: {problem}; fix the run config (docs/design/rescaling.md)")
        for key in self.split_keys:
            try:
                parse_bytes(key)
            except ValueError as error:
                raise ConfigError(f"rescale_op config: split key {key!r}: {error}") from None
        for target in self.targets:
            target.check()

    def _problem(self) -> str | None:
        keys, targets = len(self.split_keys), len(self.targets)
        if self.operation is RescaleOperation.split:
            if self.sources:
                return "a split takes `database` (or the run tag), not `sources`"
            if keys == 0:
                return "a split needs one or more split_keys (n keys make n + 1 shards)"
            if targets != keys + 1:
                return f"{keys} split_keys make {keys + 1} shards but {targets} targets are given"
            return None
        if not self.sources:
            return "a merge takes one or more `sources`"
        if targets != 1:
            return f"a merge makes exactly one target, but {targets} are given"
        if keys:
            return "a merge takes no split_keys"
        return None


def build_rescale_op(naming: Naming = DEFAULT) -> dg.OpDefinition:
    """``rescale_op`` of the fleet ``naming`` names."""

    @dg.op(
        name=naming.name("rescale_op"),
        description="Split a database into key-range shards or merge databases into one (metadata only).",
        required_resource_keys=naming.slate_keys,
    )
    def _op(context: dg.OpExecutionContext, config: RescaleConfig) -> dg.Output[RescaleReport]:
        config.check()  # what the config schema cannot express, before anything is read
        if config.operation is RescaleOperation.split:
            sources = [runs.target_database(context, config.database)]
        else:
            sources = list(config.sources)
        output: dg.Output[RescaleReport]
        output, requests = runs.metered_run(
            context,
            naming,
            sources[0],
            lambda: rescale(context, config, naming.slate(context), sources, naming),
        )
        return dg.Output(output.value, metadata={**output.metadata, **requests})

    return _op


def rescale(
    context: dg.OpExecutionContext,
    config: RescaleConfig,
    slate: SlateDatabasesResource,
    sources: list[str],
    naming: Naming = DEFAULT,
) -> dg.Output[RescaleReport]:
    """The step of ``rescale_op``: split or merge ``sources`` and record every database involved."""
    store_url = slate.database(sources[0]).store_url
    for name in sources:
        if slate.database(name).store_url != store_url:
            raise ConfigError(f"merge sources must share one store; {name!r} is in another")
    paths = [_target_path(slate.config, target, sources) for target in config.targets]
    store = slate.open_store(sources[0])
    source_paths = [slate.database(name).path for name in sources]
    if config.operation is RescaleOperation.split:
        keys = [parse_bytes(k) for k in config.split_keys]
        report = slate.handle_for(slate.database(sources[0]), store).split(keys, paths)
    else:
        engines = {slate.database(name).engine_override() for name in sources}
        engine = engines.pop() if len(engines) == 1 else None  # mixed: detected (merge refuses two engines)
        report = merge(source_paths, store, paths[0], engine=engine, clock=slate.clock())
    verb = "created" if report.created else "already existed:"
    context.log.info(f"{report.operation} of {', '.join(sources)}: {verb} {', '.join(paths)}")
    for target, database in zip(config.targets, report.databases, strict=True):
        key_range = {"key_range": dg.MetadataValue.text(_range(database))}
        record_state(
            context,
            slate,
            target.name,
            after=f"{report.operation} of {', '.join(sources)}",
            metadata=key_range,
            naming=naming,
        )
    for name in sources:  # they gained the checkpoints that pin the new databases' inputs
        record_state(context, slate, name, after=report.operation, naming=naming)
    return dg.Output(report, metadata=rescale_metadata(sources, report))


def _target_path(config: SlateOpsConfig, target: NewDatabaseConfig, sources: list[str]) -> str:
    configured = next((d for d in config.databases if d.name == target.name), None)
    if configured is None:
        if target.path is None:
            raise ConfigError(
                f"{target.name!r} is not a configured database: give its path in the run config"
            )
        return target.path
    if configured.rescaled_from is None or sorted(configured.rescaled_from) != sorted(sources):
        raise ConfigError(
            f"database {target.name!r} is configured with rescaled_from {configured.rescaled_from}, not "
            f"{sources}; fix the config or pick another target name"
        )
    if target.path is not None and target.path != configured.path:
        raise ConfigError(
            f"path {target.path!r} differs from {target.name!r}'s configured path {configured.path!r}"
        )
    return configured.path


def _range(database: NewDatabase) -> str:
    key_range = database.key_range
    if key_range is None:
        return "all keys"
    start = "-inf" if key_range.start is None else render_bytes(key_range.start)
    end = "+inf" if key_range.end is None else render_bytes(key_range.end)
    return f"[{start}, {end})"


def rescale_metadata(sources: list[str], report: RescaleReport) -> dict[str, dg.MetadataValue]:
    """The report as run metadata: a Markdown table of the new databases."""
    rows = [
        "| database | key range | manifest | L0 views | sorted runs | SSTs | bytes |",
        "|---|---|---|---|---|---|---|",
    ]
    rows += [
        f"| {d.path} | {_range(d)} | {d.manifest_id} | {d.l0_views} | {d.sorted_runs} | {d.ssts} "
        f"| {d.bytes} |"
        for d in report.databases
    ]
    return metadata_of(
        operation=report.operation,
        sources=", ".join(sources),
        created=report.created,
        sst_bytes_copied=report.sst_bytes_copied,
        seconds=dg.MetadataValue.float(report.seconds),
        databases=dg.MetadataValue.md("\n".join(rows)),
    )


def rescale_run_config(
    operation: str,
    targets: list[dict[str, str]],
    *,
    database: str | None = None,
    sources: list[str] | None = None,
    split_keys: list[str] | None = None,
) -> dict[str, object]:
    """Run config of the rescale job (tag the run ``slate_ops/db=<source>``)."""
    config: dict[str, object] = {"operation": operation, "targets": targets}
    if database is not None:
        config["database"] = database
    if sources:
        config["sources"] = sources
    if split_keys:
        config["split_keys"] = split_keys
    return runs.op_run_config("rescale_op", **config)


def build(naming: Naming = DEFAULT) -> Domain:
    """The rescaling domain of the fleet ``naming`` names: ``rescale_job``."""
    op = build_rescale_op(naming)
    job = runs.one_op_job(
        op,
        name=naming.name(RESCALE_JOB),
        description=f"Split a database into shards or merge databases into one (run tag {DB_TAG}=<source>); "
        "metadata only, no SST is copied.",
    )
    return Domain(jobs={RESCALE_JOB: job}, ops={"rescale_op": op})


_DEFAULT = build()
rescale_op = _DEFAULT.ops["rescale_op"]
rescale_job = _DEFAULT.jobs[RESCALE_JOB]
