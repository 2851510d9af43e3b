"""Dagster's entry points give the store's own fast failures (issue 20, item 7): a fleet config with a
mistyped or unknown scheme is refused at load with the hint, a database in a ``file://`` root that
does not exist is named as such, and the ``slate`` resource's credentials are the store's own order
(``EnvVar`` fields set or not, the same ``SLATE_OPS_S3_*`` values reach the store)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slate_ops.errors import ConfigError, DbNotFoundError, StoreNotFoundError, StoreRootNotFoundError
from slate_ops.objstore import S3_CREDENTIAL_VARIABLES, S3Store
from slate_ops.orchestration import SlateDatabasesResource
from slate_ops.orchestration.config import DatabaseConfig, SlateOpsConfig, load_config


def fleet_file(tmp_path: Path, store_url: str) -> str:
    path = tmp_path / "fleet.yaml"
    path.write_text(f"databases:\n  - name: orders\n    path: orders\n    store_url: '{store_url}'\n")
    return str(path)


@pytest.mark.parametrize(
    ("url", "hint"),
    [
        ("s3//bucket/fleet", "Did you mean s3://bucket/fleet?"),
        ("file:/srv/fleet", "Did you mean file:///srv/fleet?"),
        ("gs://bucket/fleet", "known schemes: file://, memory://, s3://"),
    ],
)
def test_a_store_url_that_cannot_be_right_is_refused_at_load(
    url: str, hint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before issue 20 these loaded, and failed (or wrote to ./s3/bucket) only when a run opened them."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as raised:
        load_config(fleet_file(tmp_path, url))
    assert "databases.0.store_url" in str(raised.value) and hint in str(raised.value)
    assert list(tmp_path.iterdir()) == [tmp_path / "fleet.yaml"]


def test_a_database_in_a_missing_file_root_names_the_directory(tmp_path: Path) -> None:
    root = tmp_path / "nowhere"
    config = SlateOpsConfig(databases=[DatabaseConfig(name="orders", store_url=root.as_uri(), path="orders")])
    slate = SlateDatabasesResource(config=config)
    with pytest.raises(StoreRootNotFoundError) as raised:
        slate.open_reader("orders")
    assert isinstance(raised.value, StoreNotFoundError) and isinstance(raised.value, DbNotFoundError)
    assert f"directory {root} does not exist" in str(raised.value)
    assert not root.exists()


def test_the_resource_and_the_store_read_the_same_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in S3_CREDENTIAL_VARIABLES.values():
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv(S3_CREDENTIAL_VARIABLES["access_key_id"], "fleet-key")
    monkeypatch.setenv(S3_CREDENTIAL_VARIABLES["secret_access_key"], "fleet-secret")
    url = "s3://fleet-bucket/p?endpoint_url=http://127.0.0.1:1&region=us-east-1"
    config = SlateOpsConfig(databases=[DatabaseConfig(name="orders", store_url=url, path="orders")])
    with_envvars = SlateDatabasesResource.from_environment(config)  # fields: EnvVar("SLATE_OPS_S3_*")
    without = SlateDatabasesResource(config=config)  # fields unset: the store reads the variables
    keys = []
    for slate in (with_envvars, without):
        store = slate.open_store("orders")
        assert isinstance(store, S3Store)
        credentials = store.client._request_signer._credentials
        keys.append((credentials.access_key, credentials.secret_key, credentials.token))
    assert keys == [("fleet-key", "fleet-secret", None)] * 2
