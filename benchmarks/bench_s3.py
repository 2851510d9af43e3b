"""Reopen after many WAL SSTs on S3 with real latency (issue 15): moto behind a latency proxy.

A writer leaves ``N`` WAL SSTs (one put and one WAL flush each; the writer then closes without an
L0 flush, so every reopen replays all of them). Each reopen goes through
:class:`benchmarks.latency_proxy.LatencyProxy`, which adds a fixed delay (20 or 50 ms) to every
request before forwarding it to a moto S3 server on loopback, and counts the requests. Measured:
the wall time of ``Db.open`` (fence, manifest claim, WAL replay) with the WAL fetched one segment
at a time and 16 at a time (``slate_ops.layout.WAL_FETCH_PARALLELISM``), the requests per reopen by
method, and the same for SlateDB's Python binding (``slatedb`` 0.17.0, an S3 ObjectStoreBuilder
on the same proxy) when it is installed. The S3 client is built once before the reopens (shared
per endpoint: slate_ops.objstore.s3.shared_s3_client), so its ~0.2 s build is reported apart.

Run: ``python -m benchmarks.bench_s3`` (``--quick``: 50 WAL SSTs, one delay)
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.metadata
import logging
import os
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.latency_proxy import LatencyProxy
from benchmarks.reporting import argument_parser, markdown_table, output, publish
from slate_ops import layout
from slate_ops.engine import Db, DbOptions
from slate_ops.objstore import S3Store
from slate_ops.objstore.s3 import make_s3_client

RESULTS = Path(__file__).parent / "results" / "s3.md"
KEYS: dict[str, Any] = {"access_key_id": "testing", "secret_access_key": "testing"}
REGION = "us-east-1"
DB_PATH = "db"


@dataclass(frozen=True)
class Reopen:
    engine: str
    delay_ms: int
    wal_ssts: int
    seconds: float
    requests: dict[str, int]
    wal_gets: int


def start_moto() -> tuple[Any, str]:
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
        os.environ.setdefault(name, value)
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request on stderr

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    return server, f"http://{host}:{port}"


def new_bucket(endpoint: str) -> str:
    bucket = f"bench-{uuid.uuid4().hex[:12]}"
    make_s3_client(endpoint_url=endpoint, region=REGION, **KEYS).create_bucket(Bucket=bucket)
    return bucket


def options() -> DbOptions:
    # Background work stays out of the measurement: WAL flushes are explicit.
    return DbOptions.model_validate({"wal_flush_interval": "1h", "manifest_poll_interval": "1h"})


def write_ours(endpoint: str, bucket: str, n: int) -> None:
    store = S3Store(bucket, "ours", endpoint_url=endpoint, region=REGION, **KEYS)
    with Db.open(DB_PATH, store, options()) as db:
        for i in range(n):
            db.put(f"key{i:06d}".encode(), b"v" * 100)
            db.flush()


def reopen_ours(proxy: LatencyProxy, bucket: str, n: int, parallelism: int) -> Reopen:
    store = S3Store(bucket, "ours", endpoint_url=proxy.endpoint, region=REGION, **KEYS)
    saved = layout.WAL_FETCH_PARALLELISM
    layout.WAL_FETCH_PARALLELISM = parallelism
    try:
        proxy.reset()
        started = time.perf_counter()
        db = Db.open(DB_PATH, store, options())
        seconds = time.perf_counter() - started
        counts, wal_gets = proxy.counts, proxy.wal_gets
        assert db.get(f"key{n - 1:06d}".encode()) == b"v" * 100
        db.close()
    finally:
        layout.WAL_FETCH_PARALLELISM = saved
    name = f"slate_ops, {parallelism} at a time" if parallelism > 1 else "slate_ops, one at a time"
    return Reopen(name, round(proxy.delay * 1000), n, seconds, counts, wal_gets)


def load_slatedb() -> Any | None:
    try:
        return importlib.import_module("slatedb.uniffi")
    except ImportError:
        return None


def slatedb_store(sdb: Any, endpoint: str, bucket: str) -> Any:
    builder = sdb.ObjectStoreBuilder(sdb.ObjectStoreType.S3)
    for key, value in (
        ("aws_endpoint", endpoint),
        ("aws_allow_http", "true"),
        ("aws_region", REGION),
        ("aws_bucket_name", bucket),
        ("aws_access_key_id", "testing"),
        ("aws_secret_access_key", "testing"),
        ("aws_virtual_hosted_style_request", "false"),
    ):
        builder.with_config(key, value)
    return builder.build()


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
    return Reopen("slatedb (binding)", round(proxy.delay * 1000), n, seconds, counts, wal_gets)


def run(
    n: int,
    delays: tuple[float, ...],
    use_slatedb: bool = True,
    progress: Callable[[str], None] = lambda _: None,
) -> tuple[list[Reopen], dict[str, str]]:
    server, endpoint = start_moto()
    notes: dict[str, str] = {}
    results: list[Reopen] = []
    handles: list[Any] = []  # SlateDB handles never shut down (see _write_slatedb), kept until the end
    try:
        started = time.perf_counter()
        make_s3_client(endpoint_url=endpoint, region=REGION, **KEYS)
        notes["client build"] = f"{time.perf_counter() - started:.3f} s (once per process and endpoint)"
        bucket = new_bucket(endpoint)
        progress(f"writing {n} WAL SSTs with slate_ops")
        write_ours(endpoint, bucket, n)
        sdb = load_slatedb() if use_slatedb else None
        if sdb is not None:
            progress(f"writing {n} WAL SSTs with slatedb")
            try:
                handles.append(asyncio.run(_write_slatedb(sdb, endpoint, bucket, n)))
            except Exception as exc:  # the binding's errors are its own types
                notes["slatedb"] = f"could not write through its S3 store: {type(exc).__name__}: {exc}"
                sdb = None
        elif use_slatedb:
            notes["slatedb"] = "not installed (pip install -e '.[bench]')"
        else:
            notes["slatedb"] = "not run (--no-slatedb)"
        for delay in delays:
            progress(f"reopens at +{delay * 1000:.0f} ms")
            with LatencyProxy(endpoint, delay) as proxy:
                S3Store(bucket, "ours", endpoint_url=proxy.endpoint, region=REGION, **KEYS)  # build client
                for parallelism in (1, layout.WAL_FETCH_PARALLELISM):
                    results.append(reopen_ours(proxy, bucket, n, parallelism))
                if sdb is not None:
                    results.append(asyncio.run(_reopen_slatedb(sdb, proxy, bucket, n, handles)))
    finally:
        server.stop()
        handles.clear()
    if sdb is not None:
        notes["slatedb"] = (
            f"slatedb {importlib.metadata.version('slatedb')} via ObjectStoreBuilder(S3); its writer "
            "flushes each put to the WAL (FlushType.WAL) and is never shut down (shutdown flushes to L0), "
            "so each of its reopens replays the WAL like ours"
        )
    return results, notes


def render(results: list[Reopen], notes: dict[str, str]) -> str:
    rows = [
        [
            r.engine,
            r.delay_ms,
            r.wal_ssts,
            f"{r.seconds:.2f}",
            sum(r.requests.values()),
            r.wal_gets,
            ", ".join(f"{k} {v}" for k, v in sorted(r.requests.items())),
        ]
        for r in results
    ]
    table = markdown_table(
        ["engine", "delay (ms)", "WAL SSTs", "reopen (s)", "requests", "WAL GETs", "by method"],
        rows,
        "lrrrrrl",
    )
    return table + "\n\n" + "\n".join(f"* {k}: {v}" for k, v in notes.items()) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__, RESULTS, quick="50 WAL SSTs at +50 ms only")
    args = parser.parse_args(argv)
    n, delays = (50, (0.05,)) if args.quick else (500, (0.0, 0.02, 0.05))
    results, notes = run(n, delays)
    publish(render(results, notes), output(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
