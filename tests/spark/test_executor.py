"""The Spark executor end to end on a local session: same compaction, same rows as the local executor."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from urllib.parse import urlencode

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from slate_ops import Db, DbOptions, DbReader, ReaderOptions
from slate_ops.compaction import (
    CompactionSpec,
    CompactorOptions,
    ExecutionResult,
    LocalExecutor,
    SourceRun,
    SourceView,
)
from slate_ops.errors import InvalidArgumentError, SlateOpsError
from slate_ops.layout import sst_key
from slate_ops.manifest.model import KeyRange, resolve_sst_path
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import CountingStore, LocalStore, MemoryStore, S3Store
from slate_ops.objstore.base import ObjectStore
from slate_ops.spark import SparkExecutor
from slate_ops.sst import SCHEMA, SstReader
from tests.support.compaction import compact_once

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

PATH = "db"
QUIET = DbOptions(
    wal_flush_interval=timedelta(hours=1), manifest_poll_interval=timedelta(hours=1), l0_max_ssts=1000
)
QUIET_READER = ReaderOptions(
    manifest_poll_interval=timedelta(hours=1), checkpoint_lifetime=timedelta(hours=3)
)
# Small limits so a few thousand rows split into several subcompactions and output SSTs.
SMALL = CompactorOptions(min_sources=2, max_subcompaction_bytes=16 * 1024, target_sst_bytes=8 * 1024)


def fill(store: ObjectStore, flushes: int = 4, keys: int = 1500) -> dict[bytes, bytes]:
    """``flushes`` overlapping L0 SSTs with overwrites and deletes; returns the expected content."""
    model: dict[bytes, bytes] = {}
    with Db.open(PATH, store, QUIET) as db:
        for round_ in range(flushes):
            for i in range(round_, keys, 1 + round_):
                key, value = b"key%05d" % i, b"v%d-%d|" % (round_, i) * 4
                db.put(key, value)
                model[key] = value
            for i in range(round_, keys, 11 + round_):
                db.delete(b"key%05d" % i)
                model.pop(b"key%05d" % i, None)
            db.flush_memtable()
    return model


def contents(store: ObjectStore) -> dict[bytes, bytes]:
    with DbReader.open(PATH, store, options=QUIET_READER) as reader:
        return dict(reader.scan())


def l0_spec(store: ObjectStore, cuts: list[bytes]) -> CompactionSpec:
    """A spec over every L0 SST of the database, split at ``cuts``."""
    manifest = ManifestStore(store, PATH).read_latest_required().value
    ssts = {s.id: s for s in manifest.ssts}
    sources = tuple(
        SourceRun(
            (
                SourceView(
                    resolve_sst_path(manifest, PATH, ssts[v.sst_id]),
                    ssts[v.sst_id].info.size_bytes,
                    v.visible_range,
                ),
            )
        )
        for v in manifest.l0
    )
    bounds: list[bytes | None] = [None, *cuts, None]
    ranges = tuple(KeyRange(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1))
    return CompactionSpec(
        PATH, sources, drop_tombstones=True, target_sst_bytes=8 * 1024, subcompactions=ranges
    )


def output_rows(store: ObjectStore, result: ExecutionResult) -> pa.Table:
    tables = [SstReader.open(store, sst_key(PATH, s.id)).read_table() for s in result.outputs]
    return pa.concat_tables(tables) if tables else SCHEMA.empty_table()


def test_compactor_on_spark_keeps_the_content(spark: SparkSession, local_dir_store: LocalStore) -> None:
    model = fill(local_dir_store)
    report = compact_once(PATH, local_dir_store, SMALL, executor=SparkExecutor(spark), full=False)
    assert report is not None and report.kind == "l0" and report.executor == "spark"
    assert report.subcompactions >= 3 and len(report.output_ssts) >= 3
    assert report.rows_out == len(model) < report.rows_in  # the only run: shadowed rows and tombstones go
    manifest = ManifestStore(local_dir_store, PATH).read_latest_required().value
    assert manifest.l0 == () and len(manifest.compacted) == 1
    assert [str(v.sst_id) for v in manifest.compacted[0].views] == list(report.output_ssts)
    assert contents(local_dir_store) == model
    with Db.open(PATH, local_dir_store, QUIET) as db:
        assert dict(db.scan()) == model


@pytest.mark.s3
def test_tasks_reach_s3_through_the_store_url(
    spark: SparkSession, make_s3_store: Callable[..., S3Store]
) -> None:
    """``S3Store.url`` carries moto's endpoint and region. Credentials come from the workers'
    environment, and this JVM may have started before the dummy AWS variables were set, so the
    test adds them to the task URL."""
    store = make_s3_store("spark")
    assert "endpoint_url=" in store.url and "region=" in store.url
    model = fill(store)
    credentials = urlencode({"access_key_id": "testing", "secret_access_key": "testing"})
    executor = SparkExecutor(spark, store_url=f"{store.url}&{credentials}")
    report = compact_once(PATH, store, SMALL, executor=executor, full=False)
    assert report is not None and report.executor == "spark" and report.subcompactions >= 3
    assert contents(store) == model


def test_spark_and_local_executors_write_the_same_rows(
    spark: SparkSession, local_dir_store: LocalStore
) -> None:
    fill(local_dir_store)
    spec = l0_spec(local_dir_store, [b"key00300", b"key00301", b"key00900", b"key01499"])
    local = LocalExecutor(threads=2).execute(local_dir_store, spec)
    rdd = SparkExecutor(spark, mode="rdd").execute(local_dir_store, spec)
    dataframe = SparkExecutor(spark, mode="dataframe").execute(local_dir_store, spec)

    expected = output_rows(local_dir_store, local)
    assert expected.num_rows == local.rows_out > 0 and local.subcompactions == 5
    for result in (rdd, dataframe):
        assert output_rows(local_dir_store, result).equals(expected)
        assert [s.info for s in result.outputs] == [s.info for s in local.outputs]
        assert {s.id for s in result.outputs}.isdisjoint(s.id for s in local.outputs)  # new files
        counters = (result.bytes_read, result.bytes_written, result.rows_in, result.rows_out)
        assert counters == (local.bytes_read, local.bytes_written, local.rows_in, local.rows_out)
        assert result.subcompactions == 5


def test_memory_stores_are_refused(spark: SparkSession, local_dir_store: LocalStore) -> None:
    memory = MemoryStore("spark-test")
    fill(memory, flushes=2, keys=50)
    spec = l0_spec(memory, [])
    for store in (memory, CountingStore(memory)):
        with pytest.raises(InvalidArgumentError, match=r"memory://spark-test.*other\s+processes"):
            SparkExecutor(spark).execute(store, spec)
    with pytest.raises(InvalidArgumentError, match="memory://"):
        SparkExecutor(spark, store_url="memory://x")


def test_a_spec_without_subcompactions_starts_no_job(
    spark: SparkSession, local_dir_store: LocalStore
) -> None:
    empty = CompactionSpec(PATH, (), drop_tombstones=True, target_sst_bytes=1024, subcompactions=())
    result = SparkExecutor(spark).execute(local_dir_store, empty)
    assert (result.outputs, result.subcompactions, result.rows_in) == ((), 0, 0)


def test_a_failed_task_raises_a_slate_ops_error(spark: SparkSession, local_dir_store: LocalStore) -> None:
    fill(local_dir_store, flushes=2, keys=100)
    spec = l0_spec(local_dir_store, [b"key00050"])
    local_dir_store.delete(spec.sources[0].views[0].key)
    expected = r"compaction of 'db' \(2 subcompactions\) failed: slate_ops\.errors\.ObjectNotFoundError: "
    with pytest.raises(SlateOpsError, match=expected + ".*does not exist"):
        SparkExecutor(spark).execute(local_dir_store, spec)
