"""A mixed fleet in Dagster: slate_ops and SlateDB databases (the SlateDB ones written by the binding's
own ``Db``) in one store, discovered as partitions and maintained by the same jobs, sensors and
checks through the admin handle; then SlateDB reads its databases back (every row still there)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from jobs import clone_job, maintenance_job, slate_ops_partitions_sensor
from slate_ops import Db
from slate_ops.config import CheckpointOptions
from slate_ops.engines.detect import Engine
from slate_ops.objstore import open_store
from slate_ops.orchestration import DB_TAG, DatabaseConfig, SlateDatabasesResource, SlateOpsConfig
from slate_ops.orchestration.assets import build_database_assets
from slate_ops.orchestration.checkpoints import slate_ops_manifest_sensor
from slate_ops.orchestration.checks import ALL_CHECKS, GC_HEALTH_CHECK, build_database_checks
from slate_ops.orchestration.clones import clone_run_config
from slate_ops.orchestration.config import CompactionPolicy, DiscoverConfig
from slate_ops.orchestration.maintenance import maintenance_run_config
from slate_ops.orchestration.resources import PYSPARK_RESOURCE_KEY, RESOURCE_KEY, local_pyspark_resource
from slate_ops.orchestration.runs import PARTITIONS_NAME
from slate_ops.runtime import SYSTEM_RUNTIME, ManualRuntime
from tests.support.clock import sleep_until_expired
from tests.support.engine import quiet
from tests.support.orchestration import skip_message
from tests.support.slatedb import read_all, write_db

sdb: Any = pytest.importorskip("slatedb.uniffi")

# End to end (SlateDB databases written by its binding, maintained by Dagster): in CI's second step.
pytestmark = [pytest.mark.timeout(600), pytest.mark.e2e, pytest.mark.slow]

OURS, THEIRS, OTHER = "fleet/ours", "fleet/theirs", "fleet/other"


def write_ours(url: str, path: str, ssts: int) -> dict[bytes, bytes]:
    """A slate_ops database with ``ssts`` L0 SSTs of 50 keys."""
    rows: dict[bytes, bytes] = {}
    with Db.open(path, open_store(url), quiet(l0_max_ssts=1000)) as db:
        for s in range(ssts):
            for i in range(50):
                k, v = b"k%04d" % (s * 50 + i), b"v%d" % i
                db.put(k, v)
                rows[k] = v
            db.flush_memtable()
    return rows


@pytest.fixture
def mixed_fleet(tmp_path: Path) -> dict[str, Any]:
    root = tmp_path / "store"
    root.mkdir()
    url = root.as_uri()
    theirs = asyncio.run(write_db(sdb, root, THEIRS, rounds=3, keys=100))
    other = asyncio.run(write_db(sdb, root, OTHER, rounds=1, keys=40))
    ours = write_ours(url, OURS, 2)
    config = SlateOpsConfig(
        databases=[
            DatabaseConfig(name="ours", store_url=url, path=OURS),  # engine: auto (detected)
            DatabaseConfig(
                name="theirs",
                store_url=url,
                path=THEIRS,
                engine="slatedb",
                compaction=CompactionPolicy(l0_threshold=8),  # below it: no compactor needed
            ),
        ],
        discover=DiscoverConfig(store_url=url, prefix="fleet"),  # finds fleet/other too
    )
    rows = {"ours": ours, "theirs": theirs, "other": other}
    return {"root": root, "url": url, "config": config, "rows": rows}


def checkpoint_ids(root: Path, path: str) -> set[str]:
    """The checkpoints SlateDB's own Admin lists."""

    async def listed() -> set[str]:
        store = sdb.ObjectStoreBuilder(sdb.ObjectStoreType.LOCAL)
        store.with_config("local_path", str(root))
        admin_ = sdb.AdminBuilder(path, store.build()).build()
        return {str(c.id) for c in await admin_.list_checkpoints(None)}

    return asyncio.run(listed())


def test_a_mixed_fleet_is_discovered_checked_and_maintained_on_both_engines(
    mixed_fleet: dict[str, Any],
) -> None:
    config, url, root = mixed_fleet["config"], mixed_fleet["url"], mixed_fleet["root"]
    slate = SlateDatabasesResource(config=config)
    assert slate.database_names() == ["ours", "theirs", "other"]
    assert slate.handle("ours").engine is Engine.SLATE_OPS
    assert slate.handle("theirs").engine is Engine.SLATEDB
    assert slate.handle("other").engine is Engine.SLATEDB  # discovered: auto, detected

    # The assets (their state from each engine's manifest) and every check, on both engines.
    result = dg.materialize(
        [*build_database_assets(config), *build_database_checks(config)], resources={RESOURCE_KEY: slate}
    )
    assert result.success
    recorded = {
        e.materialization.asset_key.path[-1]: {k: v.value for k, v in e.materialization.metadata.items()}
        for e in result.get_asset_materialization_events()
    }
    assert recorded["theirs"]["l0_ssts"] == 3 and recorded["ours"]["l0_ssts"] == 2
    assert str(recorded["theirs"]["lsm_shape"]).count("| L0 |") == 3
    evaluations = {(e.asset_key.path[-1], e.check_name): e for e in result.get_asset_check_evaluations()}
    assert set(evaluations) == {(db, check) for db in ("ours", "theirs") for check in ALL_CHECKS}
    failed = {k: e.description for k, e in evaluations.items() if not e.passed}
    assert not failed, failed
    assert evaluations[("theirs", GC_HEALTH_CHECK)].metadata["engine"].value == "slatedb"

    with dg.DagsterInstance.ephemeral() as instance:
        # Discovered as partitions: the two configured databases and the discovered SlateDB one.
        tick = slate_ops_partitions_sensor.evaluate_tick(
            dg.build_sensor_context(instance=instance, resources={RESOURCE_KEY: slate})
        )
        for request in tick.dynamic_partitions_requests or []:
            assert isinstance(request, dg.AddDynamicPartitionsRequest)
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        assert sorted(instance.get_dynamic_partitions(PARTITIONS_NAME)) == ["other", "ours", "theirs"]

        # A short-lived checkpoint on each engine, then the manifest sensor: an observation of each
        # configured database and a checkpoint expiry run of each once they expired.
        made = {
            name: str(slate.handle(name).create_checkpoint(CheckpointOptions(lifetime="1s")).id)
            for name in ("ours", "theirs", "other")
        }
        created = SYSTEM_RUNTIME.now()
        assert made["theirs"] in checkpoint_ids(root, THEIRS)  # SlateDB lists it
        sleep_until_expired(created, 1)
        sensed = slate_ops_manifest_sensor(
            dg.build_sensor_context(instance=instance, resources={RESOURCE_KEY: slate})
        )
        assert isinstance(sensed, dg.SensorResult)
        observed = {e.asset_key.path[-1] for e in sensed.asset_events or []}
        assert observed == {"ours", "theirs"}
        requested = {r.partition_key for r in sensed.run_requests or []}
        assert requested == {"ours", "theirs", "other"}

        # The same maintenance job, for real, on each engine's databases.
        for name in ("ours", "theirs", "other"):
            run = maintenance_job.execute_in_process(
                run_config=maintenance_run_config(dry_run=False),
                partition_key=name,
                instance=instance,
                resources={
                    RESOURCE_KEY: slate,
                    PYSPARK_RESOURCE_KEY: local_pyspark_resource(),
                },  # unused: local
            )
            assert run.success, name
            summaries = {
                e.step_key: str(e.step_output_data.metadata["step_summary"].value)
                for e in run.all_node_events
                if e.is_successful_output
            }
            assert "removed 1 expired checkpoint(s)" in summaries["maintenance_expire_checkpoints"], summaries
            assert "maintenance_gc" in summaries
            if name != "other":  # a configured database: its checks recorded again after maintenance
                checks = {e.check_name: e.passed for e in run.get_asset_check_evaluations()}
                assert set(checks) == set(ALL_CHECKS) and all(checks.values()), checks

    # SlateDB sees the effects and still reads every acknowledged row.
    assert made["theirs"] not in checkpoint_ids(root, THEIRS)
    assert made["other"] not in checkpoint_ids(root, OTHER)
    assert asyncio.run(read_all(sdb, root, THEIRS)) == mixed_fleet["rows"]["theirs"]
    assert asyncio.run(read_all(sdb, root, OTHER)) == mixed_fleet["rows"]["other"]
    with Db.open(OURS, open_store(url), quiet()) as db:  # and ours, every row
        assert {k: db.get(k) for k in mixed_fleet["rows"]["ours"]} == mixed_fleet["rows"]["ours"]


def test_clone_job_clones_a_slatedb_database_that_slatedb_then_reads(mixed_fleet: dict[str, Any]) -> None:
    slate = SlateDatabasesResource(config=mixed_fleet["config"])
    result = clone_job.execute_in_process(
        run_config=clone_run_config("theirs", "theirs_copy", "fleet/theirs_copy"),
        tags={DB_TAG: "theirs"},
        resources={RESOURCE_KEY: slate},
    )
    assert result.success
    output = result.output_for_node("clone_op")
    assert output.initialized and output.external_dbs >= 1
    assert output.final_checkpoint_id is not None
    assert str(output.final_checkpoint_id) in checkpoint_ids(mixed_fleet["root"], THEIRS)  # SlateDB lists it
    assert slate.handle("theirs_copy").engine is Engine.SLATEDB  # discovered: SlateDB's format
    assert (
        asyncio.run(read_all(sdb, mixed_fleet["root"], "fleet/theirs_copy")) == mixed_fleet["rows"]["theirs"]
    )


def test_gc_health_fails_on_both_engines_when_garbage_waits_too_long(mixed_fleet: dict[str, Any]) -> None:
    """The "GC had been dead for six days" case: with the clock a week on, the garbage both engines
    left (superseded manifests) is overdue and the gc_health check fails on each, naming it."""
    config = mixed_fleet["config"]
    later = SlateDatabasesResource(config=config).with_clock(ManualRuntime(time.time() + 7 * 86400))
    result = dg.materialize(
        [*build_database_assets(config), *build_database_checks(config)],
        resources={RESOURCE_KEY: later},
        selection=dg.AssetSelection.all_asset_checks(),
    )
    assert result.success
    evaluations = result.get_asset_check_evaluations()
    health = {e.asset_key.path[-1]: e for e in evaluations if e.check_name == GC_HEALTH_CHECK}
    assert set(health) == {"ours", "theirs"}
    for name, evaluation in health.items():
        assert not evaluation.passed, name
        overdue = evaluation.metadata["overdue_count"].value
        assert isinstance(overdue, int) and overdue > 0, name
        assert "eligible for GC" in (evaluation.description or ""), name


def test_slatedb_compaction_in_dagster_needs_a_running_compactor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compaction sensor requests a compaction when a SlateDB database's L0 reaches its threshold;
    maintenance fails with NoCompactorError while no SlateDB compactor runs, and reports the compaction
    once a writer (with its embedded compactor) is open; SlateDB reads every row back."""
    from slate_ops.admin.handle import SlateDbHandle
    from slate_ops.engines.slatedb import LOOP
    from slate_ops.orchestration.compaction import slate_ops_compaction_sensor
    from tests.support.slatedb import fast_settings, local_store

    root = tmp_path / "store"
    root.mkdir()
    # 3 L0 SSTs: over this database's threshold (2), under SlateDB's own scheduler's trigger (4)
    rows = asyncio.run(write_db(sdb, root, "fleet/busy", rounds=3, keys=50, wal=False))
    busy = DatabaseConfig(
        name="busy",
        store_url=root.as_uri(),
        path="fleet/busy",
        engine="slatedb",
        compaction=CompactionPolicy(l0_threshold=2),
    )
    config = SlateOpsConfig(databases=[busy])
    slate = SlateDatabasesResource(config=config)
    resources = {RESOURCE_KEY: slate, PYSPARK_RESOURCE_KEY: local_pyspark_resource()}
    sensed = slate_ops_compaction_sensor(dg.build_sensor_context(resources={RESOURCE_KEY: slate}))
    assert isinstance(sensed, dg.SensorResult)
    assert [r.partition_key for r in sensed.run_requests or []] == ["busy"]

    monkeypatch.setattr(SlateDbHandle, "compaction_timeout_s", 3.0)  # no compactor: fail in 3 s, not 30
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(PARTITIONS_NAME, ["busy"])

        def maintain() -> dg.ExecuteInProcessResult:
            return maintenance_job.execute_in_process(
                run_config=maintenance_run_config(dry_run=False),
                partition_key="busy",
                instance=instance,
                resources=resources,
                raise_on_error=False,
            )

        dry = maintenance_job.execute_in_process(  # the dry run: what SlateDB's compactor would get
            partition_key="busy", instance=instance, resources=resources
        )
        (planned,) = [
            e.step_output_data.metadata
            for e in dry.all_node_events
            if e.is_successful_output and e.step_key == "maintenance_compact"
        ]
        summary = str(planned["step_summary"].value)
        assert summary.startswith("would run a l0 compaction of 3 SST(s) ("), summary
        assert planned["bytes_to_read"].value == sum(s.size_bytes for s in slate.handle("busy").shape().l0)

        stalled = maintain()
        assert not stalled.success
        (failure,) = [e for e in stalled.all_node_events if e.is_step_failure]
        assert failure.step_key == "maintenance_compact"
        error = str(failure.step_failure_data.error)
        assert "NoCompactorError" in error and "A SlateDB compactor must be running" in error, error

        builder = sdb.DbBuilder("fleet/busy", local_store(sdb, root))
        builder.with_settings(fast_settings(sdb, wal=False))
        writer = LOOP.run(builder.build())  # its embedded compactor runs the queued request
        try:
            for _ in range(100):
                if slate.handle("busy").describe().l0_ssts == 0:
                    break
                time.sleep(0.1)
            for r in range(2):  # 2 new L0 SSTs: our threshold again, not SlateDB's
                for i in range(30):
                    k, v = b"n%04d" % i, b"new %d" % r
                    LOOP.run(writer.put(k, v))
                    rows[k] = v
                LOOP.run(writer.flush_with_options(sdb.FlushOptions(flush_type=sdb.FlushType.MEM_TABLE)))
            monkeypatch.setattr(SlateDbHandle, "compaction_timeout_s", 60.0)
            done = maintain()
        finally:
            LOOP.run(writer.shutdown())
    assert done.success
    summaries = {
        e.step_key: str(e.step_output_data.metadata["step_summary"].value)
        for e in done.all_node_events
        if e.is_successful_output
    }
    assert summaries["maintenance_compact"].startswith("l0 compaction on slatedb-compactor: 2 ->"), summaries
    assert slate.handle("busy").describe().l0_ssts == 0
    assert asyncio.run(read_all(sdb, root, "fleet/busy")) == rows


def test_an_unchanged_database_costs_the_manifest_sensor_one_get_probe_on_either_engine(
    mixed_fleet: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sensor's poll (admin.handle.poll.state_since): a changed database of either engine is read
    (a slate_ops one with one LIST and one GET), an unchanged one of either engine costs one GET
    probe of its next manifest and no LIST (no engine detection)."""
    from slate_ops.objstore import CountingStore
    from slate_ops.orchestration import fleet as fleet_module

    slate = SlateDatabasesResource(config=mixed_fleet["config"])
    opened: dict[str, CountingStore] = {}
    store_of = fleet_module.store_of

    def counted(slate_: SlateDatabasesResource, db: DatabaseConfig) -> CountingStore:
        opened[db.name] = CountingStore(store_of(slate_, db))
        return opened[db.name]

    monkeypatch.setattr(fleet_module, "store_of", counted)
    first = slate_ops_manifest_sensor(dg.build_sensor_context(resources={RESOURCE_KEY: slate}))
    assert isinstance(first, dg.SensorResult) and first.cursor is not None
    assert {e.asset_key.path[-1] for e in first.asset_events or []} == {"ours", "theirs"}
    assert (opened["ours"].counts["list"], opened["ours"].counts["get"]) == (1, 1)
    second = slate_ops_manifest_sensor(
        dg.build_sensor_context(cursor=first.cursor, resources={RESOURCE_KEY: slate})
    )
    assert "no manifest changed in 3 database(s)" in str(skip_message(second))
    for name in ("ours", "theirs", "other"):
        assert opened[name].counts == {**dict.fromkeys(opened[name].counts, 0), "get": 1}, name
