"""Sensor ticks over a fleet on S3 (issue 15): reads overlap, an unchanged database costs one GET
probe (issue 23; one LIST at the first poll and hourly), and a missing, destroyed or corrupt
database is skipped without failing the tick.

The fleet lives on moto's S3 server on loopback, reached through boto3 as the sensors reach it (the
resource opens ``s3://`` stores from the config). The server's WSGI app is wrapped to count the
requests by method (a GET with ``list-type`` counted as ``LIST``), to record how many were in flight
at once, and to add a delay per request.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import dagster as dg
import pytest

from slate_ops import Db, admin
from slate_ops.admin.cost import SENSOR_LIST_INTERVAL_S
from slate_ops.objstore import S3Store
from slate_ops.objstore.metering import RequestCounts
from slate_ops.objstore.s3 import make_s3_client
from slate_ops.orchestration import DatabaseConfig, SlateDatabasesResource, SlateOpsConfig
from slate_ops.orchestration.checkpoints import slate_ops_manifest_sensor
from slate_ops.orchestration.compaction import slate_ops_compaction_sensor
from slate_ops.orchestration.config import CompactionPolicy, parse_config
from slate_ops.orchestration.fleet import FLEET_READ_THREADS
from slate_ops.orchestration.gc import gc_job
from slate_ops.orchestration.resources import RESOURCE_KEY
from slate_ops.runtime import ManualRuntime
from tests.support.orchestration import add_checkpoint, is_cost_observation, manifests_of, skip_message
from tests.support.s3 import CREDENTIALS, WrappedMotoServer, drain, serving

pytestmark = pytest.mark.s3

COUNT = 60
PREFIX = "fleet"


class CountingApp:
    """moto's app, counting requests by method, the most in flight at once, and sleeping ``delay``
    seconds in each (outside any lock, so concurrent requests overlap their delays)."""

    def __init__(self, app: Any) -> None:
        self._app = app
        self._lock = threading.Lock()
        self.delay = 0.0
        self.requests: Counter[str] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.max_in_flight = 0

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        with self._lock:
            method = environ["REQUEST_METHOD"]
            listing = method == "GET" and "list-type=" in environ.get("QUERY_STRING", "")
            self.requests["LIST" if listing else method] += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                time.sleep(self.delay)
            return drain(self._app(environ, start_response))
        finally:
            with self._lock:
                self.in_flight -= 1


CountingMotoServer = WrappedMotoServer[CountingApp]


@pytest.fixture(scope="module")
def server() -> Iterator[CountingMotoServer]:
    with serving(WrappedMotoServer(CountingApp)) as moto:  # the resource's stores use boto3's chain
        yield moto


@pytest.fixture
def counter(server: CountingMotoServer) -> CountingApp:
    server.app.delay = 0.0
    server.app.reset()
    return server.app


@pytest.fixture
def endpoint(server: CountingMotoServer) -> str:
    return server.endpoint


@pytest.fixture
def bucket(endpoint: str, counter: CountingApp) -> str:
    name = f"fleet-{time.monotonic_ns()}"
    make_s3_client(endpoint_url=endpoint, **CREDENTIALS).create_bucket(Bucket=name)
    return name


@pytest.fixture
def s3_fleet_store(endpoint: str, bucket: str) -> S3Store:
    return S3Store(bucket, "", endpoint_url=endpoint, **CREDENTIALS)


def names(n: int = COUNT) -> list[str]:
    return [f"db_{i:03d}" for i in range(n)]


def fleet_config(endpoint: str, bucket: str, databases: list[str], **extra: Any) -> SlateOpsConfig:
    url = f"s3://{bucket}?endpoint_url={endpoint}&region=us-east-1"
    return SlateOpsConfig(
        databases=[
            DatabaseConfig(name=name, store_url=url, path=f"{PREFIX}/{name}", **extra.get(name, {}))
            for name in databases
        ]
    )


@pytest.fixture
def s3_fleet(
    endpoint: str, bucket: str, s3_fleet_store: S3Store, counter: CountingApp
) -> SlateDatabasesResource:
    """``COUNT`` databases (manifest 1 each) on S3; the counter starts from zero."""
    for name in names():
        admin.create_db(f"{PREFIX}/{name}", s3_fleet_store)
    counter.reset()
    clock = ManualRuntime(1_700_000_000.0)
    return SlateDatabasesResource(config=fleet_config(endpoint, bucket, names())).with_clock(clock)


def manifest_tick(slate: SlateDatabasesResource, cursor: str | None) -> dg.SensorResult | dg.SkipReason:
    result = slate_ops_manifest_sensor(
        dg.build_sensor_context(cursor=cursor, resources={RESOURCE_KEY: slate})
    )
    assert isinstance(result, dg.SensorResult | dg.SkipReason)
    return result


def observed(result: dg.SensorResult | dg.SkipReason) -> list[tuple[str, object]]:
    assert isinstance(result, dg.SensorResult), result
    return [
        (e.asset_key.path[1], e.metadata["manifest_id"].value)
        for e in result.asset_events
        if not (isinstance(e, dg.AssetObservation) and is_cost_observation(e))
    ]


def test_an_unchanged_database_costs_one_get_probe_and_a_changed_one_is_seen(
    s3_fleet: SlateDatabasesResource, s3_fleet_store: S3Store, counter: CountingApp
) -> None:
    first = manifest_tick(s3_fleet, None)
    assert observed(first) == [(name, 1) for name in names()]  # every one, in the config's order
    assert dict(counter.requests) == {"LIST": COUNT, "GET": COUNT}  # a LIST and a GET each
    assert isinstance(first, dg.SensorResult) and first.cursor is not None

    counter.reset()
    second = manifest_tick(s3_fleet, first.cursor)
    assert f"no manifest changed in {COUNT} database(s)" in (skip_message(second) or "")
    # One GET probe of manifest 2 per database (404), no LIST, no manifest read.
    assert dict(counter.requests) == {"GET": COUNT}

    add_checkpoint(s3_fleet_store, f"{PREFIX}/db_017", ManualRuntime(1_700_000_000.0), None, "moved")
    counter.reset()
    third = manifest_tick(s3_fleet, first.cursor)
    assert observed(third) == [("db_017", 2)]
    # db_017's probe found manifest 2; one LIST showed it the newest, so it is not read again.
    assert dict(counter.requests) == {"GET": COUNT, "LIST": 1}
    assert isinstance(third, dg.SensorResult) and third.cursor is not None
    assert manifests_of(third.cursor) == {name: 2 if name == "db_017" else 1 for name in names()}


def test_ticks_read_the_fleet_concurrently_within_the_bound(
    s3_fleet: SlateDatabasesResource, counter: CountingApp
) -> None:
    first = manifest_tick(s3_fleet, None)
    assert isinstance(first, dg.SensorResult)
    delay = 0.2  # well above the CPU time of a request, even on a loaded machine
    counter.delay = delay
    counter.reset()
    started = time.perf_counter()
    assert skip_message(manifest_tick(s3_fleet, first.cursor)) is not None
    elapsed = time.perf_counter() - started
    serial = COUNT * delay  # one LIST per database, one after another
    assert elapsed < serial / 3, f"{elapsed:.2f}s for {COUNT} LISTs of {delay}s each"
    assert 1 < counter.max_in_flight <= FLEET_READ_THREADS


def test_a_compaction_sensor_tick_costs_a_probe_list_and_get_per_changed_and_one_get_per_unchanged_database(
    endpoint: str, bucket: str, s3_fleet_store: S3Store, counter: CountingApp
) -> None:
    databases = names(20)
    for name in databases:
        admin.create_db(f"{PREFIX}/{name}", s3_fleet_store)
    with Db.open(f"{PREFIX}/db_005", s3_fleet_store) as db:  # two L0 SSTs: its threshold below
        for round_ in range(2):
            db.put(b"key", f"v{round_}".encode())
            db.flush_memtable()
    policy = {"db_005": {"compaction": CompactionPolicy(l0_threshold=2)}}
    slate = SlateDatabasesResource(config=fleet_config(endpoint, bucket, databases, **policy))

    def tick(cursor: str | None) -> dg.SensorResult | dg.SkipReason:
        context = dg.build_sensor_context(cursor=cursor, resources={RESOURCE_KEY: slate})
        result = slate_ops_compaction_sensor(context)
        assert isinstance(result, dg.SensorResult | dg.SkipReason)
        return result

    counter.reset()
    first = tick(None)
    assert isinstance(first, dg.SensorResult) and first.cursor is not None
    assert [r.tags["slate_ops/db"] for r in first.run_requests or []] == ["db_005"]
    assert dict(counter.requests) == {"LIST": len(databases), "GET": len(databases)}

    counter.reset()
    again = tick(first.cursor)
    assert isinstance(again, dg.SensorResult) and again.cursor is not None
    assert manifests_of(again.cursor) == manifests_of(first.cursor)  # no manifest moved (polls counted)
    message = skip_message(again) or ""
    assert f"{len(databases)} without a new manifest since the last tick: db_000" in message
    # The cursor names the manifest each database was evaluated at: one GET probe each (of the next
    # manifest, absent) proves it unchanged.
    assert dict(counter.requests) == {"GET": len(databases)}

    with Db.open(f"{PREFIX}/db_004", s3_fleet_store) as db:  # new manifests: probe, LIST + GET, still below
        db.put(b"key", b"v")
        db.flush_memtable()
    counter.reset()
    changed = tick(first.cursor)
    assert "db_004 1/4" in (skip_message(changed) or "")
    assert dict(counter.requests) == {"GET": len(databases) + 1, "LIST": 1}


def test_missing_destroyed_gc_trimmed_and_corrupt_databases_do_not_fail_the_tick(
    s3_fleet: SlateDatabasesResource,
    s3_fleet_store: S3Store,
    endpoint: str,
    bucket: str,
    counter: CountingApp,
) -> None:
    first = manifest_tick(s3_fleet, None)
    assert isinstance(first, dg.SensorResult) and first.cursor is not None
    # db_003: hard-destroyed (every object deleted) while the cursor names its manifest 1.
    for meta in list(s3_fleet_store.list(f"{PREFIX}/db_003/")):
        s3_fleet_store.delete(meta.key)
    # db_007: two newer manifests, and GC deleted the one the cursor names.
    clock = ManualRuntime(1_700_000_000.0)
    add_checkpoint(s3_fleet_store, f"{PREFIX}/db_007", clock, None, "a")
    add_checkpoint(s3_fleet_store, f"{PREFIX}/db_007", clock, None, "b")
    s3_fleet_store.delete(f"{PREFIX}/db_007/manifest/{1:020d}.manifest")
    # db_011: its latest manifest is garbage.
    s3_fleet_store.put(f"{PREFIX}/db_011/manifest/{2:020d}.manifest", b"not a manifest")
    config = fleet_config(endpoint, bucket, ["ghost", *names()])  # ghost: never created

    slate = SlateDatabasesResource(config=config)
    result = manifest_tick(slate, first.cursor)
    assert observed(result) == [("db_007", 3)]
    assert isinstance(result, dg.SensorResult) and result.cursor is not None
    cursor = manifests_of(result.cursor)
    assert cursor["db_007"] == 3 and "ghost" not in cursor

    message = skip_message(manifest_tick(slate, result.cursor)) or ""
    reasons = ["ghost (DbNotFoundError", "db_003 (DbNotFoundError", "db_011 (CorruptObjectError"]
    assert all(reason in message for reason in reasons), message
    assert [message.index(reason) for reason in reasons] == sorted(message.index(r) for r in reasons)


def test_a_discovered_fleet_keeps_its_cursor_without_observations(
    s3_fleet: SlateDatabasesResource, endpoint: str, bucket: str, counter: CountingApp
) -> None:
    """Discovered databases have no asset to observe; the cursor still moves, so the next tick
    costs one GET probe per database (and no discovery LIST: the cursor's listing is reused within
    discover.interval_minutes)."""
    url = f"s3://{bucket}?endpoint_url={endpoint}&region=us-east-1"
    slate = SlateDatabasesResource(
        config=parse_config(f"discover: {{store_url: '{url}', prefix: {PREFIX}}}\n")
    )
    first = manifest_tick(slate, None)
    assert isinstance(first, dg.SensorResult) and not first.asset_events and first.cursor is not None
    assert first.skip_reason is not None and "no manifest changed" in (first.skip_reason.skip_message or "")
    assert manifests_of(first.cursor) == dict.fromkeys(names(), 1)
    counter.reset()
    assert skip_message(manifest_tick(slate, first.cursor)) is not None
    assert dict(counter.requests) == {"GET": COUNT}


def test_an_hour_of_polls_records_exactly_the_requests_the_server_served(
    s3_fleet: SlateDatabasesResource, counter: CountingApp
) -> None:
    """Each database's poll requests accumulate in the cursor and come out once an hour as one
    observation; summed over the fleet they are what S3 was asked. Ticks 30 minutes apart are too
    far apart to probe from (SENSOR_PROBE_MAX_AGE_S): each poll LISTs."""
    clock = s3_fleet.clock()
    assert isinstance(clock, ManualRuntime)
    cursor: str | None = None
    polls: list[dg.AssetObservation] = []
    for _ in range(3):  # at 0, 30 and 60 minutes
        result = manifest_tick(s3_fleet, cursor)
        assert isinstance(result, dg.SensorResult) and result.cursor is not None
        polls += [
            e for e in result.asset_events if isinstance(e, dg.AssetObservation) and is_cost_observation(e)
        ]
        cursor = result.cursor
        clock.advance(1800)
    assert len(polls) == COUNT  # one per database, at the third tick
    counts = [RequestCounts.from_dict(p.metadata["requests"].value) for p in polls]  # type: ignore[arg-type]
    assert set(counts) == {RequestCounts(list=3, get=1, bytes_read=counts[0].bytes_read)}
    assert {p.metadata["cost_runs"].value for p in polls} == {3}
    assert dict(counter.requests) == {"LIST": sum(c.list for c in counts), "GET": sum(c.get for c in counts)}


def test_a_gc_step_on_s3_records_exactly_the_requests_the_server_served(
    s3_fleet: SlateDatabasesResource, s3_fleet_store: S3Store, counter: CountingApp
) -> None:
    with Db.open(f"{PREFIX}/db_000", s3_fleet_store) as db:
        db.put(b"key", b"value")
        db.flush_memtable()
    counter.reset()
    result = gc_job.execute_in_process(
        run_config={"ops": {"gc_op": {"config": {"database": "db_000", "dry_run": False}}}},
        resources={RESOURCE_KEY: s3_fleet},
    )
    assert result.success
    (output,) = [e for e in result.all_node_events if e.is_successful_output]
    recorded = RequestCounts.from_dict(output.step_output_data.metadata["requests"].value)  # type: ignore[arg-type]
    served = dict(counter.requests)
    assert recorded.list > 0 and recorded.get > 0
    assert served == {
        method: n
        for method, n in {
            "GET": recorded.get,
            "LIST": recorded.list,
            "HEAD": recorded.head,
            "PUT": recorded.put,
            "DELETE": recorded.delete,
        }.items()
        if n
    }


def small_fleet(endpoint: str, bucket: str, store: S3Store, count: int) -> SlateDatabasesResource:
    """``count`` databases (manifest 1 each) on a clock the test advances."""
    for name in names(count):
        admin.create_db(f"{PREFIX}/{name}", store)
    clock = ManualRuntime(1_700_000_000.0)
    return SlateDatabasesResource(config=fleet_config(endpoint, bucket, names(count))).with_clock(clock)


def test_an_hour_of_30s_polls_is_one_get_each_with_a_list_at_the_start_and_the_hour(
    endpoint: str, bucket: str, s3_fleet_store: S3Store, counter: CountingApp
) -> None:
    """Issue 23: an idle database's poll is one GET probe; it LISTs at its first poll (no manifest
    known), and again once its last LIST is an hour old (SENSOR_LIST_INTERVAL_S). db_001 is deleted
    by hand meanwhile: the probe cannot tell (decided, docs/orchestration.md), the hourly LIST finds
    it missing, and from then on every poll of it LISTs and reports it, as before issue 23."""
    slate = small_fleet(endpoint, bucket, s3_fleet_store, 3)
    clock = slate.clock()
    assert isinstance(clock, ManualRuntime) and SENSOR_LIST_INTERVAL_S == 3600
    served: list[dict[str, int]] = []
    messages: list[str] = []
    polls: list[dg.AssetObservation] = []
    cursor: str | None = None
    for tick in range(122):  # at 0 s, 30 s, ..., 3630 s
        if tick == 10:
            for meta in list(s3_fleet_store.list(f"{PREFIX}/db_001/")):
                s3_fleet_store.delete(meta.key)
        counter.reset()
        result = manifest_tick(slate, cursor)
        served.append(dict(counter.requests))
        messages.append(skip_message(result) or "")
        assert isinstance(result, dg.SensorResult) and result.cursor is not None
        polls += [
            e for e in result.asset_events if isinstance(e, dg.AssetObservation) and is_cost_observation(e)
        ]
        cursor = result.cursor
        clock.advance(30)
    assert served[0] == {"LIST": 3, "GET": 3}  # the first poll reads each database
    assert all(s == {"GET": 3} for s in served[1:120]), served[1:120]  # one probe each, no LIST
    assert all("db_001" not in m for m in messages[:121])
    # The hour: each confirmed by LIST; db_001 found missing (its LIST from manifest 1 is empty,
    # then one of every manifest: DbNotFoundError), and so on every poll of it from now on.
    assert served[120] == {"LIST": 4}
    assert served[121] == {"GET": 2, "LIST": 2}
    assert "db_001 (DbNotFoundError" in messages[121]
    # The hour's poll window of db_000, recorded at 3600 s: exactly what it cost the server.
    (db_000,) = [p for p in polls if p.asset_key.path[-1] == "db_000"]
    recorded = RequestCounts.from_dict(db_000.metadata["requests"].value)  # type: ignore[arg-type]
    assert (recorded.list, recorded.get, db_000.metadata["cost_runs"].value) == (2, 120, 121)


def test_destroyed_and_gc_trimmed_databases_are_seen_by_the_probe(
    endpoint: str, bucket: str, s3_fleet_store: S3Store, counter: CountingApp
) -> None:
    """A soft destroy writes the next manifest: the probe finds it and the state is read. A hard
    destroy of a database already seen destroyed writes its tombstone there: found, and skipped as
    deleted. GC trimming the manifest the cursor names (newer ones exist) is a change like any other.
    A hard destroy of a live database deletes the destroyed mark it commits first, so the probe
    misses it until the hourly LIST (decided: as a deletion by hand; a discovered fleet drops it at
    once, next test)."""
    slate = small_fleet(endpoint, bucket, s3_fleet_store, 4)
    clock = slate.clock()
    assert isinstance(clock, ManualRuntime)
    admin.destroy(f"{PREFIX}/db_001", s3_fleet_store, dry_run=False, clock=clock)  # claim 2, mark 3
    first = manifest_tick(slate, None)
    assert isinstance(first, dg.SensorResult) and manifests_of(first.cursor)["db_001"] == 3

    clock.advance(30)
    admin.destroy(f"{PREFIX}/db_000", s3_fleet_store, dry_run=False, clock=clock)  # soft: 2 and 3
    admin.destroy(f"{PREFIX}/db_001", s3_fleet_store, soft=False, dry_run=False, clock=clock)  # tombstone 4
    admin.destroy(f"{PREFIX}/db_002", s3_fleet_store, soft=False, dry_run=False, clock=clock)  # only 4 left
    add_checkpoint(s3_fleet_store, f"{PREFIX}/db_003", clock, None, "a")
    add_checkpoint(s3_fleet_store, f"{PREFIX}/db_003", clock, None, "b")
    s3_fleet_store.delete(f"{PREFIX}/db_003/manifest/{1:020d}.manifest")  # as GC, after its min_age
    counter.reset()
    second = manifest_tick(slate, first.cursor)
    assert observed(second) == [("db_000", 3), ("db_003", 3)]
    assert isinstance(second, dg.SensorResult) and second.cursor is not None
    destroyed = next(e for e in second.asset_events if e.asset_key.path[-1] == "db_000")
    assert "destroyed_at_s" in destroyed.metadata
    cursor = manifests_of(second.cursor)
    assert (cursor["db_000"], cursor["db_001"], cursor["db_002"], cursor["db_003"]) == (3, 3, 1, 3)
    # db_000 and db_003: probe hit (2), LIST, GET of the newest (3); db_001: probe hit (the
    # tombstone 4), LIST: it is the newest, so not read again (deleted: skipped); db_002: probe miss.
    assert dict(counter.requests) == {"GET": 2 + 1 + 1 + 2, "LIST": 3}

    clock.advance(30)
    third = manifest_tick(slate, second.cursor)
    message = skip_message(third) or ""
    assert "db_001 (DbNotFoundError" in message and "db_002" not in message


def test_a_discovered_fleet_drops_a_hard_destroyed_database_at_once(
    s3_fleet: SlateDatabasesResource, endpoint: str, bucket: str, s3_fleet_store: S3Store
) -> None:
    """With ``interval_minutes: 0`` every tick discovers (the default's interval: next module)."""
    url = f"s3://{bucket}?endpoint_url={endpoint}&region=us-east-1"
    slate = SlateDatabasesResource(
        config=parse_config(f"discover: {{store_url: '{url}', prefix: {PREFIX}, interval_minutes: 0}}\n")
    ).with_clock(s3_fleet.clock())
    first = manifest_tick(slate, None)
    assert isinstance(first, dg.SensorResult) and "db_005" in manifests_of(first.cursor)
    admin.destroy(f"{PREFIX}/db_005", s3_fleet_store, soft=False, dry_run=False)
    again = manifest_tick(slate, first.cursor)
    assert isinstance(again, dg.SensorResult) and again.cursor is not None
    assert "db_005" not in manifests_of(again.cursor) and len(manifests_of(again.cursor)) == COUNT - 1
    assert "db_005" not in json.loads(again.cursor)["confirmed"]
