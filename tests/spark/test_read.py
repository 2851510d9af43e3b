"""read_db and tags_table on a local Spark session: the same rows as the engine's scan at a checkpoint."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable
from urllib.parse import urlencode

import pytest
from pyspark.sql import DataFrame, SparkSession

from slate_ops import CheckpointScope, Db, DbReader, admin
from slate_ops.compaction import CompactorOptions
from slate_ops.errors import (
    CheckpointExpiredError,
    CheckpointNotFoundError,
    InvalidArgumentError,
    TagNotFoundError,
)
from slate_ops.manifest.model import KeyRange
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import LocalStore, S3Store
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import ManualRuntime
from slate_ops.spark import read_db, tags_table
from slate_ops.spark.read import READ_CHECKPOINT_NAME, plan_read
from tests.spark.test_executor import QUIET, QUIET_READER
from tests.support.compaction import compact_once

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

PATH = "shop/orders"
FULL = CompactorOptions(min_sources=2, target_sst_bytes=16 * 1024)


def rows(df: DataFrame) -> list[tuple[bytes, bytes]]:
    return [(bytes(row["key"]), bytes(row["value"])) for row in df.collect()]


def engine_scan(store: ObjectStore, checkpoint: uuid.UUID) -> list[tuple[bytes, bytes]]:
    with DbReader.open(PATH, store, checkpoint, QUIET_READER) as reader:
        return list(reader.scan())


def mutate(db: Db, rng: random.Random, model: dict[bytes, bytes], ops: int) -> None:
    """Random puts (new keys and overwrites, some with high bytes) and deletes."""
    for _ in range(ops):
        key = b"k%04d" % rng.randrange(3000) + bytes([rng.choice([0x00, 0x41, 0x80, 0xFF])])
        if rng.random() < 0.15:
            db.delete(key)
            model.pop(key, None)
        else:
            model[key] = rng.randbytes(rng.randrange(0, 120))
            db.put(key, model[key])


def test_read_db_equals_the_engine_scan_at_each_checkpoint(
    spark: SparkSession, local_dir_store: LocalStore
) -> None:
    rng = random.Random(11)
    model: dict[bytes, bytes] = {}
    states: list[tuple[uuid.UUID, dict[bytes, bytes], str]] = []
    with Db.open(PATH, local_dir_store, QUIET.model_copy(update={"l0_max_ssts": 1000})) as db:
        for _ in range(3):  # overlapping L0 SSTs
            mutate(db, rng, model, 2000)
            db.flush_memtable()
        states.append((db.create_checkpoint(CheckpointScope.DURABLE).id, dict(model), "l0 only"))
        assert compact_once(PATH, local_dir_store, FULL) is not None
        mutate(db, rng, model, 1500)
        db.flush_memtable()  # L0 over a sorted run
        mutate(db, rng, model, 1500)
        db.flush()  # these writes are only in the WAL: the checkpoint covers them
        states.append((db.create_checkpoint(CheckpointScope.DURABLE).id, dict(model), "wal, l0, run"))
        mutate(db, rng, model, 500)  # after the checkpoints: must not show up
        db.flush_memtable()
        url = local_dir_store.url
        for checkpoint, expected, label in states:
            manifest = admin.read_manifest(PATH, local_dir_store).value
            assert manifest.checkpoint(checkpoint) is not None
            df = read_db(spark, url, PATH, checkpoint=checkpoint, partitions=3)
            assert df.rdd.getNumPartitions() == 3, label
            got = rows(df)  # partitions in key order, each in key order
            assert got == engine_scan(local_dir_store, checkpoint), label
            assert got == sorted(expected.items()), label
    wal_plan = plan_read(local_dir_store, url, PATH, states[1][0], 3)
    assert sum(t.num_rows for t in wal_plan.wal) > 0  # the second state really had WAL-only writes


def test_without_a_checkpoint_read_db_takes_one_for_an_hour(
    spark: SparkSession, local_dir_store: LocalStore
) -> None:
    with Db.open(PATH, local_dir_store, QUIET) as db:
        for i in range(300):
            db.put(b"key%04d" % i, b"v1")
        db.flush()  # WAL only
        df = read_db(spark, local_dir_store.url, PATH)
        for i in range(300):
            db.put(b"key%04d" % i, b"v2")
        db.flush_memtable()
    assert rows(df) == [(b"key%04d" % i, b"v1") for i in range(300)]  # the state at read_db, not at collect
    (checkpoint,) = admin.list_checkpoints(PATH, local_dir_store, name=READ_CHECKPOINT_NAME)
    assert checkpoint.expire_time_s is not None
    assert abs(checkpoint.expire_time_s - (time.time() + 3600)) < 60

    # A DataFrame evaluated after its checkpoint expired fails with the typed error, in the task.
    old = ManualRuntime(time.time() - 7200)
    stale = read_db(spark, local_dir_store.url, PATH, clock=old)
    with pytest.raises(Exception, match=CheckpointExpiredError.__name__):
        stale.collect()


def test_tags_and_refusals(spark: SparkSession, local_dir_store: LocalStore) -> None:
    admin.create_db(PATH, local_dir_store)
    empty = read_db(spark, local_dir_store.url, PATH, partitions=4)
    assert empty.rdd.getNumPartitions() == 1 and empty.collect() == []  # no blocks: one range
    with Db.open(PATH, local_dir_store, QUIET) as db:
        db.put(b"a", b"1")
        db.flush_memtable()
        admin.create_tag(PATH, local_dir_store, "v1")
        db.put(b"a", b"2")
        db.put(b"b", b"2")
        db.flush_memtable()
        admin.create_tag(PATH, local_dir_store, "v2")
    url = local_dir_store.url
    assert rows(read_db(spark, url, PATH, tag="v1")) == [(b"a", b"1")]
    assert rows(read_db(spark, url, PATH, tag="v2")) == [(b"a", b"2"), (b"b", b"2")]

    tags = tags_table(spark, url, PATH).orderBy("tag_name").collect()
    expected = admin.list_tags(PATH, local_dir_store).sort_by("tag_name").to_pylist()
    assert [t["tag_name"] for t in tags] == ["v1", "v2"]
    for got, want in zip(tags, expected, strict=True):
        assert {**got.asDict(), "create_time": None} == {**want, "create_time": None}
        assert got["create_time"].timestamp() == want["create_time"].timestamp()  # local vs UTC

    with pytest.raises(InvalidArgumentError, match="a checkpoint or a tag, not both"):
        read_db(spark, url, PATH, checkpoint=uuid.uuid4(), tag="v1")
    with pytest.raises(TagNotFoundError, match="no tag 'v3'"):
        read_db(spark, url, PATH, tag="v3")
    with pytest.raises(CheckpointNotFoundError, match="list-checkpoints"):
        read_db(spark, url, PATH, checkpoint=uuid.uuid4())
    with pytest.raises(InvalidArgumentError, match="partitions must be an int >= 1"):
        read_db(spark, url, PATH, tag="v1", partitions=0)
    with pytest.raises(InvalidArgumentError, match=r"memory://x.*other processes"):
        read_db(spark, "memory://x", PATH)


def test_a_projected_shard_is_read_inside_its_range(spark: SparkSession, local_dir_store: LocalStore) -> None:
    with Db.open(PATH, local_dir_store, QUIET) as db:
        for i in range(1000):
            db.put(b"key%04d" % i, b"v%d" % i)
        db.flush_memtable()
    shard = KeyRange(b"key0300", b"key0600")
    ManifestStore(local_dir_store, PATH).update(
        lambda current: current.value.with_changes(visible_range=shard)
    )
    checkpoint = admin.create_checkpoint(PATH, local_dir_store).id
    got = rows(read_db(spark, local_dir_store.url, PATH, checkpoint=checkpoint, partitions=4))
    assert got == [(b"key%04d" % i, b"v%d" % i) for i in range(300, 600)]
    assert got == engine_scan(local_dir_store, checkpoint)
    plan = plan_read(local_dir_store, local_dir_store.url, PATH, checkpoint, 4)
    assert plan.ranges[0].start == shard.start and plan.ranges[-1].end == shard.end


@pytest.mark.s3
def test_read_db_on_s3(spark: SparkSession, make_s3_store: Callable[..., S3Store]) -> None:
    store = make_s3_store("spark-read")
    with Db.open(PATH, store, QUIET) as db:
        for i in range(500):
            db.put(b"key%04d" % i, b"s3-%d" % i)
        db.flush_memtable()
        db.delete(b"key0007")
        db.flush()
        checkpoint = db.create_checkpoint(CheckpointScope.DURABLE).id
    # The JVM may predate the dummy AWS variables: the task URL carries them (see test_executor).
    credentials = urlencode({"access_key_id": "testing", "secret_access_key": "testing"})
    df = read_db(spark, f"{store.url}&{credentials}", PATH, checkpoint=checkpoint, partitions=2)
    assert rows(df) == [(b"key%04d" % i, b"s3-%d" % i) for i in range(500) if i != 7]
    assert rows(df) == engine_scan(store, checkpoint)
