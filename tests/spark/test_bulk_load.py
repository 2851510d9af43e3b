"""bulk_load on a local Spark session: loaded rows shadow older data, writers are fenced, bad input
writes nothing."""

from __future__ import annotations

import contextlib
import itertools
import random
from collections.abc import Callable
from urllib.parse import urlencode

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from slate_ops import CheckpointScope, Db, DbReader, admin
from slate_ops.compaction import CompactorOptions
from slate_ops.errors import (
    BulkLoadInputError,
    DuplicateKeyError,
    FencedError,
    InvalidArgumentError,
    OutOfRangeError,
)
from slate_ops.layout import sst_key
from slate_ops.manifest.model import KeyRange
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import LocalStore, S3Store
from slate_ops.objstore.base import ObjectStore
from slate_ops.spark import bulk_load, read_db
from tests.spark.test_executor import QUIET, QUIET_READER
from tests.support.compaction import compact_once
from tests.support.stores import snapshot

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

PATH = "warehouse/items"
SCHEMA = "key binary, value binary"


def frame(spark: SparkSession, rows: dict[bytes, bytes], partitions: int = 3) -> DataFrame:
    """A DataFrame of ``rows`` in random order, spread over ``partitions`` input partitions."""
    items = list(rows.items())
    random.Random(3).shuffle(items)
    return spark.createDataFrame(items, SCHEMA).repartition(partitions)


def contents(store: ObjectStore) -> dict[bytes, bytes]:
    with DbReader.open(PATH, store, options=QUIET_READER) as reader:
        return dict(reader.scan())


def test_loaded_values_shadow_older_ones_everywhere(spark: SparkSession, local_dir_store: LocalStore) -> None:
    old: dict[bytes, bytes] = {}
    with Db.open(PATH, local_dir_store, QUIET.model_copy(update={"l0_max_ssts": 1000})) as db:
        for i in range(0, 3000, 2):  # a sorted run ...
            old[b"k%05d" % i] = b"run"
            db.put(b"k%05d" % i, b"run")
        db.flush_memtable()
        db.put(b"k00000", b"run-too")
        db.flush_memtable()
        assert compact_once(PATH, local_dir_store, CompactorOptions(min_sources=2))
        for i in range(0, 3000, 3):  # ... L0 over it ...
            old[b"k%05d" % i] = b"l0"
            db.put(b"k%05d" % i, b"l0")
        db.flush_memtable()
        for i in range(0, 3000, 5):  # ... and WAL-only writes, some deletes
            old[b"k%05d" % i] = b"wal"
            db.put(b"k%05d" % i, b"wal")
        db.delete(b"k00006")
        old.pop(b"k00006")
        db.flush()
    before = ManifestStore(local_dir_store, PATH).read_latest_required().value

    loaded = {b"k%05d" % i: b"loaded-%d" % i for i in range(0, 4000, 7)}
    loaded[b"\x80high"] = b"sorted as unsigned bytes"
    loaded[b"\xff\xff"] = b""
    report = bulk_load(
        frame(spark, loaded), local_dir_store.url, PATH, target_sst_bytes=8 * 1024, partitions=3
    )

    expected = {**old, **loaded}
    assert report.rows == len(loaded) and report.ssts >= 3 and report.partitions == 3
    assert report.manifest_id is not None
    manifest = ManifestStore(local_dir_store, PATH).read(report.manifest_id)
    latest = ManifestStore(local_dir_store, PATH).read_latest_required()
    assert latest.id == manifest.id + 1 and latest.value.l0 == manifest.value.l0  # + the writer's close
    writes = 1500 + 1 + 1000 + 600 + 1  # every write, WAL-only ones included, is older than the load
    assert report.seq == manifest.value.last_l0_seq == writes + 1 > before.last_l0_seq
    ingested = [str(v.sst_id) for v in manifest.value.l0[: report.ssts]]
    assert ingested == list(report.sst_ids)  # in front of L0, in key order
    infos = [manifest.value.sst(v.sst_id).info for v in manifest.value.l0[: report.ssts]]  # type: ignore[union-attr]
    assert all(a.last_key < b.first_key for a, b in itertools.pairwise(infos))
    assert sum(i.size_bytes for i in infos) == report.bytes
    assert all(i.min_seq == i.max_seq == report.seq for i in infos)

    assert contents(local_dir_store) == expected
    with Db.open(PATH, local_dir_store, QUIET) as db:
        assert db.get(b"k00000") == b"loaded-0" and db.get(b"k00010") == b"wal"
        assert db.get(b"\x80high") == b"sorted as unsigned bytes"
        db.put(b"k00007", b"after")  # later writes shadow the load
        db.flush_memtable()
        expected[b"k00007"] = b"after"
        checkpoint = db.create_checkpoint(CheckpointScope.DURABLE).id
    got = read_db(spark, local_dir_store.url, PATH, checkpoint=checkpoint).collect()
    assert {bytes(r["key"]): bytes(r["value"]) for r in got} == expected
    assert compact_once(PATH, local_dir_store, CompactorOptions(min_sources=2))
    assert contents(local_dir_store) == expected  # the compactor keeps the load's versions


def test_a_running_writer_is_fenced_and_keeps_its_acknowledged_writes(
    spark: SparkSession, local_dir_store: LocalStore
) -> None:
    writer = Db.open(PATH, local_dir_store, QUIET)
    for i in range(200):
        writer.put(b"w%04d" % i, b"acked", await_durable=True)
    writer.put(b"shared", b"writer", await_durable=True)
    loaded = {b"shared": b"load", b"new": b"load"}
    bulk_load(frame(spark, loaded, 1), local_dir_store.url, PATH)
    with pytest.raises(FencedError, match="writer"):
        writer.put(b"late", b"x", await_durable=True)  # an unacknowledged write is lost, as it should be
    with pytest.raises(FencedError, match="writer"):
        writer.put(b"later", b"x")  # once fenced, every call raises
    with contextlib.suppress(FencedError):
        writer.close()
    got = contents(local_dir_store)
    assert got == {**{b"w%04d" % i: b"acked" for i in range(200)}, **loaded}


@pytest.mark.parametrize(
    ("rows", "error"),
    [
        ([(b"a", b"1"), (None, b"2")], "column 'key' holds 1 null keys"),
        ([(b"a", b"1"), (b"b", None)], "column 'value' holds 1 null values"),
        ([(b"a", b"1"), (b"", b"2")], "column 'key' holds 1 empty keys"),
    ],
    ids=["null-key", "null-value", "empty-key"],
)
def test_bad_rows_are_refused_before_anything_is_written(
    spark: SparkSession,
    local_dir_store: LocalStore,
    rows: list[tuple[bytes | None, bytes | None]],
    error: str,
) -> None:
    with Db.open(PATH, local_dir_store, QUIET) as db:
        db.put(b"a", b"0")
    before = snapshot(local_dir_store)
    with pytest.raises(BulkLoadInputError, match=error):
        bulk_load(spark.createDataFrame(rows, SCHEMA), local_dir_store.url, PATH)
    assert snapshot(local_dir_store) == before


def test_bad_columns_and_arguments_are_refused_before_anything_is_written(
    spark: SparkSession, local_dir_store: LocalStore
) -> None:
    admin.create_db(PATH, local_dir_store)
    before = snapshot(local_dir_store)
    strings = spark.createDataFrame([("a", "1")], "key string, value string")
    url = local_dir_store.url
    with pytest.raises(BulkLoadInputError, match=r"key column 'key' is string, not binary; cast"):
        bulk_load(strings, url, PATH)
    with pytest.raises(BulkLoadInputError, match=r"value column 'v' is string"):
        bulk_load(
            strings.select(F.col("key").cast("binary"), F.col("value").alias("v")), url, PATH, value_col="v"
        )
    with pytest.raises(BulkLoadInputError, match=r"no key column 'id'"):
        bulk_load(strings, url, PATH, key_col="id")
    with pytest.raises(BulkLoadInputError, match="must differ"):
        bulk_load(strings, url, PATH, value_col="key")
    good = spark.createDataFrame([(b"a", b"1")], SCHEMA)
    with pytest.raises(InvalidArgumentError, match="target_sst_bytes must be an int >= 1"):
        bulk_load(good, url, PATH, target_sst_bytes=0)
    with pytest.raises(InvalidArgumentError, match="memory://m"):
        bulk_load(good, "memory://m", PATH)
    empty = bulk_load(spark.createDataFrame([], SCHEMA), url, PATH)
    assert (empty.rows, empty.ssts, empty.manifest_id) == (0, 0, None)
    assert snapshot(local_dir_store) == before

    # A shard of a split takes only keys inside its range.
    ManifestStore(local_dir_store, PATH).update(
        lambda current: current.value.with_changes(visible_range=KeyRange(b"b", b"m"))
    )
    before = snapshot(local_dir_store)
    rows = spark.createDataFrame([(b"c", b"1"), (b"a", b"2"), (b"z", b"3")], SCHEMA)
    with pytest.raises(OutOfRangeError, match=r"2 keys of column 'key' are outside"):
        bulk_load(rows, url, PATH)
    assert snapshot(local_dir_store) == before


def test_duplicate_keys_name_one_and_commit_nothing(spark: SparkSession, local_dir_store: LocalStore) -> None:
    with Db.open(PATH, local_dir_store, QUIET) as db:
        db.put(b"dup", b"old")
        db.flush_memtable()
    rows = [(b"k%03d" % i, b"v") for i in range(300)] + [(b"dup", b"1"), (b"dup", b"2")]
    with pytest.raises(DuplicateKeyError, match=r"holds key b'dup' more than once") as caught:
        bulk_load(spark.createDataFrame(rows, SCHEMA).repartition(2), local_dir_store.url, PATH)
    assert caught.value.key == b"dup"
    assert contents(local_dir_store) == {b"dup": b"old"}
    manifest = ManifestStore(local_dir_store, PATH).read_latest_required().value
    listed = {sst_key(PATH, s.id) for s in manifest.ssts}
    orphans = [m.key for m in local_dir_store.list(f"{PATH}/compacted/") if m.key not in listed]
    assert orphans == []  # the SSTs of the tasks without a duplicate were deleted, not left to GC


@pytest.mark.s3
def test_bulk_load_on_s3(spark: SparkSession, make_s3_store: Callable[..., S3Store]) -> None:
    store = make_s3_store("spark-load")
    with Db.open(PATH, store, QUIET) as db:
        db.put(b"k0001", b"old")
    credentials = urlencode({"access_key_id": "testing", "secret_access_key": "testing"})
    url = f"{store.url}&{credentials}"  # the JVM may predate the dummy AWS variables
    loaded = {b"k%04d" % i: b"s3-%d" % i for i in range(500)}
    report = bulk_load(frame(spark, loaded, 2), url, PATH, target_sst_bytes=4096)
    assert report.rows == 500 and report.ssts > 1
    assert contents(store) == loaded
    got = read_db(spark, url, PATH, partitions=2).collect()
    assert {bytes(r["key"]): bytes(r["value"]) for r in got} == loaded
