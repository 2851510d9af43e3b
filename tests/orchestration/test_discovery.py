"""Discovery reused across ticks (discover.interval_minutes), a discovered name resolved without the
discovery LIST, and discovery's cost in the fleet views: requests counted at a real moto server,
the discovery LIST (prefix ``fleet/``) apart from each database's own LISTs."""

from __future__ import annotations

import copy
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs

import dagster as dg
import pytest

from slate_ops import admin
from slate_ops.admin.cost import DISCOVER_INTERVAL_S, DISCOVERING_SCHEDULE_TICKS, discovery_cost
from slate_ops.errors import ConfigError, DbNotFoundError
from slate_ops.objstore import S3Store
from slate_ops.objstore.metering import RequestCounts
from slate_ops.objstore.s3 import make_s3_client
from slate_ops.orchestration import SlateDatabasesResource
from slate_ops.orchestration.checkpoints import checkpoint_expiry_job, slate_ops_manifest_sensor
from slate_ops.orchestration.compaction import slate_ops_compaction_sensor
from slate_ops.orchestration.config import discovered_path, parse_config
from slate_ops.orchestration.cost_assets import build_fleet_cost_asset
from slate_ops.orchestration.discovery import CURSOR_KEY, DiscoveryListing, discover_digest
from slate_ops.orchestration.gc import gc_schedule
from slate_ops.orchestration.partitions import slate_ops_partitions_sensor
from slate_ops.orchestration.resources import RESOURCE_KEY
from slate_ops.orchestration.tags import tag_policy_schedule
from slate_ops.runtime import ManualRuntime
from tests.support.orchestration import manifests_of, skip_message
from tests.support.s3 import CREDENTIALS, WrappedMotoServer, drain, serving

pytestmark = pytest.mark.s3

PREFIX = "fleet"
DATABASES = 6
JUNK = 200  # objects per database besides its manifest: 1,206 objects, two discovery LIST pages
PAGES = 2
START = 1_700_000_000.0


class ListingApp:
    """moto's app counting requests: a LIST of the discovery prefix as ``discovery``, any other
    LIST as ``LIST``, the rest by method."""

    def __init__(self, app: Any) -> None:
        self._app = app
        self._lock = threading.Lock()
        self.requests: Counter[str] = Counter()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        query = parse_qs(environ.get("QUERY_STRING", ""))
        method = environ["REQUEST_METHOD"]
        with self._lock:
            if method == "GET" and "list-type" in query:
                discovery = query.get("prefix", [""])[0] == f"{PREFIX}/"
                self.requests["discovery" if discovery else "LIST"] += 1
            else:
                self.requests[method] += 1
        return drain(self._app(environ, start_response))

    def take(self) -> dict[str, int]:
        """The requests since the last call."""
        with self._lock:
            counted = dict(self.requests)
            self.requests.clear()
            return counted


ListingMotoServer = WrappedMotoServer[ListingApp]


@pytest.fixture(scope="module")
def listing_moto() -> Iterator[ListingMotoServer]:
    with serving(WrappedMotoServer(ListingApp)) as moto:
        yield moto


class Fleet:
    """``DATABASES`` databases ``fleet/db_N`` with ``JUNK`` other objects each, in a fresh bucket."""

    def __init__(self, server: ListingMotoServer) -> None:
        endpoint = server.endpoint
        bucket = f"discovery-{time.monotonic_ns()}"
        make_s3_client(endpoint_url=endpoint, **CREDENTIALS).create_bucket(Bucket=bucket)
        self.store = S3Store(bucket, "", endpoint_url=endpoint, **CREDENTIALS)
        self.url = f"s3://{bucket}?endpoint_url={endpoint}&region=us-east-1"
        for i in range(DATABASES):
            admin.create_db(f"{PREFIX}/db_{i}", self.store)
            for j in range(JUNK):
                self.store.put(f"{PREFIX}/db_{i}/compacted/junk{j:04d}.bin", b"")
        self.clock = ManualRuntime(START)
        self.app = server.app
        self.app.take()

    def fresh(self) -> Fleet:
        """This fleet on a new clock at START, with the requests counted so far dropped."""
        view = copy.copy(self)
        view.clock = ManualRuntime(START)
        view.app.take()
        return view

    def resource(self, extra: str = "") -> SlateDatabasesResource:
        config = parse_config(f"discover: {{store_url: '{self.url}', prefix: {PREFIX}{extra}}}\n")
        return SlateDatabasesResource(config=config).with_clock(self.clock)


@pytest.fixture(scope="module")
def unchanged_fleet(listing_moto: ListingMotoServer) -> Fleet:
    """One fleet for the tests that change no object in it (building one takes ~5 s)."""
    return Fleet(listing_moto)


@pytest.fixture
def fleet(unchanged_fleet: Fleet) -> Fleet:
    """The shared fleet, on a clock of the test's own, its requests counted from now."""
    return unchanged_fleet.fresh()


@pytest.fixture
def own_fleet(listing_moto: ListingMotoServer) -> Fleet:
    """A fleet of the test's own, for tests that create or destroy databases (or run an op)."""
    return Fleet(listing_moto)


def tick(
    sensor: dg.SensorDefinition, slate: SlateDatabasesResource, cursor: str | None, **context: Any
) -> tuple[dg.SensorResult | dg.SkipReason, str | None]:
    result = sensor(dg.build_sensor_context(cursor=cursor, resources={RESOURCE_KEY: slate}, **context))
    assert isinstance(result, dg.SensorResult | dg.SkipReason)
    return result, (result.cursor if isinstance(result, dg.SensorResult) else None) or cursor


@pytest.mark.parametrize("sensor", [slate_ops_manifest_sensor, slate_ops_compaction_sensor])
def test_a_tick_within_the_interval_sends_no_discovery_list_and_after_it_exactly_the_pages(
    fleet: Fleet, sensor: dg.SensorDefinition
) -> None:
    slate = fleet.resource()
    assert slate.config.discover is not None and slate.config.discover.interval_minutes == 5
    served = []
    cursor: str | None = None
    for _ in range(12):  # at 0 s, 30 s, ..., 330 s
        _, cursor = tick(sensor, slate, cursor)
        served.append(fleet.app.take().get("discovery", 0))
        fleet.clock.advance(30)
    assert served == [PAGES] + [0] * 9 + [PAGES, 0]  # listed at 0 s and at 300 s
    assert cursor is not None
    listing = DiscoveryListing.in_cursor(cursor)
    assert listing is not None and listing.at == START + 300 and listing.objects == DATABASES * (JUNK + 1)
    assert manifests_of(cursor) == {f"db_{i}": 1 for i in range(DATABASES)}


def test_a_new_database_is_found_and_a_deleted_one_dropped_after_the_interval(own_fleet: Fleet) -> None:
    """Within the interval the fleet is the listing's: a new database is not polled yet; a deleted
    one is still polled, and skipped with a warning where its poll finds it gone (ticks 90 s apart
    are too far apart to probe from, so each poll LISTs its manifests). The next listing adds the new
    one and drops the deleted one."""
    slate = own_fleet.resource()
    _, cursor = tick(slate_ops_manifest_sensor, slate, None)
    admin.create_db(f"{PREFIX}/db_new", own_fleet.store)
    admin.destroy(f"{PREFIX}/db_3", own_fleet.store, soft=False, dry_run=False, clock=own_fleet.clock)
    own_fleet.app.take()

    own_fleet.clock.advance(90)
    within, cursor = tick(slate_ops_manifest_sensor, slate, cursor)
    assert "discovery" not in own_fleet.app.take()
    assert "db_3 (DbNotFoundError" in (skip_message(within) or "")
    assert cursor is not None and "db_new" not in manifests_of(cursor) and "db_3" in manifests_of(cursor)

    own_fleet.clock.advance(DISCOVER_INTERVAL_S - 90)
    after, cursor = tick(slate_ops_manifest_sensor, slate, cursor)
    assert own_fleet.app.take()["discovery"] == PAGES
    assert "db_3" not in (skip_message(after) or "")
    assert cursor is not None
    assert set(manifests_of(cursor)) == {f"db_{i}" for i in range(DATABASES) if i != 3} | {"db_new"}
    assert "db_3" not in json.loads(cursor)["confirmed"]


def test_cursors_of_the_formats_before_parse_and_list_afresh(fleet: Fleet) -> None:
    slate = fleet.resource()
    names = [f"db_{i}" for i in range(DATABASES)]
    old = json.dumps(dict.fromkeys(names, 1))
    without = json.dumps({"manifests": dict.fromkeys(names, 1), "polls": {}, "confirmed": {}})
    broken = json.dumps({"manifests": dict.fromkeys(names, 1), "polls": {}, CURSOR_KEY: {"at": "x"}})
    for given in (old, without, broken):
        result, cursor = tick(slate_ops_manifest_sensor, slate, given)
        assert fleet.app.take()["discovery"] == PAGES
        assert cursor is not None and manifests_of(cursor) == dict.fromkeys(names, 1)
        assert DiscoveryListing.in_cursor(cursor) is not None
        assert "ignoring unreadable cursor" not in (skip_message(result) or "")


def test_a_listing_of_another_store_or_prefix_is_not_reused(fleet: Fleet) -> None:
    slate = fleet.resource()
    _, cursor = tick(slate_ops_manifest_sensor, slate, None)
    fleet.app.take()
    moved = fleet.resource(", interval_minutes: 60")  # same store and prefix: reused
    tick(slate_ops_manifest_sensor, moved, cursor)
    assert "discovery" not in fleet.app.take()
    listing = DiscoveryListing.in_cursor(cursor)
    assert listing is not None
    discover = parse_config(f"discover: {{store_url: '{fleet.url}', prefix: {PREFIX}/db_1}}\n").discover
    assert discover is not None and not listing.reusable(START, discover)
    assert listing.where != discover_digest(discover)


def test_interval_zero_lists_every_tick(fleet: Fleet) -> None:
    slate = fleet.resource(", interval_minutes: 0")
    cursor: str | None = None
    for _ in range(3):
        _, cursor = tick(slate_ops_compaction_sensor, slate, cursor)
        assert fleet.app.take()["discovery"] == PAGES
        fleet.clock.advance(30)


def test_the_partitions_sensor_keeps_its_listing_in_its_cursor(own_fleet: Fleet) -> None:
    slate = own_fleet.resource()
    instance = dg.DagsterInstance.ephemeral()
    first, cursor = tick(slate_ops_partitions_sensor, slate, None, instance=instance)
    assert own_fleet.app.take() == {"discovery": PAGES}
    assert isinstance(first, dg.SensorResult) and first.dynamic_partitions_requests
    for request in first.dynamic_partitions_requests:
        assert isinstance(request, dg.AddDynamicPartitionsRequest)
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    own_fleet.clock.advance(60)
    again, cursor = tick(slate_ops_partitions_sensor, slate, cursor, instance=instance)
    assert own_fleet.app.take() == {} and isinstance(again, dg.SkipReason)
    admin.destroy(f"{PREFIX}/db_0", own_fleet.store, soft=False, dry_run=False, clock=own_fleet.clock)
    own_fleet.app.take()
    own_fleet.clock.advance(DISCOVER_INTERVAL_S)
    later, cursor = tick(slate_ops_partitions_sensor, slate, cursor, instance=instance)
    assert own_fleet.app.take() == {"discovery": PAGES}
    assert isinstance(later, dg.SensorResult)
    (removed,) = later.dynamic_partitions_requests or []
    assert isinstance(removed, dg.DeleteDynamicPartitionsRequest) and list(removed.partition_keys) == ["db_0"]


def test_a_gc_schedule_tick_at_which_no_discovered_database_is_due_does_not_list(fleet: Fleet) -> None:
    slate = fleet.resource()

    def gc_tick(hour: int) -> object:
        when = datetime(2026, 1, 1, hour, tzinfo=UTC)
        return gc_schedule(
            dg.build_schedule_context(scheduled_execution_time=when, resources={RESOURCE_KEY: slate})
        )

    gc_tick(1)  # the default gc.interval_hours (6) is not due at 01:00
    assert fleet.app.take() == {}
    runs = gc_tick(6)
    assert fleet.app.take()["discovery"] == PAGES
    assert isinstance(runs, list) and len(runs) == DATABASES


def test_a_tag_policy_schedule_tick_does_not_list_for_databases_without_a_policy(fleet: Fleet) -> None:
    slate = fleet.resource()
    when = datetime(2026, 1, 1, 0, 15, tzinfo=UTC)
    skip = tag_policy_schedule(
        dg.build_schedule_context(scheduled_execution_time=when, resources={RESOURCE_KEY: slate})
    )
    assert isinstance(skip, dg.SkipReason) and fleet.app.take() == {}


def test_a_discovered_name_is_resolved_without_the_discovery_list(own_fleet: Fleet) -> None:
    admin.create_db(f"{PREFIX}/orders", own_fleet.store)
    admin.create_db(f"{PREFIX}/eu-1", own_fleet.store)
    own_fleet.app.take()
    slate = own_fleet.resource()
    # No "_": the name is its own path; no request (the handle's own read finds it).
    assert slate.database("orders").path == f"{PREFIX}/orders"
    assert slate.database("ghost").path == f"{PREFIX}/ghost"
    assert own_fleet.app.take() == {}
    # "_" may stand for another character: one LIST of the own path's manifests proves it.
    assert slate.database("db_2").path == f"{PREFIX}/db_2"
    assert own_fleet.app.take() == {"LIST": 1}
    # Not its own path: that LIST finds nothing, then the discovery LIST finds it.
    assert slate.database("eu_1").path == f"{PREFIX}/eu-1"
    assert own_fleet.app.take() == {"LIST": 1, "discovery": PAGES}
    with pytest.raises(ConfigError, match="no database named 'no_such'"):
        slate.database("no_such")
    # A gone database: the handle's read says so, naming it.
    with pytest.raises(DbNotFoundError, match=f"{PREFIX}/ghost"):
        slate.handle("ghost").describe()


def test_an_op_on_a_discovered_database_sends_no_discovery_list(own_fleet: Fleet) -> None:
    slate = own_fleet.resource()
    result = checkpoint_expiry_job.execute_in_process(
        run_config={"ops": {"expire_checkpoints_op": {"config": {"database": "db_4"}}}},
        resources={RESOURCE_KEY: slate},
    )
    assert result.success
    served = own_fleet.app.take()
    assert "discovery" not in served and served["LIST"] >= 1


def test_two_paths_with_one_name_resolve_to_the_own_path_everywhere(own_fleet: Fleet) -> None:
    admin.create_db(f"{PREFIX}/db-2", own_fleet.store)  # sorts before db_2, and is named db_2 too
    slate = own_fleet.resource()
    by_name = {db.name: db.path for db in slate.discovered()}
    assert by_name["db_2"] == f"{PREFIX}/db_2"
    assert slate.database("db_2").path == f"{PREFIX}/db_2"
    assert discovered_path("db_2", PREFIX) == f"{PREFIX}/db_2"
    assert discovered_path("wal", PREFIX) is None  # a reserved name is no path


def test_discovery_cost_model() -> None:
    cost = discovery_cost(200_000, DISCOVER_INTERVAL_S)
    schedules = sum(DISCOVERING_SCHEDULE_TICKS.values())
    assert cost.per_pass == RequestCounts(list=200)
    assert cost.passes_per_day == 3 * 288 + schedules
    assert cost.per_day.list == 200 * (3 * 288 + schedules)
    every_tick = discovery_cost(200_000, 0)
    assert every_tick.passes_per_day == 2 * 2880 + 1440 + schedules
    assert every_tick.dollars_per_day > 6 * cost.dollars_per_day
    assert discovery_cost(0).per_pass.list == 1  # an empty prefix is still one LIST


def test_the_fleet_cost_asset_shows_discovery(fleet: Fleet) -> None:
    slate = fleet.resource()
    result = dg.materialize(
        [build_fleet_cost_asset()], resources={RESOURCE_KEY: slate}, instance=dg.DagsterInstance.ephemeral()
    )
    assert result.success
    (materialization,) = result.asset_materializations_for_node("slate_ops_fleet_cost")
    metadata = materialization.metadata
    expected = discovery_cost(DATABASES * (JUNK + 1), DISCOVER_INTERVAL_S)
    assert metadata["discovery_requests_per_day"].value == expected.per_day.requests
    assert metadata["discovery_cost_usd_per_day"].value == pytest.approx(expected.dollars_per_day)
    assert f"| {DATABASES * (JUNK + 1)} | {PAGES} | 5 |" in str(metadata["discovery"].value)
