"""Fleet sensor ticks on S3 with latency (issue 15): 100 and 1,000 databases on moto behind a proxy.

Each database is created straight on moto (no proxy, 16 at a time): manifest 1 under
``fleet/db_NNNN``. The real sensors (``slate_ops_manifest_sensor``, ``slate_ops_compaction_sensor``)
are then evaluated through ``dagster.build_sensor_context`` with the real
``SlateDatabasesResource``, configured to discover the fleet (``discover: {store_url, prefix:
fleet}``) on an ``s3://`` URL whose endpoint is :class:`benchmarks.latency_proxy.LatencyProxy`,
which adds 0, 20 or 50 ms to every request and counts them. Measured per sensor: the first tick (no
cursor: every database is read) and a steady tick (the first tick's cursor, nothing changed), wall
seconds and requests per database (the tick's discovery LIST pages apart: the first tick lists the
prefix, the steady tick reuses its cursor's listing), with the shipped bound
(``slate_ops.orchestration.fleet.FLEET_READ_THREADS`` = 32) and, at 100 databases, one database at
a time as the reference. moto runs in its own process (``moto_server``), so its per-request CPU
does not share this process's GIL.

The same ticks at +0 ms give moto's own time, the floor that overlapping requests cannot hide.

Run: ``python -m benchmarks.bench_s3_fleet`` (``--quick``: 100 databases at +0 and +20 ms)
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.latency_proxy import LatencyProxy
from benchmarks.reporting import argument_parser, markdown_table, output, publish
from benchmarks.s3_fixtures import KEYS, REGION, MotoProcess, new_bucket, ours_store
from slate_ops import admin

if TYPE_CHECKING:
    from benchmarks.suite import Options, Outcome
from slate_ops.objstore.metering import list_requests
from slate_ops.objstore.s3 import shared_s3_client

RESULTS = Path(__file__).parent / "results" / "s3_fleet.md"
PREFIX = "fleet"
SENSORS = ("manifest", "compaction")
FULL_SIZES = (100, 1000)
FULL_DELAYS = (0.0, 0.02, 0.05)  # +0 ms: moto's own time per tick, the floor the pool cannot hide
KINDS = (("first", "first tick (no cursor)"), ("steady", "steady tick (unchanged)"))
GOAL_MS = 20  # the latency: its target is a tick of 1,000 databases in < 10 s at +20 ms
SERIAL_SIZE = 100  # one database at a time is measured at this size only (1,000 would take minutes)


@dataclass(frozen=True)
class Tick:
    sensor: str  # "manifest" or "compaction"
    databases: int
    delay_ms: int
    kind: str  # "first" (no cursor) or "steady" (nothing changed since the first)
    threads: int
    seconds: float
    requests: int
    discovery: int  # of ``requests``: the discovery LIST pages of the prefix (a tick that listed it)
    answer: str  # what the tick returned, in short

    @property
    def per_db(self) -> float:
        """Requests per database, the tick's discovery LIST(s) left out."""
        return (self.requests - self.discovery) / self.databases


def create_fleet(endpoint: str, bucket: str, n: int) -> None:
    """``n`` databases (manifest 1 each) straight on moto, 16 at a time."""
    store = ours_store(endpoint, bucket, "")
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda i: admin.create_db(f"{PREFIX}/db_{i:04d}", store), range(n)))


def resource(endpoint: str, bucket: str) -> Any:
    from slate_ops.orchestration import SlateDatabasesResource
    from slate_ops.orchestration.config import parse_config

    url = f"s3://{bucket}?endpoint_url={endpoint}&region={REGION}"
    config = parse_config(f"discover: {{store_url: '{url}', prefix: {PREFIX}}}\n")
    return SlateDatabasesResource(config=config)


def sensor_of(name: str) -> Any:
    if name == "manifest":
        from slate_ops.orchestration.checkpoints import slate_ops_manifest_sensor

        return slate_ops_manifest_sensor
    from slate_ops.orchestration.compaction import slate_ops_compaction_sensor

    return slate_ops_compaction_sensor


def evaluate(sensor: Any, slate: Any, cursor: str | None) -> Any:
    import dagster as dg

    from slate_ops.orchestration.resources import RESOURCE_KEY

    return sensor(dg.build_sensor_context(cursor=cursor, resources={RESOURCE_KEY: slate}))


def short(result: Any) -> str:
    import dagster as dg

    if isinstance(result, dg.SkipReason):
        return "skip: " + (result.skip_message or "")[:60]
    runs, events = len(result.run_requests or []), len(result.asset_events or [])
    if not runs and not events:
        return "no run, no event; cursor " + ("updated" if getattr(result, "cursor", None) else "unchanged")
    return f"{runs} run request(s), {events} event(s)"


@contextmanager
def read_threads(threads: int) -> Iterator[None]:
    from slate_ops.orchestration import fleet

    saved = fleet.FLEET_READ_THREADS
    fleet.FLEET_READ_THREADS = threads
    try:
        yield
    finally:
        fleet.FLEET_READ_THREADS = saved


def discovery_pages(before: str | None, after: str | None) -> int:
    """The discovery LIST pages a tick sent: those of the listing in its new cursor, if it listed
    (the listing is newer than the one it was given); none when it reused its cursor's."""
    from slate_ops.orchestration.discovery import DiscoveryListing

    given, kept = DiscoveryListing.in_cursor(before), DiscoveryListing.in_cursor(after)
    if kept is None or (given is not None and given.at == kept.at):
        return 0
    return list_requests(kept.objects)


def measure(proxy: LatencyProxy, slate: Any, sensor: str, n: int, threads: int) -> tuple[Tick, Tick]:
    """The first tick (no cursor) and a steady tick (its cursor, nothing changed) of ``sensor``."""
    definition = sensor_of(sensor)
    delay_ms = round(proxy.delay * 1000)
    ticks = []
    cursor: str | None = None
    with read_threads(threads):
        for kind in ("first", "steady"):
            proxy.reset()
            started = time.perf_counter()
            result = evaluate(definition, slate, cursor)
            seconds = time.perf_counter() - started
            requests = sum(proxy.counts.values())
            after = getattr(result, "cursor", None) or cursor
            discovery = discovery_pages(cursor, after)
            ticks.append(
                Tick(sensor, n, delay_ms, kind, threads, seconds, requests, discovery, short(result))
            )
            cursor = after
    return ticks[0], ticks[1]


def run(
    sizes: tuple[int, ...],
    delays: tuple[float, ...],
    progress: Callable[[str], None] = lambda _: None,
) -> tuple[list[Tick], dict[str, str]]:
    from slate_ops.orchestration.fleet import FLEET_READ_THREADS

    notes: dict[str, str] = {}
    ticks: list[Tick] = []
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
        os.environ.setdefault(name, value)  # the sensors' resource finds moto's keys in the environment
    with MotoProcess(timeout=60) as moto:
        endpoint = moto.endpoint
        notes["moto"] = "moto_server in its own process on loopback"
        for n in sizes:
            bucket = new_bucket(endpoint)
            started = time.perf_counter()
            create_fleet(endpoint, bucket, n)
            progress(f"{n} databases created in {time.perf_counter() - started:.1f} s")
            for sensor in SENSORS:  # warm-up, not measured: Dagster's and botocore's first-use costs
                evaluate(sensor_of(sensor), resource(endpoint, bucket), None)
            for delay in delays:
                with LatencyProxy(endpoint, delay) as proxy:
                    slate = resource(proxy.endpoint, bucket)
                    started = time.perf_counter()
                    shared_s3_client(endpoint_url=proxy.endpoint, region=REGION, **KEYS)
                    notes["client build"] = f"{time.perf_counter() - started:.2f} s, before the ticks"
                    for sensor in SENSORS:
                        progress(f"{sensor} sensor, {n} databases, +{delay * 1000:.0f} ms")
                        ticks.extend(measure(proxy, slate, sensor, n, FLEET_READ_THREADS))
                    if n == SERIAL_SIZE and round(delay * 1000) == GOAL_MS:
                        progress(f"manifest sensor, {n} databases, one at a time")
                        ticks.extend(measure(proxy, slate, "manifest", n, 1))
    notes["load average"] = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return ticks, notes


def render(ticks: list[Tick], notes: dict[str, str]) -> str:
    rows = [
        [
            f"{t.sensor} sensor",
            f"{t.databases:,}",
            t.delay_ms,
            t.kind,
            t.threads,
            f"{t.seconds:.2f}",
            t.requests,
            t.discovery,
            f"{t.per_db:.2f}",
            t.answer,
        ]
        for t in ticks
    ]
    table = markdown_table(
        [
            "sensor",
            "databases",
            "delay (ms)",
            "tick",
            "read threads",
            "seconds",
            "requests",
            "of which discovery",
            "requests / db",
            "answer",
        ],
        rows,
        "llrlrrrrrl",
    )
    return table + "\n\n" + "\n".join(f"* {k}: {v}" for k, v in notes.items()) + "\n"


def collect(options: Options) -> Outcome:
    """The summary rows for ``python -m benchmarks`` (registered in benchmarks/suite.py)."""
    from benchmarks.suite import Outcome, Row, Target, _progress, command, row
    from slate_ops.orchestration.fleet import FLEET_READ_THREADS

    sizes, delays = ((SERIAL_SIZE,), (0.0, 0.02)) if options.quick else (FULL_SIZES, FULL_DELAYS)
    ticks, notes = run(sizes, delays, progress=_progress)
    largest = max(sizes)

    def find(sensor: str, n: int, delay_ms: int, kind: str, threads: int = 0) -> Tick | None:
        wanted = threads or FLEET_READ_THREADS
        return next(
            (
                t
                for t in ticks
                if (t.sensor, t.databases, t.delay_ms, t.kind, t.threads)
                == (sensor, n, delay_ms, kind, wanted)
            ),
            None,
        )

    rows: list[Row] = []
    for n in sizes:
        for delay in (d for d in delays if d > 0):
            delay_ms = round(delay * 1000)
            for sensor in SENSORS:
                for kind, what in KINDS:
                    ours = find(sensor, n, delay_ms, kind)
                    floor = find(sensor, n, 0, kind)
                    target = Target("ours", "<", 10) if (n, delay_ms) == (largest, GOAL_MS) else None
                    note = f"{ours.per_db:.2f} requests/db; {ours.answer}" if ours else "not measured"
                    if floor is not None:
                        note += "; reference: the same tick at +0 ms (moto's own time)"
                    if target is None:
                        note += "; reported"
                    rows.append(
                        row(
                            "s3_fleet",
                            f"{sensor} sensor, {what}, {n:,} dbs, +{delay_ms} ms",
                            "s",
                            None if ours is None else ours.seconds,
                            None if floor is None else floor.seconds,
                            None if floor is None else "same tick at +0 ms",
                            target,
                            note,
                        )
                    )
    for kind, what in KINDS:
        ours, serial = (
            find("manifest", SERIAL_SIZE, GOAL_MS, kind),
            find("manifest", SERIAL_SIZE, GOAL_MS, kind, 1),
        )
        rows.append(
            row(
                "s3_fleet",
                f"manifest sensor, {what}, {SERIAL_SIZE} dbs, +{GOAL_MS} ms: {FLEET_READ_THREADS} at a time",
                "s",
                None if ours is None else ours.seconds,
                None if serial is None else serial.seconds,
                "one at a time",
                None,
                "what the bounded pool buys; same run; reported",
            )
        )
    for sensor in SENSORS:
        steady = find(sensor, largest, GOAL_MS, "steady")
        rows.append(
            row(
                "s3_fleet",
                f"requests per unchanged db, {sensor} sensor, {largest:,} dbs",
                "requests",
                None if steady is None else round(steady.per_db, 3),
                target=Target("ours", "<=", 2),
                note="steady tick's requests / databases; plus the discovery LIST pages once per "
                "discover.interval_minutes (5), not in the steady tick",
            )
        )
    ms = ", ".join(f"+{round(d * 1000)}" for d in delays)
    setup = (
        f"{' and '.join(f'{n:,}' for n in sizes)} databases (manifest 1 each) discovered under one S3 "
        f"prefix on moto_server (own process, loopback) behind a proxy adding {ms} ms per request; "
        "the real manifest and compaction sensors evaluated with build_sensor_context and the real "
        "resource, first tick (no cursor) and steady tick (nothing changed); "
        + "; ".join(f"{k}: {v}" for k, v in notes.items())
        + "."
    )
    table = render(ticks, notes)
    head = f"# Fleet sensor ticks on S3 (benchmarks/bench_s3_fleet.py)\n\n`{command('s3_fleet', options)}`"
    report = f"{head}\n\n{setup}\n\n{table}"
    return Outcome(rows, setup, table, report)


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__, RESULTS, quick="100 databases at +0 and +20 ms only")
    args = parser.parse_args(argv)
    sizes, delays = ((SERIAL_SIZE,), (0.0, 0.02)) if args.quick else (FULL_SIZES, FULL_DELAYS)
    ticks, notes = run(sizes, delays, progress=lambda m: print(m, file=sys.stderr, flush=True))
    publish(render(ticks, notes), output(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
