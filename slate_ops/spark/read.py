"""A database as a Spark DataFrame: :func:`read_db` (key, value at a checkpoint) and :func:`tags_table`.

The driver fixes the state to read (a checkpoint: given, a tag's, or a fresh one), reads that
checkpoint's manifest, weighs its SSTs by their block indexes and cuts the key space into ranges
of about equal stored bytes (:func:`~slate_ops.admin.split_keys.balanced_ranges`). It also reads
the WAL SSTs the checkpoint covers (the writes not yet in L0, at most a few memtables) and keeps
the newest version of each key. Each Spark task then opens the store from its URL, reads the
checkpoint's manifest and merges, for its range: that WAL slice (newest), the L0 views (newest
first) and the sorted runs, keeping the newest version per key and hiding tombstones, exactly like
``DbReader.open(path, store, checkpoint).scan()``. No row passes through the driver.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import uuid
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession

from slate_ops.admin.handle import SlateOpsHandle
from slate_ops.admin.split_keys import BlockWeight, balanced_ranges, check_count, manifest_at, manifest_blocks
from slate_ops.admin.tags import list_tags
from slate_ops.engine.lsm import LsmState, SstReaders
from slate_ops.engine.memtable import Memtable
from slate_ops.engine.wal_store import WalStore
from slate_ops.engines.detect import Engine
from slate_ops.engines.probe import probe_db
from slate_ops.errors import InvalidArgumentError
from slate_ops.layout import normalize_db_path
from slate_ops.manifest.model import KeyRange, Manifest
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import ObjectStore
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime
from slate_ops.spark.credentials import NO_CREDENTIALS, S3Credentials
from slate_ops.spark.executor import _worker_store
from slate_ops.spark.read_base import (
    DEFAULT_READ_LIFETIME,
    READ_ARROW_SCHEMA,
    READ_CHECKPOINT_NAME,
    READ_SCHEMA,
    EngineRead,
    default_parallelism,
    partition_count,
    partitions_frame,
    require_shareable,
    resolve_read_checkpoint,
)
from slate_ops.spark.read_slatedb import SLATEDB_READ
from slate_ops.sst import SCHEMA
from slate_ops.sst.merge import live_rows, newest_per_key

CHUNK_BYTES = 8 * 1024 * 1024
"""A task merges its range in chunks of about this many stored bytes (bounds a worker's memory)."""
BATCH_ROWS = 64 * 1024

# --- planning (driver) ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadPlan:
    """What the tasks of one :func:`read_db` need; pickled into the job (no store clients)."""

    store_url: str
    path: str
    checkpoint_id: uuid.UUID
    manifest_id: int
    chunks: tuple[tuple[KeyRange, ...], ...]
    """Per partition, in key order: the chunks that together cover the partition's range."""
    wal: tuple[pa.Table, ...]
    """Per partition: the newest WAL version of each key in its range (SCHEMA, key order)."""

    @property
    def ranges(self) -> list[KeyRange]:
        """The key range of each partition."""
        return [KeyRange(c[0].start, c[-1].end) for c in self.chunks]


def wal_table(store: ObjectStore, path: str, manifest: Manifest) -> pa.Table:
    """The newest version of each key (tombstones included) in the WAL SSTs ``manifest`` covers.

    That is the WAL chain after ``replay_after_wal_id`` up to ``wal_id_last_seen``, as
    ``DbReader.open`` on a checkpoint replays it; the result is in key order, in :data:`SCHEMA`.
    """
    wal = WalStore(store, path)
    memtable = Memtable()
    walk = wal.chain(manifest.replay_after_wal_id, manifest.wal_id_last_seen)
    for _, entries in wal.read_many(walk.segments):
        for key, seq, kind, value in entries:
            memtable.put(key, seq, kind, value)
    return memtable.to_table() if len(memtable) else SCHEMA.empty_table()


def _range_mask(keys: pa.ChunkedArray | pa.Array, key_range: KeyRange) -> pa.Array | pa.ChunkedArray:
    mask = pc.greater_equal(keys, pa.scalar(key_range.start or b"", pa.binary()))
    if key_range.end is not None:
        mask = pc.and_(mask, pc.less(keys, pa.scalar(key_range.end, pa.binary())))
    return mask


def _chunks(
    blocks: Sequence[BlockWeight], keys: Sequence[bytes], key_range: KeyRange, chunk_bytes: int
) -> tuple[KeyRange, ...]:
    """``key_range`` cut wherever about ``chunk_bytes`` of the blocks inside it accumulate.

    ``blocks`` are sorted by key and ``keys`` are their keys.
    """
    lo = 0 if key_range.start is None else bisect.bisect_left(keys, key_range.start)
    hi = len(keys) if key_range.end is None else bisect.bisect_left(keys, key_range.end)
    cuts: list[bytes] = []
    accumulated = 0
    for key, size in blocks[lo:hi]:
        if accumulated >= chunk_bytes and key != key_range.start and (not cuts or key > cuts[-1]):
            cuts.append(key)
            accumulated = 0
        accumulated += size
    edges: list[bytes | None] = [key_range.start, *cuts, key_range.end]
    return tuple(KeyRange(edges[i], edges[i + 1]) for i in range(len(edges) - 1))


def plan_read(
    store: ObjectStore,
    store_url: str,
    path: str,
    checkpoint_id: uuid.UUID,
    partitions: int | None = None,
    *,
    min_partitions: int = 1,
    chunk_bytes: int = CHUNK_BYTES,
    clock: Runtime = SYSTEM_RUNTIME,
) -> ReadPlan:
    """The plan of reading ``checkpoint_id``: at most ``partitions`` ranges of about equal stored bytes.

    ``partitions=None``: ``min_partitions``, or more so that a partition holds at most
    :data:`PARTITION_BYTES` of stored bytes. A projected database (``Manifest.visible_range``) is
    read only inside its range. Refuses a missing or expired checkpoint
    (:class:`CheckpointNotFoundError`, :class:`CheckpointExpiredError`).
    """
    path = normalize_db_path(path)
    pinned = manifest_at(path, store, checkpoint_id, clock=clock)
    manifest = pinned.value
    blocks = sorted(manifest_blocks(path, store, manifest))
    partitions = partition_count(sum(size for _, size in blocks), partitions, min_partitions)
    ranges = balanced_ranges(blocks, partitions, bounds=manifest.visible_range)
    keys = [key for key, _ in blocks]
    wal = wal_table(store, path, manifest)
    return ReadPlan(
        store_url=store_url,
        path=path,
        checkpoint_id=checkpoint_id,
        manifest_id=pinned.id,
        chunks=tuple(_chunks(blocks, keys, r, chunk_bytes) for r in ranges),
        wal=tuple(wal.filter(_range_mask(wal.column("key"), r)) for r in ranges),
    )


def narrow_plan(plan: ReadPlan, bounds: KeyRange, keys: Collection[bytes] | None = None) -> ReadPlan:
    """``plan`` read only inside ``bounds``: the partitions whose range meets it, their chunks and
    WAL rows clipped to it (a partition outside ``bounds`` is dropped, not read empty). With
    ``keys``, only the chunks that may hold one of them are kept."""
    chunks: list[tuple[KeyRange, ...]] = []
    wal: list[pa.Table] = []
    for partition, rows in zip(plan.chunks, plan.wal, strict=True):
        clipped = tuple(c.intersect(bounds) for c in partition)
        kept = tuple(
            c for c in clipped if not c.is_empty() and (keys is None or any(c.contains(k) for k in keys))
        )
        if kept:
            chunks.append(kept)
            wal.append(rows.filter(_range_mask(rows.column("key"), bounds)) if rows.num_rows else rows)
    return dataclasses.replace(plan, chunks=tuple(chunks), wal=tuple(wal))


def resolve_checkpoint(
    store: ObjectStore,
    path: str,
    *,
    checkpoint: uuid.UUID | None,
    tag: str | None,
    lifetime: timedelta,
    clock: Runtime = SYSTEM_RUNTIME,
) -> uuid.UUID:
    """The checkpoint to read: ``checkpoint``, the tag's, or a new one named :data:`READ_CHECKPOINT_NAME`
    (:func:`~slate_ops.spark.read_base.resolve_read_checkpoint`)."""

    return resolve_read_checkpoint(
        SlateOpsHandle(path, store, clock=clock),
        ManifestStore(store, path).location,
        checkpoint=checkpoint,
        tag=tag,
        lifetime=lifetime,
    )


# --- reading (tasks) --------------------------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def _worker_state(
    url: str, credentials: S3Credentials, path: str, manifest_id: int
) -> tuple[LsmState, SstReaders]:
    """One LSM state (and its opened SST readers) per manifest version per worker process."""
    store = _worker_store(url, credentials)
    manifest = ManifestStore(store, path).read(manifest_id).value
    readers = SstReaders(store, None)
    return LsmState(manifest, path, readers), readers


Source = list[pa.RecordBatch]


def newest_values(sources: Sequence[Source]) -> pa.Table:
    """``(key, value)`` of the newest version of each key, tombstones dropped, in key order.

    ``sources`` are given newest first, each in (key asc, seq desc) order with one version per key,
    as ``merge_newest`` takes them; merged by the shared :func:`~slate_ops.sst.merge.newest_per_key`.
    A single source needs no sort.
    """
    table = pa.Table.from_batches([b for source in sources for b in source], schema=SCHEMA)
    if table.num_rows == 0:
        return READ_ARROW_SCHEMA.empty_table()
    table = table.combine_chunks()
    if sum(1 for source in sources if source) > 1:
        table = newest_per_key(table, drop_tombstones=True)
    else:
        table = live_rows(table)
    return table.select(["key", "value"])


def read_chunk(lsm: LsmState, readers: SstReaders, wal: pa.Table, chunk: KeyRange) -> pa.Table:
    """The live ``(key, value)`` rows of ``chunk``: the WAL rows, then L0 newest first, then the runs."""
    sources: list[Source] = []
    if wal.num_rows:
        sources.append(wal.filter(_range_mask(wal.column("key"), chunk)).to_batches())
    for handle in lsm.l0:
        bounds = handle.clip(chunk.start, chunk.end)
        if bounds is not None:
            sources.append(list(readers.open(handle.key, handle.size).scan_batches(*bounds)))
    for run in lsm.runs:
        batches: Source = []
        for handle in run:
            bounds = handle.clip(chunk.start, chunk.end)
            if bounds is not None:
                batches.extend(readers.open(handle.key, handle.size).scan_batches(*bounds))
        sources.append(batches)
    return newest_values(sources)


def read_partition(
    plan: ReadPlan, index: int, credentials: S3Credentials = NO_CREDENTIALS
) -> Iterator[pa.RecordBatch]:
    """The body of task ``index``: its range's live rows as Arrow batches, in key order.

    Checks first that the checkpoint is still live (a DataFrame evaluated after its checkpoint
    expired fails with :class:`CheckpointExpiredError` rather than on a file GC removed).
    """
    store = _worker_store(plan.store_url, credentials)
    manifest_at(plan.path, store, plan.checkpoint_id)
    lsm, readers = _worker_state(plan.store_url, credentials, plan.path, plan.manifest_id)
    wal = plan.wal[index]
    for chunk in plan.chunks[index]:
        table = read_chunk(lsm, readers, wal, chunk)
        yield from table.to_batches(max_chunksize=BATCH_ROWS)


def _manifest_at(store: ObjectStore, path: str, checkpoint_id: uuid.UUID) -> object:
    return manifest_at(path, store, checkpoint_id)


def _partition_count(plan: ReadPlan) -> int:
    return len(plan.chunks)


SLATE_OPS_READ: EngineRead[ReadPlan] = EngineRead(
    resolve=resolve_checkpoint,
    require_live=_manifest_at,
    plan=plan_read,
    narrow=narrow_plan,
    count=_partition_count,
    read_partition=read_partition,
)
"""A slate_ops database's read, for :func:`read_db` and ``format("slate_ops")``."""


def engine_read(engine: Engine) -> EngineRead[Any]:
    """The read steps of ``engine``'s databases."""
    return SLATEDB_READ if engine is Engine.SLATEDB else SLATE_OPS_READ


# --- the API ----------------------------------------------------------------------------------------


def read_db(
    spark: SparkSession,
    store_url: str,
    path: str,
    *,
    checkpoint: uuid.UUID | None = None,
    tag: str | None = None,
    partitions: int | None = None,
    lifetime: timedelta = DEFAULT_READ_LIFETIME,
    clock: Runtime = SYSTEM_RUNTIME,
    engine: Engine | str | None = None,
) -> DataFrame:
    """The live ``(key binary, value binary)`` rows of the database at a checkpoint, as a DataFrame.

    Either engine's database: ``engine`` None detects it on the driver from the latest manifest
    (one LIST and one GET); a SlateDB database is read by the binding's ``DbReader`` at the
    checkpoint in each task (:mod:`slate_ops.spark.read_slatedb`), with the same schema, options,
    partitioning rule and errors.

    The state read is ``checkpoint``, the checkpoint of ``tag``, or (neither given) a new
    checkpoint of the current state named ``spark-read`` that expires after ``lifetime`` (1 hour).
    It holds exactly what ``DbReader.open(path, store, checkpoint).scan()`` returns, writes only in
    the WAL included. The DataFrame is lazy and re-reads that fixed state on every action, so it
    works only while the checkpoint lives: a new checkpoint is never deleted by read_db (it cannot
    know when the last action ran) and simply expires; actions after that fail with
    ``CheckpointExpiredError``. Cache or write the result within the lifetime, or manage the
    checkpoint yourself and pass it.

    One partition per key range (at most ``partitions``; default: the session's default
    parallelism, or more so that a partition holds at most 128 MiB of stored SST bytes); partition
    ``i`` holds keys below those of partition ``i + 1``, each in key order. Both ``checkpoint`` and
    ``tag`` raise :class:`InvalidArgumentError`; an unknown tag :class:`TagNotFoundError`; a missing
    or expired checkpoint :class:`CheckpointNotFoundError` / :class:`CheckpointExpiredError`. The
    store must be reachable by its URL from every worker (``file://`` on a shared filesystem,
    ``s3://...?endpoint_url=``); ``memory://`` is refused. S3 credentials (driver and tasks) come from
    the session's ``spark.slate_ops.s3.*`` settings, else boto3's chain.
    """
    require_shareable(store_url, "read_db")
    if partitions is not None:
        check_count(partitions, "partitions")
    credentials = S3Credentials.of_session(spark)
    store = credentials.open_store(store_url)
    min_partitions = default_parallelism(spark)
    path = normalize_db_path(path)
    read = engine_read(detect_engine(store, path, engine))
    checkpoint_id = read.resolve(store, path, checkpoint=checkpoint, tag=tag, lifetime=lifetime, clock=clock)
    plan = read.plan(
        store, store_url, path, checkpoint_id, partitions, min_partitions=min_partitions, clock=clock
    )
    return partitions_frame(spark, read, plan, credentials)


def detect_engine(store: ObjectStore, path: str, engine: Engine | str | None = None) -> Engine:
    """``engine`` if given (``InvalidArgumentError`` naming the choices if unknown), else the engine
    of the database's latest manifest (:func:`~slate_ops.engines.probe.probe_db`: one LIST, one GET;
    ``DbNotFoundError`` without one)."""
    if engine is None:
        return probe_db(path, store).detection.engine
    try:
        return Engine(engine)
    except ValueError:
        choices = ", ".join(e.value for e in Engine)
        raise InvalidArgumentError(f"unknown engine {engine!r} for {path!r}; use one of: {choices}") from None


def tags_table(spark: SparkSession, store_url: str, path: str) -> DataFrame:
    """The ``$tags`` table of :func:`slate_ops.admin.list_tags` as a DataFrame, read on the driver.

    Same columns; the unsigned ``manifest_id``, ``record_count`` and ``bytes`` become Spark longs
    (Spark has no unsigned types) and ``create_time`` a timestamp. Any store URL works, ``memory://``
    included (no task touches the store); S3 credentials as for :func:`read_db`.
    """
    table = list_tags(path, S3Credentials.of_session(spark).open_store(store_url))
    schema = pa.schema(
        [
            pa.field(f.name, pa.int64() if pa.types.is_unsigned_integer(f.type) else f.type, f.nullable)
            for f in table.schema
        ]
    )
    return spark.createDataFrame(table.cast(schema))


__all__ = [
    "DEFAULT_READ_LIFETIME",
    "READ_CHECKPOINT_NAME",
    "READ_SCHEMA",
    "SLATE_OPS_READ",
    "ReadPlan",
    "default_parallelism",
    "detect_engine",
    "engine_read",
    "narrow_plan",
    "newest_values",
    "plan_read",
    "read_chunk",
    "read_db",
    "read_partition",
    "require_shareable",
    "resolve_checkpoint",
    "tags_table",
    "wal_table",
]
