"""The cost of each database: the sums by source and the fleet's order (plain functions), the poll
windows of the sensors' cursor, and the metered steps and cost views through real Dagster runs on a
local-directory fleet."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from slate_ops import admin
from slate_ops.admin.cost import SENSOR_LIST_INTERVAL_S, SENSOR_PROBE_MAX_AGE_S
from slate_ops.engine import Db
from slate_ops.objstore import ObjectStore, open_store
from slate_ops.objstore.metering import S3_STANDARD, MeteredStore, PriceTable, RequestCounts
from slate_ops.orchestration import DatabaseConfig, SlateDatabasesResource, SlateOpsConfig, build_definitions
from slate_ops.orchestration import fleet as fleet_module
from slate_ops.orchestration import resources as resources_module
from slate_ops.orchestration.assets import build_database_asset
from slate_ops.orchestration.checkpoints import slate_ops_manifest_sensor
from slate_ops.orchestration.config import PricesConfig
from slate_ops.orchestration.cost import (
    CHECKPOINTS,
    COMPACTION,
    DAY_S,
    GC,
    SENSOR_POLLS,
    CostEvent,
    by_source_markdown,
    database_markdown,
    fleet_markdown,
    fleet_rows,
    per_day_by_source,
    slatedb_default_polling,
    source_of_op,
)
from slate_ops.orchestration.cost_assets import build_fleet_cost_asset, cost_events, fleet_cost_key
from slate_ops.orchestration.polls import (
    POLL_WINDOW_S,
    Confirmed,
    PollWindow,
    SensorCursor,
    location_digest,
)
from slate_ops.orchestration.resources import PYSPARK_RESOURCE_KEY, RESOURCE_KEY, local_pyspark_resource
from slate_ops.runtime import ManualRuntime
from tests.support.orchestration import ALPHA, BETA, cost_observation_events, manifests_of

LOG = logging.getLogger(__name__)
NOW = 1_700_000_000.0


# -- plain functions ------------------------------------------------------------------------------


def test_sums_by_source_over_the_window_per_day() -> None:
    week = 7 * DAY_S
    events = [
        CostEvent(GC, RequestCounts(list=10, delete=4), NOW - DAY_S),
        CostEvent(GC, RequestCounts(list=4), NOW - 2 * DAY_S),
        CostEvent(COMPACTION, RequestCounts(get=70, put=14, bytes_read=7000), NOW - 10),
        CostEvent(SENSOR_POLLS, RequestCounts(list=700), NOW - 3600, runs=700),
        CostEvent(GC, RequestCounts(list=1000), NOW - week - 1),  # before the window
        CostEvent(GC, RequestCounts(list=1000), NOW + 1),  # after now
    ]
    cost = per_day_by_source("alpha", events, now=NOW, window_s=week)
    assert list(cost.totals) == [SENSOR_POLLS, COMPACTION, GC]  # the tables' order
    assert cost.per_day == {
        SENSOR_POLLS: RequestCounts(list=100),
        COMPACTION: RequestCounts(get=10, put=2, bytes_read=1000),
        GC: RequestCounts(list=2, delete=1),
    }
    assert cost.events == 4 and cost.runs == {SENSOR_POLLS: 700, COMPACTION: 1, GC: 2}
    prices = PriceTable(get_per_1000=1.0, put_per_1000=2.0, list_per_1000=3.0, delete_per_1000=4.0)
    assert cost.cost_per_day(prices) == pytest.approx((714 * 3 + 70 * 1 + 14 * 2 + 4 * 4) / 1000 / 7)
    assert cost.cost_per_day(prices, GC) == pytest.approx((14 * 3 + 4 * 4) / 1000 / 7)
    assert cost.polling_cost_per_day(prices) == pytest.approx((714 * 3 + 4 * 4) / 1000 / 7)
    assert cost.per_run(GC) == RequestCounts(list=7, delete=2)
    assert cost.per_run(CHECKPOINTS) is None


def test_slatedb_defaults_poll_at_their_own_cadence_with_their_measured_counts() -> None:
    events = [
        CostEvent(SENSOR_POLLS, RequestCounts(list=120, get=6), NOW, runs=120),
        CostEvent(GC, RequestCounts(list=8, get=2, delete=5), NOW),
        CostEvent(GC, RequestCounts(list=4, get=2), NOW),
    ]
    cost = per_day_by_source("a", events, now=NOW, window_s=DAY_S)
    polling = slatedb_default_polling(cost)
    # SlateDB's collector (7 LIST + 23 GET measured per pass) every 600 s and its compactor's
    # 5 GETs every 5 s: 144 passes and 17,280 polls a day, whatever our own counts were.
    per_gc_pass = RequestCounts(list=7, get=23)
    expected = per_gc_pass.scaled(DAY_S / 600) + RequestCounts(get=5).scaled(DAY_S / 5)
    assert polling == expected == RequestCounts(list=1_008, get=3_312 + 86_400)
    assert slatedb_default_polling(per_day_by_source("b", [], now=NOW, window_s=DAY_S)) is None


def test_the_fleet_is_ordered_by_cost_and_the_tables_show_every_source() -> None:
    prices = S3_STANDARD
    cheap = per_day_by_source("cheap", [CostEvent(GC, RequestCounts(list=5), NOW)], now=NOW, window_s=DAY_S)
    dear = per_day_by_source(
        "dear", [CostEvent(COMPACTION, RequestCounts(put=500), NOW)], now=NOW, window_s=DAY_S
    )
    idle = per_day_by_source("idle", [], now=NOW, window_s=DAY_S)
    rows = fleet_rows([idle, cheap, dear], prices)
    assert [c.database for c in rows] == ["dear", "cheap", "idle"]
    table = fleet_markdown(rows, prices).splitlines()
    assert [line.split("|")[1].strip() for line in table[2:]] == ["dear", "cheap", "idle"]
    assert table[2] == "| dear | $0.002500 | 500 | $0.000000 | - |"  # no polling measured
    # SlateDB's defaults: 1,008 LISTs at $0.005 and 89,712 GETs at $0.0004 per 1,000 a day
    assert table[3] == "| cheap | $0.000025 | 5 | $0.000025 | $0.040925 |"
    sources = by_source_markdown(rows, prices).splitlines()
    assert sources[0] == "| database | compaction | gc |"
    assert sources[2:] == ["| dear | $0.002500 | - |", "| cheap | - | $0.000025 |", "| idle | - | - |"]
    text = database_markdown(cheap, prices)
    assert "| gc | 0 | 0 | 0 | 5 | 0 | 0 | 0 | $0.000025 |" in text
    assert "| **total** |" in text
    assert database_markdown(idle, prices).startswith("No request counts recorded")


def test_each_op_has_its_source() -> None:
    assert source_of_op("eu_maintenance_gc", "eu_") == GC
    assert source_of_op("compact_op") == COMPACTION
    assert source_of_op("my_own_op") == "my_own_op"


# -- the sensors' cursor ----------------------------------------------------------------------------


def test_the_old_cursor_format_still_parses_and_the_new_one_round_trips() -> None:
    old = SensorCursor.parse(json.dumps({"alpha": 3, "gone": 1}), LOG, ["alpha", "beta"])
    assert old.manifests == {"alpha": 3} and old.polls == {}
    old.add_poll("alpha", RequestCounts(list=1), NOW)
    old.add_poll("alpha", RequestCounts(list=1, get=1, bytes_read=10), NOW + 30)
    again = SensorCursor.parse(old.dumps(), LOG, ["alpha"])
    assert again == old
    assert again.polls["alpha"] == PollWindow(NOW, 2, RequestCounts(list=2, get=1, bytes_read=10))


@pytest.mark.parametrize(
    "text", ["not json", '{"alpha": "one"}', '{"manifests": {}, "polls": {"alpha": {"since": 1}}}']
)
def test_an_unreadable_cursor_is_empty(text: str) -> None:
    assert SensorCursor.parse(text, LOG, ["alpha"]) == SensorCursor()


def test_a_poll_probes_only_from_a_recent_confirmation_and_lists_hourly() -> None:
    """Issue 23: the GET probe of manifest ``M + 1`` is sound only while ``M`` was confirmed the
    latest, at the same store and path, less than 60 s ago (GC's min_age floor is 120 s); the last
    LIST must be under an hour old."""
    here, there = location_digest("s3://b", "alpha"), location_digest("s3://b", "moved/alpha")
    assert here != there and here == location_digest("s3://b", "alpha")
    cursor = SensorCursor()
    assert not cursor.may_probe("alpha", 3, NOW, here)  # nothing confirmed: LIST
    cursor.confirm("alpha", 3, NOW, here, listed=True)
    assert cursor.may_probe("alpha", 3, NOW + 30, here) and cursor.may_probe("alpha", 3, NOW + 59.9, here)
    assert not cursor.may_probe("alpha", 3, NOW + SENSOR_PROBE_MAX_AGE_S, here)  # too old to probe from
    assert not cursor.may_probe("alpha", 2, NOW + 30, here) and not cursor.may_probe("alpha", None, NOW, here)
    assert not cursor.may_probe("alpha", 3, NOW + 30, there)  # the config moved it: LIST
    assert not cursor.may_probe("alpha", 3, NOW - 1, here)  # the clock went back: LIST
    # Probe misses every 30 s carry the confirmation forward, but not the last LIST.
    at = NOW
    while at + 30 < NOW + SENSOR_LIST_INTERVAL_S:
        at += 30
        assert cursor.may_probe("alpha", 3, at, here), at
        cursor.confirm("alpha", 3, at, here, listed=False)
    assert cursor.confirmed["alpha"] == Confirmed(3, at, NOW, here)
    assert not cursor.may_probe("alpha", 3, NOW + SENSOR_LIST_INTERVAL_S, here)  # an hour: LIST again
    cursor.confirm("alpha", 4, NOW + SENSOR_LIST_INTERVAL_S, here, listed=True)
    assert cursor.confirmed["alpha"] == Confirmed(4, NOW + 3600, NOW + 3600, here)
    assert SensorCursor.parse(cursor.dumps(), LOG, ["alpha"]) == cursor
    # The cursor before issue 23's probes (manifests and polls) parses with nothing confirmed.
    before = json.dumps({"manifests": {"alpha": 4}, "polls": {}})
    assert SensorCursor.parse(before, LOG, ["alpha"]) == SensorCursor({"alpha": 4})
    bad = json.dumps({"manifests": {"alpha": 4}, "confirmed": {"alpha": {"manifest": 4, "at": "now"}}})
    assert SensorCursor.parse(bad, LOG, ["alpha"]) == SensorCursor()


def test_a_window_closes_after_an_hour_and_starts_again() -> None:
    cursor = SensorCursor()
    cursor.add_poll("alpha", RequestCounts(list=1), NOW)
    assert cursor.close_windows(NOW + POLL_WINDOW_S - 1) == []
    cursor.add_poll("alpha", RequestCounts(list=1, get=1), NOW + POLL_WINDOW_S)
    (closed,) = cursor.close_windows(NOW + POLL_WINDOW_S)
    assert closed == ("alpha", PollWindow(NOW, 2, RequestCounts(list=2, get=1)))
    assert cursor.polls["alpha"] == PollWindow(NOW + POLL_WINDOW_S)
    assert cursor.close_windows(NOW + 10 * POLL_WINDOW_S) == []  # an empty window records nothing


def test_the_manifest_sensor_records_each_databases_polls_once_an_hour(
    created: ObjectStore, slate: SlateDatabasesResource, clock: ManualRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    meters: list[tuple[str, MeteredStore]] = []
    store_of = fleet_module.store_of

    def counted(slate_: SlateDatabasesResource, db: DatabaseConfig) -> ObjectStore:
        """An outer meter per poll (summed per database below)."""
        meters.append((db.name, MeteredStore(store_of(slate_, db))))
        return meters[-1][1]

    monkeypatch.setattr(fleet_module, "store_of", counted)

    def tick(cursor: str | None) -> dg.SensorResult | dg.SkipReason:
        context = dg.build_sensor_context(cursor=cursor, resources={RESOURCE_KEY: slate})
        result = slate_ops_manifest_sensor(context)
        assert isinstance(result, dg.SensorResult | dg.SkipReason)
        return result

    # The cursor of a sensor from before request counting: both databases unchanged.
    cursor = json.dumps({"alpha": 1, "beta": 1})
    polls: list[dg.AssetObservation] = []
    for _ in range(4):  # polls at 0, 20, 40 and 60 minutes: the fourth closes the hour
        result = tick(cursor)
        assert isinstance(result, dg.SensorResult) and result.cursor is not None
        assert manifests_of(result.cursor) == {"alpha": 1, "beta": 1}  # nothing new was read
        polls += [e for e in result.asset_events if isinstance(e, dg.AssetObservation)]
        cursor = result.cursor
        clock.advance(POLL_WINDOW_S / 3)
    assert {tuple(p.asset_key.path) for p in polls} == {("slate_ops", "alpha"), ("slate_ops", "beta")}
    outer: dict[str, RequestCounts] = {}
    for name, meter in meters:
        outer[name] = outer.get(name, RequestCounts()) + meter.counts
    for observation in polls:
        name = observation.asset_key.path[-1]
        metadata = {k: v.value for k, v in observation.metadata.items()}
        assert metadata["cost_source"] == SENSOR_POLLS and metadata["cost_runs"] == 4
        assert metadata["requests"] == outer[name].to_dict() == RequestCounts(list=4).to_dict()
        assert metadata["request_cost_usd"] == pytest.approx(S3_STANDARD.cost(outer[name]))
    windows = json.loads(cursor)["polls"]
    assert windows["alpha"]["polls"] == 0  # started again
    assert skip_free(tick(cursor))  # the next tick has nothing to record


def skip_free(result: dg.SensorResult | dg.SkipReason) -> bool:
    return isinstance(result, dg.SensorResult) and not result.asset_events and result.skip_reason is not None


# -- metered steps through real runs ----------------------------------------------------------------


@pytest.fixture
def local_url(tmp_path: Path) -> str:
    return (tmp_path / "fleet").as_uri()


@pytest.fixture
def local_fleet(local_url: str) -> SlateOpsConfig:
    return SlateOpsConfig(
        databases=[
            DatabaseConfig(name="alpha", store_url=local_url, path=ALPHA),
            DatabaseConfig(name="beta", store_url=local_url, path=BETA),
            DatabaseConfig(name="alpha_clone", store_url=local_url, path="dbs/alpha_clone", parent="alpha"),
        ]
    )


@pytest.fixture
def outer(monkeypatch: pytest.MonkeyPatch) -> list[MeteredStore]:
    """Every store the resource opens, metered from outside the step's own meter."""
    opened: list[MeteredStore] = []

    def metered_open(url: str, **kwargs: Any) -> ObjectStore:
        store = MeteredStore(open_store(url, **kwargs))
        opened.append(store)
        return store

    monkeypatch.setattr(resources_module, "open_store", metered_open)
    return opened


def outer_total(opened: list[MeteredStore]) -> RequestCounts:
    return sum((s.counts for s in opened), RequestCounts())


def write_l0(url: str, path: str, flushes: int) -> None:
    with Db.open(path, open_store(url)) as db:
        for round_ in range(flushes):
            for i in range(20):
                db.put(f"k{i:02d}".encode(), f"v{round_}".encode())
            db.flush_memtable()


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as instance:
        yield instance


def run_job(
    defs: dg.Definitions,
    job: str,
    slate: SlateDatabasesResource,
    instance: dg.DagsterInstance,
    run_config: dict[str, Any],
    database: str = "alpha",
) -> dg.ExecuteInProcessResult:
    return defs.resolve_job_def(job).execute_in_process(
        run_config=run_config,
        tags={"slate_ops/db": database},
        resources={RESOURCE_KEY: slate, PYSPARK_RESOURCE_KEY: local_pyspark_resource()},
        instance=instance,
        raise_on_error=False,
    )


def step_requests(result: dg.ExecuteInProcessResult) -> dict[str, tuple[RequestCounts, float]]:
    """Each successful op's ``requests`` and ``request_cost_usd`` metadata."""
    found = {}
    for event in result.all_node_events:
        if event.is_successful_output:
            metadata = event.step_output_data.metadata
            requests = metadata["requests"].value
            assert isinstance(requests, dict)
            cost = metadata["request_cost_usd"].value
            assert isinstance(cost, float)
            found[str(event.step_key)] = (RequestCounts.from_dict(requests), cost)
    return found


@pytest.mark.parametrize(
    ("job", "op", "config", "source"),
    [
        ("compaction_job", "compact_op", {"database": "alpha", "executor": "local"}, COMPACTION),
        ("gc_job", "gc_op", {"dry_run": False}, GC),
        ("checkpoint_expiry_job", "expire_checkpoints_op", {"dry_run": False}, CHECKPOINTS),
        ("clone_job", "clone_op", {"clone_name": "alpha_clone"}, "clones"),
        (
            "rescale_job",
            "rescale_op",
            {
                "operation": "split",
                "split_keys": ["k10"],
                "targets": [{"name": "low", "path": "dbs/low"}, {"name": "high", "path": "dbs/high"}],
            },
            "rescale",
        ),
    ],
)
def test_a_steps_metadata_and_observation_carry_exactly_its_requests(
    local_fleet: SlateOpsConfig,
    local_url: str,
    outer: list[MeteredStore],
    instance: dg.DagsterInstance,
    job: str,
    op: str,
    config: dict[str, Any],
    source: str,
) -> None:
    write_l0(local_url, ALPHA, 4)
    defs = build_definitions(local_fleet)
    slate = SlateDatabasesResource(config=local_fleet)
    outer.clear()
    result = run_job(defs, job, slate, instance, {"ops": {op: {"config": config}}})
    assert result.success
    total = outer_total(outer)
    assert total.requests > 0  # the step read (and wrote) something
    (counts, cost) = step_requests(result)[op]
    assert counts == total  # every request once: not skipped, not counted twice
    assert cost == pytest.approx(S3_STANDARD.cost(total))
    (event,) = cost_observation_events(result)
    observation = event.asset_observation_data.asset_observation
    assert observation.asset_key == dg.AssetKey(["slate_ops", "alpha"])
    assert observation.metadata["cost_source"].value == source
    assert observation.metadata["requests"].value == total.to_dict()


def test_the_maintenance_steps_each_meter_their_own_requests(
    local_fleet: SlateOpsConfig, local_url: str, outer: list[MeteredStore], instance: dg.DagsterInstance
) -> None:
    from slate_ops.orchestration.maintenance import maintenance_run_config

    write_l0(local_url, ALPHA, 4)
    defs = build_definitions(local_fleet)
    slate = SlateDatabasesResource(config=local_fleet)
    outer.clear()
    result = run_job(defs, "maintenance_job", slate, instance, maintenance_run_config(dry_run=False))
    assert result.success
    steps = step_requests(result)
    assert set(steps) == {
        "maintenance_expire_checkpoints",
        "maintenance_compact",
        "maintenance_tag_policy",
        "maintenance_gc",
    }
    assert steps["maintenance_compact"][0].put > 0  # compaction wrote SSTs and a manifest
    assert sum((c for c, _ in steps.values()), RequestCounts()) == outer_total(outer)
    sources = [
        e.asset_observation_data.asset_observation.metadata["cost_source"].value
        for e in cost_observation_events(result)
    ]
    assert sources == [CHECKPOINTS, COMPACTION, "tag policy", GC]


def test_a_failed_step_still_records_its_requests(
    local_fleet: SlateOpsConfig, outer: list[MeteredStore], instance: dg.DagsterInstance
) -> None:
    defs = build_definitions(local_fleet)  # alpha was never created: compaction fails reading it
    slate = SlateDatabasesResource(config=local_fleet)
    result = run_job(defs, "compaction_job", slate, instance, {"ops": {"compact_op": {"config": {}}}})
    assert not result.success
    assert cost_observation_events(result) == []  # Dagster drops a failed step's events...
    (event,) = cost_events(instance, dg.AssetKey(["slate_ops", "alpha"]), since=0.0).events
    assert event.source == COMPACTION  # ...so the step recorded them outside the run
    assert event.counts == outer_total(outer) and event.counts.list >= 1


# -- the cost views, from the event log ------------------------------------------------------------


def test_the_database_asset_and_the_fleet_asset_show_the_costs_from_the_event_log(
    local_fleet: SlateOpsConfig, local_url: str, outer: list[MeteredStore], instance: dg.DagsterInstance
) -> None:
    admin.create_db(BETA, open_store(local_url))
    write_l0(local_url, ALPHA, 4)
    prices = PricesConfig(list_per_1000=1.0, get_per_1000=0.5, put_per_1000=2.0, source="test prices")
    config = local_fleet.model_copy(update={"prices": prices})
    defs = build_definitions(config)
    slate = SlateDatabasesResource(config=config)
    gc = {"ops": {"gc_op": {"config": {"dry_run": True}}}}
    recorded = [
        step_requests(
            run_job(defs, "compaction_job", slate, instance, {"ops": {"compact_op": {"config": {}}}})
        ),
        step_requests(run_job(defs, "gc_job", slate, instance, gc)),
        step_requests(run_job(defs, "gc_job", slate, instance, gc, database="beta")),
    ]
    alpha_counts = recorded[0]["compact_op"][0] + recorded[1]["gc_op"][0]
    beta_counts = recorded[2]["gc_op"][0]
    table = prices.table()

    window = cost_events(instance, dg.AssetKey(["slate_ops", "alpha"]), since=0.0, page=1)  # paged
    assert sorted(e.source for e in window.events) == [COMPACTION, GC]

    materialized = dg.materialize(
        [build_database_asset(config.database("alpha"), config)],
        resources={RESOURCE_KEY: slate},
        instance=instance,
    )
    (alpha,) = materialized.asset_materializations_for_node("slate_ops__alpha")
    metadata = {k: v.value for k, v in alpha.metadata.items()}
    assert metadata["request_cost_usd_per_day"] == pytest.approx(table.cost(alpha_counts) / 7)
    text = str(metadata["requests_per_day"])
    assert "| compaction |" in text and "| gc |" in text and "over the last 7 day(s), 2 recorded" in text
    assert metadata["manifest_id"] > 0  # the state is still there

    fleet = dg.materialize([build_fleet_cost_asset()], resources={RESOURCE_KEY: slate}, instance=instance)
    (event,) = fleet.asset_materializations_for_node(fleet_cost_key().to_python_identifier())
    shown = {k: v.value for k, v in event.metadata.items()}
    rows = [line.split("|")[1].strip() for line in str(shown["databases"]).splitlines()[2:]]
    assert rows == ["alpha", "beta", "alpha_clone"]  # by cost; the clone has no requests recorded
    assert shown["costliest_database"] == "alpha"
    assert shown["fleet_cost_usd_per_day"] == pytest.approx(table.cost(alpha_counts + beta_counts) / 7)
    assert "Source: test prices" in str(shown["price_table"])
    assert "| list per 1,000 | 1.0 |" in str(shown["price_table"])


def test_events_older_than_the_window_are_left_out(
    local_fleet: SlateOpsConfig, local_url: str, instance: dg.DagsterInstance
) -> None:
    write_l0(local_url, ALPHA, 1)
    config = local_fleet.model_copy(update={"cost_window_days": 0.5 / DAY_S})  # half a second
    defs = build_definitions(config)
    slate = SlateDatabasesResource(config=config)
    assert run_job(defs, "gc_job", slate, instance, {"ops": {"gc_op": {"config": {}}}}).success
    time.sleep(1.0)
    materialized = dg.materialize(
        [build_database_asset(config.database("alpha"), config)],
        resources={RESOURCE_KEY: slate},
        instance=instance,
    )
    (alpha,) = materialized.asset_materializations_for_node("slate_ops__alpha")
    assert alpha.metadata["request_cost_usd_per_day"].value == 0.0
    assert str(alpha.metadata["requests_per_day"].value).startswith("No request counts recorded")


def test_a_price_out_of_range_is_refused_naming_the_field() -> None:
    from slate_ops.errors import ConfigError
    from slate_ops.orchestration.config import parse_config

    with pytest.raises(
        ConfigError, match=r"prices\.list_per_1000: Input should be greater than or equal to 0"
    ):
        parse_config(
            "databases: [{name: a, store_url: 'memory://p', path: a}]\nprices: {list_per_1000: -1}\n"
        )
    with pytest.raises(ConfigError, match=r"prices\.lists_per_1000: Extra inputs are not permitted"):
        parse_config(
            "databases: [{name: a, store_url: 'memory://p', path: a}]\nprices: {lists_per_1000: 1}\n"
        )


def test_the_prices_block_has_every_field_of_the_price_table() -> None:
    import dataclasses

    assert set(PricesConfig.model_fields) == {f.name for f in dataclasses.fields(PriceTable)}
    assert PricesConfig().table() == S3_STANDARD
