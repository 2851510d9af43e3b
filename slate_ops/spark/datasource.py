"""Databases as a Spark data source: ``spark.read.format("slate_ops")`` and ``df.write.format("slate_ops")``.

PySpark 4's Python Data Source API (:mod:`pyspark.sql.datasource`) on the same code as
:func:`~slate_ops.spark.read_db` and :func:`~slate_ops.spark.bulk_load`::

    from slate_ops.spark import register

    register(spark)  # once per session; local_spark_session and the Dagster resource do it
    df = spark.read.format("slate_ops").option("store", url).option("path", "orders").load()
    df.where(df.key >= b"k100").count()  # the key range is pushed down: fewer partitions read
    (df.repartitionByRange(8, "key").write.format("slate_ops").mode("append")
        .option("store", url).option("path", "orders_copy").save())

Reading: ``schema()`` (run once by ``load()``) resolves the checkpoint to read — ``checkpoint``,
the ``tag``'s, or a new ``spark-read`` checkpoint of one hour, as ``read_db`` does — so every
action on the DataFrame reads the same state. ``reader()`` plans with
:func:`~slate_ops.spark.read.plan_read` (partitions as ``read_db`` sizes them); ``pushFilters``
turns the filters on ``key`` into one key range and a set of keys
(:func:`~slate_ops.spark.read.narrow_plan` drops the partitions outside it and clips the others);
each task runs :func:`~slate_ops.spark.read.read_partition` and yields its Arrow batches. A
database written by SlateDB (detected from its manifest, or ``.option("engine", "slatedb")``) is
read by the same :class:`PlanReader` with the steps of :mod:`slate_ops.spark.read_slatedb` (one
``DbReader`` at the checkpoint per key range, the same pushdown).

Writing: ``writer()`` checks the columns and the options, then opens the database as its writer
(fencing the running one, flushing its writes into L0), reserves a sequence number above all
stored data and closes it, as ``bulk_load`` does before its job. Each task sorts its partition
and writes SSTs (:func:`~slate_ops.spark.bulk_load.task_result`); the messages come back to
``commit``, which reopens the writer, checks that nothing was written since (the same number is
reserved again) and commits every SST in one manifest update
(:func:`~slate_ops.spark.bulk_load.commit_load`); ``abort`` deletes the tasks' SSTs.

The planning, commit and abort steps run in Python processes the driver's JVM starts, not in the
caller's: the S3 credentials (the session's ``spark.slate_ops.s3.*``, else the driver's
``SLATE_OPS_S3_*``), the default parallelism and the kill timeout are read by :func:`register`
and carried by the registered class. Errors raised there reach the caller as Spark's ``AnalysisException`` or
``PythonException`` whose message holds the slate_ops error's class and text.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from slate_ops.admin.split_keys import check_count
from slate_ops.engine.db import Db
from slate_ops.engines.detect import Engine
from slate_ops.errors import (
    BulkLoadConflictError,
    InvalidArgumentError,
    SlateOpsError,
    UnsupportedSaveModeError,
)
from slate_ops.layout import normalize_db_path
from slate_ops.manifest.model import KeyRange
from slate_ops.manifest.store import ManifestStore
from slate_ops.runtime import SYSTEM_RUNTIME
from slate_ops.spark.bulk_load import (
    DEFAULT_TARGET_SST_BYTES,
    LoadTarget,
    _TaskResult,
    check_columns,
    commit_load,
    delete_load_orphans,
    delete_ssts,
    task_result,
)
from slate_ops.spark.credentials import NO_CREDENTIALS, S3Credentials
from slate_ops.spark.executor import _worker_store
from slate_ops.spark.read import detect_engine, engine_read
from slate_ops.spark.read_base import (
    DEFAULT_READ_LIFETIME,
    READ_ARROW_SCHEMA,
    READ_SCHEMA,
    EngineRead,
    default_parallelism,
    require_shareable,
)
from slate_ops.spark.task_kills import kill_grace_seconds, session_kill_grace, sweep_after_kills
from slate_ops.sst import DEFAULT_OPTIONS

log = logging.getLogger(__name__)

FORMAT = "slate_ops"
"""The format name: ``spark.read.format("slate_ops")``."""
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
"""Spark's switch for ``pushFilters`` of Python data sources (off by default; :func:`register` sets it)."""

READ_OPTIONS = frozenset({"store", "path", "checkpoint", "tag", "partitions", "engine"})
WRITE_OPTIONS = frozenset({"store", "path", "key_col", "value_col", "target_sst_bytes"})
P = TypeVar("P")


def _successor(key: bytes) -> bytes:
    """The smallest key above ``key`` (keys sort as unsigned bytes)."""
    return key + b"\x00"


def _as_key(value: Any) -> bytes | None:
    """A filter literal as a key, or None if it cannot be one (a string literal is UTF-8)."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    return None


@dataclass(frozen=True)
class KeyFilter:
    """What of the ``key`` filters the source applies: a key range, and optionally a set of keys."""

    bounds: KeyRange = field(default_factory=KeyRange)
    keys: frozenset[bytes] | None = None
    """``key IN (...)`` / ``key = ...``: only these keys (intersected over the filters)."""

    def push(self, item: Filter) -> KeyFilter | None:
        """This filter and ``item``, or None if ``item`` is not one the source applies exactly."""
        if getattr(item, "attribute", None) != ("key",):
            return None
        if isinstance(item, IsNotNull):
            return self  # keys are never null
        if isinstance(item, In):
            keys = [_as_key(v) for v in item.value]
            if any(k is None for k in keys):
                return None
            return self._with_keys(frozenset(k for k in keys if k is not None))
        key = _as_key(getattr(item, "value", None))
        if key is None:
            return None
        if isinstance(item, (EqualTo, EqualNullSafe)):
            return self._with_keys(frozenset({key}))
        narrower = {
            GreaterThan: KeyRange(_successor(key), None),
            GreaterThanOrEqual: KeyRange(key, None),
            LessThan: KeyRange(None, key),
            LessThanOrEqual: KeyRange(None, _successor(key)),
        }.get(type(item))
        if narrower is None:
            return None
        return KeyFilter(self.bounds.intersect(narrower), self.keys)

    def _with_keys(self, keys: frozenset[bytes]) -> KeyFilter:
        keys = keys if self.keys is None else self.keys & keys
        return KeyFilter(self.bounds, keys)

    def range(self) -> KeyRange:
        """The key range to read: the bounds, narrowed to the keys' span if there is a key set."""
        if self.keys is None:
            return self.bounds
        kept = sorted(k for k in self.keys if self.bounds.contains(k))
        if not kept:
            return KeyRange(b"", b"")  # empty
        return KeyRange(kept[0], _successor(kept[-1]))


class SlateOpsPartition(InputPartition):
    """One key range of the plan (``index``); -1: nothing to read (every range was filtered out)."""

    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index


class PlanReader(DataSourceReader, Generic[P]):
    """Plans the read on the driver; each task reads one partition's key range as Arrow batches.

    Either engine: ``engine_read`` narrows the plan, counts its partitions and reads one
    (:class:`~slate_ops.spark.read_base.EngineRead`)."""

    def __init__(self, engine_read: EngineRead[P], plan: P, credentials: S3Credentials) -> None:
        self.engine_read = engine_read
        self.plan = plan
        self.credentials = credentials
        self.keys: frozenset[bytes] | None = None

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        """Applies the filters on ``key`` (=, <, <=, >, >=, IN, IS NOT NULL) by narrowing the plan;
        returns the others (on ``value``, NOT, ...) for Spark to evaluate."""
        pushed = KeyFilter()
        left: list[Filter] = []
        for item in filters:
            narrowed = pushed.push(item)
            if narrowed is None:
                left.append(item)
            else:
                pushed = narrowed
        self.plan = self.engine_read.narrow(self.plan, pushed.range(), pushed.keys)
        self.keys = pushed.keys
        return left

    def partitions(self) -> Sequence[InputPartition]:
        """One partition per key range of the (narrowed) plan."""
        count = self.engine_read.count(self.plan)
        return [SlateOpsPartition(i) for i in range(count)] if count else [SlateOpsPartition(-1)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The partition's live rows, in key order (the engine's ``read_partition``)."""
        index = getattr(partition, "index", -1)
        if index < 0:
            return
        keys = None if self.keys is None else pa.array(sorted(self.keys), pa.binary())
        for batch in self.engine_read.read_partition(self.plan, index, self.credentials):
            if keys is not None:
                batch = batch.filter(pc.is_in(batch.column(0), value_set=keys))
            if batch.num_rows:  # Spark's schema has nullable columns (no copy)
                yield pa.RecordBatch.from_arrays(batch.columns, schema=READ_ARROW_SCHEMA)


@dataclass(frozen=True)
class SlateOpsCommitMessage(WriterCommitMessage):
    """A write task's SSTs (metadata only), row count and first duplicate key."""

    result: _TaskResult


class SlateOpsWriter(DataSourceArrowWriter):
    """Tasks write SSTs of their (sorted) partition; the driver commits them all at once."""

    def __init__(
        self,
        load: LoadTarget,
        key_col: str,
        value_col: str,
        *,
        epoch: int,
        started: float,
        kill_grace_s: float = kill_grace_seconds(),
    ) -> None:
        self.load = load
        self.key_col = key_col
        self.value_col = value_col
        self.epoch = epoch
        """The writer epoch the write took to reserve ``load.seq`` (what :meth:`abort`'s sweep checks)."""
        self.started = started
        self.kill_grace_s = kill_grace_s
        """How long after the job failed the tasks Spark killed may still write
        (:mod:`slate_ops.spark.task_kills`): :meth:`abort` sweeps again after it."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SlateOpsCommitMessage:
        """One task: its rows sorted by key, written as SSTs at the reserved sequence number."""
        columns = (
            pa.RecordBatch.from_arrays(
                [b.column(self.key_col), b.column(self.value_col)], names=["key", "value"]
            )
            for b in iterator
        )
        return SlateOpsCommitMessage(task_result(self.load, columns, sort=True))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Reopen the writer, check the sequence number still holds, commit every SST in one update."""
        results = _results(messages)
        if not any(r.ssts for r in results) and not any(r.duplicate for r in results):
            return
        load = self.load
        db = Db.open(load.path, load.credentials.open_store(load.url))
        try:
            seq = db.reserve_ingest_seq()
            if seq != load.seq:
                raise BulkLoadConflictError(
                    f"the database {load.path!r} was written while df.write.format('slate_ops') ran "
                    f"(sequence number {load.seq} reserved at the start, {seq} now): nothing was "
                    "committed and the SSTs written were deleted. Stop its writers and write again."
                )
            commit_load(db, load.path, results, seq)
        except BaseException:
            with contextlib.suppress(Exception):  # the error in flight says more; abort() deletes
                db.close()
            raise
        try:
            db.close()
        except SlateOpsError:  # committed: failing now would make Spark abort a visible load
            log.warning("closing the writer of %r after the load's commit failed", load.path, exc_info=True)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Delete the SSTs of the tasks that finished, then those of tasks Spark killed after they
        wrote (:func:`~slate_ops.spark.bulk_load.delete_load_orphans`; a failed task deleted its own),
        once more after :attr:`kill_grace_s` if a task sent no message (it may still be writing)."""
        failed_at = SYSTEM_RUNTIME.monotonic()  # Spark killed the job's other tasks before calling abort
        load = self.load
        store = _worker_store(load.url, load.credentials)
        delete_ssts(store, load.path, (s for r in _results(messages) for s in r.ssts))

        def sweep() -> int:
            return delete_load_orphans(store, load.path, load.seq, self.epoch, self.started)

        if any(m is None for m in messages):
            sweep_after_kills(sweep, grace_s=self.kill_grace_s, failed_at=failed_at)
        else:
            sweep()


def _results(messages: Sequence[WriterCommitMessage | None]) -> list[_TaskResult]:
    return [m.result for m in messages if isinstance(m, SlateOpsCommitMessage)]


class SlateOpsDataSource(DataSource):
    """``format("slate_ops")``: read a database at a checkpoint, or bulk-load a DataFrame into one.

    Register it with :func:`register` (which binds the session's S3 credentials and parallelism).
    """

    credentials: S3Credentials = NO_CREDENTIALS
    """Bound by :func:`register`: the S3 credentials of the planning, commit and task processes."""
    parallelism: int = 2
    """Bound by :func:`register`: the session's default parallelism (partitions at least)."""
    kill_grace_s: float = kill_grace_seconds()
    """Bound by :func:`register`: how long the tasks of a failed write may still write, from the
    session's ``spark.python.task.killTimeout`` (:mod:`slate_ops.spark.task_kills`)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def _option(self, key: str, *, required: bool = False) -> str | None:
        value = self.options.get(key)
        if required and not value:
            raise InvalidArgumentError(
                f'format("{FORMAT}") needs the option {key!r}: .option("{key}", ...) '
                "(store: the store URL, path: the database's path)"
            )
        return value or None

    def _check_options(self, allowed: frozenset[str], what: str) -> tuple[str, str]:
        unknown = sorted(set(self.options.keys()) - allowed)
        if unknown:
            raise InvalidArgumentError(
                f'format("{FORMAT}") {what} does not take the option(s) {unknown}; it takes {sorted(allowed)}'
            )
        store_url = self._option("store", required=True)
        path = self._option("path", required=True)
        assert store_url is not None and path is not None
        require_shareable(store_url, f'format("{FORMAT}")')
        return store_url, normalize_db_path(path)

    def schema(self) -> str:
        """``key binary, value binary``; resolves the checkpoint to read once per ``load()``."""
        self._read_checkpoint()
        return READ_SCHEMA

    def _read_checkpoint(self) -> uuid.UUID:
        resolved: uuid.UUID | None = getattr(self, "_checkpoint", None)
        if resolved is not None:
            return resolved
        store_url, path = self._check_options(READ_OPTIONS, "reading")
        given = self._option("checkpoint")
        try:
            checkpoint = None if given is None else uuid.UUID(given)
        except ValueError:
            raise InvalidArgumentError(
                f"the checkpoint option {given!r} is not a checkpoint id (a UUID); list them with "
                "`slate-ops list-checkpoints`"
            ) from None
        store = self.credentials.open_store(store_url)
        # a missing database fails here, named; a SlateDB one is read through the binding
        self._engine = detect_engine(store, path, self._option("engine"))
        if self._engine is Engine.SLATE_OPS:
            ManifestStore(store, path).read_latest_required()  # the engine was given: check it is there
        read = engine_read(self._engine)
        resolved = read.resolve(
            store, path, checkpoint=checkpoint, tag=self._option("tag"), lifetime=DEFAULT_READ_LIFETIME
        )
        read.require_live(store, path, resolved)  # a missing or expired checkpoint fails at load()
        self._checkpoint = resolved
        return resolved

    def reader(self, schema: StructType) -> PlanReader[Any]:
        """The plan of reading the checkpoint (partitions sized as ``read_db`` sizes them)."""
        checkpoint = self._read_checkpoint()
        store_url, path = self._check_options(READ_OPTIONS, "reading")
        partitions = self._int_option("partitions")
        store = self.credentials.open_store(store_url)
        read = engine_read(getattr(self, "_engine", Engine.SLATE_OPS))
        plan = read.plan(store, store_url, path, checkpoint, partitions, min_partitions=self.parallelism)
        return PlanReader(read, plan, self.credentials)

    def _int_option(self, key: str) -> int | None:
        given = self._option(key)
        if given is None:
            return None
        try:
            value = int(given)
        except ValueError:
            raise InvalidArgumentError(f"the option {key!r} must be a whole number, got {given!r}") from None
        check_count(value, key)
        return value

    def writer(self, schema: StructType, overwrite: bool) -> SlateOpsWriter:
        """Checks the columns, then takes the writer role once to reserve the load's sequence number."""
        if overwrite:
            raise UnsupportedSaveModeError(
                f'df.write.format("{FORMAT}") supports only .mode("append") (rows are added; newer '
                'versions shadow older ones), not "overwrite": nothing was written'
            )
        store_url, path = self._check_options(WRITE_OPTIONS, "writing")
        key_col = self._option("key_col") or "key"
        value_col = self._option("value_col") or "value"
        check_columns(schema, key_col, value_col)
        target = self._int_option("target_sst_bytes") or DEFAULT_TARGET_SST_BYTES
        store = self.credentials.open_store(store_url)
        started = SYSTEM_RUNTIME.now()  # weighed against the tasks' SST ids (real clocks)
        with Db.open(path, store) as db:  # fences the running writer; its writes go to L0
            seq = db.reserve_ingest_seq()
            epoch = db.writer_epoch
        load = LoadTarget(store_url, self.credentials, path, seq, target, DEFAULT_OPTIONS)
        return SlateOpsWriter(
            load, key_col, value_col, epoch=epoch, started=started, kill_grace_s=self.kill_grace_s
        )


def register(spark: SparkSession) -> type[SlateOpsDataSource]:
    """Register ``format("slate_ops")`` on ``spark`` and enable Spark's filter pushdown for it.

    The registered class carries the session's S3 credentials (``spark.slate_ops.s3.*``, else the
    driver's ``SLATE_OPS_S3_*``), default parallelism and ``spark.python.task.killTimeout`` as
    they are now: call it again after changing them. :func:`~slate_ops.spark.local_spark_session`
    and the Dagster ``pyspark`` resource call it for you.
    """
    bound = type(
        "SlateOpsDataSource",
        (SlateOpsDataSource,),
        {
            "credentials": S3Credentials.of_session(spark),
            "parallelism": default_parallelism(spark),
            "kill_grace_s": session_kill_grace(spark),
            "__module__": __name__,
            "__qualname__": "register.<locals>.SlateOpsDataSource",
        },
    )
    spark.conf.set(PUSHDOWN_CONF, "true")
    spark.dataSource.register(bound)
    return bound


__all__ = [
    "FORMAT",
    "KeyFilter",
    "PlanReader",
    "SlateOpsCommitMessage",
    "SlateOpsDataSource",
    "SlateOpsWriter",
    "register",
]
