"""The maintenance job: four steps in order, dry run by default, database policies, reports as run
metadata, retries only on idempotent steps, the daily schedule, and an S3 store with EnvVar
credentials."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import dagster as dg
import pytest

from jobs import maintenance_job, maintenance_schedule
from slate_ops import Db, admin
from slate_ops.admin.handle import SlateOpsHandle
from slate_ops.compaction import CompactionReport
from slate_ops.gc import GcReport
from slate_ops.objstore import ObjectStore, S3Store
from slate_ops.objstore import url as url_module
from slate_ops.orchestration import (
    DatabaseConfig,
    SlateDatabasesResource,
    SlateOpsConfig,
    local_pyspark_resource,
)
from slate_ops.orchestration.config import CheckpointPolicy, GcPolicy, TagPolicyConfig
from slate_ops.orchestration.maintenance import STEPS, maintenance_run_config, run_summary
from slate_ops.orchestration.resources import PYSPARK_RESOURCE_KEY, RESOURCE_KEY
from slate_ops.orchestration.runs import DATABASES, PARTITIONS_NAME
from slate_ops.orchestration.summary import latest_run_summary
from slate_ops.runtime import ManualRuntime
from tests.support.orchestration import ALPHA, BETA, add_checkpoint
from tests.support.stores import snapshot

DAY = 86_400.0


def fill(store: ObjectStore, path: str, clock: ManualRuntime) -> None:
    """Four L0 SSTs (each round's WAL SSTs become garbage) and a checkpoint that expires in an hour."""
    for round_ in range(4):
        with Db.open(path, store) as db:
            for i in range(50):
                db.put(b"k%03d" % i, b"round %d" % round_)
            db.flush_memtable()
    add_checkpoint(store, path, clock, "1h", "short-lived")


@pytest.fixture
def fleet_config(store_url: str) -> SlateOpsConfig:
    """alpha: a daily tag policy, default policies otherwise; beta: expiry and GC only dry-run."""
    return SlateOpsConfig(
        databases=[
            DatabaseConfig(
                name="alpha",
                store_url=store_url,
                path=ALPHA,
                tag_policy=TagPolicyConfig(num_retained_max=3),
            ),
            DatabaseConfig(
                name="beta",
                store_url=store_url,
                path=BETA,
                checkpoints=CheckpointPolicy(expiry_dry_run=True),
                gc=GcPolicy(dry_run=True),
            ),
        ]
    )


@pytest.fixture
def day_old_fleet(fleet_store: ObjectStore, fleet_config: SlateOpsConfig) -> SlateDatabasesResource:
    """Both databases filled; the clock a day later, so the checkpoints expired and garbage is old."""
    clock = ManualRuntime(time.time())
    fill(fleet_store, ALPHA, clock)
    fill(fleet_store, BETA, clock)
    clock.advance(DAY)
    return SlateDatabasesResource(config=fleet_config).with_clock(clock)


def run(
    slate: SlateDatabasesResource, db: str = "alpha", config: dict[str, Any] | None = None
) -> dg.ExecuteInProcessResult:
    """A run tagged ``slate_ops/db=<db>``; ``config``: the op config of every step."""
    return maintenance_job.execute_in_process(
        run_config=maintenance_run_config(**config) if config else None,
        tags={"slate_ops/db": db},
        resources=resources(slate),
        raise_on_error=False,
    )


def resources(slate: SlateDatabasesResource) -> dict[str, Any]:
    return {RESOURCE_KEY: slate, PYSPARK_RESOURCE_KEY: local_pyspark_resource()}


def step_metadata(result: dg.ExecuteInProcessResult) -> dict[str, dict[str, Any]]:
    """Each step's output metadata (plain values), by op name."""
    return {
        str(e.step_key): {k: v.value for k, v in e.step_output_data.metadata.items()}
        for e in result.all_node_events
        if e.is_successful_output
    }


def started_steps(result: dg.ExecuteInProcessResult) -> list[str]:
    return [str(e.step_key) for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_START]


def test_dry_run_is_the_default_reports_every_step_and_writes_nothing(
    day_old_fleet: SlateDatabasesResource, fleet_store: ObjectStore
) -> None:
    before = snapshot(fleet_store)
    result = run(day_old_fleet)
    assert result.success
    assert snapshot(fleet_store) == before
    assert started_steps(result) == list(STEPS)
    meta = step_metadata(result)
    expiry, compact = meta["maintenance_expire_checkpoints"], meta["maintenance_compact"]
    tags, gc = meta["maintenance_tag_policy"], meta["maintenance_gc"]
    assert (expiry["dry_run"], expiry["expired_count"]) == (True, 1)
    assert "Would remove (dry run) 1 checkpoint(s)" in expiry["expired_checkpoints"]
    assert (compact["dry_run"], compact["kind"], compact["input_ssts"], compact["compacted"]) == (
        True,
        "l0",
        4,
        False,
    )
    assert compact["bytes_to_read"] > 0
    assert tags["dry_run"] and tags["created"].startswith("auto-")
    assert gc["dry_run"] and gc["deleted_objects"] > 0 and "| resource | would delete |" in gc["summary"]
    for step in STEPS:
        assert meta[step]["duration_s"] >= 0
        assert meta[step]["step_summary"]
    assert [(step, line) for step, line, _ in run_summary(result.all_events)] == [
        (
            "maintenance_expire_checkpoints",
            "would remove 1 expired checkpoint(s) at manifest " + str(expiry["manifest_id"]),
        ),
        ("maintenance_compact", compact["step_summary"]),
        ("maintenance_tag_policy", tags["step_summary"]),
        ("maintenance_gc", gc["step_summary"]),
    ]
    assert compact["step_summary"].startswith("would run a l0 compaction of 4 SST(s)")


def test_real_run_does_each_step_in_order(
    day_old_fleet: SlateDatabasesResource, fleet_store: ObjectStore
) -> None:
    result = run(day_old_fleet, config={"dry_run": False})
    assert result.success
    assert started_steps(result) == list(STEPS)
    compaction = result.output_for_node("maintenance_compact")
    assert isinstance(compaction, CompactionReport) and compaction.kind == "l0"
    assert len(compaction.input_ssts) == 4
    gc = result.output_for_node("maintenance_gc")
    assert isinstance(gc, GcReport) and not gc.dry_run and gc.deleted_keys()
    assert not gc.deleted_keys() & set(snapshot(fleet_store))
    meta = step_metadata(result)
    assert (
        meta["maintenance_expire_checkpoints"]["dry_run"],
        meta["maintenance_expire_checkpoints"]["expired_count"],
    ) == (False, 1)
    assert meta["maintenance_compact"]["bytes_written"] > 0
    created = meta["maintenance_tag_policy"]["created"]
    assert [t["tag_name"] for t in admin.list_tags(ALPHA, fleet_store).to_pylist()] == [created]
    manifest = admin.read_manifest(ALPHA, fleet_store).value
    assert not manifest.l0 and len(manifest.compacted) == 1
    assert not [c for c in manifest.checkpoints if c.name == "short-lived"]
    # The same run again finds nothing left to do.
    again = step_metadata(run(day_old_fleet, config={"dry_run": False}))
    assert again["maintenance_expire_checkpoints"]["expired_count"] == 0
    assert again["maintenance_compact"]["compacted"] is False
    assert again["maintenance_tag_policy"]["created"] == ""


def test_database_policy_keeps_expiry_and_gc_dry(
    day_old_fleet: SlateDatabasesResource, fleet_store: ObjectStore
) -> None:
    """beta: checkpoints.expiry_dry_run and gc.dry_run; without a tag_policy that step is skipped."""
    result = run(day_old_fleet, "beta", {"dry_run": False})
    assert result.success
    meta = step_metadata(result)
    assert meta["maintenance_expire_checkpoints"]["dry_run"] is True
    assert meta["maintenance_expire_checkpoints"]["expired_count"] == 1
    assert meta["maintenance_gc"]["dry_run"] is True
    assert meta["maintenance_tag_policy"]["step_summary"] == "skipped: the database has no tag_policy"
    assert result.output_for_node("maintenance_compact") is not None  # compaction is not dry
    assert [c.name for c in admin.read_manifest(BETA, fleet_store).value.checkpoints].count(
        "short-lived"
    ) == 1


def test_overrides_and_policy_select_a_full_compaction(day_old_fleet: SlateDatabasesResource) -> None:
    result = run(day_old_fleet, config={"dry_run": False, "full": True, "executor": "local"})
    report = result.output_for_node("maintenance_compact")
    assert isinstance(report, CompactionReport) and (report.kind, report.executor) == ("full", "local")


def test_database_given_twice_must_agree(day_old_fleet: SlateDatabasesResource) -> None:
    result = run(day_old_fleet, "beta", {"database": "alpha"})
    assert not result.success
    (failure,) = [e for e in result.all_node_events if e.is_step_failure]
    assert failure.step_key == "maintenance_expire_checkpoints"
    assert "must agree" in str(failure.step_failure_data.error)


def test_a_failed_step_stops_the_run_and_is_not_retried(
    day_old_fleet: SlateDatabasesResource, fleet_store: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:

    calls: list[str] = []

    def broken(handle: SlateOpsHandle, *args: object, **kwargs: object) -> None:
        calls.append(handle.path)
        raise RuntimeError("injected: executor lost")

    monkeypatch.setattr(SlateOpsHandle, "compact", broken)  # the step calls the handle's compact
    result = run(day_old_fleet, config={"dry_run": False})
    assert not result.success
    assert calls == [ALPHA]  # compaction is not idempotent: no retry
    # tag policy and GC never start
    assert started_steps(result) == ["maintenance_expire_checkpoints", "maintenance_compact"]


def test_idempotent_step_is_retried_after_a_transient_error(
    day_old_fleet: SlateDatabasesResource, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = SlateOpsHandle.expire_checkpoints
    attempts: list[bool] = []

    def flaky(*args: Any, **kwargs: Any) -> Any:
        attempts.append(kwargs["dry_run"])
        if len(attempts) == 1:
            raise ConnectionError("injected: connection reset")
        return real(*args, **kwargs)

    monkeypatch.setattr(SlateOpsHandle, "expire_checkpoints", flaky)
    result = run(day_old_fleet, config={"dry_run": False})
    assert result.success
    assert attempts == [False, False]
    retried = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY]
    assert [e.step_key for e in retried] == ["maintenance_expire_checkpoints"]


@pytest.mark.parametrize(
    ("tags", "config", "message"),
    [
        ({}, None, "no database given"),
        ({}, {"database": "nope"}, "no database named 'nope' is configured"),
    ],
)
def test_a_run_without_a_database_fails_at_once_without_retries(
    day_old_fleet: SlateDatabasesResource, tags: dict[str, str], config: dict[str, Any] | None, message: str
) -> None:
    result = maintenance_job.execute_in_process(
        run_config=maintenance_run_config(**config) if config else None,
        tags=tags,
        resources=resources(day_old_fleet),
        raise_on_error=False,
    )
    assert not result.success
    events = [e.event_type for e in result.all_events]
    assert dg.DagsterEventType.STEP_UP_FOR_RETRY not in events
    assert started_steps(result) == ["maintenance_expire_checkpoints"]  # one attempt, then the run stops
    (failure,) = [e for e in result.all_node_events if e.is_step_failure]
    error = failure.step_failure_data.error
    assert error is not None and message in error.message
    assert "max_retries" not in error.message


def test_only_transient_errors_are_retried(
    day_old_fleet: SlateDatabasesResource, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts: list[bool] = []

    def broken(*args: Any, **kwargs: Any) -> Any:
        attempts.append(kwargs["dry_run"])
        raise ValueError("injected: a bug that fails every time")

    monkeypatch.setattr(SlateOpsHandle, "expire_checkpoints", broken)
    result = run(day_old_fleet, config={"dry_run": False})
    assert not result.success
    assert attempts == [False]  # not retried: it cannot succeed on retry
    (failure,) = [e for e in result.all_node_events if e.is_step_failure]
    assert "ValueError: injected" in str(failure.step_failure_data.error)


def test_retry_policies_only_on_idempotent_steps() -> None:
    policies = {node.name: node.definition.retry_policy for node in maintenance_job.graph.nodes}  # type: ignore[attr-defined]
    assert {name for name, policy in policies.items() if policy is not None} == {
        "maintenance_expire_checkpoints",
        "maintenance_tag_policy",
    }
    pools = {node.name: node.definition.pool for node in maintenance_job.graph.nodes}  # type: ignore[attr-defined]
    assert {name for name, pool in pools.items() if pool} == {"maintenance_compact"}
    assert pools["maintenance_compact"] == "slate_ops_spark"


def test_schedule_requests_one_tagged_real_partition_run_per_existing_database(
    fleet_config: SlateOpsConfig, fleet_store: ObjectStore, store_url: str
) -> None:
    admin.create_db(ALPHA, fleet_store)  # beta does not exist
    slate = SlateDatabasesResource(config=fleet_config)
    when = datetime(2024, 1, 2, 3, 0, tzinfo=UTC)
    context = dg.build_schedule_context(scheduled_execution_time=when, resources={RESOURCE_KEY: slate})
    requests = maintenance_schedule(context)
    assert isinstance(requests, list)
    assert [(r.run_key, r.partition_key, r.tags, r.run_config) for r in requests] == [
        (
            "maintenance-alpha-20240102T0300Z",
            "alpha",
            {"slate_ops/db": "alpha"},
            maintenance_run_config(dry_run=False),
        )
    ]
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(PARTITIONS_NAME, ["alpha"])
        result = maintenance_job.execute_in_process(
            run_config=requests[0].run_config,
            partition_key=requests[0].partition_key,
            tags=requests[0].tags,
            resources=resources(slate),
            instance=instance,
        )
    assert result.success
    assert all(not meta["dry_run"] for meta in step_metadata(result).values() if "dry_run" in meta)


def test_runs_of_several_partitions_maintain_each_database(
    day_old_fleet: SlateDatabasesResource, fleet_store: ObjectStore
) -> None:
    """The partition key is the database: one real run per partition, each with its own policy."""
    assert maintenance_job.partitions_def is DATABASES
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(PARTITIONS_NAME, ["alpha", "beta"])
        results = {
            key: maintenance_job.execute_in_process(
                run_config=maintenance_run_config(dry_run=False),
                partition_key=key,
                resources=resources(day_old_fleet),
                instance=instance,
            )
            for key in ("alpha", "beta")
        }
        for key, result in results.items():
            assert result.success, key
            assert result.dagster_run.tags["dagster/partition"] == key
            assert {m["database"] for m in step_metadata(result).values()} == {key}
        assert latest_run_summary(instance, "beta").startswith("maintenance_job of beta (run ")
        assert "real run): SUCCESS" in latest_run_summary(instance, "alpha")
    for path in (ALPHA, BETA):  # both compacted
        assert not admin.read_manifest(path, fleet_store).value.l0
    # alpha's policy expires its checkpoint; beta's keeps expiry a dry run
    assert not [
        c for c in admin.read_manifest(ALPHA, fleet_store).value.checkpoints if c.name == "short-lived"
    ]
    assert [c.name for c in admin.read_manifest(BETA, fleet_store).value.checkpoints].count(
        "short-lived"
    ) == 1
    assert step_metadata(results["beta"])["maintenance_gc"]["dry_run"] is True


def test_a_partition_and_another_database_must_agree(day_old_fleet: SlateDatabasesResource) -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(PARTITIONS_NAME, ["alpha"])
        result = maintenance_job.execute_in_process(
            run_config=maintenance_run_config(database="beta"),
            partition_key="alpha",
            resources=resources(day_old_fleet),
            instance=instance,
            raise_on_error=False,
        )
    assert not result.success
    (failure,) = [e for e in result.all_node_events if e.is_step_failure]
    assert "must agree" in str(failure.step_failure_data.error)


def test_definitions_hold_the_job_and_schedule(defs: dg.Definitions) -> None:
    dg.Definitions.validate_loadable(defs)
    job = defs.resolve_job_def("maintenance_job")
    upstream = {
        name: [o.node_name for outs in structure.values() for o in outs]
        for name in STEPS
        for structure in [job.graph.dependency_structure.input_to_upstream_outputs_for_node(name)]
    }
    assert upstream == {step: list(STEPS[i - 1 : i]) for i, step in enumerate(STEPS)}  # a chain, in order
    schedule = defs.resolve_schedule_def("maintenance_schedule")
    assert (schedule.job_name, schedule.cron_schedule, schedule.execution_timezone) == (
        "maintenance_job",
        "0 3 * * *",
        "UTC",
    )
    with pytest.raises(dg.DagsterInvalidConfigError, match="dry_runn"):
        job.execute_in_process(run_config={"dry_runn": False}, tags={"slate_ops/db": "alpha"})


@pytest.mark.s3
def test_s3_store_with_envvar_credentials(
    monkeypatch: pytest.MonkeyPatch, moto_endpoint: str, make_bucket: Callable[[], str]
) -> None:
    """Credentials reach the store from SLATE_OPS_S3_* through dagster.EnvVar, never from the file."""
    monkeypatch.setenv("SLATE_OPS_S3_ACCESS_KEY_ID", "from-envvar")
    monkeypatch.setenv("SLATE_OPS_S3_SECRET_ACCESS_KEY", "secret-from-envvar")
    monkeypatch.delenv("SLATE_OPS_S3_SESSION_TOKEN", raising=False)
    opened: list[dict[str, Any]] = []

    class RecordingS3Store(S3Store):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            opened.append(kwargs)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(url_module, "S3Store", RecordingS3Store)
    url = f"s3://{make_bucket()}/fleet?endpoint_url={moto_endpoint}&region=us-east-1"
    config = SlateOpsConfig(databases=[DatabaseConfig(name="orders", store_url=url, path="orders")])
    import definitions

    defs = definitions.make_definitions(config)
    assert defs.resources is not None
    resource = defs.resources[RESOURCE_KEY]
    assert isinstance(resource, SlateDatabasesResource)
    # The definitions hold the variables' names (shown in the UI), not their values.
    assert isinstance(resource.s3_access_key_id, dg.EnvVar)
    assert (resource.s3_access_key_id, resource.s3_secret_access_key, resource.s3_session_token) == (
        "SLATE_OPS_S3_ACCESS_KEY_ID",
        "SLATE_OPS_S3_SECRET_ACCESS_KEY",
        None,
    )
    assert defs.resolve_job_def("slate_ops_databases_job").execute_in_process().success
    result = defs.resolve_job_def("maintenance_job").execute_in_process(
        run_config=maintenance_run_config(dry_run=False), tags={"slate_ops/db": "orders"}
    )
    assert result.success
    assert opened and all(
        (o["access_key_id"], o["secret_access_key"]) == ("from-envvar", "secret-from-envvar") for o in opened
    )
    store = resource.open_store("orders")
    assert isinstance(store, S3Store) and admin.read_manifest("orders", store).id >= 1


def test_summary_of_the_latest_run_from_the_instance(
    day_old_fleet: SlateDatabasesResource, monkeypatch: pytest.MonkeyPatch
) -> None:

    with dg.DagsterInstance.ephemeral() as instance:
        assert (
            latest_run_summary(instance, "alpha")
            == "no maintenance_job run of alpha in this Dagster instance"
        )
        maintenance_job.execute_in_process(
            run_config=maintenance_run_config(dry_run=False),
            tags={"slate_ops/db": "alpha"},
            resources=resources(day_old_fleet),
            instance=instance,
        )
        lines = latest_run_summary(instance, "alpha").splitlines()
        assert re.fullmatch(r"maintenance_job of alpha \(run [0-9a-f]{8}, real run\): SUCCESS", lines[0])
        assert re.fullmatch(
            r"  1\. checkpoint expiry +\d+\.\d\ds  removed 1 expired checkpoint\(s\) at manifest \d+",
            lines[1],
        )
        assert re.fullmatch(
            r"  2\. compaction +\d+\.\d\ds  l0 compaction on local: 4 -> 1 SST\(s\), .*", lines[2]
        )
        assert re.fullmatch(
            r"  3\. tag policy +\d+\.\d\ds  created auto-\d{4}-\d\d-\d\d, deleted 0 tag\(s\); 1 tag\(s\) now",
            lines[3],
        )
        assert re.fullmatch(
            r"  4\. garbage collection +\d+\.\d\ds  deleted [1-9]\d* object\(s\) \(\d+ bytes\); .*", lines[4]
        )

        monkeypatch.setattr(SlateOpsHandle, "compact", _broken_compaction)
        maintenance_job.execute_in_process(
            run_config=maintenance_run_config(dry_run=False),
            tags={"slate_ops/db": "alpha"},
            resources=resources(day_old_fleet),
            instance=instance,
            raise_on_error=False,
        )
        failed = latest_run_summary(instance, "alpha").splitlines()
        dry = maintenance_job.execute_in_process(
            tags={"slate_ops/db": "alpha"}, resources=resources(day_old_fleet), instance=instance
        )
        assert dry.success and "dry run): SUCCESS" in latest_run_summary(instance, "alpha")
    assert re.fullmatch(r"maintenance_job of alpha \(run [0-9a-f]{8}, real run\): FAILURE", failed[0])
    assert "checkpoint expiry" in failed[1] and "removed 0 expired" in failed[1]
    assert [line.split()[1:] for line in failed[2:]] == [
        ["compaction", "did", "not", "finish"],
        ["tag", "policy", "did", "not", "finish"],
        ["garbage", "collection", "did", "not", "finish"],
    ]


def _broken_compaction(*args: object, **kwargs: object) -> None:
    raise RuntimeError("injected")


def recorded(instance: dg.DagsterInstance, run_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The stored check evaluations (by check name) and materializations' metadata that the run's
    last step recorded, each of ``slate_ops/alpha`` (compaction and tag policy observe what they
    changed in their own steps)."""
    checks: dict[str, Any] = {}
    observations: list[dict[str, Any]] = []
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event is None or event.step_key != "maintenance_gc":
            continue
        if event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION:
            evaluation = event.event_specific_data
            assert isinstance(evaluation, dg.AssetCheckEvaluation)
            assert evaluation.asset_key == dg.AssetKey(["slate_ops", "alpha"])
            checks[evaluation.check_name] = evaluation
        elif event.event_type == dg.DagsterEventType.ASSET_MATERIALIZATION:
            materialization = event.step_materialization_data.materialization
            assert materialization.asset_key == dg.AssetKey(["slate_ops", "alpha"])
            observations.append({k: v.value for k, v in materialization.metadata.items()})
    return checks, observations


def test_a_real_run_records_the_checks_and_state_it_leaves(day_old_fleet: SlateDatabasesResource) -> None:
    """After the last step, the run records alpha's checks (as its multi_asset_check computes them)
    and a materialization of the maintained state; a dry run changes nothing and records nothing."""
    from slate_ops.orchestration.checks import ALL_CHECKS as CHECKS  # verify's checks and gc_health
    from slate_ops.orchestration.checks import verify_results

    key = dg.AssetKey(["slate_ops", "alpha"])
    before = verify_results(
        day_old_fleet, "alpha", logging.getLogger(__name__)
    )  # what the asset check reports
    # A day without GC: its garbage is older than gc_health allows (3 x the 6 h interval)
    failing = ["no_expired_checkpoints", "l0_below_threshold", "gc_health"]
    assert [r.check_name for r in before if not r.passed] == failing
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(PARTITIONS_NAME, ["alpha"])
        dry = maintenance_job.execute_in_process(
            partition_key="alpha", resources=resources(day_old_fleet), instance=instance
        )
        assert recorded(instance, dry.run_id) == ({}, [])
        real = maintenance_job.execute_in_process(
            run_config=maintenance_run_config(dry_run=False),
            partition_key="alpha",
            resources=resources(day_old_fleet),
            instance=instance,
        )
        checks, observations = recorded(instance, real.run_id)
        latest = instance.event_log_storage.get_latest_asset_check_execution_by_key(
            [dg.AssetCheckKey(key, "no_expired_checkpoints")]
        )
    assert set(checks) == set(CHECKS)
    assert all(c.passed for c in checks.values()), {
        n: c.description for n, c in checks.items() if not c.passed
    }
    assert latest[dg.AssetCheckKey(key, "no_expired_checkpoints")].run_id == real.run_id
    (observed,) = observations
    created = step_metadata(real)["maintenance_tag_policy"]["created"]
    assert "0 L0 SST(s), 1 sorted run(s)" in observed["lsm_shape"]
    assert observed["tag_names"] == created and "short-lived" not in observed["checkpoint_names"]


def test_each_maintenance_op_takes_only_the_fields_it_uses() -> None:
    """The launchpad pre-fills each op's own config: executor and full under compaction only."""
    fields = {node.name: set(node.config_schema.config_type.fields) for node in maintenance_job.all_node_defs}
    assert fields == {
        "maintenance_expire_checkpoints": {"database", "dry_run"},
        "maintenance_compact": {"database", "dry_run", "executor", "full"},
        "maintenance_tag_policy": {"database", "dry_run"},
        "maintenance_gc": {"database", "dry_run"},
    }
    config = maintenance_run_config(dry_run=False, executor="local", full=True, database="alpha")["ops"]
    assert {step: set(config[step]["config"]) for step in STEPS} == fields
    assert maintenance_job.run_config_schema.config_type is not None
    dg.validate_run_config(maintenance_job, maintenance_run_config(dry_run=False, executor="spark"))
    with pytest.raises(dg.DagsterInvalidConfigError, match="executor"):
        dg.validate_run_config(
            maintenance_job, {"ops": {"maintenance_gc": {"config": {"dry_run": False, "executor": "local"}}}}
        )
