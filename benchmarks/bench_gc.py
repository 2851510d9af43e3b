"""Object-store requests of one GC run on a database of about 1,000 objects (docs/design/gc.md),
and what keeping such a database maintained costs per day: our defaults (sensor polls + GC) beside
SlateDB's (GC every 10 min + compactor polls), from counts measured on it (slate_ops.admin.cost).

The database is built with the real engine on a memory store whose ``last_modified`` follows a
manual clock: ``ROUNDS`` rounds of (write, WAL flush, L0 flush), a compaction every 8 L0 SSTs and a
checkpoint that later expires, so every namespace holds garbage. Each scenario runs on a copy of
that state through :class:`CountingStore`, which counts as S3 bills: one LIST per 1,000 keys.

Run: ``python -m benchmarks.bench_gc``
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from benchmarks.latency_proxy import LatencyProxy
from benchmarks.reporting import argument_parser, markdown_table, output, publish
from benchmarks.s3_fixtures import load_slatedb, new_bucket, ours_store, slatedb_store, start_moto
from slate_ops import Db, DbOptions, admin
from slate_ops.admin import cost as cost_model
from slate_ops.compaction import Compactor, CompactorOptions
from slate_ops.config import CheckpointOptions
from slate_ops.gc import GarbageCollector, GcOptions, GcReport
from slate_ops.objstore import CountingStore, MemoryStore
from slate_ops.runtime import ManualRuntime

RESULTS = Path(__file__).parent / "results" / "gc.md"
ROUNDS = 280
QUIET = DbOptions(
    wal_flush_interval=timedelta(hours=1), manifest_poll_interval=timedelta(hours=1), l0_max_ssts=100_000
)
COMPACTOR = CompactorOptions(
    min_sources=8, max_sources=8, compaction_checkpoint_lifetime=timedelta(minutes=1)
)


def stamped(clock: ManualRuntime, name: str) -> MemoryStore:
    return MemoryStore(name, now=lambda: datetime.fromtimestamp(clock.now(), UTC))


def build(clock: ManualRuntime, rounds: int = ROUNDS) -> MemoryStore:
    """A database with garbage in every namespace; one round every 2 s."""
    store = stamped(clock, "bench-gc")
    compactor: Compactor | None = None
    with Db.open("db", store, QUIET, clock=clock) as db:
        compactor = Compactor("db", store, COMPACTOR, clock=clock)
        for round_ in range(rounds):
            for i in range(10):
                db.put(b"k%04d" % (round_ * 10 + i), b"v" * 100)
            db.flush()
            db.flush_memtable()
            if round_ == rounds // 2:
                admin.create_checkpoint("db", store, CheckpointOptions(lifetime="10min"), clock=clock)
            if compactor.run_once() is not None:
                clock.advance(1)
            clock.advance(2)
        compactor.close()
    return store


def copy(store: MemoryStore, clock: ManualRuntime) -> MemoryStore:
    """The same objects with the same ``last_modified`` in a fresh store."""
    now = clock.now()
    target = stamped(clock, "bench-gc-copy")
    for meta in store.list(""):
        clock.set(meta.last_modified.timestamp())
        target.put(meta.key, store.get(meta.key).data)
    clock.set(now)
    return target


@dataclass(frozen=True)
class Row:
    scenario: str
    objects: int
    deleted: int
    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def measure(
    scenario: str, store: MemoryStore, clock: ManualRuntime, run: Callable[[GarbageCollector], GcReport]
) -> Row:
    counting = CountingStore(store)
    objects = sum(1 for _ in store.list("db/"))
    report = run(GarbageCollector("db", counting, GcOptions(), clock=clock))
    return Row(scenario, objects, len(report.deleted_keys()), counting.counts)


def run_scenarios(rounds: int = ROUNDS) -> list[Row]:
    clock = ManualRuntime(1_700_000_000.0)
    base = build(clock, rounds)
    built_at = clock.now()
    rows = []

    def at(offset: float) -> tuple[MemoryStore, ManualRuntime]:
        clock.set(built_at)
        state = copy(base, clock)
        clock.set(built_at + offset)
        return state, clock

    state, now = at(0)  # the last 150 rounds are younger than min_age (300 s)
    rows.append(
        measure(
            "dry run, writer active in the last 5 min",
            state,
            now,
            lambda gc: gc.run_once(dry_run=True),
        )
    )
    state, now = at(0)
    rows.append(
        measure(
            "real run, writer active in the last 5 min", state, now, lambda gc: gc.run_once(dry_run=False)
        )
    )
    state, now = at(86_400)
    rows.append(measure("dry run, all garbage a day old", state, now, lambda gc: gc.run_once(dry_run=True)))
    state, now = at(86_400)
    rows.append(measure("real run, all garbage a day old", state, now, lambda gc: gc.run_once(dry_run=False)))
    rows.append(measure("real run again (steady state)", state, now, lambda gc: gc.run_once(dry_run=False)))
    return rows


@dataclass(frozen=True)
class PollingRow:
    database: str
    objects: int
    cost: cost_model.DatabaseCost
    writers: int = 1


def polling_costs(rounds: int = ROUNDS) -> list[PollingRow]:
    """Requests per day of keeping the benchmark's database maintained, at our defaults and at
    SlateDB's, measured on it as built (garbage waiting) and after a GC (steady state), with one
    writer; and after the GC without a writer (idle: the sensors' polls and GC alone)."""
    clock = ManualRuntime(1_700_000_000.0)
    state = build(clock, rounds)
    clock.advance(86_400)
    rows = []
    for name in ("as built, a day later (garbage waiting)", "after a GC (steady state)"):
        measured = cost_model.measure("db", state, clock=clock)
        rows.append(PollingRow(name, sum(measured.objects.values()), cost_model.polling_cost(measured)))
        GarbageCollector("db", state, GcOptions(), clock=clock).run_once(dry_run=False)
    idle = cost_model.polling_cost(measured, cost_model.Intervals(writers=0))
    rows.append(PollingRow("after a GC, no writer (idle)", rows[-1].objects, idle, writers=0))
    return rows


def polling_table(rows: list[PollingRow]) -> str:
    header = ["database", "objects", "ours: sensor polls (GET probes + LISTs)", "ours: GC",
              "ours: writer polls", "ours total", "ours $/month", "SlateDB: GC", "SlateDB: compactor polls",
              "SlateDB: writer polls", "SlateDB total", "SlateDB $/month"]  # fmt: skip
    cells = []
    for row in rows:
        cost = row.cost
        ours = {s.source: s.per_day.requests for s in cost.ours}
        theirs = {s.source: s.per_day.requests for s in cost.slatedb_defaults}
        cells.append(
            [
                row.database,
                row.objects,
                f"{ours['sensor_polls']} + {ours['sensor_lists']}",
                ours["gc"],
                ours["writer_polls"],
                cost.per_day(cost.ours).requests,
                f"{cost.dollars_per_month:.4f}",
                theirs["gc"],
                theirs["compactor_polls"],
                theirs["writer_polls"],
                cost.per_day(cost.slatedb_defaults).requests,
                f"{cost.slatedb_dollars_per_month:.4f}",
            ]
        )
    return markdown_table(header, cells, "lr" + "r" * 10)


def idle_requests_on_s3(seconds: float) -> dict[str, dict[str, float]]:
    """Re-measures the per-pass constants of slate_ops.admin.cost at the HTTP endpoint (moto behind
    :class:`LatencyProxy`, no delay): requests per second of an idle writer of each engine with
    default options, and one SlateDB ``run_gc_once`` with default options. Needs the ``slatedb``
    binding; returns ``{what: {kind: n}}``."""
    sdb = load_slatedb()
    if sdb is None:
        raise SystemExit("--idle-seconds needs the slatedb binding: pip install -e '.[bench]'")
    server, endpoint = start_moto()
    proxy = LatencyProxy(endpoint, 0).start()
    try:
        bucket = new_bucket(endpoint)
        with Db.open("db", ours_store(proxy.endpoint, bucket, "ours")) as db:
            for i in range(100):
                db.put(b"k%d" % i, b"v")
            db.flush()
            db.flush_memtable()
            time.sleep(2)
            proxy.reset()
            time.sleep(seconds)
            ours = {kind: n / seconds for kind, n in proxy.kinds.items()}

        async def theirs() -> tuple[dict[str, float], dict[str, float]]:
            store = slatedb_store(sdb, proxy.endpoint, bucket)
            db = await sdb.DbBuilder("theirs", store).build()
            for i in range(100):
                await db.put(b"k%d" % i, b"v")
            await db.flush()
            await asyncio.sleep(2)
            proxy.reset()
            await asyncio.sleep(seconds)
            idle = {kind: n / seconds for kind, n in proxy.kinds.items()}
            await db.shutdown()
            admin_ = sdb.AdminBuilder("theirs", store).build()
            proxy.reset()
            await admin_.run_gc_once(None)
            return idle, {kind: float(n) for kind, n in proxy.kinds.items()}

        idle, gc_pass = asyncio.run(theirs())
    finally:
        proxy.stop()
        server.stop()
    return {
        "slate_ops idle writer, per second": ours,
        "SlateDB idle writer (embedded compactor), per second": idle,
        "SlateDB run_gc_once (default options), per pass": gc_pass,
    }


def idle_table(measured: dict[str, dict[str, float]]) -> str:
    kinds = ("LIST", "GET", "HEAD", "PUT", "DELETE")
    cells = [[what, *(f"{counts.get(k, 0):.2f}" for k in kinds)] for what, counts in measured.items()]
    recorded = [
        ("recorded: WRITER_POLL", cost_model.WRITER_POLL),
        ("recorded: SLATEDB_WRITER_POLL + SLATEDB_COMPACTOR_POLL / 5 s", None),
        ("recorded: SLATEDB_GC_PASS", cost_model.SLATEDB_GC_PASS),
    ]
    for what, counts in recorded:
        if counts is None:
            per_s = cost_model.SLATEDB_WRITER_POLL.get + cost_model.SLATEDB_COMPACTOR_POLL.get / 5
            cells.append([what, "0.00", f"{per_s:.2f}", "0.00", "0.00", "0.00"])
        else:
            cells.append([what, *(f"{getattr(counts, k.lower()):.2f}" for k in kinds)])
    return markdown_table(["measured at the endpoint", *kinds], cells, "l" + "r" * len(kinds))


def table(rows: list[Row]) -> str:
    kinds = ("list", "get", "head", "put", "delete")
    header = ["scenario", "objects", "deleted", "requests", *(k.upper() for k in kinds)]
    cells = [
        [row.scenario, row.objects, row.deleted, row.total, *(row.counts.get(k, 0) for k in kinds)]
        for row in rows
    ]
    return markdown_table(header, cells, "lrrr" + "r" * len(kinds))


def describe(rounds: int) -> str:
    return (
        f"A database built by {rounds} rounds of write / WAL flush / L0 flush, 2 s apart, with a compaction "
        "every 8 L0 SSTs; memory store, `CountingStore`, default `GcOptions` (min_age 300 s). LIST counts "
        "one request per 1,000 keys, as S3 bills."
    )


POLLING_NOTE = (
    "Requests per day of keeping that database maintained (slate_ops.admin.cost, counts measured on "
    "it: one sensor observe by GET probe and one by LIST, one GC dry run, its objects per directory). "
    "Ours: 2 manifest sensors every 30 s (a GET probe of the next manifest, a LIST once an hour) + GC "
    "every 6 h + one writer's manifest probe every second (none in the idle row); "
    "SlateDB's defaults: GC every 10 min (its measured pass, plus a LIST per further 1,000 keys of "
    "manifest/, wal/, compacted/, compactions/) + its compactor's polls every 5 s + one writer's every "
    "second (measured at the endpoint: `--idle-seconds`). S3 Standard us-east-1 prices."
)


def results_text(rows: list[Row], polling: list[PollingRow] | None = None) -> str:
    """What a run prints: the GC table, then (given) the requests per day per database."""
    text = f"{table(rows)}\n"
    if polling:
        text += f"\n## Requests per day per database\n\n{POLLING_NOTE}\n\n{polling_table(polling)}\n"
    return text


def report_head(rounds: int) -> str:
    """The results file's title and what was measured."""
    return f"# GC requests per run (benchmarks/bench_gc.py)\n\n{describe(rounds)}\n\n"


def render_report(rows: list[Row], rounds: int, polling: list[PollingRow] | None = None) -> str:
    """The results file: :func:`report_head`, then :func:`results_text`."""
    return report_head(rounds) + results_text(rows, polling)


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__, RESULTS, quick="60 rounds")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="rounds of writes (default: %(default)s)")
    parser.add_argument(
        "--idle-seconds",
        type=float,
        default=0,
        help="also re-measure the recorded SlateDB constants on moto for this long (needs slatedb)",
    )
    args = parser.parse_args(argv)
    rounds = 60 if args.quick else args.rounds
    rows = run_scenarios(rounds)
    polling = polling_costs(rounds)
    printed = results_text(rows, polling)
    if args.idle_seconds > 0:
        idle = idle_table(idle_requests_on_s3(args.idle_seconds))
        printed += f"\n## Per-pass constants, re-measured\n\n{idle}\n"
    publish(printed, output(args), report_head(rounds) + printed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
