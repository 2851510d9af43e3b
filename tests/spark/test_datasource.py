"""format("slate_ops") on a local Spark session: reads equal read_db's, filters on the key are pushed
down (fewer partitions, same rows), writes bulk-load through bulk_load's tasks and commit, and a
failed write leaves nothing visible."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Mapping
from datetime import timedelta

import pyarrow as pa
import pytest
from pyspark.errors import AnalysisException, PythonException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark.sql.types import StructType

from slate_ops import Db, DbReader, admin
from slate_ops.config import CheckpointOptions
from slate_ops.errors import BulkLoadConflictError, FencedError
from slate_ops.layout import sst_key
from slate_ops.manifest.model import KeyRange
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import LocalStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import SYSTEM_RUNTIME
from slate_ops.spark import FORMAT, read_db, register
from slate_ops.spark.datasource import KeyFilter, SlateOpsDataSource
from slate_ops.spark.read import READ_CHECKPOINT_NAME, narrow_plan, plan_read
from tests.spark.test_executor import QUIET, QUIET_READER
from tests.support.clock import sleep_until_expired
from tests.support.stores import snapshot

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

PATH = "shop/orders"
SCHEMA = "key binary, value binary"


def load(spark: SparkSession, store: ObjectStore, path: str = PATH, **options: str) -> DataFrame:
    reader = spark.read.format(FORMAT).option("store", store.url).option("path", path)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def save(df: DataFrame, store: ObjectStore, path: str = PATH, mode: str = "append", **options: str) -> None:
    writer = df.write.format(FORMAT).mode(mode).option("store", store.url).option("path", path)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()


def rows(df: DataFrame) -> list[tuple[bytes, bytes]]:
    return sorted((bytes(r["key"]), bytes(r["value"])) for r in df.collect())


def contents(store: ObjectStore, path: str = PATH) -> dict[bytes, bytes]:
    with DbReader.open(path, store, options=QUIET_READER) as reader:
        return dict(reader.scan())


def populate(store: ObjectStore, n: int = 3000) -> dict[bytes, bytes]:
    """Rows in L0 SSTs, overwritten and deleted ones, and WAL-only writes; returns the live rows."""
    model: dict[bytes, bytes] = {}
    rng = random.Random(7)
    with Db.open(PATH, store, QUIET) as db:
        for flush in range(4):
            for i in range(n):
                if rng.random() < 0.3:
                    key = b"k%05d" % i
                    if rng.random() < 0.1:
                        db.delete(key)
                        model.pop(key, None)
                    else:
                        value = b"v%d-%d" % (flush, i) * 4
                        db.put(key, value)
                        model[key] = value
            db.flush_memtable()
        db.put(b"k00001", b"wal-only")  # acknowledged, only in the WAL
        model[b"k00001"] = b"wal-only"
        db.flush()
    return dict(sorted(model.items()))


def test_registration_is_automatic_and_idempotent(spark: SparkSession, local_dir_store: LocalStore) -> None:
    populate(local_dir_store, 100)
    assert spark.conf.get("spark.sql.python.filterPushdown.enabled") == "true"
    register(spark)  # again: replaces the registration, same format name
    assert load(spark, local_dir_store).count() == len(contents(local_dir_store))


def test_reads_equal_read_db_and_the_engine(spark: SparkSession, local_dir_store: LocalStore) -> None:
    model = populate(local_dir_store)
    checkpoint = admin.create_checkpoint(
        PATH, local_dir_store, CheckpointOptions(lifetime=timedelta(hours=1))
    )
    df = load(spark, local_dir_store, checkpoint=str(checkpoint.id), partitions="4")
    assert df.rdd.getNumPartitions() == 4  # as read_db sizes them
    via_read_db = read_db(spark, local_dir_store.url, PATH, checkpoint=checkpoint.id, partitions=4)
    assert rows(df) == rows(via_read_db) == list(model.items())
    assert df.schema.simpleString() == "struct<key:binary,value:binary>"
    # partition i holds keys below those of partition i + 1, each in key order (as read_db)
    per_partition = df.rdd.glom().map(lambda part: [bytes(r[0]) for r in part]).collect()
    flat = [key for part in per_partition for key in part]
    assert flat == sorted(flat) == list(model)


def test_default_is_one_new_checkpoint_per_load(spark: SparkSession, local_dir_store: LocalStore) -> None:
    model = populate(local_dir_store, 500)
    df = load(spark, local_dir_store)
    with Db.open(PATH, local_dir_store, QUIET) as db:  # written after load(): not seen by df
        db.put(b"k00002", b"later")
        db.flush()
    assert rows(df) == list(model.items())
    assert df.count() == len(model)  # another plan, the same checkpoint
    manifest = ManifestStore(local_dir_store, PATH).read_latest_required().value
    assert sum(1 for c in manifest.checkpoints if c.name == READ_CHECKPOINT_NAME) == 1


def test_tag_option_reads_the_tagged_state(spark: SparkSession, local_dir_store: LocalStore) -> None:
    before = populate(local_dir_store, 500)
    admin.create_tag(PATH, local_dir_store, "before")
    with Db.open(PATH, local_dir_store, QUIET) as db:
        db.put(b"new", b"1")
        db.flush()
    assert rows(load(spark, local_dir_store, tag="before")) == list(before.items())
    assert (b"new", b"1") in rows(load(spark, local_dir_store))


KEY_FILTERS: list[tuple[str, Callable[[], Column], KeyRange | None, frozenset[bytes] | None]] = [
    # (name, filter, the key range pushed down or None if nothing is, the keys pushed down)
    ("eq", lambda: F.col("key") == F.lit(b"k01500"), KeyRange(b"k01500", b"k01500\x00"), None),
    ("lt", lambda: F.col("key") < F.lit(b"k00200"), KeyRange(None, b"k00200"), None),
    ("le", lambda: F.col("key") <= F.lit(b"k00200"), KeyRange(None, b"k00200\x00"), None),
    ("gt", lambda: F.col("key") > F.lit(b"k02800"), KeyRange(b"k02800\x00", None), None),
    ("ge", lambda: F.col("key") >= F.lit(b"k02800"), KeyRange(b"k02800", None), None),
    (
        "between",
        lambda: F.col("key").between(F.lit(b"k01000"), F.lit(b"k01100")),
        KeyRange(b"k01000", b"k01100\x00"),
        None,
    ),
    (
        "in",
        lambda: F.col("key").isin(b"k00010", b"k00011", b"k02999"),
        KeyRange(b"k00010", b"k02999\x00"),
        frozenset({b"k00010", b"k00011", b"k02999"}),
    ),
    ("none", lambda: F.col("key") > F.lit(b"zzz"), KeyRange(b"zzz\x00", None), None),
    ("value", lambda: F.col("value").startswith(F.lit(b"v1")), None, None),  # not pushed: Spark filters
    ("not-in", lambda: ~F.col("key").isin(b"k00010", b"k00011"), None, None),
    ("or", lambda: (F.col("key") < F.lit(b"k00100")) | (F.col("key") > F.lit(b"k02900")), None, None),
    (
        "key-and-value",
        lambda: (F.col("key") >= F.lit(b"k02000")) & (F.col("value") > F.lit(b"v2")),
        KeyRange(b"k02000", None),
        None,
    ),
]


@pytest.mark.parametrize(("name", "make", "pushed", "keys"), KEY_FILTERS, ids=[f[0] for f in KEY_FILTERS])
def test_pushdown_narrows_the_read_and_stays_exact(
    spark: SparkSession,
    local_dir_store: LocalStore,
    name: str,
    make: Callable[[], Column],
    pushed: KeyRange | None,
    keys: frozenset[bytes] | None,
) -> None:
    condition = make()
    model = populate(local_dir_store)
    checkpoint = admin.create_checkpoint(
        PATH, local_dir_store, CheckpointOptions(lifetime=timedelta(hours=1))
    )
    df = load(spark, local_dir_store, checkpoint=str(checkpoint.id), partitions="4")
    filtered = df.where(condition)
    expected = rows(read_db(spark, local_dir_store.url, PATH, checkpoint=checkpoint.id).where(condition))
    assert rows(filtered) == expected  # exact, whatever was pushed
    if name == "in":
        assert [k for k, _ in expected] == [k for k in sorted(keys or ()) if k in model]
    plan = plan_read(local_dir_store, local_dir_store.url, PATH, checkpoint.id, 4)
    if pushed is None:
        assert filtered.rdd.getNumPartitions() == len(plan.chunks) == 4
    else:  # only the ranges that meet the pushed range are read: the plan's partitions drop
        narrowed = narrow_plan(plan, pushed, keys)
        assert filtered.rdd.getNumPartitions() == max(1, len(narrowed.chunks)) < 4


def test_key_filter_ranges() -> None:
    from pyspark.sql.datasource import EqualTo, GreaterThan, In, LessThanOrEqual, StringContains

    pushed = KeyFilter()
    for item in (GreaterThan(("key",), b"b"), LessThanOrEqual(("key",), b"d")):
        narrowed = pushed.push(item)
        assert narrowed is not None
        pushed = narrowed
    assert (pushed.bounds.start, pushed.bounds.end) == (b"b\x00", b"d\x00")
    assert pushed.push(StringContains(("key",), "x")) is None
    assert pushed.push(EqualTo(("value",), b"x")) is None
    keys = pushed.push(In(("key",), (b"a", b"c", b"d")))
    assert keys is not None and keys.range().start == b"c" and keys.range().end == b"d\x00"
    assert keys.push(EqualTo(("key",), b"x")) is not None
    empty = keys.push(EqualTo(("key",), b"x"))
    assert empty is not None and empty.range().is_empty()


def spark_error(caught: pytest.ExceptionInfo[BaseException], error: str, text: str) -> None:
    """The Spark exception names the slate_ops error and its message."""
    message = str(caught.value)
    assert f"slate_ops.errors.{error}" in message, message[:3000]
    assert text in message, message[:3000]


def test_read_errors_are_typed(spark: SparkSession, local_dir_store: LocalStore) -> None:
    populate(local_dir_store, 50)
    with pytest.raises(AnalysisException) as caught:
        load(spark, local_dir_store, "no/such/db")
    spark_error(caught, "DbNotFoundError", "no database at")
    with pytest.raises(AnalysisException) as caught:
        load(spark, local_dir_store, tag="nope")
    spark_error(caught, "TagNotFoundError", "no tag 'nope'")
    with pytest.raises(AnalysisException) as caught:
        load(spark, local_dir_store, checkpoint=str(uuid.uuid4()))
    spark_error(caught, "CheckpointNotFoundError", "")
    short = admin.create_checkpoint(PATH, local_dir_store, CheckpointOptions(lifetime=timedelta(seconds=1)))
    sleep_until_expired(SYSTEM_RUNTIME.now(), 1)
    with pytest.raises(AnalysisException) as caught:
        load(spark, local_dir_store, checkpoint=str(short.id))
    spark_error(caught, "CheckpointExpiredError", str(short.id))
    with pytest.raises(AnalysisException) as caught:
        load(spark, local_dir_store, tag="x", checkpoint=str(short.id))
    spark_error(caught, "InvalidArgumentError", "takes a checkpoint or a tag, not both")
    with pytest.raises(AnalysisException) as caught:
        spark.read.format(FORMAT).option("store", "memory://").option("path", PATH).load()
    spark_error(caught, "InvalidArgumentError", "cannot use the in-process store")
    with pytest.raises(AnalysisException) as caught:
        spark.read.format(FORMAT).option("path", PATH).load()
    spark_error(caught, "InvalidArgumentError", "needs the option 'store'")
    with pytest.raises(AnalysisException) as caught:
        load(spark, local_dir_store, partitons="3")
    spark_error(caught, "InvalidArgumentError", "does not take the option(s) ['partitons']")


def test_a_dataframe_evaluated_after_its_checkpoint_expired_fails_typed(
    spark: SparkSession, local_dir_store: LocalStore
) -> None:
    populate(local_dir_store, 50)
    short = admin.create_checkpoint(PATH, local_dir_store, CheckpointOptions(lifetime=timedelta(seconds=3)))
    created = SYSTEM_RUNTIME.now()
    df = load(spark, local_dir_store, checkpoint=str(short.id))
    sleep_until_expired(created, 3)
    with pytest.raises((AnalysisException, PythonException)) as caught:  # planning or task
        df.collect()
    spark_error(caught, "CheckpointExpiredError", str(short.id))


def test_write_then_read_round_trips(spark: SparkSession, local_dir_store: LocalStore) -> None:
    loaded = {b"k%05d" % i: b"value-%d" % i * 3 for i in range(5000)}
    items = list(loaded.items())
    random.Random(1).shuffle(items)
    df = spark.createDataFrame(items, SCHEMA).repartitionByRange(4, "key")  # rows unsorted in each
    save(df, local_dir_store, target_sst_bytes="32768")
    assert contents(local_dir_store) == loaded
    manifest = ManifestStore(local_dir_store, PATH).read_latest_required().value
    assert len(manifest.l0) > 4  # several SSTs per task, all in one commit, in front of L0
    assert rows(load(spark, local_dir_store)) == sorted(loaded.items())
    # a second write shadows: the newest values win, other keys stay
    newer = spark.createDataFrame([(b"k00003", b"new"), (b"zzz", b"z")], SCHEMA)
    save(newer, local_dir_store)
    assert contents(local_dir_store) == {**loaded, b"k00003": b"new", b"zzz": b"z"}


def test_write_takes_other_column_names_and_fences_the_writer(
    spark: SparkSession, local_dir_store: LocalStore
) -> None:
    writer = Db.open(PATH, local_dir_store, QUIET)
    writer.put(b"a", b"acknowledged", await_durable=True)
    df = spark.createDataFrame([(b"b", b"2", 1), (b"c", b"3", 2)], "id binary, payload binary, n int")
    save(df, local_dir_store, key_col="id", value_col="payload")
    assert contents(local_dir_store) == {b"a": b"acknowledged", b"b": b"2", b"c": b"3"}
    with pytest.raises(FencedError):
        writer.put(b"x", b"y", await_durable=True)


def test_a_write_during_the_load_makes_the_commit_refuse(local_dir_store: LocalStore) -> None:
    """The writer's own steps, run in this process as Spark runs them in its workers."""
    populate(local_dir_store, 20)
    source = SlateOpsDataSource(CaseInsensitiveDict(store=local_dir_store.url, path=PATH))
    schema = StructType.fromDDL(SCHEMA)
    assert isinstance(schema, StructType)
    writer = source.writer(schema, overwrite=False)
    batch = pa.RecordBatch.from_pydict({"key": [b"x1", b"x2"], "value": [b"1", b"2"]})
    message = writer.write(iter([batch]))
    assert message.result.ssts
    with Db.open(PATH, local_dir_store, QUIET) as db:  # another writer, after the load started
        db.put(b"meanwhile", b"1")
    before = contents(local_dir_store)
    with pytest.raises(BulkLoadConflictError, match="was written while"):
        writer.commit([message])
    writer.abort([message])  # what Spark does after a failed commit
    assert contents(local_dir_store) == before
    manifest = ManifestStore(local_dir_store, PATH).read_latest_required().value
    listed = {sst_key(PATH, s.id) for s in manifest.ssts}
    assert [m.key for m in local_dir_store.list(f"{PATH}/compacted/") if m.key not in listed] == []


def no_new_data(store: LocalStore, before: Mapping[str, object], data: dict[bytes, bytes]) -> None:
    assert contents(store) == data
    sst_files = {k for k in snapshot(store) if "/compacted/" in k}
    assert sst_files == {k for k in before if "/compacted/" in k}


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ([(b"dup", b"1"), (b"dup", b"2")], "DuplicateKeyError"),
        ([(b"", b"1")], "BulkLoadInputError"),
        ([(b"k", None)], "BulkLoadInputError"),
    ],
    ids=["duplicate", "empty-key", "null-value"],
)
def test_a_failed_write_leaves_nothing_visible(
    spark: SparkSession, local_dir_store: LocalStore, bad: list[tuple[bytes, bytes | None]], error: str
) -> None:
    data = populate(local_dir_store, 200)
    with Db.open(PATH, local_dir_store, QUIET) as db:
        db.flush_memtable()
    before = snapshot(local_dir_store)
    good = [(b"g%05d" % i, b"v") for i in range(2000)]
    df = spark.createDataFrame(good + bad, SCHEMA).repartitionByRange(3, "key")
    with pytest.raises((AnalysisException, PythonException)) as caught:
        save(df, local_dir_store, target_sst_bytes="4096")  # every task writes several SSTs first
    spark_error(caught, error, "")
    no_new_data(local_dir_store, before, data)


def test_overlapping_partitions_are_refused_and_deleted(
    spark: SparkSession, local_dir_store: LocalStore
) -> None:
    data = populate(local_dir_store, 200)
    with Db.open(PATH, local_dir_store, QUIET) as db:
        db.flush_memtable()
    before = snapshot(local_dir_store)
    df = spark.createDataFrame([(b"o%05d" % i, b"v") for i in range(1000)], SCHEMA).repartition(3)
    with pytest.raises(AnalysisException) as caught:
        save(df, local_dir_store)
    spark_error(caught, "BulkLoadOverlapError", "repartitionByRange")
    no_new_data(local_dir_store, before, data)


def test_save_modes_and_bad_writes_are_refused(spark: SparkSession, local_dir_store: LocalStore) -> None:
    populate(local_dir_store, 20)
    df = spark.createDataFrame([(b"a", b"1")], SCHEMA)
    with pytest.raises(AnalysisException) as caught:
        save(df, local_dir_store, mode="overwrite")
    spark_error(caught, "UnsupportedSaveModeError", 'supports only .mode("append")')
    for mode in ("error", "ignore"):  # refused by Spark itself, before slate_ops is asked
        with pytest.raises(AnalysisException, match="Append"):
            save(df, local_dir_store, mode=mode)
    with pytest.raises(AnalysisException) as caught:
        save(spark.createDataFrame([("a", "1")], "key string, value string"), local_dir_store)
    spark_error(caught, "BulkLoadInputError", "not binary")
    with pytest.raises(AnalysisException) as caught:
        df.write.format(FORMAT).mode("append").option("store", "memory://").option("path", PATH).save()
    spark_error(caught, "InvalidArgumentError", "cannot use the in-process store")
