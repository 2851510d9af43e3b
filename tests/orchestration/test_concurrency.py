"""Concurrency and safety: the repo's instance/dagster.yaml, the slate_ops/db tag on every run request
of every schedule and sensor, the Spark pool, retries only on idempotent ops, destructive ops dry by
default."""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from dagster._core.definitions.partitions.context import partition_loading_context

from slate_ops import Db
from slate_ops.objstore import ObjectStore
from slate_ops.orchestration import DB_TAG, DatabaseConfig, SlateDatabasesResource, SlateOpsConfig
from slate_ops.orchestration.compaction import SPARK_POOL
from slate_ops.orchestration.config import TagPolicyConfig
from slate_ops.orchestration.maintenance import STEPS
from slate_ops.orchestration.resources import PYSPARK_RESOURCE_KEY, RESOURCE_KEY
from slate_ops.orchestration.runs import PARTITIONS_NAME
from slate_ops.runtime import ManualRuntime
from tests.support.orchestration import ALPHA, BETA, add_checkpoint

REPO = Path(__file__).resolve().parents[2]
DB_LIMIT = [
    {"key": "dagster/partition", "value": {"applyLimitPerUniqueValue": True}, "limit": 1},
    {"key": "slate_ops/db", "value": {"applyLimitPerUniqueValue": True}, "limit": 1},
]

IDEMPOTENT_OPS = {
    "expire_checkpoints_op",
    "tag_policy_op",
    "maintenance_expire_checkpoints",
    "maintenance_tag_policy",
}
"""The only ops allowed a retry policy: running them twice converges on the same state."""


def test_repo_dagster_yaml_limits_runs_per_database_and_the_spark_pool(tmp_path: Path) -> None:
    shutil.copy(REPO / "instance" / "dagster.yaml", tmp_path / "dagster.yaml")
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        config = instance.get_concurrency_config()
        assert config.run_queue_config is not None
        assert config.run_queue_config.tag_concurrency_limits == DB_LIMIT
        assert config.pool_config.default_pool_limit == 1
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        assert instance.get_settings("telemetry") == {"enabled": False}


def test_documented_concurrency_limits_load_into_an_instance(tmp_path: Path) -> None:
    docs = (REPO / "docs" / "orchestration.md").read_text()
    snippets = [s for s in re.findall(r"```yaml\n(.*?)```", docs, re.S) if "tag_concurrency_limits" in s]
    assert snippets
    for i, snippet in enumerate(snippets):
        home = tmp_path / f"home{i}"
        home.mkdir()
        (home / "dagster.yaml").write_text(snippet)
        with dg.DagsterInstance.from_config(str(home)) as instance:
            queue = instance.get_concurrency_config().run_queue_config
            assert queue is not None and queue.tag_concurrency_limits == DB_LIMIT


@pytest.fixture
def busy(fleet_store: ObjectStore, store_url: str) -> SlateDatabasesResource:
    """Two databases where every schedule and sensor has work: an expired checkpoint, four L0 SSTs,
    a tag policy whose tag is due, and day-old garbage."""
    clock = ManualRuntime(time.time())
    for path in (ALPHA, BETA):
        for round_ in range(4):
            with Db.open(path, fleet_store) as db:
                db.put(b"k", b"%d" % round_)
                db.flush_memtable()
        add_checkpoint(fleet_store, path, clock, "1h", "short-lived")
    clock.advance(86_400)
    config = SlateOpsConfig(
        databases=[
            DatabaseConfig(name=name, store_url=store_url, path=path, tag_policy=TagPolicyConfig())
            for name, path in (("alpha", ALPHA), ("beta", BETA))
        ]
    )
    return SlateDatabasesResource(config=config).with_clock(clock)


@pytest.fixture
def busy_defs(busy: SlateDatabasesResource) -> Iterator[dg.Definitions]:
    import definitions

    yield definitions.make_definitions(busy.config)


def _databases_in(run_config: Any) -> set[str]:
    """Every ``database`` value anywhere in a run config."""
    if isinstance(run_config, dict):
        found = {v for k, v in run_config.items() if k == "database" and isinstance(v, str)}
        return found.union(*(_databases_in(v) for v in run_config.values()))
    return set()


def test_every_schedule_and_sensor_run_request_carries_the_database_tag(
    busy_defs: dg.Definitions, busy: SlateDatabasesResource
) -> None:
    tick = datetime(2024, 1, 2, 0, 0, tzinfo=UTC)  # every schedule's cron and gc.interval_hours match
    requested: dict[str, list[dg.RunRequest]] = {}
    repository = busy_defs.get_repository_def()
    with (
        dg.DagsterInstance.ephemeral() as instance,
        partition_loading_context(dynamic_partitions_store=instance),  # as the daemon evaluates them
    ):
        instance.add_dynamic_partitions(PARTITIONS_NAME, ["alpha", "beta"])  # the partitions sensor's work
        for schedule in repository.schedule_defs:
            context = dg.build_schedule_context(
                instance=instance,
                scheduled_execution_time=tick,
                resources={RESOURCE_KEY: busy},
                repository_def=repository,
            )
            requested[schedule.name] = list(schedule.evaluate_tick(context).run_requests or [])
        for sensor in repository.sensor_defs:
            context = dg.build_sensor_context(
                instance=instance, resources={RESOURCE_KEY: busy}, definitions=busy_defs
            )
            requested[sensor.name] = list(sensor.evaluate_tick(context).run_requests or [])
    expected = {
        "maintenance_schedule",
        "checkpoint_expiry_schedule",
        "compaction_schedule",
        "gc_schedule",
        "tag_policy_schedule",
        "slate_ops_manifest_sensor",
        "slate_ops_compaction_sensor",
    }
    assert expected <= set(requested)
    for name, requests in requested.items():
        tagged = [r.tags.get(DB_TAG) for r in requests]
        if name in expected:  # every database has work for these: one run each
            assert sorted(map(str, tagged)) == ["alpha", "beta"], f"{name} requested {tagged}"
        for request in requests:
            assert request.tags.get(DB_TAG) in {"alpha", "beta"}, f"{name}: {request.tags}"
            assert _databases_in(request.run_config) <= {request.tags[DB_TAG]}, name
            assert request.run_key, f"{name}: run requests need deterministic run keys"
            assert request.partition_key == request.tags[DB_TAG], name  # the partition is the database


def _ops(defs: dg.Definitions) -> dict[str, dg.OpDefinition]:
    ops: dict[str, dg.OpDefinition] = {}
    for job in defs.resolve_all_job_defs():
        for node in job.graph.iterate_op_defs():
            ops[node.name] = node
    return ops


def test_spark_ops_are_in_the_pool_and_only_idempotent_ops_retry(defs: dg.Definitions) -> None:
    ops = _ops(defs)
    spark_ops = {name for name, op in ops.items() if PYSPARK_RESOURCE_KEY in op.required_resource_keys}
    assert spark_ops == {"compact_op", "maintenance_compact"}
    assert {name for name, op in ops.items() if op.pool == SPARK_POOL} == spark_ops
    retrying = {name for name, op in ops.items() if op.retry_policy is not None}
    assert retrying == IDEMPOTENT_OPS
    for job in defs.resolve_all_job_defs():
        assert job.op_retry_policy is None, f"{job.name} retries every op"


def test_destructive_ops_default_to_a_dry_run(defs: dg.Definitions) -> None:
    ops = _ops(defs)
    for name in ("expire_checkpoints_op", "gc_op", "tag_policy_op"):
        field = ops[name].config_schema.as_field().config_type.fields["dry_run"]  # type: ignore[attr-defined]
        assert field.default_value is True, name
    for name in STEPS:  # the maintenance ops, each with the same op config
        field = ops[name].config_schema.as_field().config_type.fields["dry_run"]  # type: ignore[attr-defined]
        assert field.default_value is True, name
