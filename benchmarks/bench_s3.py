"""slate_ops vs SlateDB on S3 with real latency (issue 15): moto behind a latency proxy.

Every measured request goes through :class:`benchmarks.latency_proxy.LatencyProxy`, which adds a
fixed delay (+20 or +50 ms; the reopen also +0 ms) to each request before forwarding it to a moto
S3 server on loopback (in a child process, like a remote server: its request handling does not
take this process's GIL), and counts the requests. Both engines run in the same process on the same
proxy: slate_ops with its default options, SlateDB through its Python binding (``slatedb`` 0.17.0,
an ``ObjectStoreBuilder(S3)`` store) with its defaults. Figures (one function each):

* **durable puts** — one writer, each ``put(..., await_durable=True)`` (SlateDB:
  ``await (await db.put(k, v)).await_durable()``): latency p50/p99, puts/s, requests per 1,000
  puts; and the same with :data:`WRITERS` concurrent writers on one database (how a user gets
  durable throughput).
* **non-durable puts** — one writer, plain puts then one flush: puts/s and requests per 1,000 puts
  (the WAL flush interval, 100 ms by default, decides how many WAL SSTs they make).
* **cold random gets** — a database loaded straight into moto as several L0 SSTs, reopened through
  the proxy (a fresh writer, empty caches), then random keys read one after another: latency
  p50/p99 and requests per get.
* **full scan after reopen** — the same database, reopened again (cold), scanned whole: rows/s
  (SlateDB also with read-ahead, not its default, at the largest delay).
* **reader open + full scan** (at the largest delay) — a reader (``DbReader``; SlateDB's
  ``DbReaderBuilder``) opened through the proxy and a full scan, timed together (SlateDB reads its
  SSTs' metadata while opening, slate_ops while scanning): on SSTs whose key ranges overlap (L0
  SSTs of shuffled keys) and on adjacent ones (slate_ops: one sorted run of that many SSTs made by
  its compactor; SlateDB: L0 SSTs of adjacent key ranges — its binding compacts only with a
  compactor running); SlateDB with its default scan options and with read-ahead.
* **reopen after N WAL SSTs** — a writer leaves ``N`` WAL SSTs (one put and one WAL flush each; it
  never flushes to L0), and ``Db.open`` replays them: wall time with the WAL fetched one segment at
  a time and 16 at a time (``slate_ops.engine.wal_store.WAL_FETCH_PARALLELISM``), requests by method.

The S3 clients are built before anything is timed (slate_ops shares one boto3 client per endpoint:
slate_ops.objstore.s3.shared_s3_client; its ~0.2 s build is reported apart).

Run: ``python -m benchmarks.bench_s3`` (``--quick``: small sizes, +50 ms only)
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import math
import random
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.latency_proxy import LatencyProxy
from benchmarks.reporting import argument_parser, markdown_table, output, publish
from benchmarks.s3_fixtures import (
    KEYS,
    REGION,
    load_slatedb,
    new_bucket,
    ours_store,
    slatedb_store,
    start_moto,
    start_moto_process,
)
from benchmarks.suite import Options, Outcome, Row, Target, command, package_version, row
from slate_ops.compaction import CompactorOptions
from slate_ops.compaction.compactor import Compactor
from slate_ops.engine import Db, DbOptions, DbReader, wal_store
from slate_ops.objstore.base import PutMode
from slate_ops.objstore.s3 import make_s3_client

__all__ = [
    "KEYS",
    "REGION",
    "Measured",
    "Reopen",
    "Sizes",
    "load_slatedb",
    "new_bucket",
    "run",
    "slatedb_store",
    "start_moto",
]

RESULTS = Path(__file__).parent / "results" / "s3.md"
DB_PATH = "db"
VALUE_SIZE = 100
WRITERS = 8
SCAN_BATCH = 1000  # SlateDB's iterator is drained with next_batch(SCAN_BATCH), its fastest path

OURS = "slate_ops"
THEIRS = "slatedb (binding)"
BOUND = "bound: one bare PUT per put"
BOUND_PUT_BYTES = 1024  # about one round's WAL SST of a few 100-byte puts
DURABLE = "durable puts, 1 writer"
DURABLE_CONCURRENT = f"durable puts, {WRITERS} writers"
NON_DURABLE = "non-durable puts, 1 writer"
COLD_GETS = "cold random gets"
SCAN = "full scan after reopen"
OPEN_SCAN_OVERLAPPING = "reader open + full scan, overlapping SSTs"
OPEN_SCAN_ADJACENT = "reader open + full scan, adjacent SSTs"
OPEN_SCANS = (OPEN_SCAN_OVERLAPPING, OPEN_SCAN_ADJACENT)
FIGURES = (DURABLE, DURABLE_CONCURRENT, NON_DURABLE, COLD_GETS, SCAN, *OPEN_SCANS)
SCAN_FIGURES = (SCAN, *OPEN_SCANS)
# SlateDB's scans read one block (4 KiB) per GET, one at a time, unless told otherwise; this is what
# a user who tunes them gets (reported beside the default, at the largest delay only).
READ_AHEAD_BYTES = 4 * 1024 * 1024
FETCH_TASKS = 8
THEIRS_READ_AHEAD = f"slatedb, read_ahead_bytes {READ_AHEAD_BYTES >> 20} MiB x {FETCH_TASKS} tasks"


@dataclass(frozen=True)
class Sizes:
    wal_ssts: int = 500  # reopen: WAL SSTs replayed
    durable_puts: int = 200  # one writer, each awaited
    concurrent_puts: int = 800  # spread over WRITERS writers
    puts: int = 20_000  # non-durable
    keys: int = 20_000  # the database of the gets and the scan
    l0_ssts: int = 4  # ... loaded as this many L0 SSTs of adjacent key ranges
    gets: int = 300


QUICK = Sizes(wal_ssts=30, durable_puts=20, concurrent_puts=40, puts=5_000, keys=2_000, l0_ssts=2, gets=40)


@dataclass(frozen=True)
class Reopen:
    engine: str
    delay_ms: int
    wal_ssts: int
    seconds: float
    requests: dict[str, int]
    wal_gets: int


@dataclass(frozen=True)
class Measured:
    """One figure of one engine at one delay: ``ops`` puts, gets or scanned rows in ``seconds``."""

    figure: str
    engine: str
    delay_ms: int
    ops: int
    seconds: float
    requests: dict[str, int]
    latencies: tuple[float, ...] = ()  # seconds per operation, where each is timed

    @property
    def per_second(self) -> float:
        return self.ops / self.seconds

    @property
    def total_requests(self) -> int:
        return sum(self.requests.values())

    @property
    def requests_per_unit(self) -> float:
        """Requests per 1,000 puts, per get, or per scan."""
        if self.figure in SCAN_FIGURES:
            return self.total_requests
        return self.total_requests * (1 if self.figure == COLD_GETS else 1000) / self.ops

    def percentile_ms(self, q: float) -> float | None:
        """The nearest-rank ``q`` percentile (0 < q <= 100) of the latencies, in ms."""
        if not self.latencies:
            return None
        ordered = sorted(self.latencies)
        return 1000 * ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def key(i: int) -> bytes:
    return f"key{i:08d}".encode()


def values(n: int, seed: int = 15) -> list[bytes]:
    """``n`` incompressible values of VALUE_SIZE bytes, the same for both engines."""
    rng = random.Random(seed)
    return [rng.randbytes(VALUE_SIZE) for _ in range(n)]


def _no_background() -> DbOptions:
    # Loading and the reopen's writer: WAL flushes are explicit, no manifest polls meanwhile.
    return DbOptions.model_validate({"wal_flush_interval": "1h", "manifest_poll_interval": "1h"})


# --- slate_ops: the figures -------------------------------------------------------------------------


def timed_closed_loop(put: Callable[[int], object], n: int, writers: int) -> tuple[float, list[float]]:
    """Puts ``0..n-1`` by ``writers`` threads (thread ``w`` takes ``w, w + writers, ...``), each put
    after the previous one returned: the wall time and each put's latency. A thread's failure is
    raised here (a thread that stopped early would make the rate look higher)."""
    latencies: list[float] = []
    failures: list[BaseException] = []
    lock = threading.Lock()

    def write(indexes: range) -> None:
        mine = []
        try:
            for i in indexes:
                started = time.perf_counter()
                put(i)
                mine.append(time.perf_counter() - started)
        except BaseException as error:
            failures.append(error)
        with lock:
            latencies.extend(mine)

    parts = [range(w, n, writers) for w in range(writers)]
    started = time.perf_counter()
    if writers == 1:
        write(parts[0])
    else:
        threads = [threading.Thread(target=write, args=(part,)) for part in parts]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    seconds = time.perf_counter() - started
    if failures:
        raise failures[0]
    return seconds, latencies


def durable_puts_ours(proxy: LatencyProxy, bucket: str, n: int, writers: int = 1) -> Measured:
    """``n`` puts with ``await_durable=True`` by ``writers`` threads on one writer (default options)."""
    with Db.open(DB_PATH, ours_store(proxy.endpoint, bucket, f"ours-durable-{writers}")) as db:
        data = values(n)
        proxy.reset()
        seconds, latencies = timed_closed_loop(
            lambda i: db.put(key(i), data[i], await_durable=True), n, writers
        )
        counts = proxy.counts
        assert db.get(key(n - 1)) == data[n - 1]
    figure = DURABLE if writers == 1 else DURABLE_CONCURRENT
    return Measured(figure, OURS, _ms(proxy), n, seconds, counts, tuple(latencies))


def durable_puts_bound(proxy: LatencyProxy, bucket: str, n: int, writers: int = 1) -> Measured:
    """The ceiling of any engine's durable puts here: ``n`` bare create-if-absent PUTs of one small WAL
    SST's size by ``writers`` closed-loop threads through slate_ops' S3 client, nothing else per put (no
    grouping, no confirmation, no manifest). A durable put cannot be acknowledged before its data's
    PUT ends, so no design of the WAL reaches more puts/s than this on this endpoint and delay."""
    store = ours_store(proxy.endpoint, bucket, f"bound-{writers}-{_ms(proxy)}")
    body = random.Random(23).randbytes(BOUND_PUT_BYTES)
    proxy.reset()
    seconds, latencies = timed_closed_loop(
        lambda i: store.put(f"wal/{i:020d}.sst", body, PutMode.create()), n, writers
    )
    figure = DURABLE if writers == 1 else DURABLE_CONCURRENT
    return Measured(figure, BOUND, _ms(proxy), n, seconds, proxy.counts, tuple(latencies))


def puts_ours(proxy: LatencyProxy, bucket: str, n: int) -> Measured:
    """``n`` plain puts (durable later, by the background WAL flush), then one ``flush()``."""
    data = values(n)
    with Db.open(DB_PATH, ours_store(proxy.endpoint, bucket, "ours-puts")) as db:
        proxy.reset()
        started = time.perf_counter()
        for i in range(n):
            db.put(key(i), data[i])
        db.flush()
        seconds = time.perf_counter() - started
        counts = proxy.counts
    return Measured(NON_DURABLE, OURS, _ms(proxy), n, seconds, counts)


def load_ours(endpoint: str, bucket: str, n: int, l0_ssts: int) -> None:
    """``n`` keys straight into moto, in key order, as ``l0_ssts`` L0 SSTs (no WAL left to replay)."""
    data = values(n)
    chunk = math.ceil(n / l0_ssts)
    with Db.open(DB_PATH, ours_store(endpoint, bucket, "ours-read"), _no_background()) as db:
        for i in range(n):
            db.put(key(i), data[i])
            if (i + 1) % chunk == 0 or i == n - 1:
                db.flush_memtable()


def gets_ours(proxy: LatencyProxy, bucket: str, keys: list[int]) -> Measured:
    """Random gets, one after another, on a writer freshly opened through the proxy (cold caches)."""
    data = values(max(keys) + 1)
    latencies = []
    with Db.open(DB_PATH, ours_store(proxy.endpoint, bucket, "ours-read")) as db:
        proxy.reset()
        started = time.perf_counter()
        for i in keys:
            begun = time.perf_counter()
            found = db.get(key(i))
            latencies.append(time.perf_counter() - begun)
            assert found == data[i], f"get of {key(i)!r}"
        seconds = time.perf_counter() - started
        counts = proxy.counts
    return Measured(COLD_GETS, OURS, _ms(proxy), len(keys), seconds, counts, tuple(latencies))


def scan_ours(proxy: LatencyProxy, bucket: str, n: int) -> Measured:
    """A full scan on a writer freshly opened through the proxy."""
    with Db.open(DB_PATH, ours_store(proxy.endpoint, bucket, "ours-read")) as db:
        proxy.reset()
        started = time.perf_counter()
        rows = sum(1 for _ in db.scan())
        seconds = time.perf_counter() - started
        counts = proxy.counts
    assert rows == n, f"scanned {rows} rows of {n}"
    return Measured(SCAN, OURS, _ms(proxy), rows, seconds, counts)


def shuffled(n: int) -> list[int]:
    """The key numbers ``0..n-1`` in a fixed random order: L0 SSTs loaded in it overlap."""
    order = list(range(n))
    random.Random(n).shuffle(order)
    return order


def load_ours_overlapping(endpoint: str, bucket: str, n: int, l0_ssts: int) -> None:
    """``n`` keys in shuffled order as ``l0_ssts`` L0 SSTs, each spanning the whole key range."""
    data = values(n)
    chunk = math.ceil(n / l0_ssts)
    with Db.open(DB_PATH, ours_store(endpoint, bucket, "ours-overlapping"), _no_background()) as db:
        for count, i in enumerate(shuffled(n), 1):
            db.put(key(i), data[i])
            if count % chunk == 0 or count == n:
                db.flush_memtable()


def load_ours_sorted_run(endpoint: str, bucket: str, n: int, ssts: int) -> None:
    """``n`` keys compacted into one sorted run of about ``ssts`` SSTs of adjacent key ranges."""
    data = values(n)
    store = ours_store(endpoint, bucket, "ours-run")
    with Db.open(DB_PATH, store, _no_background()) as db:
        for i in range(n):
            db.put(key(i), data[i])
        db.flush_memtable()
    target = math.ceil(n * (VALUE_SIZE + 12) / ssts)
    compactor = Compactor(DB_PATH, store, CompactorOptions(target_sst_bytes=target))
    compactor.run_once(full=True)
    compactor.close()  # its "completed" record lands before the measurements start


def open_scan_ours(proxy: LatencyProxy, bucket: str, n: int, figure: str) -> Measured:
    """A reader opened through the proxy, then a full scan: timed together."""
    root = "ours-overlapping" if figure == OPEN_SCAN_OVERLAPPING else "ours-run"
    store = ours_store(proxy.endpoint, bucket, root)
    proxy.reset()
    started = time.perf_counter()
    with DbReader.open(DB_PATH, store) as reader:
        rows = sum(1 for _ in reader.scan())
        seconds = time.perf_counter() - started
        counts = proxy.counts
    assert rows == n, f"scanned {rows} rows of {n}"
    return Measured(figure, OURS, _ms(proxy), rows, seconds, counts)


def write_ours(endpoint: str, bucket: str, n: int) -> None:
    """``n`` WAL SSTs of one put each; the writer closes without an L0 flush."""
    with Db.open(DB_PATH, ours_store(endpoint, bucket, "ours"), _no_background()) as db:
        for i in range(n):
            db.put(f"key{i:06d}".encode(), b"v" * 100)
            db.flush()


def reopen_ours(proxy: LatencyProxy, bucket: str, n: int, parallelism: int) -> Reopen:
    store = ours_store(proxy.endpoint, bucket, "ours")
    saved = wal_store.WAL_FETCH_PARALLELISM
    wal_store.WAL_FETCH_PARALLELISM = parallelism
    try:
        proxy.reset()
        started = time.perf_counter()
        db = Db.open(DB_PATH, store, _no_background())
        seconds = time.perf_counter() - started
        counts, wal_gets = proxy.counts, proxy.wal_gets
        assert db.get(f"key{n - 1:06d}".encode()) == b"v" * 100
        db.close()
    finally:
        wal_store.WAL_FETCH_PARALLELISM = saved
    name = f"slate_ops, {parallelism} at a time" if parallelism > 1 else "slate_ops, one at a time"
    return Reopen(name, _ms(proxy), n, seconds, counts, wal_gets)


def _ms(proxy: LatencyProxy) -> int:
    return round(proxy.delay * 1000)


# --- SlateDB's binding: the same figures (async: each run with asyncio.run) -------------------------


async def durable_puts_theirs(
    sdb: Any, proxy: LatencyProxy, bucket: str, n: int, writers: int = 1
) -> Measured:
    db = await sdb.DbBuilder(f"theirs-durable-{writers}", slatedb_store(sdb, proxy.endpoint, bucket)).build()
    data = values(n)
    latencies: list[float] = []

    async def write(indexes: range) -> None:
        for i in indexes:
            started = time.perf_counter()
            handle = await db.put(key(i), data[i])
            await handle.await_durable()
            latencies.append(time.perf_counter() - started)

    proxy.reset()
    started = time.perf_counter()
    await asyncio.gather(*(write(range(w, n, writers)) for w in range(writers)))
    seconds = time.perf_counter() - started
    counts = proxy.counts
    assert await db.get(key(n - 1)) == data[n - 1]
    await db.shutdown()
    figure = DURABLE if writers == 1 else DURABLE_CONCURRENT
    return Measured(figure, THEIRS, _ms(proxy), n, seconds, counts, tuple(latencies))


async def puts_theirs(sdb: Any, proxy: LatencyProxy, bucket: str, n: int) -> Measured:
    db = await sdb.DbBuilder("theirs-puts", slatedb_store(sdb, proxy.endpoint, bucket)).build()
    data = values(n)
    put = db.put
    proxy.reset()
    started = time.perf_counter()
    for i in range(n):
        await put(key(i), data[i])
    await db.flush()
    seconds = time.perf_counter() - started
    counts = proxy.counts
    await db.shutdown()
    return Measured(NON_DURABLE, THEIRS, _ms(proxy), n, seconds, counts)


async def load_theirs(sdb: Any, endpoint: str, bucket: str, n: int, l0_ssts: int) -> None:
    db = await sdb.DbBuilder("theirs-read", slatedb_store(sdb, endpoint, bucket)).build()
    data = values(n)
    chunk = math.ceil(n / l0_ssts)
    memtable = sdb.FlushOptions(flush_type=sdb.FlushType.MEM_TABLE)
    for i in range(n):
        await db.put(key(i), data[i])
        if (i + 1) % chunk == 0 or i == n - 1:
            await db.flush_with_options(memtable)
    await db.shutdown()


async def gets_theirs(sdb: Any, proxy: LatencyProxy, bucket: str, keys: list[int]) -> Measured:
    db = await sdb.DbBuilder("theirs-read", slatedb_store(sdb, proxy.endpoint, bucket)).build()
    data = values(max(keys) + 1)
    latencies = []
    proxy.reset()
    started = time.perf_counter()
    for i in keys:
        begun = time.perf_counter()
        found = await db.get(key(i))
        latencies.append(time.perf_counter() - begun)
        assert found == data[i], f"get of {key(i)!r}"
    seconds = time.perf_counter() - started
    counts = proxy.counts
    await db.shutdown()
    return Measured(COLD_GETS, THEIRS, _ms(proxy), len(keys), seconds, counts, tuple(latencies))


async def scan_theirs(
    sdb: Any, proxy: LatencyProxy, bucket: str, n: int, read_ahead: bool = False
) -> Measured:
    """SlateDB's full scan, drained in batches; ``read_ahead``: with READ_AHEAD_BYTES and FETCH_TASKS
    instead of its default ScanOptions (read_ahead_bytes 1, max_fetch_tasks 1)."""
    db = await sdb.DbBuilder("theirs-read", slatedb_store(sdb, proxy.endpoint, bucket)).build()
    proxy.reset()
    started = time.perf_counter()
    rows = await _drain_scan(sdb, db, read_ahead)
    seconds = time.perf_counter() - started
    counts = proxy.counts
    await db.shutdown()
    assert rows == n, f"scanned {rows} rows of {n}"
    return Measured(SCAN, THEIRS_READ_AHEAD if read_ahead else THEIRS, _ms(proxy), rows, seconds, counts)


async def load_theirs_overlapping(sdb: Any, endpoint: str, bucket: str, n: int, l0_ssts: int) -> None:
    db = await sdb.DbBuilder("theirs-overlapping", slatedb_store(sdb, endpoint, bucket)).build()
    data = values(n)
    chunk = math.ceil(n / l0_ssts)
    memtable = sdb.FlushOptions(flush_type=sdb.FlushType.MEM_TABLE)
    for count, i in enumerate(shuffled(n), 1):
        await db.put(key(i), data[i])
        if count % chunk == 0 or count == n:
            await db.flush_with_options(memtable)
    await db.shutdown()


async def open_scan_theirs(
    sdb: Any, proxy: LatencyProxy, bucket: str, n: int, figure: str, read_ahead: bool
) -> Measured:
    """SlateDB's reader opened through the proxy, then a full scan drained in batches: timed together."""
    path = "theirs-overlapping" if figure == OPEN_SCAN_OVERLAPPING else "theirs-read"
    store = slatedb_store(sdb, proxy.endpoint, bucket)
    proxy.reset()
    started = time.perf_counter()
    reader = await sdb.DbReaderBuilder(path, store).build()
    rows = await _drain_scan(sdb, reader, read_ahead)
    seconds = time.perf_counter() - started
    counts = proxy.counts
    await reader.shutdown()
    assert rows == n, f"scanned {rows} rows of {n}"
    return Measured(figure, THEIRS_READ_AHEAD if read_ahead else THEIRS, _ms(proxy), rows, seconds, counts)


async def _drain_scan(sdb: Any, db: Any, read_ahead: bool) -> int:
    """A full scan of SlateDB's ``db`` (a Db or a DbReader), drained in batches: the rows it gave."""
    everything = sdb.KeyRange(start=None, start_inclusive=False, end=None, end_inclusive=False)
    if read_ahead:
        iterator = await db.scan_with_options(everything, _read_ahead_options(sdb))
    else:
        iterator = await db.scan(everything)
    rows = 0
    while True:
        batch = await iterator.next_batch(SCAN_BATCH)
        rows += len(batch)
        if len(batch) < SCAN_BATCH:
            return rows


def _read_ahead_options(sdb: Any) -> Any:
    return sdb.ScanOptions(
        durability_filter=sdb.DurabilityLevel.MEMORY,
        dirty=False,
        read_ahead_bytes=READ_AHEAD_BYTES,
        cache_blocks=False,
        max_fetch_tasks=FETCH_TASKS,
    )


async def _write_slatedb(sdb: Any, endpoint: str, bucket: str, n: int) -> Any:
    db = await sdb.DbBuilder("theirs", slatedb_store(sdb, endpoint, bucket)).build()
    wal = sdb.FlushOptions(flush_type=sdb.FlushType.WAL)
    for i in range(n):
        await db.put(f"key{i:06d}".encode(), b"v" * 100)
        await db.flush_with_options(wal)
    # No shutdown: SlateDB's shutdown flushes the memtable to L0, after which a reopen replays no
    # WAL. The handle is returned and kept alive (the next open fences it), like a writer that died.
    return db


async def _reopen_slatedb(sdb: Any, proxy: LatencyProxy, bucket: str, n: int, handles: list[Any]) -> Reopen:
    store = slatedb_store(sdb, proxy.endpoint, bucket)
    proxy.reset()
    started = time.perf_counter()
    db = await sdb.DbBuilder("theirs", store).build()
    seconds = time.perf_counter() - started
    counts, wal_gets = proxy.counts, proxy.wal_gets
    assert await db.get(f"key{n - 1:06d}".encode()) == b"v" * 100
    # No shutdown either (it would flush to L0): the next reopen replays the same WAL SSTs.
    handles.append(db)
    return Reopen(THEIRS, _ms(proxy), n, seconds, counts, wal_gets)


# --- the run ----------------------------------------------------------------------------------------


@dataclass
class S3Results:
    reopens: list[Reopen]
    figures: list[Measured]
    notes: dict[str, str]

    def find(self, figure: str, engine: str, delay_ms: int) -> Measured | None:
        return next(
            (m for m in self.figures if (m.figure, m.engine, m.delay_ms) == (figure, engine, delay_ms)), None
        )


def measure_figures(
    endpoint: str,
    bucket: str,
    sizes: Sizes,
    delay: float,
    sdb: Any | None,
    progress: Callable[[str], None] = lambda _: None,
    read_ahead: bool = False,
) -> list[Measured]:
    """Puts, cold gets and the scan of both engines at one delay; each engine on a proxy of its own
    (a fresh one per figure, so no background request of an earlier handle is counted).
    ``read_ahead``: also SlateDB's scan with read-ahead (THEIRS_READ_AHEAD)."""
    ms = round(delay * 1000)
    found: list[Measured] = []
    keys = random.Random(ms).sample(range(sizes.keys), min(sizes.gets, sizes.keys))

    def ours(measure: Callable[..., Measured], *args: Any) -> None:
        progress(f"+{ms} ms: {measure.__name__}")
        with LatencyProxy(endpoint, delay) as proxy:
            ours_store(proxy.endpoint, bucket, "build-the-client")
            found.append(measure(proxy, bucket, *args))

    def theirs(measure: Callable[..., Coroutine[Any, Any, Measured]], *args: Any) -> None:
        if sdb is not None:
            progress(f"+{ms} ms: {measure.__name__}")
            with LatencyProxy(endpoint, delay) as proxy:
                found.append(asyncio.run(measure(sdb, proxy, bucket, *args)))

    for n, writers in ((sizes.durable_puts, 1), (sizes.concurrent_puts, WRITERS)):
        ours(durable_puts_ours, n, writers)
        theirs(durable_puts_theirs, n, writers)
        ours(durable_puts_bound, n, writers)
    ours(puts_ours, sizes.puts)
    theirs(puts_theirs, sizes.puts)
    ours(gets_ours, keys)
    theirs(gets_theirs, keys)
    ours(scan_ours, sizes.keys)
    theirs(scan_theirs, sizes.keys)
    if read_ahead:
        theirs(scan_theirs, sizes.keys, True)
        for figure in OPEN_SCANS:  # reader open + full scan: at the largest delay only
            ours(open_scan_ours, sizes.keys, figure)
            theirs(open_scan_theirs, sizes.keys, figure, False)
            theirs(open_scan_theirs, sizes.keys, figure, True)
    return found


def run(
    sizes: Sizes,
    delays: tuple[float, ...],
    reopen_delays: tuple[float, ...] | None = None,
    use_slatedb: bool = True,
    progress: Callable[[str], None] = lambda _: None,
) -> S3Results:
    """Every figure at each of ``delays`` (the reopen at ``reopen_delays``, by default the same)."""
    server, endpoint = start_moto_process()
    notes: dict[str, str] = {}
    reopens: list[Reopen] = []
    figures: list[Measured] = []
    handles: list[Any] = []  # SlateDB handles never shut down (see _write_slatedb), kept until the end
    sdb = None
    try:
        started = time.perf_counter()
        make_s3_client(endpoint_url=endpoint, region=REGION, **KEYS)
        notes["client build"] = f"{time.perf_counter() - started:.3f} s (once per process and endpoint)"
        bucket = new_bucket(endpoint)
        progress(f"loading: {sizes.wal_ssts} WAL SSTs and {sizes.keys:,} keys in {sizes.l0_ssts} L0 SSTs")
        write_ours(endpoint, bucket, sizes.wal_ssts)
        load_ours(endpoint, bucket, sizes.keys, sizes.l0_ssts)
        load_ours_overlapping(endpoint, bucket, sizes.keys, sizes.l0_ssts)
        load_ours_sorted_run(endpoint, bucket, sizes.keys, sizes.l0_ssts)
        sdb = load_slatedb() if use_slatedb else None
        if sdb is not None:
            try:
                handles.append(asyncio.run(_write_slatedb(sdb, endpoint, bucket, sizes.wal_ssts)))
                asyncio.run(load_theirs(sdb, endpoint, bucket, sizes.keys, sizes.l0_ssts))
                asyncio.run(load_theirs_overlapping(sdb, endpoint, bucket, sizes.keys, sizes.l0_ssts))
            except Exception as exc:  # the binding's errors are its own types
                notes["slatedb"] = f"could not write through its S3 store: {type(exc).__name__}: {exc}"
                sdb = None
        elif use_slatedb:
            notes["slatedb"] = "not installed (pip install -e '.[bench]')"
        else:
            notes["slatedb"] = "not run (--no-slatedb)"
        for delay in delays:
            figures += measure_figures(endpoint, bucket, sizes, delay, sdb, progress, delay == max(delays))
        for delay in delays if reopen_delays is None else reopen_delays:
            progress(f"+{delay * 1000:.0f} ms: reopens")
            with LatencyProxy(endpoint, delay) as proxy:
                ours_store(proxy.endpoint, bucket, "ours")  # build the client
                for parallelism in (1, wal_store.WAL_FETCH_PARALLELISM):
                    reopens.append(reopen_ours(proxy, bucket, sizes.wal_ssts, parallelism))
                if sdb is not None:
                    reopens.append(asyncio.run(_reopen_slatedb(sdb, proxy, bucket, sizes.wal_ssts, handles)))
    finally:
        server.stop()
        handles.clear()
    if sdb is not None:
        notes["slatedb"] = (
            f"slatedb {importlib.metadata.version('slatedb')} via ObjectStoreBuilder(S3), default settings; "
            "for the reopen its writer flushes each put to the WAL (FlushType.WAL) and is never shut "
            "down (shutdown flushes to L0), so each of its reopens replays the WAL like ours"
        )
    return S3Results(reopens, figures, notes)


# --- reporting --------------------------------------------------------------------------------------


def _by_method(requests: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(requests.items()))


def render_reopens(results: list[Reopen]) -> str:
    rows = [
        [
            r.engine,
            r.delay_ms,
            r.wal_ssts,
            f"{r.seconds:.2f}",
            sum(r.requests.values()),
            r.wal_gets,
            _by_method(r.requests),
        ]
        for r in results
    ]
    return markdown_table(
        ["engine", "delay (ms)", "WAL SSTs", "reopen (s)", "requests", "WAL GETs", "by method"],
        rows,
        "lrrrrrl",
    )


def _rate(m: Measured) -> str:
    unit = "rows/s" if m.figure in SCAN_FIGURES else "gets/s" if m.figure == COLD_GETS else "puts/s"
    return f"{m.per_second:,.0f} {unit}"


def _latency(m: Measured) -> str:
    p50, p99 = m.percentile_ms(50), m.percentile_ms(99)
    return "—" if p50 is None or p99 is None else f"{p50:.2f} / {p99:.1f}"


def render_figures(figures: list[Measured]) -> str:
    rows = [
        [
            m.figure,
            m.engine,
            m.delay_ms,
            f"{m.ops:,}",
            f"{m.seconds:.2f}",
            _rate(m),
            _latency(m),
            f"{m.requests_per_unit:,.2f}",
            _by_method(m.requests),
        ]
        for m in figures
    ]
    return markdown_table(
        [
            "figure",
            "engine",
            "delay (ms)",
            "ops",
            "time (s)",
            "rate",
            "p50 / p99 (ms)",
            "requests per 1,000 puts / per get / per scan",
            "requests by method",
        ],
        rows,
        "llrrrrrrl",
    )


def render(results: S3Results) -> str:
    notes = "\n".join(f"* {k}: {v}" for k, v in results.notes.items())
    return render_figures(results.figures) + "\n\n" + render_reopens(results.reopens) + "\n\n" + notes + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__, RESULTS, quick="small sizes at +50 ms only")
    args = parser.parse_args(argv)
    results = run(QUICK, (0.05,)) if args.quick else run(Sizes(), (0.02, 0.05), (0.0, 0.02, 0.05))
    publish(render(results), output(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())


# --- the summary rows of python -m benchmarks (suite.collect_s3) ------------------------------------

_WHAT = {DURABLE: "1 writer", DURABLE_CONCURRENT: f"{WRITERS} writers on one database"}


def _pair(
    results: S3Results, figure: str, delay_ms: int, theirs: str = THEIRS
) -> tuple[Measured | None, Measured | None]:
    return results.find(figure, OURS, delay_ms), results.find(figure, theirs, delay_ms)


def figure_rows(results: S3Results, sizes: Sizes, delays_ms: list[int], label: str) -> list[Row]:
    """The summary rows of the puts, gets and scan; latency targets are on ours / SlateDB's."""

    def add(
        figure: str,
        delay_ms: int,
        metric: str,
        unit: str,
        value: Callable[[Measured], float | None],
        target: Target | None,
        note: str,
        reference: str = THEIRS,
    ) -> None:
        ours, theirs = _pair(results, figure, delay_ms, reference)
        rows.append(
            row(
                "s3",
                metric,
                unit,
                None if ours is None else value(ours),
                None if theirs is None else value(theirs),
                label if reference == THEIRS else f"{label}, read-ahead",
                target,
                note,
            )
        )

    def p(q: float) -> Callable[[Measured], float | None]:
        return lambda m: m.percentile_ms(q)

    def rate(m: Measured) -> float:
        return m.per_second

    def bound_rows(ms: int, n: int) -> None:
        """The ceiling of any WAL design (BOUND) beside SlateDB and beside ours: whether the 8-writer
        target can be met at all at this delay, and how near to it slate_ops is."""
        bound = results.find(DURABLE_CONCURRENT, BOUND, ms)
        what = f"{n} create-if-absent PUTs of {BOUND_PUT_BYTES} B by {WRITERS} closed-loop threads, no more"
        for metric, ours, reference, reference_label in (
            ("the bound of any WAL vs SlateDB", bound, results.find(DURABLE_CONCURRENT, THEIRS, ms), label),
            ("slate_ops vs the bound", results.find(DURABLE_CONCURRENT, OURS, ms), bound, BOUND),
        ):
            rows.append(
                row(
                    "s3",
                    f"durable puts at +{ms} ms, {WRITERS} writers: {metric}",
                    "puts/s",
                    None if ours is None else ours.per_second,
                    None if reference is None else reference.per_second,
                    reference_label,
                    None,
                    f"{what}; reported",
                )
            )

    rows: list[Row] = []
    at_most, at_least = Target("ratio", "<=", 1), Target("ratio", ">=", 1)
    for ms in delays_ms:
        n, c = sizes.durable_puts, sizes.concurrent_puts
        add(DURABLE, ms, f"durable put p50 at +{ms} ms, 1 writer", "ms", p(50), at_most, f"{n} puts")
        add(
            DURABLE,
            ms,
            f"durable put p99 at +{ms} ms, 1 writer",
            "ms",
            p(99),
            Target("ratio", "<=", 1.5),
            f"{n} puts",
        )
        add(DURABLE, ms, f"durable puts at +{ms} ms, 1 writer", "puts/s", rate, at_least, f"{n} puts")
        add(
            DURABLE_CONCURRENT,
            ms,
            f"durable puts at +{ms} ms, {WRITERS} writers",
            "puts/s",
            rate,
            Target("ratio", ">=", 2.0),  # issue 23; out of reach at +50 ms: see the bound's rows below
            f"{c} puts by {WRITERS} threads (SlateDB: {WRITERS} tasks) on one database",
        )
        bound_rows(ms, c)
        add(
            NON_DURABLE,
            ms,
            f"non-durable puts at +{ms} ms",
            "puts/s",
            rate,
            at_least,
            f"{sizes.puts:,} puts, then one flush",
        )
        add(
            COLD_GETS,
            ms,
            f"cold get p50 at +{ms} ms",
            "ms",
            p(50),
            at_most,
            f"{sizes.gets} random keys of {sizes.keys:,}",
        )
        add(
            COLD_GETS,
            ms,
            f"cold get p99 at +{ms} ms",
            "ms",
            p(99),
            at_most,
            f"{sizes.gets} random keys of {sizes.keys:,}",
        )
        add(
            SCAN,
            ms,
            f"full scan after reopen at +{ms} ms",
            "rows/s",
            rate,
            at_least,
            f"{sizes.keys:,} rows in {sizes.l0_ssts} L0 SSTs",
        )
    ms = max(delays_ms)
    add(
        SCAN,
        ms,
        f"full scan after reopen at +{ms} ms, vs SlateDB with read-ahead",
        "rows/s",
        rate,
        None,
        f"SlateDB's scan with read_ahead_bytes {READ_AHEAD_BYTES >> 20} MiB and max_fetch_tasks "
        f"{FETCH_TASKS} (its default: 1 byte, i.e. one block, and 1); reported",
        THEIRS_READ_AHEAD,
    )
    kinds = {
        OPEN_SCAN_OVERLAPPING: f"{sizes.l0_ssts} L0 SSTs of shuffled keys",
        OPEN_SCAN_ADJACENT: f"ours: a sorted run of ~{sizes.l0_ssts} SSTs; SlateDB: {sizes.l0_ssts} L0 "
        "SSTs of adjacent key ranges (its binding compacts only with a compactor running)",
    }
    for figure in OPEN_SCANS:
        what = f"{sizes.keys:,} rows, {kinds[figure]}; a fresh reader, open and scan timed together"
        add(
            figure,
            ms,
            f"{figure} at +{ms} ms, vs SlateDB with read-ahead",
            "rows/s",
            rate,
            Target("ratio", ">=", 1.5),
            f"{what}; SlateDB with read_ahead_bytes {READ_AHEAD_BYTES >> 20} MiB, "
            f"max_fetch_tasks {FETCH_TASKS}",
            THEIRS_READ_AHEAD,
        )
        add(
            figure,
            ms,
            f"{figure} at +{ms} ms, vs SlateDB's defaults",
            "rows/s",
            rate,
            Target("ratio", ">=", 20),
            f"{what}; SlateDB with its default scan options",
        )
    for figure, what, unit in (
        (DURABLE, "requests per 1,000 durable puts, 1 writer", "requests/1,000 puts"),
        (DURABLE_CONCURRENT, f"requests per 1,000 durable puts, {WRITERS} writers", "requests/1,000 puts"),
        (NON_DURABLE, "requests per 1,000 non-durable puts", "requests/1,000 puts"),
        (COLD_GETS, "requests per cold get", "requests/get"),
        (SCAN, f"requests per full scan of {sizes.keys:,} rows", "requests"),
    ):
        ours, theirs = _pair(results, figure, ms)
        note = f"at +{ms} ms; ours: {_by_method(ours.requests) if ours else '—'}"
        if theirs is not None:
            note += f"; SlateDB: {_by_method(theirs.requests)}"
        add(figure, ms, what, unit, lambda m: m.requests_per_unit, None, note + "; reported")
    return rows


def reopen_rows(results: S3Results, wal_ssts: int, delays_ms: list[int], label: str) -> list[Row]:
    """Reopen time per delay (16 at a time: target within 3x SlateDB at the largest delay) and the
    requests of one reopen at the largest delay."""
    parallel = f"slate_ops, {wal_store.WAL_FETCH_PARALLELISM} at a time"
    goal_ms = max(delays_ms)

    def find(engine: str, delay_ms: int) -> Reopen | None:
        return next((r for r in results.reopens if r.engine == engine and r.delay_ms == delay_ms), None)

    def by_method(r: Reopen) -> str:
        return f"{_by_method(r.requests)}; {r.wal_gets} WAL GETs"

    rows: list[Row] = []
    for delay_ms in delays_ms:
        theirs = find(THEIRS, delay_ms)
        for engine, what in (
            (parallel, "16 WAL GETs at a time"),
            ("slate_ops, one at a time", "one at a time"),
        ):
            ours = find(engine, delay_ms)
            target = Target("ratio", "<=", 3) if engine == parallel and delay_ms == goal_ms else None
            note = "same run, same proxy; SlateDB replays its WAL too (never shut down)" if theirs else None
            if target is None:
                note = "reported" if note is None else f"{note}; reported"
            rows.append(
                row(
                    "s3",
                    f"reopen after {wal_ssts} WAL SSTs at +{delay_ms} ms, {what}",
                    "s",
                    None if ours is None else ours.seconds,
                    None if theirs is None else theirs.seconds,
                    label,
                    target,
                    note,
                )
            )
    ours_req, theirs_req = find(parallel, goal_ms), find(THEIRS, goal_ms)
    if ours_req is not None:
        note = f"ours: {by_method(ours_req)}"
        if theirs_req is not None:
            note += f"; SlateDB: {by_method(theirs_req)}"
        rows.append(
            row(
                "s3",
                f"requests per reopen after {wal_ssts} WAL SSTs",
                "requests",
                sum(ours_req.requests.values()),
                None if theirs_req is None else sum(theirs_req.requests.values()),
                label,
                None,
                note + "; reported, no target",
            )
        )
    return rows


def collect(options: Options) -> Outcome:
    """The ``s3`` benchmark of ``python -m benchmarks`` (registered as ``suite.collect_s3``)."""
    sizes = QUICK if options.quick else Sizes()
    delays: tuple[float, ...] = (0.05,) if options.quick else (0.02, 0.05)
    reopen_delays: tuple[float, ...] = (0.05,) if options.quick else (0.0, 0.02, 0.05)
    skipped = [] if options.slatedb else ["SlateDB's binding: --no-slatedb"]
    results = run(sizes, delays, reopen_delays, use_slatedb=options.slatedb, progress=_progress)
    if options.slatedb and not any(m.engine == THEIRS for m in results.figures):
        skipped.append(f"SlateDB's binding: {results.notes.get('slatedb', 'not run')}")
    version = package_version("slatedb")
    label = f"slatedb {version}" if version else "slatedb"
    figures_ms = [round(d * 1000) for d in delays]
    rows = figure_rows(results, sizes, figures_ms, label)
    rows += reopen_rows(results, sizes.wal_ssts, [round(d * 1000) for d in reopen_delays], label)
    ms = ", ".join(f"+{m}" for m in figures_ms)
    setup = (
        f"moto's S3 server on loopback behind a proxy adding {ms} ms per request (the reopen also at "
        f"{', '.join(f'+{round(d * 1000)}' for d in reopen_delays)} ms); both engines with default "
        f"options in one process, each measurement on a fresh proxy. Durable puts: {sizes.durable_puts} "
        f"by one writer, {sizes.concurrent_puts} by {WRITERS}; non-durable: {sizes.puts:,}; cold gets: "
        f"{sizes.gets} random keys of {sizes.keys:,} (100 B values, {sizes.l0_ssts} L0 SSTs) on a "
        f"freshly opened writer; the full scan on another; reopen after {sizes.wal_ssts} WAL SSTs. "
        + "; ".join(f"{k}: {v}" for k, v in results.notes.items())
        + "."
    )
    table = render_figures(results.figures) + "\n\n" + render_reopens(results.reopens)
    head = f"# slate_ops vs SlateDB on S3 with latency (benchmarks/bench_s3.py)\n\n`{command('s3', options)}`"
    return Outcome(rows, setup, table, f"{head}\n\n{setup}\n\n{table}\n", skipped)


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
