"""Compaction in Dagster: the job's report and shapes, the L0 sensor, the schedule, the Spark resource."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest
from dagster_pyspark import LazyPySparkResource

from jobs import compaction_job, compaction_schedule
from slate_ops import Db, DbReader
from slate_ops.admin import describe_db
from slate_ops.compaction import CompactionReport
from slate_ops.objstore import ObjectStore
from slate_ops.orchestration import DatabaseConfig, SlateDatabasesResource, SlateOpsConfig
from slate_ops.orchestration.compaction import compact_op, slate_ops_compaction_sensor
from slate_ops.orchestration.resources import (
    PYSPARK_RESOURCE_KEY,
    RESOURCE_KEY,
    LocalPySparkResource,
    local_pyspark_resource,
)
from tests.support.orchestration import (
    ALPHA,
    BETA,
    manifests_of,
    op_metadata,
    run_op,
    skip_message,
    state_observation_events,
)

KEYS = [f"k{i:02d}".encode() for i in range(10)]


def flush_rounds(store: ObjectStore, path: str, rounds: int, first: int = 0) -> None:
    """``rounds`` L0 SSTs in ``path``, each rewriting every key with value ``v<round>``."""
    with Db.open(path, store) as db:
        for round_ in range(first, first + rounds):
            for key in KEYS:
                db.put(key, f"v{round_}".encode())
            db.flush_memtable()


def contents(store: ObjectStore, path: str) -> dict[bytes, bytes]:
    reader = DbReader.open(path, store)
    try:
        return dict(reader.scan())
    finally:
        reader.close()


def run(
    defs: dg.Definitions,
    slate: SlateDatabasesResource,
    config: dict[str, object] | None = None,
    tags: dict[str, str] | None = None,
) -> dg.ExecuteInProcessResult:
    job = defs.resolve_job_def("compaction_job")
    return run_op(job, "compact_op", slate, config, {"slate_ops/db": "alpha"} if tags is None else tags)


def resources(slate: SlateDatabasesResource) -> dict[str, object]:
    """What the bare ``compaction_job`` needs (Definitions bind them for the UI and the CLI)."""
    return {RESOURCE_KEY: slate, PYSPARK_RESOURCE_KEY: local_pyspark_resource()}


def observation(result: dg.ExecuteInProcessResult) -> dict[str, object]:
    (event,) = state_observation_events(result)
    observed = event.asset_observation_data.asset_observation
    assert observed.asset_key == dg.AssetKey(["slate_ops", "alpha"])
    return {key: value.value for key, value in observed.metadata.items()}


def tick(slate: SlateDatabasesResource, cursor: str | None) -> dg.SensorResult | dg.SkipReason:
    result = slate_ops_compaction_sensor(
        dg.build_sensor_context(cursor=cursor, resources={RESOURCE_KEY: slate})
    )
    assert isinstance(result, dg.SensorResult | dg.SkipReason)
    return result


def test_job_compacts_l0_and_reports_shapes(
    defs: dg.Definitions, slate: SlateDatabasesResource, fleet_store: ObjectStore
) -> None:
    flush_rounds(fleet_store, ALPHA, 5)
    result = run(defs, slate)  # no op config: the database comes from the run tag
    assert result.success
    report = result.output_for_node("compact_op")
    assert isinstance(report, CompactionReport)
    assert (report.kind, report.executor, len(report.input_ssts), len(report.output_ssts)) == (
        "l0",
        "local",
        5,
        1,
    )

    metadata = op_metadata(result)
    assert (metadata["database"], metadata["compacted"], metadata["full"]) == ("alpha", True, False)
    assert (metadata["kind"], metadata["executor"], metadata["compaction_id"]) == (
        "l0",
        "local",
        str(report.id),
    )
    assert (metadata["sources"], metadata["input_ssts"], metadata["output_ssts"]) == (5, 5, 1)
    assert (metadata["rows_in"], metadata["rows_out"], metadata["sorted_run_id"]) == (50, 10, 0)
    assert metadata["bytes_read"] == report.bytes_read and metadata["bytes_written"] == report.bytes_written
    assert isinstance(metadata["duration_s"], float) and metadata["manifest_id"] == report.manifest_id
    table = str(metadata["inputs_outputs"])
    assert table.startswith("| role | id |")
    assert all(f"| input SST | {sst} |" in table for sst in report.input_ssts)
    assert f"| output SST | {report.output_ssts[0]} |" in table

    before, after = str(metadata["lsm_shape_before"]), str(metadata["lsm_shape_after"])
    assert "5 L0 SST(s), 0 sorted run(s)" in before and before.count("\n| L0 | ") == 5
    assert "| level | id | SSTs | first key | last key | bytes | entries |" in before
    assert all(f"| L0 | {sst} | 1 | k00 | k09 | " in before for sst in report.input_ssts)
    assert after.startswith(f"Manifest {report.manifest_id}: 0 L0 SST(s), 1 sorted run(s)")
    assert "| SR | 0 | 1 | k00 | k09 | " in after and after.rstrip().endswith(" | 10 |")

    observed = observation(result)
    assert (observed["manifest_id"], observed["l0_ssts"], observed["sorted_runs"], observed["ssts"]) == (
        report.manifest_id,
        0,
        1,
        1,
    )
    assert observed["lsm_shape"] == after
    assert contents(fleet_store, ALPHA) == {key: b"v4" for key in KEYS}


def test_nothing_to_compact_succeeds_and_full_merges_everything(
    defs: dg.Definitions, slate: SlateDatabasesResource, fleet_store: ObjectStore
) -> None:
    flush_rounds(fleet_store, ALPHA, 4)
    assert run(defs, slate).success
    flush_rounds(fleet_store, ALPHA, 2, first=4)

    idle = run(defs, slate, {"database": "alpha"})
    assert idle.success and idle.output_for_node("compact_op") is None
    metadata = op_metadata(idle)
    assert metadata["compacted"] is False and "kind" not in metadata
    assert "2 L0 SST(s), 1 sorted run(s)" in str(metadata["lsm_shape_before"])
    assert "2 L0 SST(s), 1 sorted run(s)" in str(metadata["lsm_shape_after"])

    full = run(defs, slate, {"full": True})
    metadata = op_metadata(full)
    assert (metadata["kind"], metadata["full"], metadata["input_ssts"], metadata["rows_out"]) == (
        "full",
        True,
        3,
        10,
    )
    assert "0 L0 SST(s), 1 sorted run(s)" in str(metadata["lsm_shape_after"])
    assert observation(full)["l0_ssts"] == 0
    assert contents(fleet_store, ALPHA) == {key: b"v5" for key in KEYS}


@pytest.mark.parametrize(
    ("op_config", "tags", "error"),
    [
        ({"database": "alpha"}, {"slate_ops/db": "beta"}, "must agree"),
        (None, {}, "no database given"),
        (None, {"slate_ops/db": "ghost"}, "no database named 'ghost'"),
    ],
)
def test_wrong_target_fails_the_run(
    defs: dg.Definitions,
    slate: SlateDatabasesResource,
    fleet_store: ObjectStore,
    op_config: dict[str, object] | None,
    tags: dict[str, str],
    error: str,
) -> None:
    flush_rounds(fleet_store, ALPHA, 4)
    result = run(defs, slate, op_config, tags)
    assert not result.success
    failure = result.failure_data_for_node("compact_op")
    assert failure is not None and error in str(failure.error)


def test_invalid_executor_is_a_config_error(defs: dg.Definitions, slate: SlateDatabasesResource) -> None:
    with pytest.raises(dg.DagsterInvalidConfigError, match="executor"):
        run(defs, slate, {"executor": "ray"})


def test_per_database_threshold_is_the_compactors_min_sources(
    store_url: str, fleet_store: ObjectStore
) -> None:
    config = SlateOpsConfig(
        databases=[DatabaseConfig(name="alpha", store_url=store_url, path=ALPHA, compaction_l0_threshold=2)]
    )
    slate = SlateDatabasesResource(config=config)
    flush_rounds(fleet_store, ALPHA, 2)
    request = tick(slate, None)
    assert isinstance(request, dg.SensorResult)
    (run_request,) = request.run_requests or []
    context = dg.build_op_context(resources=resources(slate))
    output = compact_op(context, run_request.run_config["ops"]["compact_op"]["config"])
    assert isinstance(output, dg.Output) and isinstance(output.value, CompactionReport)
    assert len(output.value.input_ssts) == 2  # the default min_sources (4) would have found nothing


def test_sensor_requests_a_tagged_run_when_l0_reaches_its_threshold(
    slate: SlateDatabasesResource, created: ObjectStore
) -> None:
    flush_rounds(created, ALPHA, 3)
    below = tick(slate, None)
    assert skip_message(below) == "no database reached its L0 threshold (alpha 3/4; beta 0/4)"
    assert isinstance(below, dg.SensorResult) and below.cursor is not None
    evaluated = manifests_of(below.cursor)  # the manifest each database was evaluated at
    assert evaluated == {"alpha": describe_db(ALPHA, created).manifest_id, "beta": 1}
    unchanged = tick(slate, below.cursor)  # nothing new: one LIST per database, nothing to decide
    assert skip_message(unchanged) == (
        "no database reached its L0 threshold (2 without a new manifest since the last tick: alpha, beta)"
    )

    flush_rounds(created, ALPHA, 1, first=3)
    manifest_id = describe_db(ALPHA, created).manifest_id
    result = tick(slate, below.cursor)
    assert isinstance(result, dg.SensorResult)
    (request,) = result.run_requests or []
    assert request.run_key == f"compact-alpha-{manifest_id}"
    assert request.tags == {"slate_ops/db": "alpha"}
    assert request.run_config == {
        "ops": {"compact_op": {"config": {"database": "alpha", "executor": "local", "full": False}}}
    }
    assert manifests_of(result.cursor) == {"alpha": manifest_id, "beta": 1}

    # The same manifest is not requested twice; the cursor keeps only configured databases.
    again = tick(slate, json.dumps({"alpha": manifest_id, "retired": 3}))
    assert "without a new manifest since the last tick: alpha" in (skip_message(again) or "")

    done = compaction_job.execute_in_process(
        run_config=request.run_config, tags=request.tags, resources=resources(slate)
    )
    assert done.success
    after = tick(slate, result.cursor)
    assert "alpha 0/4" in (skip_message(after) or "")
    assert contents(created, ALPHA) == {key: b"v3" for key in KEYS}


def test_sensor_skips_unreadable_databases(store_url: str, fleet_store: ObjectStore) -> None:
    config = SlateOpsConfig(
        databases=[
            DatabaseConfig(name="ghost", store_url=store_url, path="not/created"),
            DatabaseConfig(name="alpha", store_url=store_url, path=ALPHA),
        ]
    )
    slate = SlateDatabasesResource(config=config)
    flush_rounds(fleet_store, ALPHA, 4)
    result = tick(slate, None)
    assert isinstance(result, dg.SensorResult)
    assert [r.tags for r in result.run_requests or []] == [{"slate_ops/db": "alpha"}]
    only_ghost = SlateDatabasesResource(config=SlateOpsConfig(databases=config.databases[:1]))
    skip = tick(only_ghost, None)
    assert (skip_message(skip) or "").startswith("all 1 database(s) skipped: ghost (DbNotFoundError")


def test_schedule_requests_runs_where_the_compactor_has_work(
    slate: SlateDatabasesResource, created: ObjectStore
) -> None:
    flush_rounds(created, ALPHA, 4)
    flush_rounds(created, BETA, 1)  # one L0 SST: below min_sources, nothing to do
    when = datetime(2024, 1, 2, 3, 30, tzinfo=UTC)
    requests = compaction_schedule(
        dg.build_schedule_context(scheduled_execution_time=when, resources={RESOURCE_KEY: slate})
    )
    assert isinstance(requests, list)
    (request,) = requests
    assert request.run_key == "compact-alpha-20240102T0330Z"
    assert request.tags == {"slate_ops/db": "alpha"}
    done = compaction_job.execute_in_process(
        run_config=request.run_config, tags=request.tags, resources=resources(slate)
    )
    assert done.success

    skip = compaction_schedule(
        dg.build_schedule_context(scheduled_execution_time=when, resources={RESOURCE_KEY: slate})
    )
    assert isinstance(skip, dg.SkipReason)
    assert skip.skip_message == "no database has anything to compact"


def test_definitions_hold_the_job_sensor_schedule_and_spark_resource(defs: dg.Definitions) -> None:
    dg.Definitions.validate_loadable(defs)
    assert defs.resolve_job_def("compaction_job").name == "compaction_job"
    sensor = defs.resolve_sensor_def("slate_ops_compaction_sensor")
    assert (sensor.job_name, sensor.minimum_interval_seconds) == ("compaction_job", 30)
    schedule = defs.resolve_schedule_def("compaction_schedule")
    assert (schedule.job_name, schedule.cron_schedule) == ("compaction_job", "*/30 * * * *")
    assert defs.resources is not None
    spark = defs.resources[PYSPARK_RESOURCE_KEY]
    assert isinstance(spark, LazyPySparkResource) and isinstance(spark, LocalPySparkResource)
    assert spark.spark_config["spark.master"] == "local[2]"
    assert (spark.pyspark_python, spark.local_ip) == (sys.executable, "127.0.0.1")


@pytest.mark.spark
def test_job_compacts_on_spark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``executor: spark`` through the definitions' LazyPySparkResource, on a real local session."""
    pytest.importorskip("slate_ops.spark")
    import definitions
    from slate_ops.objstore import open_store

    store_url = (tmp_path / "store").as_uri()  # Spark workers are other processes: no memory://
    config = SlateOpsConfig(databases=[DatabaseConfig(name="alpha", store_url=store_url, path=ALPHA)])
    store = open_store(store_url)
    flush_rounds(store, ALPHA, 4)
    defs = definitions.make_definitions(config)
    result = defs.resolve_job_def("compaction_job").execute_in_process(
        run_config={"ops": {"compact_op": {"config": {"executor": "spark"}}}},
        tags={"slate_ops/db": "alpha"},
    )
    assert result.success
    metadata = op_metadata(result)
    assert (metadata["executor"], metadata["kind"], metadata["rows_out"]) == ("spark", "l0", 10)
    assert "0 L0 SST(s), 1 sorted run(s)" in str(metadata["lsm_shape_after"])
    assert contents(store, ALPHA) == {key: b"v3" for key in KEYS}
