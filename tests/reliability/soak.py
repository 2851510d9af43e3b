"""The chaos soak on S3 (issue 8): writer, reader, compactor and GC as separate processes against
moto's S3 server behind a fault-injecting proxy (:mod:`tests.reliability.chaos_proxy`).

Each actor is a spawned process that opens the store from its ``s3://`` URL, whose
``endpoint_url`` is the actor's own proxy port (faults and retries are counted per actor):

* **writer**: ``writer_threads`` threads write their own keys with ``await_durable=True`` — puts,
  deletes and batches — and log every attempt and every acknowledgement to ``acks.log``. Every
  ``writer_reopen_every_s`` the writer is reopened, alternately after a simulated crash (state
  dropped, nothing flushed) and after a clean close, which fences the old instance and replays the
  WAL. An operation in flight longer than ``stall_s`` is counted as a stall and the writer is
  crash-reopened to free it.
* **reader**: a :class:`DbReader` following the writer; point reads and prefix scans, checking
  that the value of every key never goes back to an older write (monotonic reads) and always
  belongs to its key. Reopened every ``reader_reopen_every_s`` and after repeated errors; the
  monotonic check spans reopens.
* **compactor**: ``run_once`` in a loop; reopened (fencing the older one) every
  ``compactor_reopen_every_s``.
* **gc**: ``run_once`` every ``gc_interval_s`` with every min age ``gc_min_age_s`` (below the
  floor: ``allow_unsafe_min_age``, tests only).

Errors that reach an actor (retries exhausted, ``BackpressureTimeoutError``, ...) are counted by
type and the actor continues or reopens. At the end every actor is stopped, and a fresh reader on
moto directly (no proxy, no faults) checks every acknowledged write: the key holds the value of its
last acknowledged write, or of a later attempted one (an unacknowledged write may still have become
durable); anything else is a **lost write**. ``admin.verify_db`` must find no dangling reference,
then one more GC run, and the reads and ``verify_db`` are repeated.

Run it alone, for any duration (starts its own moto server)::

    .venv/bin/python -m tests.reliability.soak --duration 600 --seed 7 --report soak.json

or through pytest: ``pytest -m e2e tests/reliability/test_soak.py`` runs the CI soak (~30 s);
``SLATE_OPS_SOAK_SECONDS=600 pytest -m slow -k long tests/reliability/test_soak.py`` the long one.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import logging
import multiprocessing
import os
import random
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from tests.reliability.chaos_proxy import ChaosProxy, FaultRates
from tests.support.engine import simulate_crash

ROLES = ("writer", "reader", "compactor", "gc")
REGION = "us-east-1"
ACK_LOG = "acks.log"


@dataclass(frozen=True)
class SoakConfig:
    """Everything one soak run depends on; the seed fixes the workload and the fault draws."""

    duration_s: float = 30.0
    seed: int = 0
    db_path: str = "soak"
    writer_threads: int = 8
    keys_per_thread: int = 200
    value_bytes: tuple[int, int] = (40, 400)
    delete_probability: float = 0.05
    batch_probability: float = 0.10
    writer_reopen_every_s: float = 8.0
    reader_reopen_every_s: float = 15.0
    compactor_reopen_every_s: float = 15.0
    gc_interval_s: float = 1.0
    gc_min_age_s: float = 10.0
    stall_s: float = 60.0
    stop_timeout_s: float = 120.0
    rates: FaultRates = field(
        default_factory=lambda: FaultRates(storm_every_s=10.0, storm_length_s=2.0, storm_factor=10.0)
    )


# --- the workload's keys and values ------------------------------------------------------------


def key_of(thread: int, index: int) -> bytes:
    return b"w%d-k%05d" % (thread, index)


def value_of(key: bytes, n: int, value_bytes: tuple[int, int]) -> bytes:
    """The value of write number ``n`` to ``key``: it names both, so any read can be traced back."""
    low, high = value_bytes
    size = low + (n * 7919) % max(1, high - low)
    head = b"%s|%d|" % (key, n)
    return head + (b"%08d" % n * (size // 8 + 1))[: max(0, size - len(head))]


def parse_value(value: bytes) -> tuple[bytes, int] | None:
    """``(key, n)`` of a workload value, or None if it is not one."""
    parts = value.split(b"|", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    return parts[0], int(parts[1])


# --- per-actor counters -------------------------------------------------------------------------


class Counters:
    """Operation and error counts of one actor, written to ``<role>.json`` now and then."""

    def __init__(self, role: str, path: Path) -> None:
        self.role = role
        self.path = path
        self.ops: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.samples: dict[str, str] = {}  # the first message of each error type
        self.violations: list[str] = []
        self._lock = threading.Lock()

    def op(self, name: str, count: int = 1) -> None:
        with self._lock:
            self.ops[name] += count

    def error(self, error: BaseException, where: str = "") -> None:
        name = type(error).__name__
        with self._lock:
            self.errors[name] += 1
            self.samples.setdefault(name, f"{where}: {error}"[:500] if where else str(error)[:500])

    def violation(self, text: str) -> None:
        with self._lock:
            self.violations.append(text)

    def dump(self, **extra: Any) -> None:
        with self._lock:
            data = {
                "role": self.role,
                "ops": dict(sorted(self.ops.items())),
                "errors": dict(sorted(self.errors.items())),
                "error_samples": dict(sorted(self.samples.items())),
                "violations": list(self.violations[:50]),
                "violation_count": len(self.violations),
                **extra,
            }
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1, default=str))
        tmp.replace(self.path)


def _pace(counters: Counters, every: float = 2.0) -> Callable[[], None]:
    """A function that dumps the counters at most every ``every`` seconds."""
    last = [time.monotonic()]

    def tick() -> None:
        if time.monotonic() - last[0] >= every:
            last[0] = time.monotonic()
            counters.dump()

    return tick


# --- the actors (each runs in its own spawned process) ------------------------------------------


def actor_entry(role: str, store_url: str, config: SoakConfig, workdir: str, stop: Any) -> None:
    """The target of every actor process."""
    work = Path(workdir)
    logging.basicConfig(
        filename=str(work / f"{role}.log"),
        level=logging.WARNING,
        format="%(asctime)s %(threadName)s %(name)s %(levelname)s %(message)s",
    )
    counters = Counters(role, work / f"{role}.json")
    actors: dict[str, Callable[[Any, SoakConfig, Path, Any, Counters], None]] = {
        "writer": _writer,
        "reader": _reader,
        "compactor": _compactor,
        "gc": _gc,
    }
    from slate_ops.objstore import open_store

    try:
        actors[role](open_store(store_url), config, work, stop, counters)
    except BaseException as error:
        counters.violation(f"{role} process crashed: {''.join(traceback.format_exception(error))}")
        raise
    finally:
        counters.dump(finished=True)


class _WriterGate:
    """Lets the writer threads run operations, or pauses them so the Db can be swapped."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.paused = False
        self.inflight: dict[int, float] = {}  # thread -> start of its operation

    @contextlib.contextmanager
    def operation(self, thread: int, stop: Any) -> Iterator[bool]:
        with self.cond:
            while self.paused and not stop.is_set():
                self.cond.wait(0.1)
            running = not stop.is_set()
            if running:
                self.inflight[thread] = time.monotonic()
        if not running:
            yield False
            return
        try:
            yield True
        finally:
            with self.cond:
                del self.inflight[thread]
                self.cond.notify_all()

    def oldest(self) -> float | None:
        with self.cond:
            return min(self.inflight.values(), default=None)

    def drain(self, timeout: float) -> bool:
        """Pause new operations and wait for those in flight; False if they did not finish."""
        deadline = time.monotonic() + timeout
        with self.cond:
            self.paused = True
            while self.inflight:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self.cond.wait(min(remaining, 0.1))
            return True

    def resume(self) -> None:
        with self.cond:
            self.paused = False
            self.cond.notify_all()


def _writer(store: Any, config: SoakConfig, work: Path, stop: Any, counters: Counters) -> None:
    from slate_ops import Db, DbOptions, WriteBatch
    from slate_ops.errors import DbClosedError, FencedError, SlateOpsError

    options = DbOptions(
        wal_flush_interval=timedelta(milliseconds=20),
        manifest_poll_interval=timedelta(milliseconds=200),
        l0_sst_size_bytes=32 * 1024,
        l0_max_ssts=8,
        max_unflushed_bytes=512 * 1024,
        backpressure_timeout=timedelta(seconds=10),
        block_cache_bytes=8 * 1024 * 1024,
    )
    log_file = (work / ACK_LOG).open("a", buffering=1)
    log_lock = threading.Lock()
    numbers = itertools.count(1)
    gate = _WriterGate()
    holder: list[Any] = [None]
    needs_reopen = threading.Event()

    def open_db() -> Any:
        """A new writer (fencing the previous one); None if the soak stops before one opens."""
        while not stop.is_set():
            try:
                db = Db.open(config.db_path, store, options)
                counters.op("opens")
                return db
            except SlateOpsError as error:
                counters.error(error, "Db.open")
                stop.wait(0.2)
        return None

    def one_operation(db: Any, rng: random.Random, thread: int) -> None:
        with log_lock:
            n = next(numbers)
        roll = rng.random()
        if roll < config.delete_probability:
            kind, keys = "delete", [key_of(thread, rng.randrange(config.keys_per_thread))]
        elif roll < config.delete_probability + config.batch_probability:
            kind = "batch"
            keys = [key_of(thread, i) for i in rng.sample(range(config.keys_per_thread), rng.randint(2, 8))]
        else:
            kind, keys = "put", [key_of(thread, rng.randrange(config.keys_per_thread))]
        with log_lock:
            for i, key in enumerate(keys):
                op = "d" if kind == "delete" or (kind == "batch" and i % 4 == 3) else "p"
                log_file.write(f"A {n} {op} {key.hex()}\n")
        if kind == "delete":
            db.delete(keys[0], await_durable=True)
        elif kind == "put":
            db.put(keys[0], value_of(keys[0], n, config.value_bytes), await_durable=True)
        else:
            batch = WriteBatch()
            for i, key in enumerate(keys):
                if i % 4 == 3:
                    batch.delete(key)
                else:
                    batch.put(key, value_of(key, n, config.value_bytes))
            db.write(batch, await_durable=True)
        with log_lock:
            log_file.write(f"K {n}\n")
        counters.op(kind)
        counters.op("acked_keys", len(keys))

    def work_loop(thread: int) -> None:
        rng = random.Random(f"{config.seed}:writer:{thread}")
        while not stop.is_set():
            with gate.operation(thread, stop) as running:
                if not running:
                    return
                try:
                    one_operation(holder[0], rng, thread)
                except DbClosedError as error:  # the Db was swapped under a waiting write
                    counters.error(error, "write")
                except FencedError as error:
                    counters.error(error, "write")
                    needs_reopen.set()
                except SlateOpsError as error:
                    counters.error(error, "write")
                    time.sleep(0.05)

    def swap(clean: bool, stalled: bool) -> None:
        """Drain the threads, close (or crash) the Db and open a new one."""
        db = holder[0]
        if stalled or not gate.drain(config.stall_s):
            counters.op("stalls")
            counters.violation(f"writer: an operation was stuck for over {config.stall_s}s")
            simulate_crash(db)  # frees the threads waiting for durability (DbClosedError)
            gate.drain(config.stall_s)
        elif clean:
            try:
                db.close()
                counters.op("clean_closes")
            except SlateOpsError as error:
                counters.error(error, "close")
        else:
            simulate_crash(db)
            counters.op("crashes")
        needs_reopen.clear()
        holder[0] = open_db()
        if holder[0] is not None:  # else the soak is stopping: the threads stay paused and end
            gate.resume()

    tick = _pace(counters)
    holder[0] = open_db()
    if holder[0] is None:
        return
    threads = [
        threading.Thread(target=work_loop, args=(i,), name=f"writer-{i}", daemon=True)
        for i in range(config.writer_threads)
    ]
    for thread in threads:
        thread.start()
    last_swap = time.monotonic()
    swaps = 0
    try:
        while not stop.wait(0.1) and holder[0] is not None:
            tick()
            oldest = gate.oldest()
            stalled = oldest is not None and time.monotonic() - oldest > config.stall_s
            if (
                stalled
                or needs_reopen.is_set()
                or time.monotonic() - last_swap > config.writer_reopen_every_s
            ):
                swap(clean=swaps % 2 == 1, stalled=stalled)  # a crash first, then alternately
                swaps += 1
                last_swap = time.monotonic()
    finally:
        deadline = time.monotonic() + config.stall_s
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if any(t.is_alive() for t in threads):
            counters.op("stalls")
            counters.violation("writer: threads still waiting at the end")
            if holder[0] is not None:
                simulate_crash(holder[0])
            for thread in threads:
                thread.join(10)
        elif holder[0] is not None:
            try:
                holder[0].close()
                counters.op("clean_closes")
                counters.op("final_clean_close")
            except SlateOpsError as error:
                counters.error(error, "final close")
        log_file.close()


def _reader(store: Any, config: SoakConfig, work: Path, stop: Any, counters: Counters) -> None:
    from slate_ops import DbReader, ReaderOptions
    from slate_ops.errors import SlateOpsError

    options = ReaderOptions(
        manifest_poll_interval=timedelta(milliseconds=250),
        checkpoint_lifetime=timedelta(seconds=10),
        block_cache_bytes=8 * 1024 * 1024,
    )
    rng = random.Random(f"{config.seed}:reader")
    newest: dict[bytes, int] = {}  # key -> the newest write number seen

    def check(key: bytes, value: bytes | None, how: str) -> None:
        counters.op("values_checked")
        if value is None:
            return  # deleted (or never written): says nothing about order
        parsed = parse_value(value)
        if parsed is None or parsed[0] != key:
            counters.violation(f"{how} {key!r}: value {value[:40]!r} is not a value of this key")
            return
        n = parsed[1]
        seen = newest.get(key, 0)
        if n < seen:
            counters.violation(f"{how} {key!r}: read write {n} after having read write {seen}")
        newest[key] = max(seen, n)

    tick = _pace(counters)
    reader: Any = None
    opened_at = 0.0
    consecutive = 0
    try:
        while not stop.is_set():
            tick()
            if reader is not None and (
                consecutive >= 5 or time.monotonic() - opened_at > config.reader_reopen_every_s
            ):
                with contextlib.suppress(SlateOpsError):
                    reader.close()
                reader = None
            if reader is None:
                try:
                    reader = DbReader.open(config.db_path, store, options=options)
                    opened_at = time.monotonic()
                    consecutive = 0
                    counters.op("opens")
                except SlateOpsError as error:
                    counters.error(error, "DbReader.open")
                    stop.wait(0.2)
                    continue
            if counters.ops["gets"] % 20 == 0:
                stop.wait(0.02)  # about 1,000 reads a second: leave the CPU to the others
            thread = rng.randrange(config.writer_threads)
            try:
                if rng.random() < 0.03:
                    for key, value in reader.scan_prefix(b"w%d-" % thread):
                        check(key, value, "scan")
                    counters.op("scans")
                else:
                    key = key_of(thread, rng.randrange(config.keys_per_thread))
                    check(key, reader.get(key), "get")
                    counters.op("gets")
                consecutive = 0
            except SlateOpsError as error:
                counters.error(error, "read")
                consecutive += 1
                stop.wait(0.05)
    finally:
        if reader is not None:
            try:
                reader.close()
            except SlateOpsError as error:
                counters.error(error, "close")
        counters.dump(keys_seen=len(newest))


def _compactor(store: Any, config: SoakConfig, work: Path, stop: Any, counters: Counters) -> None:
    from slate_ops.compaction import Compactor, CompactorOptions
    from slate_ops.errors import FencedError, SlateOpsError

    options = CompactorOptions(
        poll_interval=timedelta(milliseconds=200),
        min_sources=4,
        max_sources=8,
        target_sst_bytes=64 * 1024,
        max_subcompaction_bytes=256 * 1024,
        compaction_checkpoint_lifetime=timedelta(seconds=5),
    )
    tick = _pace(counters)
    compactor: Any = None
    opened_at = 0.0
    while not stop.is_set():
        tick()
        if compactor is None or time.monotonic() - opened_at > config.compactor_reopen_every_s:
            try:
                compactor = Compactor(config.db_path, store, options)  # fences the previous one
                opened_at = time.monotonic()
                counters.op("opens")
            except SlateOpsError as error:
                counters.error(error, "Compactor()")
                stop.wait(0.2)
                continue
        try:
            report = compactor.run_once()
        except FencedError as error:
            counters.error(error, "run_once")
            compactor = None
            continue
        except SlateOpsError as error:
            counters.error(error, "run_once")
            stop.wait(0.2)
            continue
        if report is None:
            counters.op("idle_polls")
            stop.wait(options.poll_interval.total_seconds())
        else:
            counters.op("compactions")
            counters.op(f"compactions_{report.kind}")
            counters.op("rows_in", report.rows_in)
            counters.op("rows_out", report.rows_out)


def _gc(store: Any, config: SoakConfig, work: Path, stop: Any, counters: Counters) -> None:
    from slate_ops.errors import GcFailedError, SlateOpsError
    from slate_ops.gc import GarbageCollector, GcOptions, GcReport

    options = GcOptions.with_min_age(timedelta(seconds=config.gc_min_age_s), allow_unsafe_min_age=True)
    collector = GarbageCollector(config.db_path, store, options)
    tick = _pace(counters)

    def tally(report: GcReport) -> None:
        for resource in report.resources:
            counters.op(f"deleted_{resource.resource}", resource.count)
        counters.op("checkpoints_expired", len(report.checkpoints_expired))

    while not stop.wait(config.gc_interval_s):
        tick()
        try:
            tally(collector.run_once(dry_run=False))
            counters.op("runs")
        except GcFailedError as error:
            counters.error(error, "run_once")
            counters.op("failed_runs")
            assert isinstance(error.report, GcReport)
            tally(error.report)
        except SlateOpsError as error:
            counters.error(error, "run_once")
            counters.op("failed_runs")


# --- checking the outcome ----------------------------------------------------------------------


@dataclass
class WriteLog:
    """What the writer attempted and what it was told is durable, from ``acks.log``."""

    attempts: dict[bytes, dict[int, str]] = field(default_factory=dict)  # key -> {n: "p" | "d"}
    last_acked: dict[bytes, tuple[int, str]] = field(default_factory=dict)  # key -> (n, op)
    operations: int = 0
    acknowledged: int = 0

    @classmethod
    def read(cls, path: Path) -> WriteLog:
        log = cls()
        keys_of: dict[int, list[tuple[bytes, str]]] = {}
        for line in path.read_text().splitlines():
            parts = line.split()
            if not parts:
                continue
            if parts[0] == "A" and len(parts) == 4:
                n, op, key = int(parts[1]), parts[2], bytes.fromhex(parts[3])
                if n not in keys_of:
                    log.operations += 1
                keys_of.setdefault(n, []).append((key, op))
                log.attempts.setdefault(key, {})[n] = op
            elif parts[0] == "K" and len(parts) == 2:
                n = int(parts[1])
                log.acknowledged += 1
                for key, op in keys_of[n]:
                    if n > log.last_acked.get(key, (0, ""))[0]:
                        log.last_acked[key] = (n, op)
            # a torn last line (the process was killed while writing) is ignored
        return log


@dataclass
class FinalCheck:
    keys_checked: int = 0
    acknowledged_keys: int = 0
    lost: list[str] = field(default_factory=list)
    phantoms: list[str] = field(default_factory=list)  # data the writer never wrote
    unacknowledged_survivors: int = 0  # keys holding a later, unacknowledged (but durable) write


def check_final(
    log: WriteLog, read: Callable[[bytes], bytes | None], scanned: dict[bytes, bytes]
) -> FinalCheck:
    """Every acknowledged write must be readable: the key holds its last acknowledged write or a later
    attempted one. ``scanned`` (a full scan) must hold nothing the writer never attempted."""
    result = FinalCheck()
    for key in sorted(set(log.attempts) | set(scanned)):
        value = read(key)
        result.keys_checked += 1
        if scanned.get(key) != value:
            result.lost.append(
                f"{key!r}: get returns {value!r:.60} but a scan returns {scanned.get(key)!r:.60}"
            )
        attempts = log.attempts.get(key, {})
        parsed = None if value is None else parse_value(value)
        if value is not None and (parsed is None or parsed[0] != key or attempts.get(parsed[1]) != "p"):
            result.phantoms.append(f"{key!r}: holds {value[:60]!r}, which the writer never wrote there")
            continue
        if key not in log.last_acked:
            continue
        result.acknowledged_keys += 1
        n, op = log.last_acked[key]
        if value is None:
            later_delete = any(m > n and o == "d" for m, o in attempts.items())
            if op != "d" and not later_delete:
                result.lost.append(f"{key!r}: acknowledged write {n} ({op}) is gone: the key is missing")
            elif op != "d":
                result.unacknowledged_survivors += 1
            continue
        assert parsed is not None
        if parsed[1] < n or (parsed[1] == n and op == "d"):
            result.lost.append(f"{key!r}: holds write {parsed[1]}, older than acknowledged write {n} ({op})")
        elif parsed[1] > n:
            result.unacknowledged_survivors += 1
    return result


def describe_state(store: Any, path: str) -> dict[str, Any]:
    """The latest manifest's shape and its checkpoints by kind (writer, compaction, reader/other)."""
    from slate_ops.compaction.compactor import COMPACTION_CHECKPOINT
    from slate_ops.manifest.store import ManifestStore

    latest = ManifestStore(store, path).read_latest_required()
    manifest = latest.value
    kinds: Counter[str] = Counter()
    for checkpoint in manifest.checkpoints:
        if checkpoint.metadata is not None:
            kinds["writer"] += 1
        elif checkpoint.name == COMPACTION_CHECKPOINT:
            kinds["compaction"] += 1
        else:
            kinds["reader or other"] += 1
    return {
        "manifest_id": latest.id,
        "writer_epoch": manifest.writer_epoch,
        "compactor_epoch": manifest.compactor_epoch,
        "l0": len(manifest.l0),
        "sorted_runs": len(manifest.compacted),
        "ssts": len(manifest.ssts),
        "checkpoints": dict(kinds),
    }


# --- the run -----------------------------------------------------------------------------------


@dataclass
class SoakReport:
    seed: int
    duration_s: float  # from the actors' start to the stop signal
    wall_s: float  # everything, including start-up and the final checks
    gc_min_age_s: float
    rates: dict[str, Any]
    actors: dict[str, dict[str, Any]]  # role -> counters (ops, errors, violations, exit code)
    proxy: dict[str, dict[str, Any]]  # role -> requests, retries, faults by kind
    totals: dict[str, Any]
    writes_attempted: int
    writes_acknowledged: int
    keys_acknowledged: int
    unacknowledged_survivors: int
    lost_writes: list[str]
    phantom_values: list[str]
    verify_problems: list[str]
    final_gc: dict[str, int]
    final_state: dict[str, Any]  # the latest manifest once the actors stopped
    problems: list[str]  # everything that makes the run a failure

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        lines = [
            f"chaos soak: seed {self.seed}, {self.duration_s:.1f}s of load ({self.wall_s:.1f}s in all), "
            f"GC min age {self.gc_min_age_s:g}s",
            f"  writes: {self.writes_attempted} attempted, {self.writes_acknowledged} acknowledged "
            f"(as durable) over {self.keys_acknowledged} keys; lost: {len(self.lost_writes)}; "
            f"phantom values: {len(self.phantom_values)}; unacknowledged but durable: "
            f"{self.unacknowledged_survivors}",
        ]
        for role in ROLES:
            actor = self.actors.get(role, {})
            proxy = self.proxy.get(role, {})
            faults = ", ".join(f"{k} {v}" for k, v in proxy.get("faults", {}).items() if v)
            lines.append(
                f"  {role:9} ops {actor.get('ops', {})}; errors {actor.get('errors', {})}; "
                f"requests {proxy.get('requests', 0)}, retries {proxy.get('retries', 0)}; faults: {faults}"
            )
        totals = self.totals
        lines.append(
            f"  total: {totals['requests']} requests, {totals['retries']} botocore retries "
            f"({totals['retried_412']} resent conditional puts refused with 412, settled by put id), "
            f"{sum(totals['faults'].values())} faults {totals['faults']}"
        )
        lines.append(f"  final state: {self.final_state}")
        lines.append(f"  final GC: {self.final_gc}; verify_db problems: {len(self.verify_problems)}")
        lines.append("  OK" if self.ok else "  FAILED:\n    " + "\n    ".join(self.problems[:20]))
        return "\n".join(lines)


def store_url(bucket: str, prefix: str, endpoint: str) -> str:
    return f"s3://{bucket}/{prefix}?{urlencode({'endpoint_url': endpoint, 'region': REGION})}"


def run_soak(
    upstream: str,
    bucket: str,
    config: SoakConfig,
    workdir: Path,
    *,
    prefix: str = "chaos",
    progress: Callable[[str], None] | None = None,
) -> SoakReport:
    """Run the soak against the S3 server at ``upstream`` (moto), in ``bucket``/``prefix``."""
    from slate_ops import DbReader
    from slate_ops.admin import create_db
    from slate_ops.admin.verify import Severity, failed, verify_db
    from slate_ops.errors import GcFailedError
    from slate_ops.gc import GarbageCollector, GcOptions
    from slate_ops.objstore import S3Store
    from slate_ops.objstore.s3 import make_s3_client

    say = progress or (lambda text: None)
    started = time.monotonic()
    workdir.mkdir(parents=True, exist_ok=True)
    direct = S3Store(bucket, prefix, client=make_s3_client(endpoint_url=upstream, region=REGION))
    create_db(config.db_path, direct)
    problems: list[str] = []

    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    with ChaosProxy(upstream, config.rates, seed=config.seed, labels=ROLES) as proxy:
        processes = {
            role: ctx.Process(
                target=actor_entry,
                args=(role, store_url(bucket, prefix, proxy.endpoint(role)), config, str(workdir), stop),
                name=f"soak-{role}",
                daemon=True,
            )
            for role in ROLES
        }
        for process in processes.values():
            process.start()
        load_started = time.monotonic()
        deadline = load_started + config.duration_s
        next_note = load_started + 10
        while time.monotonic() < deadline:
            time.sleep(0.2)
            for role, process in processes.items():
                if not process.is_alive() and process.exitcode is not None:
                    problems.append(f"{role} process exited early with code {process.exitcode}")
                    deadline = time.monotonic()
            if time.monotonic() >= next_note:
                next_note += 10
                say(f"{time.monotonic() - load_started:.0f}s: proxy totals {proxy.totals()}")
        stop.set()
        load_s = time.monotonic() - load_started
        exit_codes: dict[str, int | None] = {}
        stop_deadline = time.monotonic() + config.stop_timeout_s
        for role, process in processes.items():
            process.join(max(0.1, stop_deadline - time.monotonic()))
            if process.is_alive():
                problems.append(f"{role} process did not stop within {config.stop_timeout_s}s")
                process.terminate()
                process.join(10)
            exit_codes[role] = process.exitcode
        proxy_stats = proxy.stats()
        totals = proxy.totals()

    actors: dict[str, dict[str, Any]] = {}
    for role in ROLES:
        try:
            actors[role] = json.loads((workdir / f"{role}.json").read_text())
        except (OSError, ValueError):
            actors[role] = {}
        actors[role]["exit_code"] = exit_codes.get(role)
        if exit_codes.get(role) != 0:
            problems.append(f"{role} process ended with exit code {exit_codes.get(role)}")
        problems += [f"{role}: {v}" for v in actors[role].get("violations", [])]
    say("actors stopped; checking every acknowledged write on moto directly")

    log = WriteLog.read(workdir / ACK_LOG)
    final_state = describe_state(direct, config.db_path)
    closed = actors["writer"].get("ops", {}).get("final_clean_close", 0)
    if closed and final_state["checkpoints"].get("writer", 0):
        problems.append(f"the writer closed, yet writer checkpoints are left: {final_state['checkpoints']}")

    def check_now() -> FinalCheck:
        with DbReader.open(config.db_path, direct) as reader:
            return check_final(log, reader.get, dict(reader.scan()))

    def verify_now() -> list[str]:
        results = verify_db(config.db_path, direct)
        return [f"{r.name}: {p}" for r in failed(results) if r.severity is Severity.ERROR for p in r.problems]

    outcome = check_now()
    verify_problems = verify_now()
    final_gc: dict[str, int] = {}
    options = GcOptions.with_min_age(timedelta(seconds=config.gc_min_age_s), allow_unsafe_min_age=True)
    try:
        report = GarbageCollector(config.db_path, direct, options).run_once(dry_run=False)
    except GcFailedError as error:
        problems.append(f"the final GC run (no faults) failed: {error}")
        report = error.report  # type: ignore[assignment]
    final_gc = {r.resource: r.count for r in report.resources}
    again = check_now()
    verify_problems += [f"after the final GC: {p}" for p in verify_now()]
    lost = outcome.lost + [f"after the final GC: {text}" for text in again.lost]
    phantoms = outcome.phantoms + [f"after the final GC: {text}" for text in again.phantoms]
    problems += [f"lost write: {text}" for text in lost]
    problems += [f"phantom value: {text}" for text in phantoms]
    problems += [f"verify_db: {text}" for text in verify_problems]
    if log.acknowledged == 0:
        problems.append("the writer had no write acknowledged")

    return SoakReport(
        seed=config.seed,
        duration_s=round(load_s, 1),
        wall_s=round(time.monotonic() - started, 1),
        gc_min_age_s=config.gc_min_age_s,
        rates=asdict(config.rates),
        actors=actors,
        proxy=proxy_stats,
        totals=totals,
        writes_attempted=log.operations,
        writes_acknowledged=log.acknowledged,
        keys_acknowledged=outcome.acknowledged_keys,
        unacknowledged_survivors=outcome.unacknowledged_survivors,
        lost_writes=lost,
        phantom_values=phantoms,
        verify_problems=verify_problems,
        final_gc=final_gc,
        final_state=final_state,
        problems=problems,
    )


# --- standalone --------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.reliability.soak",
        description="Chaos soak of slate_ops on moto's S3 behind a fault-injecting proxy.",
    )
    parser.add_argument("--duration", type=float, default=SoakConfig.duration_s, help="seconds of load")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gc-min-age", type=float, default=SoakConfig.gc_min_age_s, help="seconds (unsafe)")
    parser.add_argument("--no-storms", action="store_true", help="no bursts of errors, only the base rates")
    parser.add_argument(
        "--rate",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a FaultRates field, e.g. reset_after_apply=0.05 or storm_factor=12 (repeatable)",
    )
    parser.add_argument("--workdir", type=Path, help="keep logs and counters here (default: a temp dir)")
    parser.add_argument("--report", type=Path, help="write the report as JSON to this file")
    args = parser.parse_args(argv)

    from tests.support.s3 import AtomicMotoServer

    for name in [v for v in os.environ if v.startswith("AWS_")]:
        del os.environ[name]
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION=REGION,
        AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
    )
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    config = SoakConfig(duration_s=args.duration, seed=args.seed, gc_min_age_s=args.gc_min_age)
    if args.no_storms:
        config = replace(config, rates=replace(config.rates, storm_every_s=0.0))
    for item in args.rate:
        name, _, value = item.partition("=")
        if name not in {f.name for f in fields(FaultRates)} or name == "latency_s":
            parser.error(f"--rate {item}: unknown fault rate {name!r}")
        overrides: dict[str, Any] = {name: float(value)}
        config = replace(config, rates=replace(config.rates, **overrides))
    server = AtomicMotoServer()
    server.start()
    try:
        upstream = server.endpoint
        from slate_ops.objstore.s3 import make_s3_client

        bucket = f"soak-{uuid.uuid4().hex[:12]}"
        make_s3_client(endpoint_url=upstream, region=REGION).create_bucket(Bucket=bucket)
        with contextlib.ExitStack() as stack:
            workdir = args.workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="soak-")))
            report = run_soak(upstream, bucket, config, workdir, progress=lambda t: print(t, flush=True))
    finally:
        server.stop()
    print(report.summary())
    if args.report:
        args.report.write_text(json.dumps(report.as_dict(), indent=1, default=str))
    return 0 if report.ok else 1


if __name__ == "__main__":
    from tests.reliability.soak import main as _main  # the importable module, so spawned actors find it

    sys.exit(_main())
