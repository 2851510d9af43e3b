"""Tag policies in Dagster: ``tag_policy_op``, ``tag_policy_job`` and ``tag_policy_schedule``.

``tag_policy_op`` applies the ``tag_policy`` of one database (its run tag ``slate_ops/db``, or the op
config's ``database``) with :func:`slate_ops.admin.apply_tag_policy` — a dry run unless the config
says ``dry_run: false`` — and returns the report. Its run metadata lists what was (or would be)
created and deleted, and the ``$tags`` table after the run (``dg.MetadataValue.table``); the same
table is recorded as an ``AssetObservation`` of ``slate_ops/<name>``. Every run applies exactly one
database's policy and carries its ``slate_ops/db`` tag. Runs come from two places:

- ``tag_policy_schedule``, every 15 minutes (UTC): :func:`tag_policy_has_work` picks, and it requests one
  real run per database whose policy has something to do now (its due tag is missing, so each period's
  tag is created within 15 minutes of that database's ``create_time``; or policy tags expired or
  exceed ``num_retained_max``), found with a dry run, which reads one manifest and writes nothing;
- an operator (UI launchpad or ``dg launch``), with a partition or the tag ``slate_ops/db=<name>``: a dry
  run unless the op config says ``dry_run: false``.
"""

# No `from __future__ import annotations` here: Dagster reads the config and resource annotations
# of decorated functions at runtime.

from datetime import UTC, datetime
from typing import Any

import dagster as dg
import pyarrow as pa
from pydantic import Field

from slate_ops.admin import TagPolicyReport
from slate_ops.clock import UTC_MINUTES
from slate_ops.errors import ConfigError
from slate_ops.orchestration import runs
from slate_ops.orchestration.config import DatabaseConfig
from slate_ops.orchestration.fleet import database_schedule, store_of
from slate_ops.orchestration.metadata import metadata_of, utc_text
from slate_ops.orchestration.naming import DEFAULT, Domain, Naming
from slate_ops.orchestration.resources import SlateDatabasesResource
from slate_ops.orchestration.runs import DB_TAG

TAG_POLICY_JOB = "tag_policy_job"
"""Name of the job that runs :func:`tag_policy_op`."""

SCHEDULE_NAME = "tag_policy_schedule"


class TagPolicyOpConfig(runs.DatabaseOpConfig):
    """Run config of :func:`tag_policy_op`; the policy itself is the database's ``tag_policy``."""

    dry_run: bool = Field(default=True, description="Only report what would change (the default).")


def build_tag_policy_op(naming: Naming = DEFAULT) -> dg.OpDefinition:
    """``tag_policy_op`` of the fleet ``naming`` names."""

    @dg.op(
        name=naming.name("tag_policy_op"),
        description="Apply the database's tag policy (dry run by default): create the due tag, delete old.",
        retry_policy=runs.IDEMPOTENT_RETRY,
        required_resource_keys=naming.slate_keys,
    )
    def _op(context: dg.OpExecutionContext, config: TagPolicyOpConfig) -> dg.Output[TagPolicyReport]:
        slate = naming.slate(context)
        return runs.run_step(
            context,
            config.database,
            lambda name: tag_policy_step(context, slate, name, dry_run=config.dry_run, naming=naming),
            naming=naming,
        )

    return _op


def tag_policy_step(
    context: dg.OpExecutionContext,
    slate: SlateDatabasesResource,
    name: str,
    *,
    dry_run: bool,
    naming: Naming = DEFAULT,
) -> runs.StepResult[TagPolicyReport]:
    """Apply ``name``'s tag policy (shared by the ops; :class:`ConfigError` if it has none). Records
    the ``$tags`` table after the run as an ``AssetObservation``."""
    db = slate.database(name)
    if db.tag_policy is None:
        raise ConfigError(
            f"database {name!r} has no tag_policy in the slate_ops config; add one to its entry "
            "(docs/orchestration.md) or do not run tag_policy_job for it"
        )
    handle = slate.handle_for(db)
    report = handle.apply_tag_policy(db.tag_policy.to_policy(), dry_run=dry_run)
    tags = handle.list_tags()
    summary = tag_policy_summary(report, tags.num_rows)
    context.log.info(f"{name}: {summary}")
    context.log_event(
        dg.AssetObservation(
            asset_key=naming.asset_key(slate, name),
            metadata={"tags": tags_table(tags), "tag_count": dg.MetadataValue.int(tags.num_rows)},
        )
    )
    return runs.StepResult(report, tag_policy_metadata(name, report, tags), summary)


def tag_policy_summary(report: TagPolicyReport, tag_count: int) -> str:
    """One line: the due tag created (would be) or already there, how many deleted, tags now."""
    dry = report.dry_run
    if report.created is not None:
        created = f"{'would create' if dry else 'created'} {report.created.name}"
    else:
        created = f"{report.due_tag} already exists"
    deleted = f"{'would delete' if dry else 'deleted'} {len(report.deleted)} tag(s)"
    return f"{created}, {deleted}; {tag_count} tag(s) now"


def tag_policy_metadata(
    database: str, report: TagPolicyReport, tags: pa.Table
) -> dict[str, dg.MetadataValue]:
    """The report as run metadata, with the ``$tags`` table after the run."""
    return metadata_of(
        database=database,
        dry_run=report.dry_run,
        manifest_id=report.manifest_id,
        due_tag=report.due_tag,
        created=report.created.name if report.created else "",
        deleted_count=len(report.deleted),
        changes=dg.MetadataValue.md(changes_markdown(report)),
        tags=tags_table(tags),
    )


def changes_markdown(report: TagPolicyReport) -> str:
    """What the run created and deleted, and the policy tags it kept."""
    verbs = ("Would create", "Would delete") if report.dry_run else ("Created", "Deleted")
    lines = [
        f"Due tag `{report.due_tag}` (period from {utc_text(report.due_period_start_s, UTC_MINUTES)}):",
        "",
    ]
    lines.append(f"- {verbs[0]}: " + (f"`{report.created.name}`" if report.created else "nothing"))
    lines.append(f"- {verbs[1]}: {len(report.deleted)} tag(s)")
    lines.append("- Kept: " + (", ".join(f"`{n}`" for n in report.retained) or "none"))
    if report.deleted:
        lines += ["", "| tag | period from (UTC) | reason | checkpoint |", "| --- | --- | --- | --- |"]
        lines += [
            f"| `{d.tag.name}` | {utc_text(d.period_start_s, UTC_MINUTES)} | {d.reason} "
            f"| {d.tag.checkpoint_id} |"
            for d in report.deleted
        ]
    return "\n".join(lines)


def tags_table(tags: pa.Table) -> dg.MetadataValue:
    """The ``$tags`` table as a Dagster table (times as ISO 8601 text)."""
    schema = dg.TableSchema(
        columns=[
            dg.TableColumn("tag_name", "string"),
            dg.TableColumn("checkpoint_id", "string"),
            dg.TableColumn("manifest_id", "int"),
            dg.TableColumn("create_time", "string", description="UTC"),
            dg.TableColumn("record_count", "int"),
            dg.TableColumn("bytes", "int"),
        ]
    )
    records = [
        dg.TableRecord({**row, "create_time": row["create_time"].astimezone(UTC).isoformat()})
        for row in tags.to_pylist()
    ]
    return dg.MetadataValue.table(records, schema)


def tag_policy_run_config(database: str, *, dry_run: bool, naming: Naming = DEFAULT) -> dict[str, Any]:
    """Run config of the tag policy job for ``database``."""
    return runs.op_run_config(naming.name("tag_policy_op"), database=database, dry_run=dry_run)


def tag_policy_run_request(db: DatabaseConfig, tick: datetime, naming: Naming = DEFAULT) -> dg.RunRequest:
    """A real run of ``db``'s tag policy, tagged with ``slate_ops/db``."""
    return runs.database_run_request(
        db,
        runs.run_key("tag-policy", db.name, tick),
        tag_policy_run_config(db.name, dry_run=False, naming=naming),
        naming=naming,
    )


def tag_policy_has_work(slate: SlateDatabasesResource, db: DatabaseConfig) -> bool:
    """Whether ``db`` has a tag policy with something to do now: a dry run (reads one manifest,
    writes nothing)."""
    if db.tag_policy is None:
        return False
    report = slate.handle_for(db, store_of(slate, db)).apply_tag_policy(
        db.tag_policy.to_policy(), dry_run=True
    )
    return report.created is not None or bool(report.deleted)


def build(naming: Naming = DEFAULT) -> Domain:
    """The tag-policy domain of the fleet ``naming`` names: ``tag_policy_job`` and its schedule."""
    op = build_tag_policy_op(naming)
    job = runs.one_op_job(
        op,
        partitions_def=naming.partitions,
        name=naming.name(TAG_POLICY_JOB),
        description=f"Apply one database's tag policy (run tag {DB_TAG}=<name>; dry run by default); "
        "report it.",
    )
    schedule = database_schedule(
        naming.name(SCHEDULE_NAME),
        job,
        "*/15 * * * *",
        "Every 15 minutes: apply the tag policy of every database whose policy has work "
        "(each period's tag once a period, at its create_time; expiry and retention).",
        wants_run=tag_policy_has_work,
        run_request=lambda db, tick: tag_policy_run_request(db, tick, naming),
        nothing_to_do="no database's tag policy has anything to do",
        may_want_run=lambda db: db.tag_policy is not None,
        naming=naming,
    )
    return Domain(jobs={TAG_POLICY_JOB: job}, schedules={SCHEDULE_NAME: schedule}, ops={"tag_policy_op": op})


_DEFAULT = build()
tag_policy_op = _DEFAULT.ops["tag_policy_op"]
tag_policy_job = _DEFAULT.jobs[TAG_POLICY_JOB]
tag_policy_schedule = _DEFAULT.schedules[SCHEDULE_NAME]
