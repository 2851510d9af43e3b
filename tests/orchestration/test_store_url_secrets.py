"""A store_url never carries a secret into Dagster: the config refuses it and shows it redacted, and a run
launched with such a config fails without the secret in its event log; the Spark side's messages show
store URLs through the same redaction (docs/cli.md "Safety")."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from slate_ops.errors import ConfigError, InvalidArgumentError
from slate_ops.orchestration import SlateDatabasesResource
from slate_ops.orchestration.config import parse_config
from slate_ops.orchestration.resources import RESOURCE_KEY
from slate_ops.spark.executor import _check_shareable
from slate_ops.spark.read import require_shareable

SECRET = "S3CR3T-dagster-0123"

SECRET_STORE_URLS = [
    f"s3://user:{SECRET}@bucket/x",
    f"s3://bucket/x?endpoint_url=http://user:{SECRET}@127.0.0.1:9",
    f"s3://bucket/x?endpoint_url=http%3A%2F%2Fuser%3A{SECRET}%40127.0.0.1%3A9",
    f"s3://bucket/x?secret%5Faccess%5Fkey={SECRET}",
    f"s3://bucket/x?session%5Ftoken={SECRET}&region=eu-west-1",
    f"s3://bucket/x?aws_secret_access_key={SECRET}",
    f"file://user:{SECRET}@localhost/tmp/x",
]


@pytest.mark.parametrize("url", SECRET_STORE_URLS)
@pytest.mark.parametrize("where", ["databases", "discover"])
def test_the_config_refuses_a_secret_and_shows_the_url_redacted(url: str, where: str) -> None:
    text = (
        f"databases:\n  - name: a\n    path: p\n    store_url: '{url}'\n"
        if where == "databases"
        else f"databases: []\ndiscover:\n  store_url: '{url}'\n"
    )
    with pytest.raises(ConfigError) as raised:
        parse_config(text, "fleet.yaml")
    message = str(raised.value)
    assert SECRET not in message
    assert "store_url" in message and ("bucket" in message or "localhost" in message)
    assert "SLATE_OPS_S3_SECRET_ACCESS_KEY" in message


def test_harmless_options_pass(tmp_path: Path) -> None:
    config = parse_config(
        "databases:\n  - name: a\n    path: p\n"
        "    store_url: s3://bucket/x?endpoint_url=http://127.0.0.1:9&region=eu-west-1\n"
        f"  - name: b\n    path: p\n    store_url: {tmp_path.as_uri()}\n"
    )
    assert [db.name for db in config.databases] == ["a", "b"]


@dg.op
def _touch(slate_ops: SlateDatabasesResource) -> None:  # the default resource key, RESOURCE_KEY
    slate_ops.database("a")


@dg.job
def _touch_job() -> None:
    _touch()


@pytest.mark.parametrize("url", SECRET_STORE_URLS[:3])
def test_a_run_with_a_secret_store_url_fails_without_logging_it(url: str) -> None:
    """The run config reaches the resource unchecked by parse_config; the resource's own validation
    fails the run, and neither pydantic's echo of the input nor any event carries the secret."""
    run_config = {
        "resources": {
            RESOURCE_KEY: {
                "config": {"config": {"databases": [{"name": "a", "store_url": url, "path": "p"}]}}
            }
        }
    }
    with dg.DagsterInstance.ephemeral() as instance:
        result = _touch_job.execute_in_process(
            run_config=run_config,
            resources={RESOURCE_KEY: SlateDatabasesResource.configure_at_launch()},
            instance=instance,
            raise_on_error=False,
        )
        assert not result.success
        logs = instance.all_logs(result.run_id)
        failures = [entry for entry in logs if entry.dagster_event and entry.dagster_event.is_failure]
        assert any("carries a user or password" in repr(entry) for entry in logs), failures
        assert SECRET not in repr(logs)
        assert SECRET not in repr(instance.get_run_by_id(result.run_id).tags)


def test_spark_messages_show_store_urls_redacted() -> None:
    url = f"memory://user:{SECRET}@name?token={SECRET}"
    for check in (lambda: require_shareable(url, "bulk_load"), lambda: _check_shareable(url)):
        with pytest.raises(InvalidArgumentError) as raised:
            check()
        assert "memory://***@name" in str(raised.value) and SECRET not in str(raised.value)
