"""Bulk loading a DataFrame of (key, value) into a database: :func:`bulk_load`.

::

    driver                                                   Spark tasks (Python workers)
    ------                                                   ----------------------------
    check columns (binary), one aggregate job: rows, nulls,
      empty keys, bytes   -> BulkLoadInputError, store untouched
    Db.open(path)         -> fences the running writer, replays its WAL
    reserve_ingest_seq    -> its writes flushed to L0; seq S above all data
    repartitionByRange(n, key).sortWithinPartitions(key)
      .mapInArrow(write)  ───────────────────────────────▶  rows in key order, duplicates checked
                                                            SSTs of ~target_sst_bytes, every row at S,
                                                            PUT <db>/compacted/<ULID>.sst
    collect() ◀────────────────────────────────────────────  SST metadata only
    ingest_l0(ssts, S)    -> one manifest update under the writer epoch: the SSTs in front of L0
    close the writer

Why L0 and not a sorted run: reads take sources newest first *by structure* (memtables, L0
newest first, then sorted runs), so a run — even the newest — would be shadowed by older L0 data.
In front of L0, with a sequence number above every stored one, the loaded rows shadow all older
versions both for reads and for the compactor, which later folds them into sorted runs like any
L0 flush. The load takes the writer role for its duration: the application's writer gets
:class:`FencedError` on its next write or flush and must be reopened afterwards (everything it
acknowledged is kept: the load's writer replays its WAL and flushes it to L0 before the load's
sequence number is taken).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import pickle
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from py4j.protocol import Py4JError  # type: ignore[import-untyped]
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, StructType

from slate_ops.admin.split_keys import check_count
from slate_ops.engine.bounds import check_write
from slate_ops.engine.db import Db
from slate_ops.engine.options import DbOptions
from slate_ops.errors import (
    BulkLoadFailedError,
    BulkLoadInputError,
    BulkLoadOverlapError,
    DuplicateKeyError,
    ObjectNotFoundError,
    OutOfRangeError,
)
from slate_ops.layout import COMPACTED_DIR, normalize_db_path, own_directory, parse_sst_key, sst_key
from slate_ops.manifest.model import CompactedSst, KeyRange
from slate_ops.manifest.store import ManifestStore, VersionedManifest
from slate_ops.objstore import ObjectStore
from slate_ops.runtime import SYSTEM_RUNTIME
from slate_ops.spark.credentials import S3Credentials
from slate_ops.spark.executor import _remote_error, _worker_store
from slate_ops.spark.read_base import default_parallelism, require_shareable
from slate_ops.spark.task_kills import session_kill_grace, sweep_after_kills
from slate_ops.sst import DEFAULT_OPTIONS, KIND_VALUE, SCHEMA, SstOptions, SstReader, encode_sst
from slate_ops.sst.cut import ROW_OVERHEAD, SstCutter

MiB = 1024 * 1024
DEFAULT_TARGET_SST_BYTES = 64 * MiB
"""Row bytes (key + value + 13 per row, as the compactor counts them) per loaded SST."""
PARTITION_BYTES = 256 * MiB
"""Default partitions: at least one per core, and one per this many row bytes."""

_RESULT_SCHEMA = "result binary"
_ROWS = pa.schema([pa.field("key", pa.binary()), pa.field("value", pa.binary())])


@dataclass(frozen=True)
class BulkLoadReport:
    """What :func:`bulk_load` did. ``manifest_id`` and ``seq`` are None when there was nothing to load."""

    path: str
    rows: int
    ssts: int
    bytes: int
    """Stored bytes of the SSTs written (compressed)."""
    seconds: float
    manifest_id: int | None
    seq: int | None
    partitions: int
    sst_ids: tuple[str, ...] = field(default=(), repr=False)

    @property
    def mb_per_s(self) -> float:
        """Stored MB (10^6 bytes) written per second of the whole load."""
        return self.bytes / 1e6 / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class _TaskResult:
    """One task's SSTs (in key order), its row count, and the first duplicate key it met, if any."""

    ssts: tuple[CompactedSst, ...]
    rows: int
    duplicate: bytes | None = None


# --- tasks ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadTarget:
    """Where and how a load's tasks write: pickled into every task (no store clients)."""

    url: str
    credentials: S3Credentials
    path: str
    seq: int
    """The reserved sequence number every loaded row gets."""
    target_sst_bytes: int
    options: SstOptions


class _LoadWriter:
    """Writes a task's key-ordered rows as SSTs of ``target_sst_bytes`` row bytes
    (:class:`~slate_ops.sst.cut.SstCutter`), every row at the load's seq."""

    def __init__(self, load: LoadTarget) -> None:
        self.store = _worker_store(load.url, load.credentials)
        self.path = load.path
        self.seq = load.seq
        self.options = load.options
        self.written: list[CompactedSst] = []
        self.rows = 0
        self._cutter = SstCutter(load.target_sst_bytes, self._write)

    def add(self, batch: pa.RecordBatch) -> None:
        self._cutter.add(batch)

    def flush(self) -> None:
        self._cutter.finish()

    def _write(self, rows: pa.Table) -> None:
        rows = rows.combine_chunks()
        n = rows.num_rows
        table = pa.Table.from_arrays(
            [
                rows.column(0),
                pa.array(np.full(n, self.seq, dtype=np.uint64)),
                pa.array(np.full(n, KIND_VALUE, dtype=np.uint8)),
                rows.column(1),
            ],
            schema=SCHEMA,
        )
        data, info = encode_sst(table, self.options)
        sst = CompactedSst(SYSTEM_RUNTIME.new_ulid(), info)  # a Spark task: the worker's real clock
        self.store.put(sst_key(self.path, sst.id), data)
        self.written.append(sst)
        self.rows += n


def _first_duplicate(keys: pa.Array, previous: bytes | None) -> bytes | None:
    """The first key of ``keys`` (sorted) equal to its predecessor (``previous`` before the first)."""
    if previous is not None and keys[0].as_py() == previous:
        return previous
    n = len(keys)
    if n > 1:
        equal = pc.equal(keys.slice(1), keys.slice(0, n - 1))
        if pc.any(equal).as_py():
            index = int(pc.index(equal, True).as_py())
            value: bytes = keys[index].as_py()
            return value
    return None


def _checked(batch: pa.RecordBatch, path: str) -> pa.RecordBatch:
    """``batch`` as two binary columns; refuses a null or empty key and a null value."""
    keys = batch.column(0).cast(pa.binary())
    values = batch.column(1).cast(pa.binary())
    if keys.null_count or values.null_count or pc.min(pc.binary_length(keys)).as_py() == 0:
        raise BulkLoadInputError(
            f"a null or empty key, or a null value, reached the bulk load of {path!r}: keys must be "
            "non-empty bytes and values non-null (filter them first). Nothing was committed."
        )
    return pa.RecordBatch.from_arrays([keys, values], names=["key", "value"])


def _sorted(batches: Iterator[pa.RecordBatch], path: str) -> Iterator[pa.RecordBatch]:
    """The rows of ``batches`` in key order (unsigned bytes): as they come if they already are,
    else the whole partition sorted in memory (Arrow's sort; a partition is held once more)."""
    table = pa.Table.from_batches([_checked(b, path) for b in batches if b.num_rows], schema=_ROWS)
    if table.num_rows > 1:
        keys = table.column(0)
        if pc.any(pc.less(keys.slice(1), keys.slice(0, table.num_rows - 1))).as_py():
            table = table.take(pc.sort_indices(keys))
    yield from table.to_batches(max_chunksize=64 * 1024)


def task_result(load: LoadTarget, batches: Iterator[pa.RecordBatch], *, sort: bool = False) -> _TaskResult:
    """One task of a load: a partition's rows in, its SSTs written, their metadata out.

    The rows must come in key order, unless ``sort`` (the data source's tasks: the partition is
    sorted in memory first). The first duplicate key found stops the task (the result names it;
    the driver refuses the load). Should the task fail, it deletes the SSTs it wrote first.
    """
    cutter = _LoadWriter(load)
    path = load.path
    previous: bytes | None = None
    duplicate: bytes | None = None
    try:
        for batch in _sorted(batches, path) if sort else batches:
            if batch.num_rows == 0:
                continue
            batch = _checked(batch, path)
            keys = batch.column(0)
            if previous is not None and keys[0].as_py() < previous:
                raise BulkLoadFailedError(
                    f"Spark ordered key {keys[0].as_py()!r} after {previous!r} in the bulk load of "
                    f"{path!r}; keys must sort as unsigned bytes"
                )
            duplicate = _first_duplicate(keys, previous)
            if duplicate is not None:
                break
            cutter.add(batch)
            previous = keys[len(keys) - 1].as_py()
        if duplicate is None:
            cutter.flush()
    except BaseException:
        delete_ssts(cutter.store, path, cutter.written)
        raise
    return _TaskResult(tuple(cutter.written), cutter.rows, duplicate)


def write_partition(load: LoadTarget, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body of :func:`bulk_load`: :func:`task_result` of one key-sorted partition,
    pickled into one row."""
    result = task_result(load, batches)
    yield pa.RecordBatch.from_arrays([pa.array([pickle.dumps(result)], pa.binary())], names=["result"])


def delete_ssts(store: ObjectStore, path: str, ssts: Iterable[CompactedSst]) -> int:
    """Delete the SST files of a load that was not committed; returns how many.

    Deletes nothing if the current manifest lists any of them (the commit landed after all, e.g.
    an error came after it): those files are the database's now.
    """
    ssts = list(ssts)
    if not ssts:
        return 0
    latest = ManifestStore(store, path).read_latest()
    listed = set() if latest is None else {s.id for s in latest.value.ssts}
    if any(s.id in listed for s in ssts):
        return 0
    for sst in ssts:
        with contextlib.suppress(ObjectNotFoundError):
            store.delete(sst_key(path, sst.id))
    return len(ssts)


CLOCK_SKEW = 600.0
"""Seconds a worker's clock may lag the driver's (bounds the SST ids :func:`delete_load_orphans` weighs)."""


def delete_load_orphans(store: ObjectStore, path: str, seq: int, epoch: int, since: float) -> int:
    """Delete the SSTs of an uncommitted load that no message named (tasks killed after writing).

    Those are the SST files under ``<path>/compacted/`` that the current manifest does not list,
    whose id is from after ``since`` (Unix seconds, less :data:`CLOCK_SKEW`) and whose every row has
    the load's sequence number ``seq``. Only a writer that opened after the load reserved ``seq``
    could write another such SST, and it would have bumped the writer epoch first: if the
    manifest's epoch is no longer ``epoch``, nothing is deleted (GC removes the files later).
    Returns the number of files deleted.
    """
    manifests = ManifestStore(store, path)
    listed = [m.key for m in store.list(own_directory(path, COMPACTED_DIR))]
    latest = manifests.read_latest()
    if latest is None or latest.value.writer_epoch != epoch:
        return 0
    known = {sst_key(path, s.id) for s in latest.value.ssts}
    deleted = 0
    for key in listed:
        sst_id = parse_sst_key(path, key)
        if sst_id is None:
            continue
        try:
            if key in known or sst_id.timestamp < since - CLOCK_SKEW:
                continue
            info = SstReader.open(store, key).info
        except (ValueError, ObjectNotFoundError):
            continue
        if (info.min_seq, info.max_seq) == (seq, seq):
            with contextlib.suppress(ObjectNotFoundError):
                store.delete(key)
            deleted += 1
    return deleted


# --- driver -----------------------------------------------------------------------------------------


def check_columns(schema: StructType, key_col: str, value_col: str) -> None:
    """Refuses (:class:`BulkLoadInputError`) a missing or non-binary key or value column."""
    if key_col == value_col:
        raise BulkLoadInputError(f"key_col and value_col must differ, both are {key_col!r}")
    types = {f.name: f.dataType for f in schema.fields}
    for role, name in (("key", key_col), ("value", value_col)):
        if name not in types:
            raise BulkLoadInputError(
                f"the DataFrame has no {role} column {name!r} (columns: {sorted(types)}); pass {role}_col="
            )
        if not isinstance(types[name], BinaryType):
            raise BulkLoadInputError(
                f"the {role} column {name!r} is {types[name].simpleString()}, not binary; cast it, e.g. "
                f"F.col({name!r}).cast('binary') for UTF-8 strings"
            )


def _input_stats(
    df: DataFrame, key_col: str, value_col: str, path: str, visible: KeyRange | None
) -> tuple[int, int]:
    """One aggregate job: (rows, row bytes); refuses nulls, empty keys and keys outside ``visible``."""
    key, value = df[key_col], df[value_col]
    outside = F.lit(False)
    if visible is not None and visible.start is not None:
        outside = outside | (key < F.lit(bytearray(visible.start)))
    if visible is not None and visible.end is not None:
        outside = outside | (key >= F.lit(bytearray(visible.end)))
    row = df.select(
        F.count(F.lit(1)).alias("rows"),
        F.count_if(key.isNull()).alias("null_keys"),
        F.count_if(value.isNull()).alias("null_values"),
        F.count_if(F.length(key) == 0).alias("empty_keys"),
        F.count_if(outside).alias("outside"),
        F.sum(F.length(key) + F.length(value)).alias("bytes"),
    ).first()
    assert row is not None
    for column, name, what in (
        ("null_keys", key_col, "null keys"),
        ("null_values", value_col, "null values"),
        ("empty_keys", key_col, "empty keys"),
    ):
        if row[column]:
            raise BulkLoadInputError(
                f"the bulk load into {path!r} was refused: column {name!r} holds {row[column]} {what} "
                "(keys must be non-empty bytes, values non-null; use an empty value for no data). "
                "Nothing was written."
            )
    if row["outside"]:
        raise OutOfRangeError(
            f"the bulk load into {path!r} was refused: {row['outside']} keys of column {key_col!r} are "
            f"outside the database's key range {visible}; load them into the shards that hold them. "
            "Nothing was written."
        )
    rows = int(row["rows"])
    return rows, int(row["bytes"] or 0) + ROW_OVERHEAD * rows


def bulk_load(
    df: DataFrame,
    store_url: str,
    path: str,
    *,
    key_col: str = "key",
    value_col: str = "value",
    target_sst_bytes: int = DEFAULT_TARGET_SST_BYTES,
    partitions: int | None = None,
    db_options: DbOptions | None = None,
    sst_options: SstOptions = DEFAULT_OPTIONS,
) -> BulkLoadReport:
    """Load every row of ``df`` into the database at ``path`` (created if missing) as one new L0 run.

    The loaded values shadow every version stored before. ``key_col`` and ``value_col`` must be
    binary columns without nulls, keys non-empty: otherwise :class:`BulkLoadInputError` before
    anything is written (the store is unchanged; checking costs one aggregate Spark job over
    ``df``). A key present twice raises :class:`DuplicateKeyError` naming it, found while writing:
    nothing is committed and the SSTs already written are deleted (deduplicate first, e.g.
    ``df.dropDuplicates([key_col])`` for any-wins).

    The load opens the database as its writer (``db_options``), which fences the running writer
    (its next write or flush raises :class:`FencedError`; reopen it after the load) and keeps
    everything it acknowledged. One sequence number above all stored data is given to every loaded
    row; ``repartitionByRange`` into ``partitions`` (default: the default parallelism, or one per
    256 MiB of row bytes if more) and ``sortWithinPartitions`` order the rows; each task writes
    SSTs of about ``target_sst_bytes`` row bytes under ``<path>/compacted/``; the driver commits them
    all in one manifest update, in front of L0 (see the module docstring). If that commit fails
    (:class:`FencedError`: another writer opened meanwhile), nothing is committed and the SSTs are
    deleted; if the job fails (:class:`BulkLoadFailedError`), nothing is committed and the SSTs
    the tasks wrote are deleted (:func:`delete_load_orphans`). The same tasks and
    commit serve ``df.write.format("slate_ops")`` (:mod:`slate_ops.spark.datasource`). L0 then
    holds as many more SSTs as were loaded: writers' L0 flushes wait (``l0_max_ssts``) until the
    compactor folds them into sorted runs. An empty ``df`` writes nothing and fences no one.
    S3 credentials (driver and tasks) come from the session's ``spark.slate_ops.s3.*`` settings,
    else boto3's chain (:mod:`slate_ops.spark.credentials`).
    """
    started = time.perf_counter()
    require_shareable(store_url, "bulk_load")
    path = normalize_db_path(path)
    check_count(target_sst_bytes, "target_sst_bytes")
    if partitions is not None:
        check_count(partitions, "partitions")
    check_columns(df.schema, key_col, value_col)
    credentials = S3Credentials.of_session(df.sparkSession)
    store = credentials.open_store(store_url)
    latest = ManifestStore(store, path).read_latest()
    visible = None if latest is None else latest.value.visible_range
    rows, row_bytes = _input_stats(df, key_col, value_col, path, visible)
    if rows == 0:
        return BulkLoadReport(path, 0, 0, 0, time.perf_counter() - started, None, None, 0)
    if partitions is None:
        partitions = max(default_parallelism(df.sparkSession), math.ceil(row_bytes / PARTITION_BYTES))

    db = Db.open(path, store, db_options or DbOptions())
    try:
        seq = db.reserve_ingest_seq()
        columns = (key_col, value_col)
        job_started = SYSTEM_RUNTIME.now()  # weighed against the tasks' SST ids (real clocks)
        try:
            results = _run_job(
                df, columns, store_url, credentials, path, seq, target_sst_bytes, partitions, sst_options
            )
        except BulkLoadFailedError:
            failed_at, epoch = SYSTEM_RUNTIME.monotonic(), db.writer_epoch
            sweep_after_kills(
                lambda: delete_load_orphans(store, path, seq, epoch, job_started),
                grace_s=session_kill_grace(df.sparkSession),
                failed_at=failed_at,
            )  # the tasks Spark killed may still write SSTs for a few seconds
            raise
        try:
            committed, ssts = commit_load(db, path, results, seq)
        except BaseException:
            delete_ssts(store, path, (s for r in results for s in r.ssts))
            raise
    except BaseException:
        with contextlib.suppress(Exception):  # the error in flight says more (e.g. FencedError again)
            db.close()
        raise
    db.close()
    return BulkLoadReport(
        path=path,
        rows=sum(r.rows for r in results),
        ssts=len(ssts),
        bytes=sum(s.info.size_bytes for s in ssts),
        seconds=time.perf_counter() - started,
        manifest_id=committed.id,
        seq=seq,
        partitions=partitions,
        sst_ids=tuple(str(s.id) for s in ssts),
    )


def commit_load(
    db: Db, path: str, results: Sequence[_TaskResult], seq: int
) -> tuple[VersionedManifest, list[CompactedSst]]:
    """The driver's single commit of a load: the tasks' SSTs in front of L0 at ``seq``.

    Refuses, committing nothing: a duplicate key a task found (:class:`DuplicateKeyError`), tasks
    whose key ranges overlap (:class:`BulkLoadOverlapError`: rows were not range-partitioned), and
    keys outside a projected shard's range (:class:`OutOfRangeError`). The caller deletes the SSTs
    when this raises.
    """
    duplicates = sorted(r.duplicate for r in results if r.duplicate is not None)
    if duplicates:
        raise DuplicateKeyError(
            f"the DataFrame loaded into {path!r} holds key {duplicates[0]!r} more than once"
            f"{f' (and {len(duplicates) - 1} more duplicated keys)' if len(duplicates) > 1 else ''}; "
            "deduplicate it first (e.g. dropDuplicates on the key column). Nothing was committed; "
            "the SSTs already written were deleted.",
            duplicates[0],
        )
    spans = sorted((r.ssts[0].info.first_key, r.ssts[-1].info.last_key) for r in results if r.ssts)
    for (_, last), (first, _) in itertools.pairwise(spans):
        if first <= last:
            raise BulkLoadOverlapError(
                f"the rows written into {path!r} were not range-partitioned: one Spark partition ends "
                f"at key {last!r}, another starts at {first!r}; each partition must hold its own key "
                "range. Write df.repartitionByRange(n, <key column>) (n about one per 256 MiB of rows). "
                "Nothing was committed; the SSTs written were deleted."
            )
    ssts = sorted((s for r in results for s in r.ssts), key=lambda s: s.info.first_key)
    visible = db.manifest.visible_range
    if ssts and visible is not None:
        for key in (ssts[0].info.first_key, ssts[-1].info.last_key):
            check_write(visible, [key], f"the database {path!r}")
    return db.ingest_l0(ssts, seq), ssts


def _run_job(
    df: DataFrame,
    columns: tuple[str, str],
    url: str,
    credentials: S3Credentials,
    path: str,
    seq: int,
    target: int,
    partitions: int,
    options: SstOptions,
) -> list[_TaskResult]:
    ordered = (
        df.select(df[columns[0]].alias("key"), df[columns[1]].alias("value"))
        .repartitionByRange(partitions, "key")
        .sortWithinPartitions("key")
    )
    load = LoadTarget(url, credentials, path, seq, target, options)
    body = functools.partial(write_partition, load)
    try:
        collected = ordered.mapInArrow(body, _RESULT_SCHEMA).collect()
    except (PySparkException, Py4JError) as exc:
        raise BulkLoadFailedError(
            f"the Spark job of the bulk load into {path!r} ({partitions} partitions) failed: "
            f"{_remote_error(exc)}. Nothing was committed; the SSTs already written were deleted."
        ) from exc
    results: list[_TaskResult] = [pickle.loads(bytes(row["result"])) for row in collected]
    return results


__all__ = [
    "DEFAULT_TARGET_SST_BYTES",
    "BulkLoadReport",
    "LoadTarget",
    "bulk_load",
    "check_columns",
    "commit_load",
    "delete_load_orphans",
    "delete_ssts",
    "task_result",
    "write_partition",
]
