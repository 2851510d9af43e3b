"""read_db and format("slate_ops") over a SlateDB database (written by the binding's own Db) on a
real local Spark session: the rows equal what the binding's DbReader reads at the checkpoint, one
task per key range, each a DbReader in CHECKPOINT mode in a Spark worker; the read writes nothing;
key filters are pushed down as for ours."""

from __future__ import annotations

import os
import random
import time
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import pytest
from pyspark.errors import AnalysisException, PythonException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, In, LessThan
from pyspark.sql.types import StructType

from slate_ops import admin as admin_handle
from slate_ops.engines.slatedb import LOOP, SlateDbAdmin
from slate_ops.engines.slatedb.store import binding_path, binding_store
from slate_ops.errors import (
    CheckpointExpiredError,
    CheckpointNotFoundError,
    DbNotFoundError,
    InvalidArgumentError,
    TagNotFoundError,
)
from slate_ops.manifest.model import KeyRange
from slate_ops.objstore import LocalStore, S3Store, open_store
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import SYSTEM_RUNTIME
from slate_ops.spark import FORMAT, read_db
from slate_ops.spark.datasource import KeyFilter, PlanReader, SlateOpsDataSource
from slate_ops.spark.read import SLATE_OPS_READ
from slate_ops.spark.read_base import READ_ARROW_SCHEMA, READ_CHECKPOINT_NAME
from slate_ops.spark.read_slatedb import (
    SLATEDB_READ,
    SlateDbReadPlan,
    narrow_slatedb_plan,
    plan_slatedb_read,
    read_slatedb_partition,
)
from tests.spark.test_datasource import populate
from tests.support.clock import sleep_until_expired
from tests.support.slatedb import fast_settings, in_child, read_slatedb
from tests.support.stores import snapshot

# End to end (a real SparkSession over databases written by SlateDB's binding, ~30 s): in CI's second
# step (`pytest -m "cluster or e2e"`), keeping the default run well under 10 minutes.
pytestmark = [
    pytest.mark.spark,
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

PATH = "shop/theirs"


def write_theirs(sdb: Any, store: ObjectStore, path: str = PATH, rounds: int = 4) -> dict[bytes, bytes]:
    """SlateDB's own Db: ``rounds`` memtable flushes of disjoint key blocks (one L0 SST each, so
    the manifest has several SST key ranges), overwrites and deletes of earlier blocks, and a last
    write that is only in the WAL when the writer stops. Returns the live rows."""

    async def run() -> dict[bytes, bytes]:
        builder = sdb.DbBuilder(binding_path(store, path), binding_store(store))
        builder.with_settings(fast_settings(sdb))
        db = await builder.build()
        rng = random.Random(21)
        model: dict[bytes, bytes] = {}
        for r in range(rounds):
            for i in range(r * 250, (r + 1) * 250):
                key, value = b"k%05d" % i, b"v%d-%d" % (r, i) * 3
                await db.put(key, value)
                model[key] = value
            for _ in range(40):  # revisit older blocks
                key = b"k%05d" % rng.randrange(0, (r + 1) * 250)
                if rng.random() < 0.3:
                    await db.delete(key)
                    model.pop(key, None)
                else:
                    await db.put(key, b"over-%d" % r)
                    model[key] = b"over-%d" % r
            await db.flush_with_options(sdb.FlushOptions(flush_type=sdb.FlushType.MEM_TABLE))
        await db.put(b"k00003", b"wal-only")
        model[b"k00003"] = b"wal-only"
        await db.flush_with_options(sdb.FlushOptions(flush_type=sdb.FlushType.WAL))
        await db.shutdown()
        return dict(sorted(model.items()))

    return LOOP.run(run())


def rows(df: DataFrame) -> list[tuple[bytes, bytes]]:
    return [(bytes(r["key"]), bytes(r["value"])) for r in df.collect()]


def checkpoint_of(store: ObjectStore, name: str | None = None, lifetime_s: float = 3600) -> uuid.UUID:
    cid, _ = SlateDbAdmin(PATH, store).create_checkpoint(lifetime_s=lifetime_s, name=name)
    return uuid.UUID(cid)


def test_read_db_equals_the_binding_reader_one_task_per_range(
    sdb: Any, spark: SparkSession, local_dir_store: LocalStore
) -> None:
    model = write_theirs(sdb, local_dir_store)
    checkpoint = checkpoint_of(local_dir_store)
    expected = read_slatedb(local_dir_store, PATH, str(checkpoint))
    assert expected == model  # the WAL-only write included

    before = snapshot(local_dir_store)
    df = read_db(spark, local_dir_store.url, PATH, checkpoint=checkpoint, partitions=3)  # engine detected
    got = rows(df)
    assert got == sorted(expected.items())  # partitions in key order, each in key order
    assert df.rdd.getNumPartitions() == 3  # three ranges cut at the SSTs' first keys
    assert snapshot(local_dir_store) == before  # CHECKPOINT-mode readers write nothing

    plan = plan_slatedb_read(local_dir_store, local_dir_store.url, PATH, checkpoint, 3)
    assert len(plan.ranges) == 3 and plan.ranges[0].start is None and plan.ranges[-1].end is None
    for left, right in zip(plan.ranges, plan.ranges[1:], strict=False):
        assert left.end == right.start is not None
    # each partition holds exactly its range
    per_task = df.rdd.glom().map(lambda part: [bytes(r["key"]) for r in part]).collect()
    for keys, key_range in zip(per_task, plan.ranges, strict=True):
        assert keys and all(key_range.contains(k) for k in keys)

    # the tasks ran in Spark's Python workers, not in this process (which used the binding)
    pids = df.rdd.mapPartitions(lambda _: [os.getpid()]).collect()
    assert os.getpid() not in pids


def test_default_checkpoint_tag_and_typed_errors(
    sdb: Any, spark: SparkSession, local_dir_store: LocalStore
) -> None:
    model = write_theirs(sdb, local_dir_store, rounds=2)
    admin = SlateDbAdmin(PATH, local_dir_store)
    admin_handle.open(PATH, local_dir_store).create_tag("v1")  # the handle's tag (a checkpoint tag:v1)

    async def overwrite() -> None:  # a later write the tag does not see
        builder = sdb.DbBuilder(binding_path(local_dir_store, PATH), binding_store(local_dir_store))
        db = await builder.build()
        await db.put(b"k00000", b"after-the-tag")
        await db.shutdown()

    LOOP.run(overwrite())
    assert dict(rows(read_db(spark, local_dir_store.url, PATH, tag="v1"))) == model

    # neither checkpoint nor tag: a new spark-read checkpoint, short-lived, of the current state
    started = time.time()
    df = read_db(spark, local_dir_store.url, PATH)
    made = admin.list_checkpoints(READ_CHECKPOINT_NAME)
    assert len(made) == 1 and made[0].expire_time_s is not None
    assert started + 3500 < made[0].expire_time_s <= started + 3601  # one hour, as ours
    assert dict(rows(df)) == {**model, b"k00000": b"after-the-tag"}

    with pytest.raises(
        TagNotFoundError, match=f"no tag 'nope' in the current manifest of SlateDB database {PATH}"
    ):
        read_db(spark, local_dir_store.url, PATH, tag="nope")
    with pytest.raises(InvalidArgumentError, match="a checkpoint or a tag, not both"):
        read_db(spark, local_dir_store.url, PATH, checkpoint=uuid.uuid4(), tag="v1")
    with pytest.raises(CheckpointNotFoundError):
        read_db(spark, local_dir_store.url, PATH, checkpoint=uuid.uuid4())
    with pytest.raises(DbNotFoundError):
        read_db(spark, local_dir_store.url, "shop/none")
    short = checkpoint_of(local_dir_store, lifetime_s=2)
    created = SYSTEM_RUNTIME.now()
    lazy = read_db(spark, local_dir_store.url, PATH, checkpoint=short)
    sleep_until_expired(created, 2)
    with pytest.raises(CheckpointExpiredError):
        read_db(spark, local_dir_store.url, PATH, checkpoint=short)
    with pytest.raises(PythonException, match="CheckpointExpiredError"):  # the tasks check too
        lazy.collect()


def test_format_slate_ops_reads_slatedb_and_pushes_key_filters_down(
    sdb: Any, spark: SparkSession, local_dir_store: LocalStore
) -> None:
    model = write_theirs(sdb, local_dir_store)
    checkpoint = checkpoint_of(local_dir_store)
    df = (
        spark.read.format(FORMAT)
        .option("store", local_dir_store.url)
        .option("path", PATH)
        .option("checkpoint", str(checkpoint))
        .option("partitions", "4")
        .load()
    )
    assert df.columns == ["key", "value"]
    assert sorted(rows(df)) == sorted(model.items())
    assert df.rdd.getNumPartitions() == 4
    plan = plan_slatedb_read(local_dir_store, local_dir_store.url, PATH, checkpoint, 4)

    # a range inside the first SST block: only the ranges meeting it are read, rows exact
    lo, hi = b"k00100", b"k00200"
    ranged = df.where((F.col("key") >= F.lit(lo)) & (F.col("key") < F.lit(hi)))
    assert sorted(rows(ranged)) == [(k, v) for k, v in model.items() if lo <= k < hi]
    narrowed = narrow_slatedb_plan(plan, KeyRange(lo, hi))
    assert ranged.rdd.getNumPartitions() == len(narrowed.ranges) < 4

    wanted = [b"k00003", b"k00999", b"zz-missing"]
    picked = df.where(F.col("key").isin(*wanted))
    assert sorted(rows(picked)) == [(k, model[k]) for k in wanted if k in model]
    pushed = KeyFilter(keys=frozenset(wanted))
    assert (
        picked.rdd.getNumPartitions()
        == len(narrow_slatedb_plan(plan, pushed.range(), pushed.keys).ranges)
        < 4
    )

    # a filter on the value is left to Spark, still exact
    on_value = df.where(F.col("value") == F.lit(b"wal-only"))
    assert rows(on_value) == [(b"k00003", b"wal-only")]

    with pytest.raises(AnalysisException, match="CheckpointNotFoundError"):
        spark.read.format(FORMAT).option("store", local_dir_store.url).option("path", PATH).option(
            "checkpoint", str(uuid.uuid4())
        ).load()


def _reader_rows(store: LocalStore, path: str, filters: list[Any]) -> tuple[PlanReader[Any], list[Any], Any]:
    """``format("slate_ops")``'s reader of ``path`` (on the driver, as Spark plans it), the filters
    it left to Spark, and every row its partitions read."""
    source = register_class(store, path)
    reader = source.reader(StructType())
    left = list(reader.pushFilters(filters))
    batches = [b for p in reader.partitions() for b in reader.read(p)]
    assert all(b.schema == READ_ARROW_SCHEMA for b in batches)  # nullable columns, either engine
    return reader, left, [(k, v) for b in batches for k, v in zip(*b.to_pydict().values(), strict=True)]


def register_class(store: LocalStore, path: str) -> SlateOpsDataSource:
    source = SlateOpsDataSource({"store": store.url, "path": path, "partitions": "4"})
    source.schema()  # resolves the checkpoint (a new spark-read one), as load() does
    return source


def test_one_reader_reads_both_engines_with_the_same_pushdown(sdb: Any, local_dir_store: LocalStore) -> None:
    """format("slate_ops") plans either engine's database with one PlanReader: the same filters on
    ``key`` narrow both plans and leave the same filters to Spark; each reads exactly its rows."""
    theirs = write_theirs(sdb, local_dir_store)
    ours = populate(local_dir_store, 1000)  # shop/orders, next to shop/theirs
    lo, hi = b"k00100", b"k00700"
    wanted = (b"k00003", b"k00150", b"k00500", b"k00650", b"k00999")
    on_value = EqualTo(("value",), b"x")
    filters = [GreaterThanOrEqual(("key",), lo), LessThan(("key",), hi), In(("key",), wanted), on_value]
    for path, model, steps in ((PATH, theirs, SLATEDB_READ), ("shop/orders", ours, SLATE_OPS_READ)):
        reader, left, got = _reader_rows(local_dir_store, path, filters)
        assert type(reader) is PlanReader and reader.engine_read is steps
        assert left == [on_value]
        assert got == [(k, model[k]) for k in wanted if lo <= k < hi and k in model]
        assert 0 < steps.count(reader.plan) < 4  # ranges without a wanted key are not read
        _, left, everything = _reader_rows(local_dir_store, path, [on_value])
        assert left == [on_value] and everything == list(model.items())


def _rows_read(plan: SlateDbReadPlan) -> int:
    return sum(b.num_rows for b in read_slatedb_partition(plan, 0))


def test_a_task_forked_from_a_process_that_used_the_binding_fails_typed(
    sdb: Any, local_dir_store: LocalStore
) -> None:
    """The guard behind the Spark read: a partition read in a child forked after this process used
    the binding raises SlateDbForkError at once (unguarded it would hang); spawned, it reads."""
    model = write_theirs(sdb, local_dir_store, rounds=1)
    plan = plan_slatedb_read(local_dir_store, local_dir_store.url, PATH, checkpoint_of(local_dir_store), 1)
    kind, value = in_child("fork", _rows_read, plan)
    assert kind == "SlateDbForkError", value
    assert in_child("spawn", _rows_read, plan) == ("ok", len(model))


@pytest.mark.s3
def test_read_db_on_s3(sdb: Any, spark: SparkSession, make_s3_store: Callable[..., S3Store]) -> None:
    store = make_s3_store("spark-theirs")
    model = write_theirs(sdb, store, rounds=2)
    checkpoint = checkpoint_of(store)
    # The JVM may predate the dummy AWS variables: the task URL carries them (as ours, test_read.py).
    credentials = urlencode({"access_key_id": "testing", "secret_access_key": "testing"})
    url = f"{store.url}&{credentials}"
    assert isinstance(open_store(url), S3Store)
    df = read_db(spark, url, PATH, checkpoint=checkpoint, partitions=2)
    assert dict(rows(df)) == model == read_slatedb(store, PATH, str(checkpoint))
    assert df.rdd.getNumPartitions() == 2


def test_the_engine_can_be_given_and_an_unknown_one_is_refused(
    sdb: Any, spark: SparkSession, local_dir_store: LocalStore
) -> None:
    model = write_theirs(sdb, local_dir_store, rounds=1)
    checkpoint = checkpoint_of(local_dir_store)
    assert (
        dict(rows(read_db(spark, local_dir_store.url, PATH, checkpoint=checkpoint, engine="slatedb")))
        == model
    )
    with pytest.raises(InvalidArgumentError, match=r"unknown engine 'rocksdb'.*slate_ops, slatedb"):
        read_db(spark, local_dir_store.url, PATH, checkpoint=checkpoint, engine="rocksdb")
    with pytest.raises(AnalysisException, match="InvalidArgumentError"):
        spark.read.format(FORMAT).option("store", local_dir_store.url).option("path", PATH).option(
            "engine", "rocksdb"
        ).load()
