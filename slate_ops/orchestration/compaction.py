"""Compaction in Dagster: ``compact_op``, ``compaction_job``, its schedule and the L0 sensor.

``compact_op`` runs one compaction of one database (:func:`slate_ops.admin.compact`) on the local
executor or, when its config says ``executor: spark``, on the Spark session of the ``pyspark``
resource (:class:`~slate_ops.orchestration.resources.LocalPySparkResource`: Spark starts only when
a run asks for it). Its output metadata is the report and the LSM shape before and after; it also
records an ``AssetObservation`` of ``slate_ops/<name>`` with the shape after. Every run compacts
exactly one database and carries its ``slate_ops/db`` tag. Runs come from three places:

- ``slate_ops_compaction_sensor``, when a database's L0 reaches its threshold of SSTs
  (``compaction.l0_threshold``, else ``CompactorOptions().min_sources``), with run key
  ``compact-<name>-<manifest id>``; its cursor is JSON
  ``{"<db name>": <manifest id of the last requested compaction>}``;
- ``compaction_schedule``, every 30 minutes, for every database where the compactor has work (an
  L0 compaction, or adjacent sorted runs of similar size to merge), which also catches what the
  sensor left (sensor off, a failed run);
- an operator (UI launchpad or ``dg launch``), with a partition or the tag ``slate_ops/db=<name>``,
  optionally ``executor: spark`` or ``full: true`` in the op config.
"""

# No `from __future__ import annotations` here: Dagster reads the config and resource annotations
# of decorated functions at runtime.

import logging
from typing import Any, Literal

import dagster as dg
from dagster_pyspark import LazyPySparkResource
from pydantic import Field

from slate_ops.compaction import CompactionReport, CompactorOptions, Executor, LocalExecutor
from slate_ops.orchestration import runs
from slate_ops.orchestration.config import DatabaseConfig
from slate_ops.orchestration.fleet import (
    ManifestTick,
    Unchanged,
    database_schedule,
    manifest_sensor,
    store_of,
)
from slate_ops.orchestration.metadata import metadata_of, shape_markdown, shape_metadata
from slate_ops.orchestration.naming import DEFAULT, Domain, Naming
from slate_ops.orchestration.resources import SlateDatabasesResource
from slate_ops.orchestration.runs import DB_TAG
from slate_ops.spark import SparkExecutor

COMPACTION_JOB = "compaction_job"
"""Name of the job that runs :func:`compact_op`."""

COMPACTION_SENSOR = "slate_ops_compaction_sensor"
UNCHANGED_SHOWN = 10
"""A skipped tick names at most this many of the databases without a new manifest."""

SCHEDULE_NAME = "compaction_schedule"

SPARK_POOL = "slate_ops_spark"
"""Dagster concurrency pool of the ops that may start Spark (every compaction op: the executor is
chosen per run); its limit in ``dagster.yaml`` bounds the Spark sessions running at once."""


def compactor_options(db: DatabaseConfig) -> CompactorOptions:
    """The compactor options of ``db``: ``compaction.l0_threshold`` as ``min_sources``, if set, and
    ``checkpoints.compaction_lifetime``."""
    return db.compactor_options()


def l0_threshold(db: DatabaseConfig) -> int:
    """How many L0 SSTs make the sensor request a compaction of ``db``."""
    return compactor_options(db).min_sources


ExecutorChoice = Literal["database", "local", "spark"]
"""Where a run compacts: ``local`` threads, the ``spark`` resource's session, or ``database``: the
database's ``compaction.executor``."""


def executor_of(db: DatabaseConfig, choice: ExecutorChoice) -> str:
    """The executor a run with ``choice`` uses on ``db``."""
    return db.compaction.executor if choice == "database" else choice


class CompactConfig(runs.DatabaseOpConfig):
    """Run config of :func:`compact_op`."""

    executor: ExecutorChoice = Field(
        default="database",
        description="local: threads in the run's process; spark: the pyspark resource's session; "
        "database (the default): the database's compaction.executor.",
    )
    full: bool = Field(default=False, description="Merge every L0 SST and sorted run into one run.")


def build_compact_op(naming: Naming = DEFAULT) -> dg.OpDefinition:
    """``compact_op`` of the fleet ``naming`` names."""

    @dg.op(
        name=naming.name("compact_op"),
        description="Run one compaction of the database and report it with the LSM shape before and after.",
        pool=SPARK_POOL,
        required_resource_keys=naming.all_keys,
    )
    def _op(context: dg.OpExecutionContext, config: CompactConfig) -> dg.Output[CompactionReport | None]:
        slate = naming.slate(context)

        def step(name: str) -> runs.StepResult[CompactionReport | None]:
            executor = executor_of(slate.database(name), config.executor)
            return compact_step(
                context,
                slate,
                naming.pyspark(context),
                name,
                executor=executor,
                full=config.full,
                naming=naming,
            )

        return runs.run_step(context, config.database, step, naming=naming)

    return _op


def compact_step(
    context: dg.OpExecutionContext,
    slate: SlateDatabasesResource,
    pyspark: LazyPySparkResource,
    name: str,
    *,
    executor: str,
    full: bool,
    naming: Naming = DEFAULT,
) -> runs.StepResult[CompactionReport | None]:
    """One compaction of ``name``, with the shape before and after in the metadata (shared by the
    ops). Records an ``AssetObservation`` of the shape after."""
    db = slate.database(name)
    handle = slate.handle_for(db)
    before = handle.shape()
    # The session starts here, only in runs that ask for Spark.
    runner: Executor = SparkExecutor(pyspark.spark_session) if executor == "spark" else LocalExecutor()
    # SlateDB: submitted to its compactor and followed to the end (the executor does not apply);
    # a request that no compactor picks up fails the step with NoCompactorError.
    report = handle.compact(full=full, executor=runner, options=db.compactor_options())
    after = handle.shape()
    summary = compaction_summary(report, before.manifest_id)
    context.log.info(f"{name}: {summary}")
    context.log_event(
        dg.AssetObservation(asset_key=naming.asset_key(slate, name), metadata=shape_metadata(after))
    )
    metadata = {
        **compaction_metadata(name, report, full),
        "lsm_shape_before": dg.MetadataValue.md(shape_markdown(before)),
        "lsm_shape_after": dg.MetadataValue.md(shape_markdown(after)),
    }
    return runs.StepResult(report, metadata, summary)


def compaction_summary(report: CompactionReport | None, manifest_id: int) -> str:
    """One line: what the compaction did (``manifest_id``: the manifest it found idle)."""
    if report is None:
        return f"nothing to compact at manifest {manifest_id}"
    return (
        f"{report.kind} compaction on {report.executor}: {len(report.input_ssts)} -> "
        f"{len(report.output_ssts)} SST(s), {report.rows_in} -> {report.rows_out} rows, "
        f"{report.bytes_read} -> {report.bytes_written} bytes, {report.duration_s:.2f}s, "
        f"manifest {report.manifest_id}"
    )


def compaction_metadata(
    database: str, report: CompactionReport | None, full: bool
) -> dict[str, dg.MetadataValue]:
    """The report as run metadata: counts, bytes, duration, executor and a table of inputs/outputs."""
    metadata = metadata_of(database=database, full=full, compacted=report is not None)
    if report is None:
        return metadata
    return metadata | metadata_of(
        compaction_id=str(report.id),
        kind=report.kind,
        executor=report.executor,
        manifest_id=report.manifest_id,
        sorted_run_id=report.sorted_run_id,
        sources=len(report.sources),
        input_ssts=len(report.input_ssts),
        output_ssts=len(report.output_ssts),
        subcompactions=report.subcompactions,
        bytes_read=report.bytes_read,
        bytes_written=report.bytes_written,
        rows_in=report.rows_in,
        rows_out=report.rows_out,
        duration_s=dg.MetadataValue.float(report.duration_s),
        inputs_outputs=dg.MetadataValue.md(inputs_outputs_markdown(report)),
    )


def inputs_outputs_markdown(report: CompactionReport) -> str:
    """A Markdown table of the compaction's sources, input SSTs and output SSTs."""
    rows = ["| role | id |", "| --- | --- |"]
    rows += [f"| source | {s} |" for s in report.sources]
    rows += [f"| input SST | {s} |" for s in report.input_ssts]
    rows += [f"| output SST | {s} |" for s in report.output_ssts]
    return "\n".join(rows)


def compaction_run_config(
    database: str, *, executor: str = "local", full: bool = False, naming: Naming = DEFAULT
) -> dict[str, Any]:
    """Run config of the compaction job for ``database``."""
    return runs.op_run_config(naming.name("compact_op"), database=database, executor=executor, full=full)


def compaction_run_request(db: DatabaseConfig, key: str, naming: Naming = DEFAULT) -> dg.RunRequest:
    """A compaction run of ``db`` (what the compactor picks next) on its ``compaction.executor``,
    tagged for the concurrency limit."""
    return runs.database_run_request(
        db, key, compaction_run_config(db.name, executor=db.compaction.executor, naming=naming), naming=naming
    )


def has_compaction_work(slate: SlateDatabasesResource, db: DatabaseConfig) -> bool:
    """Whether the compactor would pick a compaction in ``db``'s current manifest (the handle's
    ``needs_compaction``: reads, fences and writes nothing)."""
    return slate.handle_for(db, store_of(slate, db)).needs_compaction(db.compactor_options())


def build(naming: Naming = DEFAULT) -> Domain:
    """The compaction domain of the fleet ``naming`` names: ``compaction_job``, its schedule and
    ``slate_ops_compaction_sensor``."""
    op = build_compact_op(naming)
    job = runs.one_op_job(
        op,
        partitions_def=naming.partitions,
        executor_def=dg.multiprocess_executor,  # a Spark compaction starts Spark in the step's own process
        name=naming.name(COMPACTION_JOB),
        description=f"Run one compaction of one database (run tag {DB_TAG}=<name>) and report it.",
    )
    schedule = database_schedule(
        naming.name(SCHEDULE_NAME),
        job,
        "*/30 * * * *",
        "Every 30 minutes: compact every database where the compactor has work.",
        wants_run=has_compaction_work,
        run_request=lambda db, tick: compaction_run_request(
            db, runs.run_key("compact", db.name, tick), naming
        ),
        nothing_to_do="no database has anything to compact",
        naming=naming,
    )

    @manifest_sensor(
        name=naming.name(COMPACTION_SENSOR),
        job_name=job.name,
        description="Requests a compaction of each database whose L0 reaches its threshold of SSTs.",
        naming=naming,
    )
    def sensor(
        tick: ManifestTick, slate: SlateDatabasesResource, log: logging.Logger
    ) -> dg.SensorResult | dg.SkipReason:
        run_requests: list[dg.RunRequest] = []
        waiting: list[str] = []
        unchanged: list[str] = []
        for db, observed in tick.found.results:
            # The cursor holds the manifest each database was last evaluated at (below its threshold,
            # or requested). Unchanged: no new manifest since, nothing new to decide, and one LIST was
            # all it cost (its manifest is not read again).
            if isinstance(observed, Unchanged) or tick.seen(db, observed):
                unchanged.append(db.name)
                continue
            tick.mark(db, observed)
            threshold = l0_threshold(db)
            if observed.status.l0_ssts < threshold:
                waiting.append(f"{db.name} {observed.status.l0_ssts}/{threshold}")
            else:
                key = f"compact-{db.name}-{observed.manifest_id}"
                run_requests.append(compaction_run_request(db, key, naming))
        if unchanged:
            shown = ", ".join(unchanged[:UNCHANGED_SHOWN]) + (
                ", …" if len(unchanged) > UNCHANGED_SHOWN else ""
            )
            waiting.append(f"{len(unchanged)} without a new manifest since the last tick: {shown}")
        return tick.result(f"no database reached its L0 threshold ({'; '.join(waiting)})", run_requests)

    return Domain(
        jobs={COMPACTION_JOB: job},
        schedules={SCHEDULE_NAME: schedule},
        sensors={COMPACTION_SENSOR: sensor},
        ops={"compact_op": op},
    )


_DEFAULT = build()
compact_op = _DEFAULT.ops["compact_op"]
compaction_job = _DEFAULT.jobs[COMPACTION_JOB]
compaction_schedule = _DEFAULT.schedules[SCHEDULE_NAME]
slate_ops_compaction_sensor = _DEFAULT.sensors[COMPACTION_SENSOR]
