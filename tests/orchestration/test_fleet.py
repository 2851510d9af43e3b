"""The fleet as dynamic partitions: discovery under a store prefix, the partitions sensor, and runs
of a partitioned job over 20 of 200 discovered databases."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from jobs import checkpoint_expiry_job, slate_ops_partitions_sensor
from slate_ops import admin
from slate_ops.objstore import open_store
from slate_ops.orchestration import DatabaseConfig, SlateDatabasesResource, SlateOpsConfig
from slate_ops.orchestration.config import DiscoverConfig, GcPolicy, discovered_name, parse_config
from slate_ops.orchestration.resources import RESOURCE_KEY
from slate_ops.orchestration.runs import PARTITIONS_NAME

COUNT = 200


def _names(n: int) -> list[str]:
    return [f"db_{i:03d}" for i in range(n)]


def test_discovered_names() -> None:
    assert discovered_name("fleet/db-007", "fleet") == "db_007"
    assert discovered_name("fleet/eu/7orders", "fleet/") == "eu_7orders"
    assert discovered_name("fleet/1", "fleet") == "_1"
    assert discovered_name("fleet", "fleet") is None


def test_a_discovery_only_config_loads() -> None:
    config = parse_config("discover: {store_url: 'memory://x', prefix: fleet}\n")
    assert config.databases == [] and config.discover == DiscoverConfig(
        store_url="memory://x", prefix="fleet"
    )


def test_200_discovered_databases_become_partitions_and_20_of_them_run(tmp_path: Path) -> None:
    url = (tmp_path / "store").as_uri()
    store = open_store(url)
    for name in _names(COUNT):
        admin.create_db(f"fleet/{name}", store)
    admin.create_db("elsewhere/other", store)  # not under the prefix
    listed = DatabaseConfig(name="db_000", store_url=url, path="fleet/db_000", gc=GcPolicy(dry_run=True))
    slate = SlateDatabasesResource(
        config=SlateOpsConfig(databases=[listed], discover=DiscoverConfig(store_url=url, prefix="fleet"))
    )
    assert slate.database_names() == _names(COUNT)
    assert slate.database("db_000").gc.dry_run  # the listed entry keeps its settings
    assert not slate.database("db_123").gc.dry_run  # discovered: the defaults
    assert slate.database("db_123").path == "fleet/db_123"

    with dg.DagsterInstance.ephemeral() as instance:
        context = dg.build_sensor_context(instance=instance, resources={RESOURCE_KEY: slate})
        result = slate_ops_partitions_sensor.evaluate_tick(context)
        for request in result.dynamic_partitions_requests or []:
            assert isinstance(request, dg.AddDynamicPartitionsRequest)
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        assert sorted(instance.get_dynamic_partitions(PARTITIONS_NAME)) == _names(COUNT)
        again = slate_ops_partitions_sensor.evaluate_tick(
            dg.build_sensor_context(instance=instance, resources={RESOURCE_KEY: slate})
        )
        assert again.skip_message and "already match" in again.skip_message

        chosen = _names(COUNT)[100:120]
        for key in chosen:  # what a backfill of 20 partitions launches, one run per partition
            run = checkpoint_expiry_job.execute_in_process(
                partition_key=key, instance=instance, resources={RESOURCE_KEY: slate}
            )
            assert run.success
            assert run.dagster_run.tags["dagster/partition"] == key
            (output,) = [e for e in run.all_node_events if e.is_successful_output]
            assert output.step_output_data.metadata["database"].value == key

        # Dropping discovery removes the discovered partitions, keeping the listed one.
        only_listed = SlateDatabasesResource(config=SlateOpsConfig(databases=[listed]))
        shrink = slate_ops_partitions_sensor.evaluate_tick(
            dg.build_sensor_context(instance=instance, resources={RESOURCE_KEY: only_listed})
        )
        (delete,) = shrink.dynamic_partitions_requests or []
        assert isinstance(delete, dg.DeleteDynamicPartitionsRequest)
        assert sorted(delete.partition_keys) == _names(COUNT)[1:]
