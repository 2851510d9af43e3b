"""Bulk load and compaction on a real Spark standalone cluster, S3 credentials from the Dagster resource.

A master and two workers (one core, 1 GiB each) are started from PySpark's own ``spark-class``
with an environment *without* any ``AWS_*`` or ``SLATE_OPS_S3_*`` variable; the driver (this
process) has none either. The S3 credentials are ``dagster.EnvVar`` fields of the ``slate``
resource; the ``pyspark`` resource (:func:`local_pyspark_resource` pointed at the master) copies
them into the session's ``spark.slate_ops.s3.*`` settings, and every job ships them to its tasks.
So if any link of that path broke, the executors' tasks could not reach moto at all.

Checked: the workers' Python really has no credentials (a task without them fails on S3); two bulk
loads and a Spark compaction with several subcompactions write what reads back; a copy written and
read back through ``format("slate_ops")`` (registered by the resource, credentials bound to it);
the compaction's outputs are the manifest's sorted run; a ``compaction_job`` run through Dagster
compacts on the cluster too; the tasks of the loads and of the compaction ran on both workers' executors (the
driver's REST API); the secret is redacted in the Spark UI and written to no log.
"""

from __future__ import annotations

import json
import os
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs import compaction_job
from slate_ops import DbReader, ReaderOptions
from slate_ops.admin import compact
from slate_ops.compaction import CompactorOptions
from slate_ops.manifest.store import ManifestStore
from slate_ops.orchestration import DatabaseConfig, SlateDatabasesResource, SlateOpsConfig
from slate_ops.orchestration.config import S3_CREDENTIAL_ENV
from slate_ops.orchestration.resources import (
    PYSPARK_RESOURCE_KEY,
    RESOURCE_KEY,
    LocalPySparkResource,
    local_pyspark_resource,
)
from slate_ops.spark import FORMAT, SparkExecutor, bulk_load, read_db
from slate_ops.spark.cluster import (
    SCRUBBED_PREFIXES,
    StandaloneCluster,
    free_port,
    standalone_cluster,
    wait_for_executors,
)
from slate_ops.spark.credentials import SECRET_KEY_CONF

# ~1.5-2.5 min on this 2-core machine (five JVMs start): not in the default run; .ci/test runs
# `pytest -m cluster` after it.
pytestmark = [
    pytest.mark.cluster,
    pytest.mark.slow,
    pytest.mark.spark,
    pytest.mark.s3,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

NAME = "clustered"
PATH = "db"
COPY = "db-copy"
ROWS = 12_000
# Small SSTs and subcompactions, so that ~1 MB of rows makes several tasks for both workers.
SMALL = CompactorOptions(min_sources=2, max_subcompaction_bytes=32 * 1024, target_sst_bytes=64 * 1024)
ACCESS_KEY = f"AKIDCLUSTER{uuid.uuid4().hex[:8].upper()}"
SECRET = f"cluster-secret-{uuid.uuid4().hex}"  # moto takes any keys; unique to grep the logs for


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    with standalone_cluster(2, cores=1, memory="1g", work_dir=tmp_path_factory.mktemp("cluster")) as running:
        yield running


@dataclass
class Wiring:
    definitions: dict[str, Any]
    """The resources as the definitions bind them (credential fields are ``EnvVar``)."""
    slate: SlateDatabasesResource
    """``definitions`` as a run has them (``dg.build_resources``: EnvVar resolved)."""
    pyspark: LocalPySparkResource


@pytest.fixture
def wiring(
    cluster: StandaloneCluster,
    moto_endpoint: str,
    make_bucket: Callable[[], str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Wiring]:
    """The ``slate`` and ``pyspark`` resources, the session on the cluster; the driver's environment
    has no AWS_* variables either."""
    for var in [v for v in os.environ if v.startswith(SCRUBBED_PREFIXES)]:
        monkeypatch.delenv(var)
    monkeypatch.setenv(S3_CREDENTIAL_ENV["s3_access_key_id"], ACCESS_KEY)
    monkeypatch.setenv(S3_CREDENTIAL_ENV["s3_secret_access_key"], SECRET)
    active = SparkSession.getActiveSession()
    if active is not None:  # the folder's local[2] session: one SparkContext per process
        active.stop()
    url = f"s3://{make_bucket()}/slate?endpoint_url={moto_endpoint}&region=us-east-1"
    database = DatabaseConfig.model_validate(
        {"name": NAME, "store_url": url, "path": PATH, "compaction_l0_threshold": 2}
    )
    config = SlateOpsConfig(databases=[database])
    slate = SlateDatabasesResource.from_environment(config)
    pyspark = local_pyspark_resource(
        slate,
        master=cluster.master_url,
        config={
            "spark.app.name": "slate_ops-cluster-test",
            "spark.ui.enabled": "true",  # its REST API says which executor ran which task
            "spark.ui.port": str(free_port()),
        },
    )
    definitions = {RESOURCE_KEY: slate, PYSPARK_RESOURCE_KEY: pyspark}
    assert isinstance(slate.s3_secret_access_key, dg.EnvVar)
    try:
        with dg.build_resources(definitions) as built:
            yield Wiring(definitions, getattr(built, RESOURCE_KEY), getattr(built, PYSPARK_RESOURCE_KEY))
    finally:
        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()


def frame(spark: SparkSession, start: int, stop: int, step: int, tag: str) -> DataFrame:
    """Rows ``key%07d -> <tag>-<i>`` computed by the executors."""
    return spark.range(start, stop, step, 4).select(
        F.format_string("key%07d", "id").cast("binary").alias("key"),
        F.format_string(f"{tag}-%d", "id").cast("binary").alias("value"),
    )


def rest(spark: SparkSession, endpoint: str) -> Any:
    """The driver's monitoring REST API (``/api/v1/applications/<app>/<endpoint>``)."""
    context = spark.sparkContext
    url = f"{context.uiWebUrl}/api/v1/applications/{context.applicationId}/{endpoint}"
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def executors_of_group(spark: SparkSession, group: str) -> set[str]:
    """The executor ids that ran the tasks of the jobs of job group ``group``."""
    stages = {s for job in rest(spark, "jobs") if job.get("jobGroup") == group for s in job["stageIds"]}
    assert stages, f"no job of group {group!r}"
    ran = set()
    for stage in rest(spark, "stages"):
        if stage["stageId"] in stages:
            tasks = rest(spark, f"stages/{stage['stageId']}/{stage['attemptId']}/taskList?length=1000")
            ran |= {task["executorId"] for task in tasks if task["status"] == "SUCCESS"}
    return ran


def test_bulk_load_and_compaction_on_a_standalone_cluster(cluster: StandaloneCluster, wiring: Wiring) -> None:
    slate = wiring.slate
    spark = wiring.pyspark.spark_session
    context = spark.sparkContext
    assert context.master == cluster.master_url
    wait_for_executors(spark, 2)
    db = slate.database(NAME)

    # The premise: the executors' Python workers have no credentials of their own.
    def environment(_: int) -> list[str]:
        return sorted(k for k in os.environ if k.startswith(("AWS_", "SLATE_OPS_S3_")))

    assert context.parallelize(range(4), 4).map(environment).collect() == [[], [], [], []]

    def list_without_credentials(url: str) -> str:
        from slate_ops.objstore import open_store

        try:
            list(open_store(url).list(""))  # list() is lazy: consume it
        except Exception as exc:
            return type(exc).__name__
        return "listed"

    (probe,) = context.parallelize([db.store_url], 1).map(list_without_credentials).collect()
    assert probe != "listed", "the workers found S3 credentials of their own: the test proves nothing"

    # Two loads (the second rewrites every other key) and a compaction with several tasks.
    context.setJobGroup("load", "bulk loads")
    first = bulk_load(frame(spark, 0, ROWS, 1, "first"), db.store_url, PATH, target_sst_bytes=64 * 1024)
    second = bulk_load(frame(spark, 0, ROWS, 2, "second"), db.store_url, PATH, target_sst_bytes=64 * 1024)
    assert (first.rows, second.rows) == (ROWS, ROWS // 2)
    assert first.ssts >= 4 and second.ssts >= 2

    context.setJobGroup("compaction", "compaction")
    store = slate.open_store(NAME)
    report = compact(PATH, store, full=True, executor=SparkExecutor(spark), options=SMALL)
    assert report is not None and report.executor == "spark"
    assert report.subcompactions >= 3 and report.rows_out == ROWS
    manifest = ManifestStore(store, PATH).read_latest_required().value
    assert manifest.l0 == () and len(manifest.compacted) == 1
    assert [str(view.sst_id) for view in manifest.compacted[0].views] == list(report.output_ssts)

    expected = {b"key%07d" % i: (b"second-%d" % i if i % 2 == 0 else b"first-%d" % i) for i in range(ROWS)}
    with slate.open_reader(NAME) as reader:
        assert dict(reader.scan()) == expected
    context.setJobGroup("read", "read_db")
    rows = read_db(spark, db.store_url, PATH).collect()
    assert {bytes(r["key"]): bytes(r["value"]) for r in rows} == expected

    # format("slate_ops"), registered by the pyspark resource: a copy written by the data source
    # (the read's partitions are key ranges in key order, so no repartition is needed), read back
    # with a pushed-down key range.
    context.setJobGroup("datasource", "format slate_ops")
    source = spark.read.format(FORMAT).option("store", db.store_url).option("path", PATH).load()
    (
        source.write.format(FORMAT)
        .mode("append")
        .option("store", db.store_url)
        .option("path", COPY)
        .option("target_sst_bytes", str(64 * 1024))
        .save()
    )
    copied = (
        spark.read.format(FORMAT)
        .option("store", db.store_url)
        .option("path", COPY)
        .option("partitions", "4")
        .load()
    )
    assert {bytes(r["key"]): bytes(r["value"]) for r in copied.collect()} == expected
    tail = copied.where(F.col("key") >= F.lit(b"key%07d" % (ROWS - 500)))
    assert tail.count() == 500
    assert tail.rdd.getNumPartitions() < copied.rdd.getNumPartitions() == 4

    # compaction_job through Dagster: EnvVar resolved in the run, executor spark on the cluster.
    context.setJobGroup("load", "bulk loads")
    bulk_load(frame(spark, 0, ROWS, 3, "third"), db.store_url, PATH, target_sst_bytes=64 * 1024)
    bulk_load(frame(spark, 1, ROWS, 3, "fourth"), db.store_url, PATH, target_sst_bytes=64 * 1024)
    result = compaction_job.execute_in_process(
        run_config={"ops": {"compact_op": {"config": {"executor": "spark"}}}},
        tags={"slate_ops/db": NAME},
        resources=wiring.definitions,
    )
    assert result.success
    job_report = result.output_for_node("compact_op")
    assert (job_report.executor, job_report.kind) == ("spark", "l0")
    expected.update({b"key%07d" % i: b"third-%d" % i for i in range(0, ROWS, 3)})
    expected.update({b"key%07d" % i: b"fourth-%d" % i for i in range(1, ROWS, 3)})
    with DbReader.open(PATH, store, options=ReaderOptions()) as reader:
        assert dict(reader.scan()) == expected

    # Both workers ran tasks: of the loads, and of the compaction.
    executors = {e["id"]: e for e in rest(spark, "allexecutors") if e["id"] != "driver"}
    workers = {e["executorLogs"]["stderr"].split("/logPage")[0] for e in executors.values()}
    assert workers == set(cluster.worker_uis)
    assert executors_of_group(spark, "load") == set(executors)
    assert executors_of_group(spark, "compaction") == set(executors)

    # The secret stays out of the Spark UI and every log.
    environment_page = json.dumps(rest(spark, "environment"))
    assert SECRET_KEY_CONF in environment_page and SECRET not in environment_page
    assert ACCESS_KEY not in environment_page
    leaked = [
        p for p in Path(cluster.work_dir).rglob("*") if p.is_file() and SECRET in p.read_text("latin-1")
    ]
    assert leaked == []
