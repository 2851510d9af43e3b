"""Maintenance on a SlateDB database vs a slate_ops database, through the one admin handle (issue 21).

Two databases of the same shape, one per engine, each maintained through ``admin.open(path,
store)`` and the same handle calls (:data:`OPERATIONS`): open (engine detection), the asset state
and the manifest sensor's poll, describe, list / create / delete a checkpoint, the compaction
sensor's question and plan, split keys, GC plan, GC health, a real GC run, a hard-destroy dry run,
clone, split into 2, merge of the shards, and a full compaction. For each call: wall time (median
of ``repeat``) and requests by S3 operation. Where an engine refuses a call, its typed error is
recorded instead.

* **SlateDB specifics.** The split passes ``flush_wal=True`` on SlateDB (it refuses to project a
  database with data in its WAL replay range, which a writer's clean shutdown leaves; the handle
  then opens it as its writer and flushes first — the first call pays for it). The compaction is
  requested from SlateDB's compactor, so a SlateDB writer (embedded compactor polling every 100 ms)
  is open during that call, talking to moto straight: its own requests (the compaction's reads and
  writes) are not counted, only the handle's submit-and-follow; ours does the work in-process.
* **Shapes.** slate_ops: our ``Db`` writes ``rounds`` memtable flushes of ``keys`` keys (later
  rounds overwrite), a full compaction of the first ``rounds - 1`` into one sorted run, then the
  last round to L0 — 1 sorted run + 1 L0 SST, plus the WAL SSTs and manifests that history leaves;
  the checkpoint the compaction leaves is removed.
  SlateDB: the binding's own ``Db`` (WAL on, its embedded compactor polling every 100 ms) writes the
  same rows in the same rounds, a compaction of the first ``rounds - 1`` L0 SSTs into sorted run 0
  is submitted through ``Admin.submit_compaction`` and followed to COMPLETED, then the last round;
  the checkpoint its compactor leaves at shutdown (15 min) is removed, as a finished writer's would
  expire, so the hard destroy is allowed and what the compaction replaced is garbage.
* **Stores.** A local directory (time only: the binding's file reads are not visible from
  Python; our requests are counted with ``CountingStore``), and S3 = moto's server in its own
  process behind :class:`benchmarks.latency_proxy.LatencyProxy` (+0 ms and +50 ms per request).
  On S3 **both engines' requests are counted the same way, at the proxy** (by method; a GET of a
  bucket is a LIST). For SlateDB, the slate_ops side of the handle (its GC listing, the engine
  probe) is counted by ``CountingStore`` too, so the binding's share is the difference.
* **GC plan vs SlateDB's own dry run.** On databases of their own (SlateDB's dry run writes, and
  a run consumes the garbage) — one pair of the same shape as above, and one pair written by
  ``history`` memtable flushes of a quarter of the keys each (ours: nothing compacted; SlateDB's
  writer: its embedded compactor compacting as it sees fit) — slate_ops' plan of the SlateDB
  database (``handle.gc_plan``: the exact objects, per directory, with reasons), the same plan of
  ours, the binding's ``Admin.run_gc_once`` with every directory ``dry_run=True`` (it returns
  nothing and, as measured in docs/design/slatedb-engine.md §3, writes boundary files), then one
  real ``run_gc_once`` (objects listed before and after, straight on moto). The handle's own real
  run (plan, run, listings) is the "GC run (real)" row of the per-operation tables.
* GC options: min ages of 1 ms (tests only: ``allow_unsafe_min_age``) so what the writers just
  left is garbage; the same options for both engines.

Run: ``python -m benchmarks.bench_maintenance_engines [--quick]`` (needs the ``slatedb`` extra;
without it only slate_ops runs). ``--quick``: fewer keys, the local directory and S3 +0 ms only.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.latency_proxy import LatencyProxy
from benchmarks.reporting import argument_parser, markdown_table, output, publish
from benchmarks.s3_fixtures import (
    KEYS,
    REGION,
    MotoProcess,
    compact_l0_with_binding,
    load_slatedb,
    new_bucket,
    slatedb_store,
)
from slate_ops import Db, DbOptions, admin
from slate_ops.admin.handle import DatabaseHandle, merge
from slate_ops.config import CheckpointOptions
from slate_ops.errors import SlateOpsError, UnsupportedOnEngineError
from slate_ops.gc import GcOptions
from slate_ops.objstore import LocalStore, S3Store
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.wrappers import CountingStore

if TYPE_CHECKING:
    from benchmarks.suite import Options, Outcome

RESULTS = Path(__file__).parent / "results" / "maintenance_engines.md"
OURS_DB = "dbs/slate_ops"
SLATEDB_DB = "dbs/slatedb"
SLATEDB_GC_DB = "dbs/slatedb_gc"  # the GC comparison's own databases (SlateDB's dry run writes)
OURS_GC_DB = "dbs/slate_ops_gc"
SLATEDB_HISTORY_DB = "dbs/slatedb_history"  # many flushes: more garbage for the GC comparison
OURS_HISTORY_DB = "dbs/slate_ops_history"
VALUE_BYTES = 100
ENGINES = ("slate_ops", "slatedb")
FAST_GC = GcOptions.with_min_age(timedelta(milliseconds=1), allow_unsafe_min_age=True)
QUIET = DbOptions(wal_flush_interval=timedelta(hours=1), manifest_poll_interval=timedelta(hours=1))


@dataclass(frozen=True)
class Sizes:
    keys: int  # per round
    rounds: int  # memtable flushes
    repeat: int  # calls per operation (the median is reported)
    delays: tuple[float | None, ...]  # None: the local directory; else S3 with this delay
    history: int = 32  # memtable flushes of the GC comparison's second pair of databases


FULL = Sizes(2_000, 4, 7, (None, 0.0, 0.05))
QUICK = Sizes(200, 4, 2, (None, 0.0), history=8)
# Operations, in the order they run on each database (destroy before clone: a SlateDB clone pins a
# final checkpoint in its source, and a hard destroy is refused while one is live).
OPERATIONS = (
    "open (detect engine)",
    "state (asset materialization)",
    "state poll, manifest unchanged",
    "describe",
    "list checkpoints",
    "create checkpoint",
    "delete checkpoint",
    "needs compaction",
    "plan a full compaction",
    "suggest 4 split keys",
    "GC plan",
    "GC health",
    "GC run (real)",
    "hard destroy, dry run",
    "clone",
    "split into 2",
    "merge the 2 shards",
    "full compaction",
)
ONCE = {"GC run (real)", "full compaction"}  # changes what the next call would find: measured once
FEWER = {"clone", "split into 2", "merge the 2 shards"}  # each makes new databases: at most 3 calls


def label(delay: float | None) -> str:
    return "local directory" if delay is None else f"S3 +{round(delay * 1000)} ms"


# --- measurements --------------------------------------------------------------------------------


@dataclass
class Measured:
    """One operation on one engine and store: times of every repetition, requests of the first."""

    store: str
    engine: str
    operation: str
    seconds: list[float] = field(default_factory=list)
    requests: dict[str, int] = field(default_factory=dict)  # at the proxy, by S3 operation
    ours_requests: int | None = None  # counted by CountingStore (slate_ops' own calls only)
    result: str = ""
    unavailable: str | None = None  # the typed error's message, when the engine refused the call
    totals: list[int] = field(default_factory=list)  # requests of every call, at the proxy

    @property
    def median_ms(self) -> float | None:
        return 1e3 * statistics.median(self.seconds) if self.seconds else None

    @property
    def total(self) -> int | None:
        return sum(self.requests.values()) if self.requests else None


class Counted:
    """Counts one call's requests: at the proxy (every client, the binding's too) and with
    ``CountingStore`` (slate_ops' own)."""

    def __init__(self, proxy: LatencyProxy | None, counting: CountingStore) -> None:
        self.proxy = proxy
        self.counting = counting

    def reset(self) -> None:
        if self.proxy is not None:
            self.proxy.reset()
        self.counting.reset()

    def read(self) -> tuple[dict[str, int], int]:
        at_proxy = {} if self.proxy is None else dict(sorted(self.proxy.kinds.items()))
        return at_proxy, self.counting.total


def _requests_text(requests: dict[str, int]) -> str:
    if not requests:
        return "0"
    return f"{sum(requests.values())} (" + ", ".join(f"{n} {k}" for k, n in requests.items()) + ")"


def _requests_cell(m: Measured | None) -> str:
    """The first call's requests by operation, and the range over the calls when they differ."""
    if m is None or m.unavailable:
        return "—"
    text = _requests_text(m.requests)
    if m.totals and min(m.totals) != max(m.totals):
        text += f"; calls {min(m.totals)} to {max(m.totals)}"
    return text


# --- databases -----------------------------------------------------------------------------------


def _rows(keys: int, round_: int) -> Iterator[tuple[bytes, bytes]]:
    for i in range(keys):
        yield b"key:%012d" % i, (b"%d:" % round_).ljust(VALUE_BYTES, b"v")


def write_ours(store: ObjectStore, path: str, keys: int, rounds: int) -> None:
    """``rounds`` L0 flushes; all but the last compacted into one sorted run."""
    with Db.open(path, store, QUIET) as db:
        for r in range(rounds - 1):
            for k, v in _rows(keys, r):
                db.put(k, v)
            db.flush_memtable()
    handle = admin.open(path, store)
    handle.compact(full=True)
    for checkpoint in handle.list_checkpoints():  # the compaction's own, as SlateDB's compactor's below
        handle.delete_checkpoint(checkpoint.id, dry_run=False)
    with Db.open(path, store, QUIET) as db:
        for k, v in _rows(keys, rounds - 1):
            db.put(k, v)
        db.flush_memtable()


def _fast_settings(sdb: Any) -> Any:
    st = sdb.Settings.default()
    comp = json.loads(st.to_json_string())["compactor_options"]
    comp["poll_interval"] = "100ms"
    comp["commit_compacted_interval"] = "100ms"
    comp["worker"]["compactions_poll_interval"] = "100ms"
    st.set("compactor_options", json.dumps(comp))
    return st


async def _write_slatedb(sdb: Any, store: Any, path: str, keys: int, rounds: int) -> None:

    builder = sdb.DbBuilder(path, store)
    builder.with_settings(_fast_settings(sdb))
    db = await builder.build()
    flush = sdb.FlushOptions(flush_type=sdb.FlushType.MEM_TABLE)
    for r in range(rounds - 1):
        for k, v in _rows(keys, r):
            await db.put(k, v)
        await db.flush_with_options(flush)
    c = await compact_l0_with_binding(sdb, path, store, polls=600)
    if c is None or c.status != sdb.CompactionStatus.COMPLETED:
        raise RuntimeError(f"SlateDB's compaction of {path} did not complete: {c}")
    for k, v in _rows(keys, rounds - 1):
        await db.put(k, v)
    await db.flush_with_options(flush)
    await db.shutdown()
    binding_admin = sdb.AdminBuilder(path, store).build()
    for checkpoint in await binding_admin.list_checkpoints(None):  # the compactor's, 15 minutes
        await binding_admin.delete_checkpoint(checkpoint.id)


def write_ours_history(store: ObjectStore, path: str, keys: int, flushes: int) -> None:
    """``flushes`` memtable flushes of ``keys // 4`` keys each by our writer, and an L0 compaction
    after every 4 (as SlateDB's embedded size-tiered compactor does by default; our writer stops at
    8 L0 SSTs without a compactor): the garbage is old manifests, WAL SSTs and replaced SSTs."""
    handle: DatabaseHandle | None = None
    for first in range(0, flushes, 4):
        with Db.open(path, store, QUIET) as db:
            for r in range(first, min(first + 4, flushes)):
                for k, v in _rows(keys // 4, r):
                    db.put(k, v)
                db.flush_memtable()
        handle = handle or admin.open(path, store)
        handle.compact()
    if handle is not None:
        for checkpoint in handle.list_checkpoints():  # the compactions' own
            handle.delete_checkpoint(checkpoint.id, dry_run=False)


async def _write_slatedb_history(sdb: Any, store: Any, path: str, keys: int, flushes: int) -> None:
    builder = sdb.DbBuilder(path, store)
    builder.with_settings(_fast_settings(sdb))
    db = await builder.build()
    flush = sdb.FlushOptions(flush_type=sdb.FlushType.MEM_TABLE)
    for r in range(flushes):
        for k, v in _rows(keys // 4, r):
            await db.put(k, v)
        await db.flush_with_options(flush)
    await db.shutdown()
    binding_admin = sdb.AdminBuilder(path, store).build()
    binding_admin = sdb.AdminBuilder(path, store).build()
    for checkpoint in await binding_admin.list_checkpoints(None):  # the compactor's, 15 minutes
        await binding_admin.delete_checkpoint(checkpoint.id)


def write_slatedb_history(sdb: Any, store: Any, path: str, keys: int, flushes: int) -> None:
    """The same by SlateDB's writer, whose embedded compactor compacts L0 as it sees fit (its
    default size-tiered scheduler): the garbage is old manifests, WAL SSTs and replaced SSTs."""
    from slate_ops.engines.slatedb import LOOP

    LOOP.run(_write_slatedb_history(sdb, store, path, keys, flushes))


def write_slatedb(sdb: Any, store: Any, path: str, keys: int, rounds: int) -> None:
    """The same rows and rounds by SlateDB's own ``Db`` on the binding store ``store``."""
    from slate_ops.engines.slatedb import LOOP

    LOOP.run(_write_slatedb(sdb, store, path, keys, rounds))


@contextmanager
def slatedb_writer(sdb: Any, store: Any, path: str) -> Iterator[None]:
    """A SlateDB writer open on ``path`` (its embedded compactor polling every 100 ms), shut down
    after: what runs SlateDB's compactions."""
    from slate_ops.engines.slatedb import LOOP

    builder = sdb.DbBuilder(path, store)
    builder.with_settings(_fast_settings(sdb))
    db = LOOP.run(builder.build())
    try:
        yield
    finally:
        LOOP.run(db.shutdown())


def shape(handle: DatabaseHandle) -> str:
    s = handle.describe()
    return f"{s.l0_ssts} L0 + {s.sorted_runs} sorted run(s), {s.ssts} SSTs, {s.sst_bytes / 1e3:.0f} kB"


# --- one engine on one store ---------------------------------------------------------------------


def measure_engine(
    engine: str,
    path: str,
    store: ObjectStore,
    counted: Counted,
    repeat: int,
    store_label: str,
    keys: int,
    compactor: Callable[[], AbstractContextManager[object]] = nullcontext,
) -> list[Measured]:
    """Every operation of :data:`OPERATIONS` on the database at ``path`` (its engine detected).
    ``compactor`` is entered around (not inside the time of) the compaction: SlateDB's needs a
    compactor running, a writer's embedded one (:func:`slatedb_writer`)."""
    results: list[Measured] = []
    handle = admin.open(path, store)
    made: list[uuid.UUID] = []  # checkpoints created, deleted by the next operation
    shards: list[list[str]] = []  # the target paths of each split
    clones = iter(range(10_000))

    def call(operation: str) -> tuple[str, Callable[[], Any]]:
        if operation == "open (detect engine)":
            return "engine " + handle.engine.value, lambda: admin.open(path, store)
        if operation == "state (asset materialization)":
            return "", handle.state_since
        if operation == "state poll, manifest unchanged":
            known = handle.describe().manifest_id
            return "", lambda: handle.state_since(known)
        if operation == "describe":
            return "", handle.describe
        if operation == "list checkpoints":
            return "", handle.list_checkpoints
        if operation == "create checkpoint":
            return "1 h lifetime", lambda: made.append(
                handle.create_checkpoint(CheckpointOptions(lifetime=timedelta(hours=1))).id
            )
        if operation == "delete checkpoint":
            return "the one just created", lambda: handle.delete_checkpoint(made.pop(), dry_run=False)
        if operation == "needs compaction":
            return "", handle.needs_compaction
        if operation == "plan a full compaction":
            return "", lambda: handle.plan_compaction(full=True)
        if operation == "full compaction":
            return "", lambda: handle.compact(full=True)
        if operation == "GC health":
            return "", lambda: handle.gc_health(FAST_GC)
        if operation == "suggest 4 split keys":
            return "", lambda: handle.suggest_split_keys(4)
        if operation == "GC plan":
            return "", lambda: handle.gc_plan(FAST_GC)
        if operation == "hard destroy, dry run":
            return "", lambda: handle.destroy(soft=False, dry_run=True)
        if operation == "clone":
            return "at the latest state, to a new path", lambda: handle.clone_to(
                f"clones/{engine}_{next(clones)}"
            )
        if operation == "split into 2":
            middle = b"key:%012d" % (keys // 2)

            def split() -> Any:
                targets = [f"shards/{engine}_{next(clones)}_{i}" for i in (0, 1)]
                # SlateDB refuses to project a database with data in its WAL replay range, which a
                # writer's clean shutdown leaves: flush_wal opens it as its writer and flushes first
                report = handle.split([middle], targets, flush_wal=engine == "slatedb")
                shards.append(targets)
                return report

            return "at the middle key", split
        if operation == "merge the 2 shards":
            return "of the first split, to a new path", lambda: merge(
                shards[0], store, f"merged/{engine}_{next(clones)}"
            )
        if operation == "GC run (real)":
            return "", lambda: handle.run_gc(FAST_GC, dry_run=False)
        raise AssertionError(operation)

    for operation in OPERATIONS:
        m = Measured(store_label, engine, operation)
        note, fn = call(operation)
        # delete checkpoint: one call per checkpoint just created; the real GC run: once
        times = len(made) if operation == "delete checkpoint" else 1 if operation in ONCE else repeat
        if operation in FEWER:
            times = min(times, 3)
        for i in range(times):
            with compactor() if operation == "full compaction" else nullcontext():
                counted.reset()
                started = time.perf_counter()
                try:
                    value = fn()
                except SlateOpsError as e:  # not available on this engine, or refused (said why)
                    kind = "not available" if isinstance(e, UnsupportedOnEngineError) else "refused"
                    m.unavailable = f"{kind}: {type(e).__name__}: {e}"
                    break
                m.seconds.append(time.perf_counter() - started)
            m.totals.append(sum(counted.read()[0].values()))
            if i == 0:
                m.requests, m.ours_requests = counted.read()
                m.result = _describe(note, value)
        results.append(m)
    return results


def _describe(note: str, value: Any) -> str:
    """What a call returned, in a few words."""
    from slate_ops.admin.destroy import DestroyReport
    from slate_ops.admin.gc_health import GcHealth
    from slate_ops.admin.handle.state import CompactionPlan, DbState
    from slate_ops.compaction import CompactionReport
    from slate_ops.gc import GcReport

    if isinstance(value, GcReport):
        deleted = sum(r.count for r in value.resources)
        return f"{deleted} objects " + ("planned" if value.dry_run else "deleted")
    if isinstance(value, DestroyReport):
        return f"{len(value.deleted)} objects listed"
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return f"{len(value)} keys"
    if isinstance(value, list):
        return note or f"{len(value)} checkpoint(s)"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, GcHealth):
        return ("passed" if value.passed else "failed") + f", {value.waiting_count} waiting"
    if isinstance(value, DbState):
        return f"manifest {value.manifest_id}"
    if isinstance(value, CompactionPlan):
        return f"{value.kind}: {value.sources} sources, {len(value.input_ssts)} SSTs"
    if isinstance(value, CompactionReport):
        return f"{len(value.input_ssts)} SSTs into {len(value.output_ssts)}"
    if value is None and note == "":
        return "None"
    return note


# --- the GC comparison ---------------------------------------------------------------------------


@dataclass
class GcCall:
    store: str
    database: str
    call: str
    seconds: list[float] = field(default_factory=list)
    requests: dict[str, int] = field(default_factory=dict)
    result: str = ""

    @property
    def median_ms(self) -> float | None:
        return 1e3 * statistics.median(self.seconds) if self.seconds else None

    @property
    def writes(self) -> int:
        return sum(n for k, n in self.requests.items() if k in ("PUT", "POST", "DELETE"))


PLAN = "slate_ops' plan (handle.gc_plan)"
OURS_PLAN = "slate_ops' plan of the pair's slate_ops database (reference)"
SLATEDB_DRY = "SlateDB's run_gc_once, every directory dry_run"
SLATEDB_REAL = "SlateDB's run_gc_once, real"


def _gc_options(sdb: Any, dry_run: bool) -> Any:
    d = sdb.GarbageCollectorDirectoryOptions(interval_ms=None, min_age_ms=1, dry_run=dry_run)
    return sdb.GarbageCollectorOptions(
        manifest_options=d,
        wal_options=d,
        wal_fence_options=None,
        compacted_options=d,
        compactions_options=d,
        detach_options=None,
        disable_boundary_files=False,
        object_store_max_retries=None,
    )


def measure_gc(
    sdb: Any,
    proxy: LatencyProxy,
    s3: S3Store,
    endpoint: str,
    bucket: str,
    repeat: int,
    store_label: str,
    database: str,
    paths: tuple[str, str],
) -> list[GcCall]:
    """slate_ops' plan vs SlateDB's dry run (both ``repeat`` times, read-only vs not), then one
    real ``run_gc_once`` on the same database. ``paths``: the SlateDB database and ours (the
    reference plan), described as ``database``."""
    from slate_ops.engines.slatedb import LOOP

    theirs_path, ours_path = paths
    handle = admin.open(theirs_path, s3)
    ours = admin.open(ours_path, s3)
    raw = sdb.AdminBuilder(theirs_path, slatedb_store(sdb, proxy.endpoint, bucket)).build()
    listing = S3Store(s3.bucket, endpoint_url=endpoint, region=REGION, **KEYS)  # straight to moto

    def objects() -> set[str]:
        return {o.key for o in listing.list(theirs_path + "/")}

    calls: list[GcCall] = []

    def run(name: str, fn: Callable[[], str], times: int) -> None:
        c = GcCall(store_label, database, name)
        for i in range(times):
            proxy.reset()
            started = time.perf_counter()
            result = fn()
            c.seconds.append(time.perf_counter() - started)
            if i == 0:
                c.requests, c.result = dict(sorted(proxy.kinds.items())), result
        calls.append(c)

    def plan(h: DatabaseHandle) -> str:
        report = h.gc_plan(FAST_GC)
        return f"{sum(r.count for r in report.resources)} objects planned, with reasons"

    def slatedb(dry_run: bool) -> str:
        before = objects()
        LOOP.run(raw.run_gc_once(_gc_options(sdb, dry_run)))
        after = objects()
        return f"returns None; {len(before - after)} objects deleted, {len(after - before)} written"

    planned = handle.gc_plan(FAST_GC)
    calls_before = len(objects())
    run(PLAN, lambda: plan(handle), repeat)
    run(OURS_PLAN, lambda: plan(ours), repeat)
    run(SLATEDB_DRY, lambda: slatedb(True), repeat)
    run(SLATEDB_REAL, lambda: slatedb(False), 1)
    calls[
        -1
    ].result += f" (the plan before the dry runs: {len(planned.deleted_keys())} of {calls_before} objects)"
    return calls


# --- the whole run -------------------------------------------------------------------------------


@dataclass
class Run:
    keys: int
    rounds: int
    repeat: int
    measured: list[Measured]
    gc: list[GcCall]
    shapes: dict[str, str]
    skipped: list[str]
    seconds: float


@contextmanager
def _moto() -> Iterator[str]:
    with MotoProcess(timeout=60) as moto:
        yield moto.endpoint


def run(
    sizes: Sizes,
    slatedb: bool = True,
    progress: Callable[[str], None] = lambda _: None,
) -> Run:
    """Measure both engines on every store of ``sizes`` (slate_ops alone without ``slatedb``)."""
    keys, rounds, repeat, delays = sizes.keys, sizes.rounds, sizes.repeat, sizes.delays
    started = time.perf_counter()
    sdb = load_slatedb() if slatedb else None
    skipped: list[str] = []
    if sdb is None:
        skipped.append(
            "SlateDB: " + ("--no-slatedb" if not slatedb else "the slatedb package is not installed")
        )
    engines = ENGINES if sdb is not None else ("slate_ops",)
    measured: list[Measured] = []
    gc: list[GcCall] = []
    shapes: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="bench-maint-") as tmp:
        if None in delays:
            root = Path(tmp) / "store"
            root.mkdir()
            local = LocalStore(root)
            progress(f"writing the databases ({keys:,} keys x {rounds} rounds) in a local directory")
            write_ours(local, OURS_DB, keys, rounds)
            if sdb is not None:
                from slate_ops.engines.slatedb import binding_store

                write_slatedb(sdb, binding_store(local), SLATEDB_DB, keys, rounds)
            counting = CountingStore(local)
            for engine, path in zip(engines, (OURS_DB, SLATEDB_DB), strict=False):
                shapes[f"{engine}, local"] = shape(admin.open(path, local))
                progress(f"{engine} on the local directory")
                writer: Callable[[], AbstractContextManager[object]] = nullcontext
                if engine == "slatedb":
                    from slate_ops.engines.slatedb import binding_store

                    writer = partial(slatedb_writer, sdb, binding_store(local), path)
                measured += measure_engine(
                    engine, path, counting, Counted(None, counting), repeat, label(None), keys, writer
                )
        s3_delays = [d for d in delays if d is not None]
        if s3_delays:
            with _moto() as endpoint:
                for delay in s3_delays:
                    measured_s3, gc_s3 = _on_s3(
                        sdb, engines, endpoint, delay, keys, rounds, repeat, sizes.history, shapes, progress
                    )
                    measured += measured_s3
                    gc += gc_s3
                    if not gc_s3 and sdb is not None:
                        skipped.append(f"SlateDB on {label(delay)}")
    return Run(keys, rounds, repeat, measured, gc, shapes, skipped, time.perf_counter() - started)


def _on_s3(
    sdb: Any,
    engines: tuple[str, ...],
    endpoint: str,
    delay: float,
    keys: int,
    rounds: int,
    repeat: int,
    history: int,
    shapes: dict[str, str],
    progress: Callable[[str], None],
) -> tuple[list[Measured], list[GcCall]]:
    """Fresh databases in a fresh bucket (written straight to moto), measured through the proxy."""
    bucket = new_bucket(endpoint)
    where = label(delay)
    progress(f"writing the databases in a bucket for {where}")
    direct = S3Store(bucket, endpoint_url=endpoint, region=REGION, **KEYS)
    for path in (OURS_DB, OURS_GC_DB):
        write_ours(direct, path, keys, rounds)
    write_ours_history(direct, OURS_HISTORY_DB, keys, history)
    if sdb is not None:
        for path in (SLATEDB_DB, SLATEDB_GC_DB):
            write_slatedb(sdb, slatedb_store(sdb, endpoint, bucket), path, keys, rounds)
        write_slatedb_history(sdb, slatedb_store(sdb, endpoint, bucket), SLATEDB_HISTORY_DB, keys, history)
    measured: list[Measured] = []
    gc: list[GcCall] = []
    with LatencyProxy(endpoint, delay) as proxy:
        s3 = S3Store(bucket, endpoint_url=proxy.endpoint, region=REGION, **KEYS)
        counting = CountingStore(s3)
        for engine, path in zip(engines, (OURS_DB, SLATEDB_DB), strict=False):
            try:
                shapes[f"{engine}, S3"] = shape(admin.open(path, s3))
            except SlateOpsError as e:  # e.g. no S3 for the binding in this version
                progress(f"{engine} on {where}: not run ({e})")
                continue
            progress(f"{engine} on {where}")
            writer: Callable[[], AbstractContextManager[object]] = (
                nullcontext  # SlateDB's: straight to moto, so its own requests are not counted
            )
            if engine == "slatedb":
                writer = partial(slatedb_writer, sdb, slatedb_store(sdb, endpoint, bucket), path)
            measured += measure_engine(
                engine, path, counting, Counted(proxy, counting), repeat, where, keys, writer
            )
        if sdb is not None and any(m.engine == "slatedb" and m.store == where for m in measured):
            progress(f"GC plan vs run_gc_once on {where}")
            for database, paths in (
                ("same shape", (SLATEDB_GC_DB, OURS_GC_DB)),
                (f"{history} flushes", (SLATEDB_HISTORY_DB, OURS_HISTORY_DB)),
            ):
                gc += measure_gc(sdb, proxy, s3, endpoint, bucket, repeat, where, database, paths)
    return measured, gc


# --- rendering -----------------------------------------------------------------------------------


def find(r: Run, store: str, engine: str, operation: str) -> Measured | None:
    return next(
        (m for m in r.measured if (m.store, m.engine, m.operation) == (store, engine, operation)), None
    )


def _ms(m: Measured | None) -> str:
    if m is None:
        return "not run"
    if m.unavailable is not None:
        return m.unavailable.split(":", 1)[0]
    value = m.median_ms
    return "—" if value is None else f"{value:.1f}"


def operations_table(r: Run, store: str) -> str:
    s3 = store != label(None)
    rows = []
    for operation in OPERATIONS:
        ours, theirs = find(r, store, "slate_ops", operation), find(r, store, "slatedb", operation)
        if ours is None and theirs is None:
            continue
        ratio = "—"
        if ours and theirs and ours.median_ms and theirs.median_ms:
            ratio = f"{ours.median_ms / theirs.median_ms:.2f}x"
        cells = [operation, _ms(ours), _ms(theirs), ratio]
        if s3:
            binding = "—"
            if theirs is not None and theirs.total is not None and theirs.ours_requests is not None:
                binding = str(theirs.total - theirs.ours_requests)
            cells += [
                _requests_cell(ours),
                _requests_cell(theirs),
                binding,
            ]
        else:
            cells.append("—" if ours is None or ours.unavailable else str(ours.ours_requests))
        results = [f"{e}: {m.result}" for e, m in (("ours", ours), ("SlateDB", theirs)) if m and m.result]
        cells.append("; ".join(results))
        rows.append(cells)
    header = ["operation", "slate_ops ms", "SlateDB ms", "slate_ops / SlateDB"]
    if s3:
        header += ["slate_ops requests", "SlateDB requests", "of which the binding's"]
    else:
        header += ["slate_ops requests (CountingStore)"]
    header.append("result")
    return markdown_table(header, rows, "l" + "r" * (len(header) - 2) + "l")


def gc_table(r: Run) -> str:
    rows = [
        [
            c.store,
            c.database,
            c.call,
            "—" if c.median_ms is None else f"{c.median_ms:.1f}",
            _requests_text(c.requests),
            c.writes,
            c.result,
        ]
        for c in r.gc
    ]
    return markdown_table(
        ["store", "databases", "call", "ms (median)", "requests", "of which writes", "result"],
        rows,
        "lllrrrl",
    )


def unavailable(r: Run) -> list[str]:
    seen: dict[tuple[str, str], str] = {}
    for m in r.measured:
        if m.unavailable is not None:
            seen.setdefault((m.engine, m.operation), m.unavailable)
    return [f"{op} on {engine}: {msg}" for (engine, op), msg in seen.items()]


def describe(r: Run) -> str:
    stores = ", ".join(dict.fromkeys(m.store for m in r.measured))
    return (
        f"{r.keys:,} keys of 16 B with {VALUE_BYTES} B values in {r.rounds} rounds per database "
        f"({'; '.join(f'{k}: {v}' for k, v in r.shapes.items())}); stores: {stores}; median of "
        f"{r.repeat} calls per operation (clone, split, merge: up to 3; the real GC run and the "
        "compaction: one), requests of the first call."
    )


def render(r: Run) -> str:
    parts = []
    for store in dict.fromkeys(m.store for m in r.measured):
        parts += [f"**{store}**", "", operations_table(r, store), ""]
    if r.gc:
        parts += [
            "**GC plan vs SlateDB's own run_gc_once** (fresh databases: one of the same shape per "
            "engine, and one per engine written by many memtable flushes)",
            "",
        ]
        parts += [gc_table(r), ""]
    missing = unavailable(r)
    if missing:
        parts += ["Not available on an engine in this version:", ""]
        parts += [f"* {line}" for line in missing] + [""]
    if r.skipped:
        parts += ["Not run: " + "; ".join(r.skipped) + ".", ""]
    return "\n".join(parts).rstrip() + "\n"


def collect(options: Options) -> Outcome:
    """The summary rows for ``python -m benchmarks`` (registered in benchmarks/suite.py)."""
    from benchmarks.suite import Outcome, Row, Target, _progress, command, row

    sizes = QUICK if options.quick else FULL
    r = run(
        sizes,
        slatedb=options.slatedb,
        progress=_progress,
    )
    rows: list[Row] = []
    s3_stores = [s for s in dict.fromkeys(m.store for m in r.measured) if s != label(None)]
    timed_at = s3_stores[-1] if s3_stores else label(None)  # the largest latency measured
    for operation in OPERATIONS:
        ours, theirs = find(r, timed_at, "slate_ops", operation), find(r, timed_at, "slatedb", operation)
        if ours is None or ours.unavailable:
            continue
        usable = theirs is not None and theirs.unavailable is None
        note = "reported"
        if s3_stores:
            note = f"requests at the S3 endpoint: {ours.total}"
            note += f" vs {theirs.total}" if usable and theirs else ""
        if theirs is not None and theirs.unavailable is not None:
            note += "; SlateDB: " + theirs.unavailable.split(":", 1)[0]
        rows.append(
            row(
                "maintenance_engines",
                f"{operation}, {timed_at}",
                "ms",
                ours.median_ms,
                theirs.median_ms if usable and theirs else None,
                "SlateDB database",
                None,
                note,
            )
        )
    plan_rows = [c for c in r.gc if c.call == PLAN]
    dry_rows = [c for c in r.gc if c.call == SLATEDB_DRY]
    for c in dry_rows:
        plan = next((p for p in plan_rows if (p.store, p.database) == (c.store, c.database)), None)
        if plan is None:
            continue
        rows.append(
            row(
                "maintenance_engines",
                f"GC plan vs SlateDB's dry run, {c.database}, {c.store}",
                "ms",
                plan.median_ms,
                c.median_ms,
                "run_gc_once(dry_run)",
                None,
                f"requests {sum(plan.requests.values())} vs {sum(c.requests.values())}, "
                f"writes {plan.writes} vs {c.writes}; reported",
            )
        )
    if plan_rows and dry_rows:
        rows.append(
            row(
                "maintenance_engines",
                "GC plan: writes (PUT/POST/DELETE), most of any run",
                "requests",
                max(p.writes for p in plan_rows),
                min(c.writes for c in dry_rows),
                "run_gc_once(dry_run), fewest",
                Target("ours", "<=", 0),
                "the plan is read-only; SlateDB's dry run writes its boundary files",
            )
        )
    setup = describe(r)
    table = render(r)
    head = (
        "# Maintenance: SlateDB vs slate_ops (benchmarks/bench_maintenance_engines.py)\n\n"
        f"`{command('maintenance_engines', options)}`"
    )
    return Outcome(rows, setup, table, f"{head}\n\n{setup}\n\n{table}", r.skipped)


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__, RESULTS, quick="fewer keys; local directory and S3 +0 ms only")
    parser.add_argument("--no-slatedb", action="store_true", help="slate_ops only")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    r = run(
        sizes,
        slatedb=not args.no_slatedb,
        progress=lambda m: print(m, file=sys.stderr, flush=True),
    )
    publish(describe(r) + "\n\n" + render(r), output(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
