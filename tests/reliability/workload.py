"""A scripted, deterministic, resumable workload over five databases, and the invariants that a crash
at any object-store call must not break (issue 8, "Crash-point sweep").

The workload (:data:`STEPS`) runs on one store with a :class:`~slate_ops.runtime.ManualRuntime`:

* writer puts, deletes and batches on ``db/main``, acknowledged as durable by ``put(...,
  await_durable=True)``, by ``flush()`` and by ``close()``; memtable flushes to L0;
* an L0 compaction and, later, full compactions of ``db/main``, the clone and the merged database;
* an admin checkpoint and a tag of ``db/main``; a clone ``db/clone`` (then written to);
* a split of ``db/main`` into ``db/low`` / ``db/high`` at ``k050`` (``db/low`` then written to) and
  a merge of both into ``db/merged``;
* garbage collection of every database, the clock past every min age;
* then a composition of destroys (issue 12): ``db/main``, the source of the clone and both shards, is
  soft-destroyed; ``db/low`` is written, fully compacted (it stops reading ``db/main``) and
  hard-destroyed, which releases its final checkpoint on ``db/main``; GC of every database runs past
  the destroy grace period. ``db/high`` and the clone must still read everything they read there.

Every step is safe to run again from its beginning, so a run interrupted at any point is *finished*
by re-running the interrupted step and the ones after it (:func:`run_workload` with ``start``):
writes are re-issued (same keys, same values, same order), compactions and GC runs are simply run
again, ``create_clone`` / ``split`` / ``merge`` complete an interrupted run by design, and the
checkpoint and tag steps first check whether they already happened, a soft destroy keeps the first
``destroyed_at_s`` and a hard destroy that finds no database is done. Which step was interrupted is
known to the driver (the "operator"), never to the crashed components.

:class:`Model` records what the workload's client knows: every write acknowledged as durable per
database, and the writes issued since the last acknowledgement (which a crash may or may not have
made durable). The checks (:func:`check_acknowledged`, :func:`check_finished`, :func:`check_gc_clean`)
compare the store with it, and every final check includes :func:`slate_ops.admin.check_references`
(every SST any database reads exists and is pinned by that database's own final checkpoint);
:func:`sweep_point` runs one crash point end to end and
:func:`count_crash_points` counts the calls of an uninterrupted run.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import logging
import math
import os
import shutil
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

from slate_ops import Db, DbOptions, DbReader, ReaderOptions, WriteBatch, admin
from slate_ops.admin import reachability
from slate_ops.admin.clone import SOURCE_CHECKPOINT_PREFIX
from slate_ops.admin.rescale import MERGE_CHECKPOINT_PREFIX, SPLIT_CHECKPOINT_PREFIX
from slate_ops.admin.verify import Severity
from slate_ops.compaction import Compactor, CompactorOptions, LocalExecutor
from slate_ops.config import CheckpointOptions
from slate_ops.errors import DbNotFoundError, TagExistsError
from slate_ops.gc import GarbageCollector, GcOptions
from slate_ops.gc.listing import list_compacted, list_wal
from slate_ops.gc.references import Protection, own_sst_keys
from slate_ops.manifest.model import KeyRange, Manifest, resolve_sst_path
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import CountingStore, FaultInjectingStore, LocalStore
from slate_ops.objstore.base import GetResult, ObjectMeta, ObjectStore, PutMode, PutResult
from slate_ops.objstore.wrappers import SimulatedCrash
from slate_ops.runtime import ManualRuntime
from tests.support.engine import simulate_crash

MAIN = "db/main"
CLONE = "db/clone"
LOW = "db/low"
HIGH = "db/high"
MERGED = "db/merged"
DATABASES = (MAIN, CLONE, LOW, HIGH, MERGED)
GC_ORDER = (MERGED, LOW, HIGH, CLONE, MAIN)
"""Dependents before what they reference: a clone's GC releases its final checkpoint on its parent."""

SPLIT_KEY = b"k050"
SHARDS = ((LOW, KeyRange(None, SPLIT_KEY)), (HIGH, KeyRange(SPLIT_KEY, None)))
CHECKPOINT_NAME = "sweep/checkpoint"
TAG_NAME = "sweep-tag"

# Background work only when asked: explicit flushes keep the sequence of store calls deterministic.
WRITER = DbOptions(
    wal_flush_interval=timedelta(hours=1), manifest_poll_interval=timedelta(hours=1), l0_max_ssts=1000
)
READER = ReaderOptions(manifest_poll_interval=timedelta(hours=1), checkpoint_lifetime=timedelta(hours=3))
COMPACTOR = CompactorOptions(min_sources=2, target_sst_bytes=2048, max_subcompaction_bytes=1 << 30)
GC = GcOptions()  # SlateDB's 300 s min ages: the workload's clock runs far enough ahead of the files

GC_TIME = 3600.0
"""Seconds after the start at which the workload's GC step runs: past every min age and past the
lifetime of the clone's, split's, merge's and compactions' ephemeral checkpoints."""
DESTROY_TIME = GC_TIME + 100
"""When ``db/main`` is soft-destroyed; ``db/low`` is written and compacted right after."""
HARD_DESTROY_TIME = DESTROY_TIME + 1800.0
"""When ``db/low`` is hard-destroyed: its compaction's 15-minute checkpoint has expired."""
DESTROY_GC_TIME = DESTROY_TIME + 86_400.0 + 600
"""GC of every database once the destroy grace period (a day) of ``db/main`` has passed."""
FINAL_GC_TIME = 2 * 86_400.0
"""Seconds after the start at which the checks run GC: after every step, past the readers'
checkpoint lifetime too, but inside the lifetime of the workload's own checkpoint
(:data:`CHECKPOINT_LIFETIME`)."""
CHECKPOINT_LIFETIME = timedelta(days=30)

Value = bytes | None  # None: a deletion
_T = TypeVar("_T")
_OVERWRITE = PutMode.overwrite()


def key(i: int) -> bytes:
    return b"k%03d" % i


def restricted(contents: dict[bytes, bytes], key_range: KeyRange) -> dict[bytes, bytes]:
    return {k: v for k, v in contents.items() if key_range.contains(k)}


# --- the model ------------------------------------------------------------------------------------


@dataclass
class DbModel:
    """One database as its client knows it: acknowledged writes, and writes issued since."""

    acked: dict[bytes, Value] = field(default_factory=dict)
    pending: dict[bytes, list[Value]] = field(default_factory=dict)

    @classmethod
    def of(cls, contents: dict[bytes, bytes]) -> DbModel:
        return cls(acked=dict(contents))

    def issue(self, k: bytes, value: Value) -> None:
        self.pending.setdefault(k, []).append(value)

    def ack(self) -> None:
        """Everything issued so far is durable (WAL SSTs are written in sequence order)."""
        for k, values in self.pending.items():
            self.acked[k] = values[-1]
        self.pending.clear()

    def settle(self, seen: dict[bytes, bytes]) -> None:
        """After a crash: adopt the recovered value of every key with writes pending."""
        for k in self.pending:
            self.acked[k] = seen.get(k)
        self.pending.clear()

    def allowed(self, k: bytes) -> set[Value]:
        """What a reader may see after a crash: the acknowledged value, or one issued after it."""
        return {self.acked.get(k), *self.pending.get(k, ())}

    def contents(self) -> dict[bytes, bytes]:
        """The exact contents once nothing is pending."""
        assert not self.pending, f"writes still pending: {sorted(self.pending)[:5]}"
        return {k: v for k, v in sorted(self.acked.items()) if v is not None}


@dataclass
class Model:
    """What the workload's client knows; survives a crash (it lives in the driver, not the engine)."""

    dbs: dict[str, DbModel] = field(default_factory=dict)
    views: dict[str, tuple[str, dict[bytes, bytes]]] = field(default_factory=dict)
    """Named checkpoints and tags: ``name -> (database, its contents)``."""
    at_split: dict[bytes, bytes] = field(default_factory=dict)
    """The source's contents when it was split."""
    completed: int = 0
    """Steps of :data:`STEPS` completed."""
    soft_destroyed: set[str] = field(default_factory=set)
    """Databases whose soft destroy has started (they may be destroyed already)."""
    hard_destroyed: set[str] = field(default_factory=set)
    """Databases whose hard destroy has started (they may be gone already)."""

    def live(self) -> list[str]:
        """The databases that must still exist (soft-destroyed ones included)."""
        return [p for p in DATABASES if p in self.dbs and p not in self.hard_destroyed]

    def readable(self) -> list[str]:
        """The databases a reader can open: live and not soft-destroyed."""
        return [p for p in self.live() if p not in self.soft_destroyed]

    def acknowledged_writes(self) -> int:
        return sum(len(m.acked) for m in self.dbs.values())


# --- components and crashes -----------------------------------------------------------------------


class CrashSignallingStore:
    """Passes calls through; on :class:`SimulatedCrash` tells the listeners before re-raising.

    A crash inside a writer's background flush is caught (and retried) there, so a caller waiting
    for durability would wait forever; the listener fails that writer, as a dead process would.
    """

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.listeners: list[Callable[[SimulatedCrash], None]] = []
        self.crashed: SimulatedCrash | None = None

    @property
    def url(self) -> str:
        return self.inner.url

    def _signal(self, crash: SimulatedCrash) -> None:
        if self.crashed is None:
            self.crashed = crash
        for listener in list(self.listeners):
            listener(crash)

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        try:
            return self.inner.get(key, byte_range)
        except SimulatedCrash as crash:
            self._signal(crash)
            raise

    def head(self, key: str) -> ObjectMeta:
        try:
            return self.inner.head(key)
        except SimulatedCrash as crash:
            self._signal(crash)
            raise

    def put(self, key: str, data: bytes, mode: PutMode = _OVERWRITE, put_id: str | None = None) -> PutResult:
        try:
            return self.inner.put(key, data, mode, put_id)
        except SimulatedCrash as crash:
            self._signal(crash)
            raise

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[ObjectMeta]:
        try:
            return iter(list(self.inner.list(prefix, start_after)))
        except SimulatedCrash as crash:
            self._signal(crash)
            raise

    def delete(self, key: str) -> None:
        try:
            self.inner.delete(key)
        except SimulatedCrash as crash:
            self._signal(crash)
            raise


class CompletedCalls:
    """Counts the calls that complete (return without an error), the unit of ``crash_after``, and
    notes the step in which each crash point lands: ``crash_after(n)`` raises at the first call made
    after ``n`` completed, whatever that call's outcome would have been."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.completed = 0
        self.step = ""
        self.landing: list[str] = []  # landing[n]: the step in which crash point n lands
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return self.inner.url

    def _call(self, call: Callable[[], _T]) -> _T:
        # Calls may overlap (the writer replays its WAL with parallel GETs): every crash point up to
        # the next one lands in the step that is running.
        with self._lock:
            while len(self.landing) <= self.completed:
                self.landing.append(self.step)
        result = call()
        with self._lock:
            self.completed += 1
            while len(self.landing) < self.completed:
                self.landing.append(self.step)
        return result

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        return self._call(lambda: self.inner.get(key, byte_range))

    def head(self, key: str) -> ObjectMeta:
        return self._call(lambda: self.inner.head(key))

    def put(self, key: str, data: bytes, mode: PutMode = _OVERWRITE, put_id: str | None = None) -> PutResult:
        return self._call(lambda: self.inner.put(key, data, mode, put_id))

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[ObjectMeta]:
        return iter(self._call(lambda: list(self.inner.list(prefix, start_after))))

    def delete(self, key: str) -> None:
        self._call(lambda: self.inner.delete(key))


@dataclass
class Context:
    """One (possibly resumed) run of the workload: the store, the clock and what is held in memory."""

    store: ObjectStore
    clock: ManualRuntime
    start: float
    model: Model
    writers: list[Db] = field(default_factory=list)
    readers: list[DbReader] = field(default_factory=list)

    def at(self, offset: float) -> None:
        """Set the clock for a step; a re-run of the step sees the same time."""
        self.clock.set(self.start + offset)

    def open_writer(self, path: str) -> Db:
        db = Db.open(path, self.store, WRITER, clock=self.clock)
        self.writers.append(db)
        return db

    def close_writer(self, db: Db, path: str) -> None:
        db.close()
        self.writers.remove(db)
        self.model.dbs[path].ack()

    def open_reader(self, path: str) -> DbReader:
        reader = DbReader.open(path, self.store, options=READER, clock=self.clock)
        self.readers.append(reader)
        return reader

    def close_reader(self, reader: DbReader) -> None:
        reader.close()
        self.readers.remove(reader)

    def fail_writers(self, crash: SimulatedCrash) -> None:
        """Make every open writer raise ``crash`` (a waiter for durability included)."""
        for db in list(self.writers):
            db.fail(crash)

    def crash(self) -> None:
        """Drop every component's in-memory state, as a killed process would."""
        for db in self.writers:
            simulate_crash(db)
        self.writers.clear()
        for reader in self.readers:  # stop polling; its checkpoint stays until it expires
            reader.crash()
        self.readers.clear()


# --- the steps ------------------------------------------------------------------------------------


def _put(ctx: Context, db: Db, path: str, k: bytes, value: bytes, *, durable: bool = False) -> None:
    ctx.model.dbs[path].issue(k, value)
    db.put(k, value, await_durable=durable)
    if durable:
        ctx.model.dbs[path].ack()


def _delete(ctx: Context, db: Db, path: str, k: bytes, *, durable: bool = False) -> None:
    ctx.model.dbs[path].issue(k, None)
    db.delete(k, await_durable=durable)
    if durable:
        ctx.model.dbs[path].ack()


def _batch(ctx: Context, db: Db, path: str, puts: dict[bytes, bytes], deletes: Sequence[bytes]) -> None:
    batch = WriteBatch()
    for k, v in puts.items():
        batch.put(k, v)
        ctx.model.dbs[path].issue(k, v)
    for k in deletes:
        batch.delete(k)
        ctx.model.dbs[path].issue(k, None)
    db.write(batch)


def _flush(ctx: Context, db: Db, path: str) -> None:
    db.flush()
    ctx.model.dbs[path].ack()


def write_main_a(ctx: Context) -> None:
    """Three rounds of writes: two end in L0 SSTs, the last stays in the WAL."""
    ctx.at(0)
    db = ctx.open_writer(MAIN)
    for i in range(0, 60):
        _put(ctx, db, MAIN, key(i), b"a1-%d" % i)
    _delete(ctx, db, MAIN, key(3))
    _delete(ctx, db, MAIN, key(10))
    _flush(ctx, db, MAIN)
    _put(ctx, db, MAIN, key(70), b"a1-durable", durable=True)
    _delete(ctx, db, MAIN, key(11), durable=True)
    _batch(ctx, db, MAIN, {key(i): b"a1-batch-%d" % i for i in range(80, 85)}, [key(12)])
    _flush(ctx, db, MAIN)
    db.flush_memtable()
    for i in range(40, 100):
        _put(ctx, db, MAIN, key(i), b"a2-%d" % i)
    _delete(ctx, db, MAIN, key(55))
    _flush(ctx, db, MAIN)
    db.flush_memtable()
    for i in range(0, 100, 7):
        _put(ctx, db, MAIN, key(i), b"a3-%d" % i)
    _put(ctx, db, MAIN, key(1), b"a3-durable", durable=True)
    _delete(ctx, db, MAIN, key(2))
    ctx.close_writer(db, MAIN)  # flushes the WAL: the last round is durable, only in the WAL


def compact_main(ctx: Context) -> None:
    """An L0 compaction (the L0 SSTs become a sorted run); a re-run finds nothing to do."""
    ctx.at(10)
    Compactor(MAIN, ctx.store, COMPACTOR, LocalExecutor(threads=1), clock=ctx.clock).run_once()


def write_main_b(ctx: Context) -> None:
    """A reader follows a writer while a compaction commits under it: two L0 SSTs, an L0
    compaction with the writer open, another L0 SST committed on top of the compactor's manifest,
    then writes left only in the WAL."""
    ctx.at(20)
    reader = ctx.open_reader(MAIN)
    _require_reads(reader, ctx.model, MAIN)
    db = ctx.open_writer(MAIN)
    for i in range(20, 80, 3):
        _put(ctx, db, MAIN, key(i), b"b1-%d" % i)
    _delete(ctx, db, MAIN, key(23))
    _flush(ctx, db, MAIN)
    db.flush_memtable()
    for i in range(60, 70):
        _put(ctx, db, MAIN, key(i), b"b2-%d" % i)
    _flush(ctx, db, MAIN)
    db.flush_memtable()
    Compactor(MAIN, ctx.store, COMPACTOR, LocalExecutor(threads=1), clock=ctx.clock).run_once()
    for i in range(90, 100):
        _put(ctx, db, MAIN, key(i), b"b3-%d" % i)
    _delete(ctx, db, MAIN, key(44), durable=True)
    db.flush_memtable()
    reader.poll()  # sees the compaction and the new L0 SST
    _require_reads(reader, ctx.model, MAIN)
    _put(ctx, db, MAIN, key(5), b"b4-durable", durable=True)
    _put(ctx, db, MAIN, key(6), b"b4-6")
    ctx.close_writer(db, MAIN)
    reader.poll()  # tails the WAL
    _require_reads(reader, ctx.model, MAIN)
    ctx.close_reader(reader)


def _require_reads(reader: DbReader, model: Model, path: str) -> None:
    """A reader of the latest state sees exactly the acknowledged writes (nothing is pending)."""
    got = dict(reader.scan())
    expected = model.dbs[path].contents()
    assert got == expected, f"the reader of {path} sees other contents ({_diff(got, expected)})"


def checkpoint_main(ctx: Context) -> None:
    """An admin checkpoint (it includes the writes only in the WAL); done already if it exists."""
    ctx.at(30)
    if not admin.list_checkpoints(MAIN, ctx.store, name=CHECKPOINT_NAME):
        options = CheckpointOptions(name=CHECKPOINT_NAME, lifetime=CHECKPOINT_LIFETIME)
        admin.create_checkpoint(MAIN, ctx.store, options, clock=ctx.clock)
    ctx.model.views[CHECKPOINT_NAME] = (MAIN, ctx.model.dbs[MAIN].contents())


def tag_main(ctx: Context) -> None:
    ctx.at(40)
    with contextlib.suppress(TagExistsError):  # the interrupted run committed it
        admin.create_tag(MAIN, ctx.store, TAG_NAME, clock=ctx.clock)
    ctx.model.views["tag:" + TAG_NAME] = (MAIN, ctx.model.dbs[MAIN].contents())


def clone_main(ctx: Context) -> None:
    """A clone of the current state (its WAL-only writes included); re-running finishes it."""
    ctx.at(50)
    admin.create_clone(CLONE, MAIN, ctx.store, clock=ctx.clock)
    ctx.model.dbs[CLONE] = DbModel.of(ctx.model.dbs[MAIN].contents())


def write_clone(ctx: Context) -> None:
    ctx.at(60)
    db = ctx.open_writer(CLONE)
    for i in range(0, 100, 4):
        _put(ctx, db, CLONE, key(i), b"clone-%d" % i)
    _delete(ctx, db, CLONE, key(6))
    _flush(ctx, db, CLONE)
    db.flush_memtable()
    _put(ctx, db, CLONE, key(101), b"clone-wal", durable=True)
    ctx.close_writer(db, CLONE)


def flush_main(ctx: Context) -> None:
    """A few writes, and everything into L0: a split needs a source whose WAL is all in L0."""
    ctx.at(70)
    db = ctx.open_writer(MAIN)
    _put(ctx, db, MAIN, key(49), b"f-49")
    _put(ctx, db, MAIN, key(50), b"f-50")
    _flush(ctx, db, MAIN)
    db.flush_memtable()
    ctx.close_writer(db, MAIN)


def split_main(ctx: Context) -> None:
    ctx.at(80)
    admin.split(MAIN, ctx.store, [SPLIT_KEY], [LOW, HIGH], clock=ctx.clock)
    ctx.model.at_split = ctx.model.dbs[MAIN].contents()
    for path, key_range in SHARDS:
        ctx.model.dbs[path] = DbModel.of(restricted(ctx.model.at_split, key_range))


def write_low(ctx: Context) -> None:
    """Writes to one shard, all flushed to L0 (the merge needs that too)."""
    ctx.at(90)
    db = ctx.open_writer(LOW)
    for i in range(0, 50, 5):
        _put(ctx, db, LOW, key(i), b"low-%d" % i)
    _delete(ctx, db, LOW, key(7), durable=True)
    _flush(ctx, db, LOW)
    db.flush_memtable()
    ctx.close_writer(db, LOW)


def merge_shards(ctx: Context) -> None:
    ctx.at(100)
    admin.merge([LOW, HIGH], ctx.store, MERGED, clock=ctx.clock)
    ctx.model.dbs[MERGED] = DbModel.of(ctx.model.dbs[LOW].contents() | ctx.model.dbs[HIGH].contents())


def write_main_c(ctx: Context) -> None:
    """After the split: an L0 SST and WAL-only writes again."""
    ctx.at(110)
    db = ctx.open_writer(MAIN)
    for i in range(0, 100, 9):
        _put(ctx, db, MAIN, key(i), b"c1-%d" % i)
    _delete(ctx, db, MAIN, key(30))
    _flush(ctx, db, MAIN)
    db.flush_memtable()
    _put(ctx, db, MAIN, key(99), b"c2-durable", durable=True)
    _put(ctx, db, MAIN, key(98), b"c2-98")
    ctx.close_writer(db, MAIN)


def _compact_full(path: str, offset: float) -> Callable[[Context], None]:
    def step(ctx: Context) -> None:
        ctx.at(offset)
        Compactor(path, ctx.store, COMPACTOR, LocalExecutor(threads=1), clock=ctx.clock).run_once(full=True)

    step.__name__ = f"compact_full_{path.rsplit('/', 1)[-1]}"
    return step


def gc_all(ctx: Context) -> None:
    """GC of every database, past every min age and every ephemeral checkpoint's lifetime."""
    ctx.at(GC_TIME)
    for path in GC_ORDER:
        GarbageCollector(path, ctx.store, GC, clock=ctx.clock).run_once(dry_run=False)


def soft_destroy_main(ctx: Context) -> None:
    """Soft-destroy the source of the clone and both shards. Its checkpoint and tag are checked first:
    readers refuse a destroyed database, so the final checks cannot read them any more."""
    ctx.at(DESTROY_TIME)
    if ManifestStore(ctx.store, MAIN).read_latest_required().value.destroyed_at_s is None:
        for name, (path, expected) in ctx.model.views.items():
            got = read_contents(ctx.store, path, ctx.clock, name)
            assert got == expected, f"{path} at {name}: contents differ ({_diff(got, expected)})"
    ctx.model.soft_destroyed.add(MAIN)
    admin.destroy(MAIN, ctx.store, clock=ctx.clock, dry_run=False)  # a re-run keeps the first destroyed_at_s


def write_low_b(ctx: Context) -> None:
    """Writes to a shard of the destroyed source, then a full compaction: the shard stops reading
    ``db/main`` (its entry there lists no SST any more)."""
    ctx.at(DESTROY_TIME + 100)
    db = ctx.open_writer(LOW)
    for i in range(1, 50, 4):
        _put(ctx, db, LOW, key(i), b"low-b-%d" % i)
    _delete(ctx, db, LOW, key(20))
    _flush(ctx, db, LOW)
    db.flush_memtable()
    ctx.close_writer(db, LOW)
    Compactor(LOW, ctx.store, COMPACTOR, LocalExecutor(threads=1), clock=ctx.clock).run_once(full=True)


def hard_destroy_low(ctx: Context) -> None:
    """Hard-destroy one shard: it releases its final checkpoint on ``db/main``, which must not be the
    other shard's protection too."""
    ctx.at(HARD_DESTROY_TIME)
    ctx.model.hard_destroyed.add(LOW)
    with contextlib.suppress(DbNotFoundError):  # the interrupted run finished it
        admin.destroy(LOW, ctx.store, soft=False, clock=ctx.clock, dry_run=False)


def gc_after_destroy(ctx: Context) -> None:
    """GC of every remaining database, past the destroy grace period of ``db/main`` (which its
    checkpoint, tag, clone and shard keep alive)."""
    ctx.at(DESTROY_GC_TIME)
    for path in GC_ORDER:
        if path in ctx.model.live():
            GarbageCollector(path, ctx.store, GC, clock=ctx.clock).run_once(dry_run=False)


STEPS: tuple[Callable[[Context], None], ...] = (
    write_main_a,
    compact_main,
    write_main_b,
    checkpoint_main,
    tag_main,
    clone_main,
    write_clone,
    flush_main,
    split_main,
    write_low,
    merge_shards,
    write_main_c,
    _compact_full(MAIN, 120),
    _compact_full(CLONE, 130),
    _compact_full(MERGED, 140),
    gc_all,
    soft_destroy_main,
    write_low_b,
    hard_destroy_low,
    gc_after_destroy,
)


def run_workload(ctx: Context, start: int = 0, before_step: Callable[[int], None] | None = None) -> None:
    """Run :data:`STEPS` from ``start``; ``ctx.model.completed`` follows the steps that finished."""
    for index in range(start, len(STEPS)):
        if before_step is not None:
            before_step(index)
        STEPS[index](ctx)
        ctx.model.completed = index + 1


# --- checks ---------------------------------------------------------------------------------------


def read_contents(
    store: ObjectStore, path: str, clock: ManualRuntime, checkpoint_name: str | None = None
) -> dict[bytes, bytes]:
    """What a reader sees: the latest state (WAL included), or a named checkpoint's state."""
    checkpoint = None
    if checkpoint_name is not None:
        found = admin.list_checkpoints(path, store, name=checkpoint_name)
        assert len(found) == 1, f"{path}: {len(found)} checkpoint(s) named {checkpoint_name!r}"
        checkpoint = found[0].id
    with DbReader.open(path, store, checkpoint, READER, clock=clock) as reader:
        return dict(reader.scan())


def check_acknowledged(store: ObjectStore, model: Model, clock: ManualRuntime) -> list[str]:
    """After a crash: every acknowledged write is readable with its value (or with a value issued
    after it, which the crash may have made durable), and nothing else is there.

    Then the model *settles*: each write issued but not acknowledged either became durable or did
    not, and what a reader sees now is what the next writer recovers (it replays the same WAL), so
    the model adopts it. Returns the acknowledged writes that were lost or wrong (none, we hope).
    """
    lost: list[str] = []
    for path, db in model.dbs.items():
        if path in model.soft_destroyed | model.hard_destroyed and not _readable(store, path):
            continue  # destroyed (or gone) by the interrupted step, as it was told to
        seen = read_contents(store, path, clock)
        for k in sorted(set(db.acked) | set(db.pending) | set(seen)):
            if seen.get(k) not in db.allowed(k):
                lost.append(f"{path} {k!r}: read {seen.get(k)!r}, acknowledged {db.acked.get(k)!r}")
        if not lost:
            db.settle(seen)
    return lost


def _readable(store: ObjectStore, path: str) -> bool:
    latest = ManifestStore(store, path).read_latest()
    return latest is not None and latest.value.destroyed_at_s is None


def check_contents(store: ObjectStore, model: Model, clock: ManualRuntime) -> None:
    """Every remaining database, checkpoint and tag holds exactly what the finished workload wrote;
    destroyed databases are destroyed, hard-destroyed ones gone."""
    readable = model.readable()
    for path, db in model.dbs.items():
        latest = ManifestStore(store, path).read_latest()
        if path in model.hard_destroyed:
            assert latest is None, f"{path} was hard-destroyed but still has a manifest"
            continue
        assert latest is not None, f"{path} is gone"
        if path in model.soft_destroyed:
            assert latest.value.destroyed_at_s is not None, f"{path} was soft-destroyed but is not"
            continue
        expected = db.contents()
        got = read_contents(store, path, clock)
        assert got == expected, f"{path}: contents differ from the model ({_diff(got, expected)})"
    # The shards are the source at the split restricted to their ranges (plus the shard's own
    # writes, in the model; the merge's model is their union at the merge).
    at_split = model.at_split
    for shard, key_range in SHARDS:
        if shard not in readable:
            continue
        got = read_contents(store, shard, clock)
        assert all(key_range.contains(k) for k in got), f"{shard} holds keys outside {key_range}"
        if shard == HIGH:
            assert got == restricted(at_split, key_range), f"{HIGH} is not {MAIN} restricted to {key_range}"
    for name, (path, expected) in model.views.items():
        if path not in readable:
            continue  # checked before its database was destroyed (soft_destroy_main)
        got = read_contents(store, path, clock, name)
        assert got == expected, f"{path} at {name}: contents differ ({_diff(got, expected)})"


def _diff(got: dict[bytes, bytes], expected: dict[bytes, bytes]) -> str:
    keys = sorted(k for k in set(got) | set(expected) if got.get(k) != expected.get(k))
    return ", ".join(f"{k!r}: {got.get(k)!r} != {expected.get(k)!r}" for k in keys[:5])


def check_references(store: ObjectStore, clock: ManualRuntime, paths: Sequence[str] = DATABASES) -> None:
    """No manifest (latest or a live checkpoint's) references a missing object; every database is
    initialised; no operation's ephemeral checkpoint is left once the operations finished; and
    :func:`slate_ops.admin.check_references` over every database in the store finds nothing: every
    SST any database reads exists and is protected by that database's own final checkpoint."""
    broken = reachability.check_references(store, now=clock.now())
    assert not broken, "broken references:\n" + "\n".join(map(str, broken))
    for path in paths:
        problems = [
            f"{r.name}: {'; '.join(r.problems)}"
            for r in admin.verify_db(path, store, l0_max_ssts=WRITER.l0_max_ssts, clock=clock, max_workers=1)
            if not r.passed and r.severity is Severity.ERROR
        ]
        assert not problems, f"verify_db({path}): {problems}"
        latest = ManifestStore(store, path).read_latest_required().value
        assert latest.initialized, f"{path} is not initialised"
        leftovers = [
            c.name
            for c in latest.checkpoints
            if (c.name or "").startswith(
                (SOURCE_CHECKPOINT_PREFIX, SPLIT_CHECKPOINT_PREFIX, MERGE_CHECKPOINT_PREFIX)
            )
            and not c.is_expired(clock.now())
        ]
        assert not leftovers, f"{path}: operation checkpoints left behind: {leftovers}"


def _protected(store: ObjectStore, path: str, now: float) -> tuple[Manifest, Protection]:
    """What the latest manifest and the live checkpoints' manifests of ``path`` reference."""
    manifests = ManifestStore(store, path)
    latest = manifests.read_latest_required().value
    protection = Protection(manifests.path)
    protection.add(latest, as_latest=True)
    for checkpoint in latest.checkpoints:
        if not checkpoint.is_expired(now):
            protection.add(manifests.read(checkpoint.manifest_id).value, as_latest=False)
    return latest, protection


def check_gc_clean(store: ObjectStore, clock: ManualRuntime, paths: Sequence[str] = DATABASES) -> int:
    """GC past every min age leaves nothing unreferenced: run it twice on every database (dependents
    first); then a dry run finds nothing more to do, every SST under ``compacted/`` and every WAL SST
    is referenced by the latest manifest or a live checkpoint's, and every SST a database reads in
    another database is referenced there too (so that one's GC keeps it). Returns the objects the
    two runs deleted."""
    deleted = 0
    for _ in range(2):
        for path in [p for p in GC_ORDER if p in paths]:
            deleted += len(
                GarbageCollector(path, store, GC, clock=clock).run_once(dry_run=False).deleted_keys()
            )
    for path in [p for p in GC_ORDER if p in paths]:
        report = GarbageCollector(path, store, GC, clock=clock).run_once(dry_run=True)
        leftover = sorted(report.deleted_keys())
        assert not leftover, f"{path}: GC would still delete {leftover[:5]}"
        assert not report.checkpoints_expired and not report.clones_detached, f"{path}: {report}"
    protections = {path: _protected(store, path, clock.now()) for path in paths}
    for path, (latest, protection) in protections.items():
        unreferenced = [
            f.meta.key for f in list_compacted(store, path) if not protection.keeps_sst(f.meta.key)
        ]
        assert not unreferenced, f"{path}: unreferenced SSTs survive GC: {unreferenced[:5]}"
        wal = [f.meta.key for f in list_wal(store, path) if not f.is_fence and not protection.keeps_wal(f.id)]
        assert not wal, f"{path}: unreferenced WAL SSTs survive GC: {wal[:5]}"
        # What this database reads elsewhere is protected there.
        for sst in latest.ssts:
            owner = latest.owner_of(sst)
            if owner is not None and owner.path in protections:
                where = resolve_sst_path(latest, path, sst)
                assert protections[owner.path][1].keeps_sst(where), (
                    f"{path} reads {where}, which nothing in {owner.path} protects"
                )
        assert own_sst_keys(latest, path) <= {f.meta.key for f in list_compacted(store, path)}
    return deleted


def check_finished(store: ObjectStore, model: Model, clock: ManualRuntime, start: float) -> None:
    """The invariants of a finished workload, before and after a final GC."""
    assert model.completed == len(STEPS)
    live = model.live()
    check_references(store, clock, live)  # first: it says which reference broke, and why
    check_contents(store, model, clock)
    clock.set(start + FINAL_GC_TIME)
    check_gc_clean(store, clock, live)
    check_references(store, clock, live)
    check_contents(store, model, clock)  # GC deleted nothing that is read


# --- the sweep ------------------------------------------------------------------------------------


BASE = {key(i): b"base-%d" % i for i in range(0, 100, 2)}


def make_template(root: Path) -> None:
    """The initial state every run starts from: ``db/main`` holding :data:`BASE` in one L0 SST."""
    with Db.open(MAIN, LocalStore(root), WRITER) as db:
        for k, v in BASE.items():
            db.put(k, v)
        db.flush_memtable()


def initial_model() -> Model:
    return Model(dbs={MAIN: DbModel.of(BASE)})


@dataclass(frozen=True)
class CallCount:
    """The object-store calls of one uninterrupted run."""

    crash_points: int  # N: calls that completed; ``crash_after(n)`` for n < N crashes the run
    calls: dict[str, int]  # every call by kind (CountingStore), those that fail by design included
    per_step: dict[str, int]  # crash points per step, by where they land

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())


def count_crash_points(template: Path, workdir: Path) -> CallCount:
    """Run the workload once without a crash, check it, and count its calls."""
    root = workdir / "count"
    shutil.copytree(template, root)
    counting = CountingStore(LocalStore(root))
    counter = CompletedCalls(counting)
    start = float(int(time.time()))
    ctx = Context(counter, ManualRuntime(start), start, initial_model())

    def enter(index: int) -> None:
        counter.step = STEPS[index].__name__

    run_workload(ctx, before_step=enter)
    per_step = {step.__name__: counter.landing.count(step.__name__) for step in STEPS}
    count = CallCount(counter.completed, counting.counts, per_step)
    check_finished(LocalStore(root), ctx.model, ctx.clock, start)
    shutil.rmtree(root)
    return count


@dataclass(frozen=True)
class PointResult:
    n: int
    crashed_in: tuple[str, ...]  # the step each crash interrupted (none: the run did not crash)
    acknowledged: int  # keys with an acknowledged write at a crash, over every database
    lost: int = 0  # of those, read back without their acknowledged value after the crash
    error: str | None = None

    @property
    def survived(self) -> bool:
        return self.error is None


def sweep_point(
    template: Path, workdir: Path, n: int, *, then: Sequence[int] = (), expect_crash: bool = True
) -> PointResult:
    """Crash after ``n`` completed calls, check what was acknowledged, finish the workload on the
    plain store and check every invariant. With ``then``, each resumed run crashes again after that
    many calls (and is checked) before the last one finishes it. Never raises: a broken invariant
    is in ``error``. The store directory is removed when every check passed, kept otherwise."""
    name = "-".join(map(str, (n, *then)))
    root = Path(tempfile.mkdtemp(dir=workdir, prefix=f"crash-{name}-")) / "store"
    shutil.copytree(template, root)
    store = LocalStore(root)
    start = float(int(time.time()))
    clock = ManualRuntime(start)
    model = initial_model()
    crashed_in: list[str] = []
    acknowledged = 0
    contexts: list[Context] = []
    try:
        for index, calls in enumerate((n, *then)):
            faulty = FaultInjectingStore(store)
            faulty.crash_after(calls)
            signalling = CrashSignallingStore(faulty)
            ctx = Context(signalling, clock, start, model)
            contexts.append(ctx)
            signalling.listeners.append(ctx.fail_writers)
            try:
                run_workload(ctx, model.completed)
            except Exception:
                # Whatever came out after the crash (SimulatedCrash, or an error that wraps it,
                # such as GC's report of its failed tasks) is the crash: the process died there.
                if signalling.crashed is None:
                    raise
                ctx.crash()
            else:
                if index == 0 and expect_crash:
                    raise AssertionError(
                        f"no crash after {n} calls: the workload's calls are not deterministic"
                    )
                break
            crashed_in.append(STEPS[model.completed].__name__)
            acknowledged = max(acknowledged, model.acknowledged_writes())
            lost = check_acknowledged(store, model, clock)
            if lost:
                message = (
                    f"{len(lost)} acknowledged write(s) lost: "
                    + "; ".join(lost[:5])
                    + f" (store kept at {root})"
                )
                return PointResult(n, tuple(crashed_in), acknowledged, len(lost), message)
        contexts.append(Context(store, clock, start, model))
        run_workload(contexts[-1], model.completed)  # finish it
        check_finished(store, model, clock, start)
    except Exception as error:
        for ctx in contexts:
            ctx.crash()
        detail = "".join(traceback.format_exception(error)).strip()
        return PointResult(
            n, tuple(crashed_in), acknowledged, error=f"{detail[-3000:]}\n(store kept at {root})"
        )
    shutil.rmtree(root.parent, ignore_errors=True)
    return PointResult(n, tuple(crashed_in), acknowledged)


@dataclass
class SweepReport:
    count: CallCount
    tried: list[PointResult]
    seconds: float
    stride: int  # 1: every crash point; 0: the points the caller chose
    double: bool = False

    @property
    def survived(self) -> int:
        return sum(1 for r in self.tried if r.survived)

    @property
    def failures(self) -> list[PointResult]:
        return [r for r in self.tried if not r.survived]

    @property
    def lost(self) -> int:
        return sum(r.lost for r in self.tried)

    def summary(self) -> str:
        """One line with the figures, e.g. for docs/reliability.md."""
        scope = "every crash point" if self.stride else "the crash points asked for"
        if self.stride > 1:
            scope = f"every {self.stride}th crash point, the first of each step and the last"
        if self.double:
            scope += ", each resumed run crashed again"
        return (
            f"crash-point sweep: {len(self.tried)} of {self.count.crash_points} crash points tried "
            f"({scope}), {self.survived} survived, {len(self.failures)} failed, acknowledged writes "
            f"lost: {self.lost}; workload of {len(STEPS)} steps, {self.count.total_calls} store calls; "
            f"{self.seconds:.1f}s"
        )

    def details(self) -> str:
        """Crash points per step, and the first lines of every failure."""
        tried: dict[str, int] = {}
        for r in self.tried:
            step = r.crashed_in[0] if r.crashed_in else "(none)"
            tried[step] = tried.get(step, 0) + 1
        lines = [
            f"  {name:<22} {calls:>4} crash points, {tried.get(name, 0):>4} tried"
            for name, calls in self.count.per_step.items()
        ]
        for r in self.failures:
            lines.append(f"  FAILED at crash point {r.n} (crashed in {', '.join(r.crashed_in)}): {r.error}")
        return "\n".join(lines)


def second_crash(n: int) -> int:
    """Where a double-crash run crashes its resumed run: after 1 to 41 calls, spread over ``n``."""
    return (n * 7) % 41 + 1


def sweep(
    workdir: Path,
    *,
    max_points: int | None = None,
    points: Sequence[int] | None = None,
    offset: int = 0,
    double: bool = False,
) -> SweepReport:
    """Count the crash points N, then run :func:`sweep_point` for each of ``points``, or for every
    one (``max_points`` None), or for every ``ceil(N / max_points)``-th one from ``offset`` (the
    stride) plus the first point of every step and the last point. With ``double``, each resumed
    run crashes again after :func:`second_crash` calls."""
    started = time.monotonic()
    template = workdir / "template"
    make_template(template)
    count = count_crash_points(template, workdir)
    n = count.crash_points
    stride = 1 if max_points is None else max(1, math.ceil(n / max_points))
    if points is not None:
        stride = 0  # chosen by the caller
    if points is not None:
        chosen = list(points)
    else:  # the stride, the first point of every step and the last point
        firsts = itertools.accumulate(count.per_step.values(), initial=0)
        chosen = sorted({*range(min(offset, n - 1), n, stride), *itertools.islice(firsts, len(STEPS)), n - 1})
    tried = [
        sweep_point(template, workdir, i, then=[second_crash(i)] if double else [], expect_crash=i < n)
        for i in chosen
    ]
    return SweepReport(count, tried, time.monotonic() - started, stride, double)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tests.reliability.workload [--every] [--double] [--points 17,204]``: a sweep in a
    temporary directory (on /dev/shm when there is one); prints the summary line and the table."""
    parser = argparse.ArgumentParser(prog="python -m tests.reliability.workload")
    parser.add_argument("--every", action="store_true", help="every crash point (default: about 60)")
    parser.add_argument("--double", action="store_true", help="crash each resumed run once more")
    parser.add_argument("--points", help="comma-separated crash points to try")
    args = parser.parse_args(argv)
    points = [int(p) for p in args.points.split(",")] if args.points else None
    shm = Path("/dev/shm")
    parent = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
    logging.disable(logging.CRITICAL)
    with tempfile.TemporaryDirectory(dir=parent, prefix="slate-ops-sweep-") as directory:
        result = sweep(
            Path(directory), max_points=None if args.every else 60, points=points, double=args.double
        )
        print(result.summary())
        print(result.details())
    return 1 if result.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
