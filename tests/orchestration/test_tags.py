"""Tag policies in Dagster: the config field, the job (dry run by default), its metadata and the
``$tags`` table, and the schedule's tagged run requests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import dagster as dg
import pytest

from jobs import tag_policy_job, tag_policy_schedule
from slate_ops import admin
from slate_ops.admin import TagPolicyReport
from slate_ops.errors import ConfigError
from slate_ops.objstore import ObjectStore
from slate_ops.orchestration import DatabaseConfig, SlateDatabasesResource, SlateOpsConfig
from slate_ops.orchestration.config import TagPolicyConfig, parse_config
from slate_ops.orchestration.resources import RESOURCE_KEY
from slate_ops.runtime import ManualRuntime
from tests.support.orchestration import ALPHA, BETA, op_metadata, run_op, state_observation_events
from tests.support.stores import snapshot

ALPHA_TAGS = {"slate_ops/db": "alpha"}
DAY = 86_400.0


@pytest.fixture
def config(store_url: str) -> SlateOpsConfig:
    """alpha keeps two daily tags created at 02:00 UTC; beta has no tag policy."""
    policy = TagPolicyConfig(create_time="02:00", num_retained_max=2)
    return SlateOpsConfig(
        databases=[
            DatabaseConfig(name="alpha", store_url=store_url, path=ALPHA, tag_policy=policy),
            DatabaseConfig(name="beta", store_url=store_url, path=BETA),
        ]
    )


@pytest.fixture
def clock() -> ManualRuntime:
    return ManualRuntime(datetime(2024, 1, 5, 2, 10, tzinfo=UTC).timestamp())


def run(
    slate: SlateDatabasesResource, config: dict[str, Any] | None = None, tags: dict[str, str] | None = None
) -> dg.ExecuteInProcessResult:
    return run_op(tag_policy_job, "tag_policy_op", slate, config, ALPHA_TAGS if tags is None else tags)


def tag_names(store: ObjectStore, path: str = ALPHA) -> list[str]:
    return sorted(admin.list_tags(path, store).column("tag_name").to_pylist())


def test_config_mirrors_the_policy_and_names_invalid_fields() -> None:
    text = """
databases:
  - name: alpha
    store_url: memory://x
    path: a
    tag_policy:
      create_time: "02:00"
      create_interval_days: 7
      name_format: weekly-%Y-%m-%d
      num_retained_max: 4
      expire_after: 60days
"""
    policy = parse_config(text).databases[0].tag_policy
    assert policy is not None
    converted = policy.to_policy()
    assert (converted.create_interval_days, converted.num_retained_max) == (7, 4)
    assert converted.expire_after is not None and converted.expire_after.days == 60
    for line, bad, message in (
        ('create_time: "02:00"', 'create_time: "2am"', "create_time must be 'hh:mm'"),
        ("name_format: weekly-%Y-%m-%d", "name_format: weekly-%Y-%m", "does not identify that period"),
        ("expire_after: 60days", "expire_after: soon", "cannot parse duration"),
        ("num_retained_max: 4", "num_retained_max: 0", "greater than or equal to 1"),
        ("num_retained_max: 4", "keep: 3", "Extra inputs are not permitted"),
    ):
        with pytest.raises(ConfigError, match=f"databases.0.tag_policy.*{message}"):
            parse_config(text.replace(line, bad))


def test_dry_run_is_the_default_and_attaches_the_tags_table(
    slate: SlateDatabasesResource, created: ObjectStore
) -> None:
    admin.create_tag(ALPHA, created, "manual")
    before = snapshot(created)
    result = run(slate)
    assert result.success and snapshot(created) == before
    report = result.output_for_node("tag_policy_op")
    assert isinstance(report, TagPolicyReport) and report.dry_run
    assert report.created is not None and report.created.name == "auto-2024-01-05"
    metadata = op_metadata(result)
    assert (metadata["database"], metadata["dry_run"], metadata["created"]) == (
        "alpha",
        True,
        "auto-2024-01-05",
    )
    assert "Would create: `auto-2024-01-05`" in str(metadata["changes"])
    table = metadata["tags"]
    assert [r.data["tag_name"] for r in table.records] == ["manual"]  # the dry run changed nothing
    assert [c.name for c in table.schema.columns] == [
        "tag_name", "checkpoint_id", "manifest_id", "create_time", "record_count", "bytes",
    ]  # fmt: skip


def test_real_run_creates_and_retains_and_observes_the_asset(
    slate: SlateDatabasesResource, created: ObjectStore, clock: ManualRuntime
) -> None:
    admin.create_tag(ALPHA, created, "manual")
    for _ in range(3):
        assert run(slate, {"dry_run": False}).success
        clock.advance(DAY)
    result = run(slate, {"dry_run": False})
    assert result.success
    report = result.output_for_node("tag_policy_op")
    assert [(d.tag.name, d.reason) for d in report.deleted] == [("auto-2024-01-06", "num_retained_max")]
    assert tag_names(created) == ["auto-2024-01-07", "auto-2024-01-08", "manual"]
    metadata = op_metadata(result)
    rows = {r.data["tag_name"]: r.data for r in metadata["tags"].records}
    assert set(rows) == {"auto-2024-01-07", "auto-2024-01-08", "manual"}
    assert rows["auto-2024-01-08"]["create_time"] == "2024-01-08T02:10:00+00:00"
    assert "| `auto-2024-01-06` |" in str(metadata["changes"])
    (event,) = state_observation_events(result)
    observed = event.asset_observation_data.asset_observation
    assert observed.asset_key == dg.AssetKey(["slate_ops", "alpha"])
    assert observed.metadata["tag_count"].value == 3
    assert tag_names(created, BETA) == []


def test_a_database_without_policy_or_a_mismatched_target_fails(
    slate: SlateDatabasesResource, created: ObjectStore
) -> None:
    before = snapshot(created)
    no_policy = run(slate, {"dry_run": False}, {"slate_ops/db": "beta"})
    assert not no_policy.success
    assert "has no tag_policy" in str(no_policy.failure_data_for_node("tag_policy_op").error)  # type: ignore[union-attr]
    mismatch = run(slate, {"database": "alpha", "dry_run": False}, {"slate_ops/db": "beta"})
    assert not mismatch.success
    assert "must agree" in str(mismatch.failure_data_for_node("tag_policy_op").error)  # type: ignore[union-attr]
    assert snapshot(created) == before


def test_schedule_requests_a_tagged_real_run_only_when_the_policy_has_work(
    slate: SlateDatabasesResource, created: ObjectStore, clock: ManualRuntime
) -> None:
    when = datetime(2024, 1, 5, 2, 15, tzinfo=UTC)
    context = dg.build_schedule_context(scheduled_execution_time=when, resources={RESOURCE_KEY: slate})
    requests = tag_policy_schedule(context)
    assert isinstance(requests, list)
    (request,) = requests  # beta has no policy
    assert request.tags == {"slate_ops/db": "alpha"} and request.run_key == "tag-policy-alpha-20240105T0215Z"
    assert request.run_config == {
        "ops": {"tag_policy_op": {"config": {"database": "alpha", "dry_run": False}}}
    }
    done = tag_policy_job.execute_in_process(
        run_config=request.run_config, tags=request.tags, resources={RESOURCE_KEY: slate}
    )
    assert done.success and tag_names(created) == ["auto-2024-01-05"]

    before = snapshot(created)
    context = dg.build_schedule_context(scheduled_execution_time=when, resources={RESOURCE_KEY: slate})
    skip = tag_policy_schedule(context)
    assert (
        isinstance(skip, dg.SkipReason) and skip.skip_message == "no database's tag policy has anything to do"
    )
    assert snapshot(created) == before  # deciding is a dry run
    clock.advance(DAY)
    context = dg.build_schedule_context(scheduled_execution_time=when, resources={RESOURCE_KEY: slate})
    assert isinstance(tag_policy_schedule(context), list)


def test_schedule_skips_an_unreadable_database(slate: SlateDatabasesResource) -> None:
    when = datetime(2024, 1, 5, 2, 15, tzinfo=UTC)  # nothing created: alpha is missing
    context = dg.build_schedule_context(scheduled_execution_time=when, resources={RESOURCE_KEY: slate})
    skip = tag_policy_schedule(context)
    assert isinstance(skip, dg.SkipReason)
    assert "skipped: alpha (DbNotFoundError" in (skip.skip_message or "")


def test_definitions_register_the_job_and_schedule(defs: dg.Definitions) -> None:
    assert defs.resolve_job_def("tag_policy_job").name == "tag_policy_job"
    schedule = defs.resolve_schedule_def("tag_policy_schedule")
    assert (schedule.job_name, schedule.cron_schedule, schedule.execution_timezone) == (
        "tag_policy_job",
        "*/15 * * * *",
        "UTC",
    )
