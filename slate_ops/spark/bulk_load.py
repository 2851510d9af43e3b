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
import math
import pickle
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from py4j.protocol import Py4JError  # type: ignore[import-untyped]
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType
from ulid import ULID

from slate_ops.admin.split_keys import check_count
from slate_ops.engine.bounds import check_write
from slate_ops.engine.db import Db
from slate_ops.engine.options import DbOptions
from slate_ops.errors import BulkLoadFailedError, BulkLoadInputError, DuplicateKeyError, OutOfRangeError
from slate_ops.layout import sst_key
from slate_ops.manifest.model import CompactedSst, KeyRange
from slate_ops.manifest.store import ManifestStore
from slate_ops.spark.credentials import S3Credentials
from slate_ops.spark.executor import _remote_error, _worker_store
from slate_ops.spark.read import default_parallelism, require_shareable
from slate_ops.sst import DEFAULT_OPTIONS, KIND_VALUE, SCHEMA, SstOptions, encode_sst
from slate_ops.txn.paths import normalize_db_path

MiB = 1024 * 1024
DEFAULT_TARGET_SST_BYTES = 64 * MiB
"""Row bytes (key + value + 13 per row, as the compactor counts them) per loaded SST."""
PARTITION_BYTES = 256 * MiB
"""Default partitions: at least one per core, and one per this many row bytes."""
ROW_OVERHEAD = 13

_RESULT_SCHEMA = "result binary"


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


class _SstCutter:
    """Buffers key-ordered rows and writes an SST each time ``target`` row bytes accumulate."""

    def __init__(
        self, url: str, credentials: S3Credentials, path: str, seq: int, target: int, options: SstOptions
    ) -> None:
        self.store = _worker_store(url, credentials)
        self.path = path
        self.seq = seq
        self.target = target
        self.options = options
        self.pending: list[pa.RecordBatch] = []
        self.pending_bytes = 0
        self.written: list[CompactedSst] = []
        self.rows = 0

    def add(self, batch: pa.RecordBatch) -> None:
        n = batch.num_rows
        sizes = pc.add(
            pc.add(pc.binary_length(batch.column(0)), pc.binary_length(batch.column(1))), ROW_OVERHEAD
        )
        cumulative = np.cumsum(sizes.to_numpy(zero_copy_only=False), dtype=np.int64)
        offset = 0
        while offset < n:
            base = int(cumulative[offset - 1]) if offset else 0
            # the first row at which the pending SST reaches its target
            at = int(np.searchsorted(cumulative, base + self.target - self.pending_bytes, side="left"))
            if at >= n:
                break
            self.pending.append(batch.slice(offset, at + 1 - offset))
            self.flush()
            offset = at + 1
        if offset < n:
            self.pending.append(batch.slice(offset))
            self.pending_bytes += int(cumulative[-1]) - (int(cumulative[offset - 1]) if offset else 0)

    def flush(self) -> None:
        if not self.pending:
            return
        rows = pa.Table.from_batches(self.pending).combine_chunks()
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
        sst = CompactedSst(ULID(), info)
        self.store.put(sst_key(self.path, sst.id), data)
        self.written.append(sst)
        self.rows += n
        self.pending = []
        self.pending_bytes = 0


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


def write_partition(
    url: str,
    credentials: S3Credentials,
    path: str,
    seq: int,
    target: int,
    options: SstOptions,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: one key-sorted partition in, its SSTs written, one pickled result out."""
    cutter = _SstCutter(url, credentials, path, seq, target, options)
    previous: bytes | None = None
    duplicate: bytes | None = None
    for batch in batches:
        if batch.num_rows == 0:
            continue
        keys = batch.column(0).cast(pa.binary())
        values = batch.column(1).cast(pa.binary())
        if keys.null_count or values.null_count or pc.min(pc.binary_length(keys)).as_py() == 0:
            raise BulkLoadInputError(  # checked by the driver; only a non-deterministic DataFrame gets here
                f"a null or empty key, or a null value, reached the bulk load of {path!r}"
            )
        if previous is not None and keys[0].as_py() < previous:
            raise BulkLoadFailedError(
                f"Spark ordered key {keys[0].as_py()!r} after {previous!r} in the bulk load of {path!r}; "
                "keys must sort as unsigned bytes"
            )
        duplicate = _first_duplicate(keys, previous)
        if duplicate is not None:
            break
        cutter.add(pa.RecordBatch.from_arrays([keys, values], names=["key", "value"]))
        previous = keys[len(keys) - 1].as_py()
    if duplicate is None:
        cutter.flush()
    result = _TaskResult(tuple(cutter.written), cutter.rows, duplicate)
    yield pa.RecordBatch.from_arrays([pa.array([pickle.dumps(result)], pa.binary())], names=["result"])


# --- driver -----------------------------------------------------------------------------------------


def _check_columns(df: DataFrame, key_col: str, value_col: str) -> None:
    if key_col == value_col:
        raise BulkLoadInputError(f"key_col and value_col must differ, both are {key_col!r}")
    types = {f.name: f.dataType for f in df.schema.fields}
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
    nothing is committed and the SSTs already written are orphans that GC removes after its
    ``min_age`` (deduplicate first, e.g. ``df.dropDuplicates([key_col])`` for any-wins).

    The load opens the database as its writer (``db_options``), which fences the running writer
    (its next write or flush raises :class:`FencedError`; reopen it after the load) and keeps
    everything it acknowledged. One sequence number above all stored data is given to every loaded
    row; ``repartitionByRange`` into ``partitions`` (default: the default parallelism, or one per
    256 MiB of row bytes if more) and ``sortWithinPartitions`` order the rows; each task writes
    SSTs of about ``target_sst_bytes`` row bytes under ``<path>/compacted/``; the driver commits them
    all in one manifest update, in front of L0 (see the module docstring). If that commit fails
    (:class:`FencedError`: another writer opened meanwhile) or the job fails
    (:class:`BulkLoadFailedError`), nothing is committed and the SSTs are orphans for GC. L0 then
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
    _check_columns(df, key_col, value_col)
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
        results = _run_job(
            df, columns, store_url, credentials, path, seq, target_sst_bytes, partitions, sst_options
        )
        duplicates = sorted(r.duplicate for r in results if r.duplicate is not None)
        if duplicates:
            raise DuplicateKeyError(
                f"the DataFrame loaded into {path!r} holds key {duplicates[0]!r} more than once"
                f"{f' (and {len(duplicates) - 1} more duplicated keys)' if len(duplicates) > 1 else ''}; "
                "deduplicate it first (e.g. dropDuplicates on the key column). Nothing was committed; "
                "the SSTs already written are orphans that GC removes.",
                duplicates[0],
            )
        ssts = sorted((s for r in results for s in r.ssts), key=lambda s: s.info.first_key)
        visible = db.manifest.visible_range
        if ssts and visible is not None:
            for key in (ssts[0].info.first_key, ssts[-1].info.last_key):
                check_write(visible, [key], f"the database {path!r}")
        committed = db.ingest_l0(ssts, seq)
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
    body = functools.partial(write_partition, url, credentials, path, seq, target, options)
    try:
        collected = ordered.mapInArrow(body, _RESULT_SCHEMA).collect()
    except (PySparkException, Py4JError) as exc:
        raise BulkLoadFailedError(
            f"the Spark job of the bulk load into {path!r} ({partitions} partitions) failed: "
            f"{_remote_error(exc)}. Nothing was committed; SSTs already written are orphans that GC removes."
        ) from exc
    results: list[_TaskResult] = [pickle.loads(bytes(row["result"])) for row in collected]
    return results


__all__ = ["DEFAULT_TARGET_SST_BYTES", "BulkLoadReport", "bulk_load", "write_partition"]
