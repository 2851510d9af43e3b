"""Garbage collection in Dagster: ``gc_op``, ``gc_job`` and ``gc_schedule``.

``gc_op`` runs :func:`slate_ops.admin.run_gc` on one database (its run tag ``slate_ops/db``, or
the op config's ``database``) — a dry run unless the config says ``dry_run: false`` — and returns
the report, with run metadata: totals, a Markdown summary table, one Markdown table per resource
listing the objects deleted (would-delete), the expired checkpoints, detached clones and the
boundary metrics. A run whose GC records errors fails with :class:`dagster.Failure` carrying the
same metadata, so nothing fails silently.

Every run collects exactly one database and carries its ``slate_ops/db`` tag (which serialises it
with that database's other maintenance runs). Runs come from two places:

- ``gc_schedule``, hourly, one run per existing database whose ``gc.interval_hours`` divides the
  tick's hour (counted from the epoch, UTC; the default 6 means 00, 06, 12 and 18 UTC), real unless
  the database's ``gc.dry_run``;
- an operator (UI launchpad or ``dg launch``), with a partition or the tag ``slate_ops/db=<name>``: a dry
  run unless the op config says ``dry_run: false``; the config also takes the resources to run and
  min ages (by default the database's ``gc`` policy).
"""

# No `from __future__ import annotations` here: Dagster reads the config and resource annotations
# of decorated functions at runtime.

from datetime import datetime
from typing import Any

import dagster as dg
from pydantic import Field, ValidationError

from slate_ops.errors import ConfigError, GcFailedError
from slate_ops.gc import ALL_RESOURCES, GcOptions, GcReport, ResourceReport
from slate_ops.orchestration import runs
from slate_ops.orchestration.config import DatabaseConfig
from slate_ops.orchestration.fleet import database_exists, database_schedule
from slate_ops.orchestration.metadata import md_cell, metadata_of, utc_text
from slate_ops.orchestration.naming import DEFAULT, Domain, Naming
from slate_ops.orchestration.resources import SlateDatabasesResource
from slate_ops.orchestration.runs import DB_TAG

GC_JOB = "gc_job"
"""Name of the job that runs :func:`gc_op`."""

SCHEDULE_NAME = "gc_schedule"

MAX_ROWS = 200
"""Objects listed per resource table in the run metadata; the counts are always complete."""


def _policy_override(description: str) -> Any:
    """A :class:`GcConfig` field that overrides the database's ``gc`` policy when set."""
    return Field(default=None, description=f"{description}; default: gc policy.")


class GcConfig(runs.DatabaseOpConfig):
    """Run config of :func:`gc_op`. Durations are written like ``"5min"`` or ``"7days 30min"``; unset
    ones come from the database's ``gc`` policy."""

    dry_run: bool = Field(default=True, description="Only report what would be deleted (the default).")
    resources: list[str] = Field(
        default=["all"],
        description="Tasks to run: database, checkpoints, manifest, compactions, wal, compacted, clones; "
        "or all.",
    )
    manifest_min_age: str | None = _policy_override(".manifest files must be this old (>= 2min)")
    compactions_min_age: str | None = _policy_override(".compactions files must be this old")
    wal_min_age: str | None = _policy_override("WAL SSTs must have been unreferenced this long")
    compacted_min_age: str | None = _policy_override("SSTs must have been unreferenced this long")
    db_delete_grace: str | None = _policy_override("Grace period of a soft-destroyed database")
    delete_wal_fences: bool | None = _policy_override("Also delete WAL fence objects")


def gc_options(config: GcConfig, db: DatabaseConfig) -> GcOptions:
    """The :class:`GcOptions` of ``config`` over ``db``'s ``gc`` policy; :class:`ConfigError` names
    every invalid field."""
    resources = sorted(ALL_RESOURCES) if "all" in config.resources else config.resources
    overrides = {name: value for name in _OVERRIDABLE if (value := getattr(config, name)) is not None}
    try:
        return db.gc.options(resources, **overrides)
    except (ValidationError, ValueError) as error:
        raise ConfigError(f"invalid gc_op config: {error}") from error


_OVERRIDABLE = (
    "manifest_min_age",
    "compactions_min_age",
    "wal_min_age",
    "compacted_min_age",
    "db_delete_grace",
    "delete_wal_fences",
)


def build_gc_op(naming: Naming = DEFAULT) -> dg.OpDefinition:
    """``gc_op`` of the fleet ``naming`` names."""

    @dg.op(
        name=naming.name("gc_op"),
        description="Garbage-collect one database (dry run by default) and report every object deleted.",
        required_resource_keys=naming.slate_keys,
    )
    def _op(context: dg.OpExecutionContext, config: GcConfig) -> dg.Output[GcReport]:
        slate = naming.slate(context)

        def step(name: str) -> runs.StepResult[GcReport]:
            options = gc_options(config, slate.database(name))
            return gc_step(context, slate, name, options, dry_run=config.dry_run)

        return runs.run_step(context, config.database, step, naming=naming)

    return _op


def gc_step(
    context: dg.OpExecutionContext,
    slate: SlateDatabasesResource,
    name: str,
    options: GcOptions,
    *,
    dry_run: bool,
) -> runs.StepResult[GcReport]:
    """One GC pass over ``name`` (shared by the ops). A pass with errors raises
    :class:`dagster.Failure` carrying the report's metadata.

    The GC's checkpoint task expires checkpoints, so a real pass over a database whose policy keeps
    checkpoint expiry report-only (``checkpoints.expiry_dry_run``) leaves that task out
    (:func:`honour_expiry_policy`); the metadata's ``checkpoint_expiry`` says so.
    """
    db = slate.database(name)
    options, dry_run, skipped = honour_expiry_policy(db, options, dry_run=dry_run)
    try:
        report = slate.handle_for(db).run_gc(options, dry_run=dry_run)
    except GcFailedError as error:
        metadata = gc_metadata(name, error.report) if isinstance(error.report, GcReport) else {}
        raise dg.Failure(description=str(error), metadata=metadata) from error
    summary = gc_summary(report)
    metadata = gc_metadata(name, report)
    if skipped is not None:
        summary += f"; {skipped}"
        metadata["checkpoint_expiry"] = dg.MetadataValue.text(skipped)
    context.log.info(f"{name}: {summary}")
    return runs.StepResult(report, metadata, summary)


EXPIRY_SKIPPED = (
    "checkpoint expiry skipped (checkpoints.expiry_dry_run: the checkpoint expiry job reports them)"
)


def honour_expiry_policy(
    db: DatabaseConfig, options: GcOptions, *, dry_run: bool
) -> tuple[GcOptions, bool, str | None]:
    """``(options, dry_run, note)`` of a GC pass over ``db`` that honours ``checkpoints.expiry_dry_run``.

    A real pass of a database with that policy runs without the ``checkpoints`` task (a pass of that
    task alone becomes a dry run); ``note`` says so, None when nothing changed. Every GC step (gc_job,
    gc_schedule's runs, maintenance_gc) goes through here, so no step expires what the policy keeps.
    """
    if dry_run or not db.checkpoints.expiry_dry_run or "checkpoints" not in options.resources:
        return options, dry_run, None
    rest = options.resources - {"checkpoints"}
    if not rest:
        return options, True, EXPIRY_SKIPPED
    return options.model_copy(update={"resources": rest}), dry_run, EXPIRY_SKIPPED


def gc_summary(report: GcReport) -> str:
    """One line: objects and bytes deleted (would be), checkpoints expired, clones detached."""
    verb = "would delete" if report.dry_run else "deleted"
    return (
        f"{verb} {len(report.deleted_keys())} object(s) ({deleted_bytes(report)} bytes); "
        f"{len(report.checkpoints_expired)} checkpoint(s) expired, {len(report.clones_detached)} "
        "clone(s) detached" + (", database destroyed" if report.destroyed else "")
    )


def deleted_bytes(report: GcReport) -> int:
    """Bytes of every object the pass deleted (would delete)."""
    return sum(r.bytes for r in report.resources) + sum(d.size for d in report.destroyed_objects)


def gc_metadata(database: str, report: GcReport) -> dict[str, dg.MetadataValue]:
    """The report as run metadata: totals, a summary table and one table per resource."""
    metadata = metadata_of(
        database=database,
        dry_run=report.dry_run,
        deleted_objects=len(report.deleted_keys()),
        deleted_bytes=deleted_bytes(report),
        checkpoints_expired=len(report.checkpoints_expired),
        destroyed=report.destroyed,
        errors=len(report.errors),
        summary=dg.MetadataValue.md(summary_markdown(report)),
        boundary_metrics=dg.MetadataValue.json(dict(report.metrics)),
    )
    if report.manifest_id is not None:
        metadata["manifest_id"] = dg.MetadataValue.int(report.manifest_id)
    for resource in report.resources:
        metadata[f"{resource.resource}_objects"] = dg.MetadataValue.md(
            resource_markdown(resource, report.dry_run)
        )
    if report.destroyed:
        metadata["database_objects"] = dg.MetadataValue.md(
            resource_markdown(
                ResourceReport.build("database", list(report.destroyed_objects), listed=0), report.dry_run
            )
        )
    if report.clones_detached:
        metadata["clones_detached"] = dg.MetadataValue.md(
            "\n".join(f"- `{p}`" for p in report.clones_detached)
        )
    if report.errors or report.notes:
        lines = [f"- **error**: {md_cell(e)}" for e in report.errors] + [
            f"- {md_cell(n)}" for n in report.notes
        ]
        metadata["messages"] = dg.MetadataValue.md("\n".join(lines))
    return metadata


def summary_markdown(report: GcReport) -> str:
    """One row per resource: objects, bytes, boundary, errors."""
    action = "would delete" if report.dry_run else "deleted"
    lines = [
        f"GC of manifest {report.manifest_id}{' (dry run)' if report.dry_run else ''}:",
        "",
        f"| resource | {action} | bytes | listed | boundary | errors |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in report.resources:
        boundary = "-" if r.boundary is None else r.boundary
        lines.append(f"| {r.resource} | {r.count} | {r.bytes} | {r.listed} | {boundary} | {len(r.errors)} |")
    lines.append(f"| checkpoints (expired) | {len(report.checkpoints_expired)} | - | - | - | - |")
    lines.append(f"| clones (detached) | {len(report.clones_detached)} | - | - | - | - |")
    if report.destroyed:
        size = sum(d.size for d in report.destroyed_objects)
        lines.append(f"| database (destroyed) | {len(report.destroyed_objects)} | {size} | - | - | - |")
    return "\n".join(lines)


def resource_markdown(resource: ResourceReport, dry_run: bool) -> str:
    """The objects of one resource: key, bytes, last modified (UTC); at most :data:`MAX_ROWS` rows."""
    title = f"{'Would delete' if dry_run else 'Deleted'} {resource.count} object(s), {resource.bytes} bytes"
    if not resource.deleted:
        return f"{title}."
    lines = [f"{title}:", "", "| key | bytes | last modified (UTC) |", "| --- | ---: | --- |"]
    for d in resource.deleted[:MAX_ROWS]:
        lines.append(f"| `{md_cell(d.key)}` | {d.size} | {utc_text(d.last_modified)} |")
    if resource.count > MAX_ROWS:
        lines.append(f"| … and {resource.count - MAX_ROWS} more | | |")
    return "\n".join(lines)


def gc_run_config(database: str, *, dry_run: bool, naming: Naming = DEFAULT) -> dict[str, Any]:
    """Run config of the GC job for ``database``."""
    return runs.op_run_config(naming.name("gc_op"), database=database, dry_run=dry_run)


def gc_run_request(db: DatabaseConfig, tick: datetime, naming: Naming = DEFAULT) -> dg.RunRequest:
    """A GC run of ``db`` (real unless its ``gc.dry_run``), tagged for the per-database concurrency limit."""
    return runs.database_run_request(
        db,
        runs.run_key("gc", db.name, tick),
        gc_run_config(db.name, dry_run=db.gc.dry_run, naming=naming),
        naming=naming,
    )


def build(naming: Naming = DEFAULT) -> Domain:
    """The garbage-collection domain of the fleet ``naming`` names: ``gc_job`` and ``gc_schedule``."""
    op = build_gc_op(naming)
    job = runs.one_op_job(
        op,
        partitions_def=naming.partitions,
        name=naming.name(GC_JOB),
        description=f"Garbage-collect one database (run tag {DB_TAG}=<name>; dry run by default) and "
        "report it.",
    )
    schedule = database_schedule(
        naming.name(SCHEDULE_NAME),
        job,
        "0 * * * *",
        "Hourly: garbage-collect every database whose gc.interval_hours is due (one run each).",
        due=lambda db, tick: db.gc.due(tick),
        none_due="no database's gc.interval_hours is due at {tick:%H:%M} UTC",
        wants_run=database_exists,
        run_request=lambda db, tick: gc_run_request(db, tick, naming),
        nothing_to_do="no database could be read",
        naming=naming,
    )
    return Domain(jobs={GC_JOB: job}, schedules={SCHEDULE_NAME: schedule}, ops={"gc_op": op})


_DEFAULT = build()
gc_op = _DEFAULT.ops["gc_op"]
gc_job = _DEFAULT.jobs[GC_JOB]
gc_schedule = _DEFAULT.schedules[SCHEDULE_NAME]
