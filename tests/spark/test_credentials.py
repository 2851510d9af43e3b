"""S3 credentials through Spark configuration: the settings, the resource that sets them, the tasks'
stores. The whole path on a standalone cluster with credential-less workers is
``test_standalone_cluster.py`` (marker ``cluster``)."""

from __future__ import annotations

import re

import dagster as dg
import pytest
from pyspark.sql import SparkSession

from slate_ops.objstore import S3_CREDENTIAL_VARIABLES
from slate_ops.orchestration import DatabaseConfig, SlateDatabasesResource, SlateOpsConfig
from slate_ops.orchestration.resources import SPARK_MASTER_ENV, local_pyspark_resource
from slate_ops.spark import S3Credentials
from slate_ops.spark.credentials import (
    ACCESS_KEY_CONF,
    NO_CREDENTIALS,
    SECRET_KEY_CONF,
    SESSION_TOKEN_CONF,
)
from slate_ops.spark.executor import _worker_store

pytestmark = [pytest.mark.spark]

KEYS = {ACCESS_KEY_CONF: "AKIDEXAMPLE", SECRET_KEY_CONF: "s3cr3t", SESSION_TOKEN_CONF: "t0ken"}


def test_credentials_are_read_from_the_session(spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in S3_CREDENTIAL_VARIABLES.values():
        monkeypatch.delenv(variable, raising=False)
    assert S3Credentials.of_session(spark) == NO_CREDENTIALS
    try:
        for key, value in KEYS.items():
            spark.conf.set(key, value)
        credentials = S3Credentials.of_session(spark)
        assert credentials == S3Credentials("AKIDEXAMPLE", "s3cr3t", "t0ken")
        assert credentials.spark_conf() == KEYS
        spark.conf.set(SESSION_TOKEN_CONF, "")  # empty is unset
        assert S3Credentials.of_session(spark).session_token is None
    finally:
        for key in KEYS:
            spark.conf.unset(key)
    assert S3Credentials.of_session(spark) == NO_CREDENTIALS


def test_without_settings_the_driver_ships_its_slate_ops_s3_variables(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one order of every entry point (issue 20): the session's settings, else the driver's
    SLATE_OPS_S3_* (shipped to the tasks like the settings), else the tasks' boto3 chain."""
    monkeypatch.setenv(S3_CREDENTIAL_VARIABLES["access_key_id"], "AKIDDRIVER")
    monkeypatch.setenv(S3_CREDENTIAL_VARIABLES["secret_access_key"], "driver-secret")
    monkeypatch.delenv(S3_CREDENTIAL_VARIABLES["session_token"], raising=False)
    assert S3Credentials.of_session(spark) == S3Credentials("AKIDDRIVER", "driver-secret")
    try:
        for key, value in KEYS.items():
            spark.conf.set(key, value)
        assert S3Credentials.of_session(spark) == S3Credentials("AKIDEXAMPLE", "s3cr3t", "t0ken")
    finally:
        for key in KEYS:
            spark.conf.unset(key)


def test_repr_hides_the_secret_and_the_token() -> None:
    text = repr(S3Credentials("AKIDEXAMPLE", "s3cr3t", "t0ken"))
    assert "AKIDEXAMPLE" in text and "s3cr3t" not in text and "t0ken" not in text
    assert S3Credentials("AKIDEXAMPLE").spark_conf() == {ACCESS_KEY_CONF: "AKIDEXAMPLE"}


def test_the_redaction_pattern_covers_every_setting(spark: SparkSession) -> None:
    """Spark's own redaction (UI, REST API, event logs) matches the three names."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    config = jvm.java.lang.Class.forName("org.apache.spark.internal.config.package$")
    entry = config.getField("MODULE$").get(None).SECRET_REDACTION_PATTERN()
    pattern = spark.sparkContext.getConf().get(entry.key(), entry.defaultValueString())
    assert all(re.search(pattern, key) for key in KEYS), pattern


def test_tasks_open_their_store_with_the_credentials() -> None:
    url = "s3://bucket/prefix?endpoint_url=http://127.0.0.1:9&region=us-east-1"
    store = _worker_store(url, S3Credentials("AKIDTASK", "task-secret"))
    frozen = store.client._request_signer._credentials.get_frozen_credentials()
    assert (frozen.access_key, frozen.secret_key) == ("AKIDTASK", "task-secret")
    assert _worker_store(url, S3Credentials("AKIDTASK", "task-secret")) is store  # cached per worker


def test_the_pyspark_resource_carries_the_slate_resources_credentials(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SLATE_OPS_S3_ACCESS_KEY_ID", "AKIDRESOURCE")
    monkeypatch.setenv("SLATE_OPS_S3_SECRET_ACCESS_KEY", "resource-secret")
    monkeypatch.delenv("SLATE_OPS_S3_SESSION_TOKEN", raising=False)
    monkeypatch.delenv(SPARK_MASTER_ENV, raising=False)
    slate = SlateDatabasesResource.from_environment(
        SlateOpsConfig(databases=[DatabaseConfig(name="a", store_url="s3://b/p", path="a")])
    )
    pyspark = local_pyspark_resource(slate)
    # Defined with the variables' names; the values only in a run (here: build_resources).
    assert isinstance(pyspark.s3_secret_access_key, dg.EnvVar)
    assert "resource-secret" not in str(pyspark.spark_config)
    with dg.build_resources({"slate": slate, "pyspark": pyspark}) as built:
        config = built.pyspark.session_config()
    assert config[ACCESS_KEY_CONF] == "AKIDRESOURCE" and config[SECRET_KEY_CONF] == "resource-secret"
    assert SESSION_TOKEN_CONF not in config
    assert config["spark.master"] == "local[2]"

    bare = local_pyspark_resource(master="spark://127.0.0.1:7077")
    assert not set(KEYS) & set(bare.session_config())
    assert bare.spark_config["spark.master"] == "spark://127.0.0.1:7077"
    monkeypatch.setenv(SPARK_MASTER_ENV, "spark://10.0.0.1:7077")
    assert local_pyspark_resource().spark_config["spark.master"] == "spark://10.0.0.1:7077"
