"""S3 stores share one boto3 client per endpoint, region and credentials (issue 15, item 1)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from slate_ops.objstore import S3Store, open_store
from slate_ops.objstore.s3 import MAX_POOL_CONNECTIONS, shared_s3_client

pytestmark = pytest.mark.s3

KEYS = {"access_key_id": "testing", "secret_access_key": "testing"}


def test_stores_for_one_endpoint_share_one_client(moto_endpoint: str) -> None:
    a = S3Store("bucket-a", "x", endpoint_url=moto_endpoint, region="us-east-1", **KEYS)
    b = S3Store("bucket-b", "y", endpoint_url=moto_endpoint, region="us-east-1", **KEYS)
    c = open_store(f"s3://bucket-c/z?endpoint_url={moto_endpoint}&region=us-east-1", **KEYS)
    assert isinstance(c, S3Store)
    assert a.client is b.client is c.client
    assert a.client.meta.config.max_pool_connections == MAX_POOL_CONNECTIONS


def test_different_settings_get_different_clients(moto_endpoint: str) -> None:
    base = shared_s3_client(endpoint_url=moto_endpoint, region="us-east-1", **KEYS)
    other_key = shared_s3_client(
        endpoint_url=moto_endpoint, region="us-east-1", access_key_id="other", secret_access_key="testing"
    )
    other_secret = shared_s3_client(
        endpoint_url=moto_endpoint, region="us-east-1", access_key_id="testing", secret_access_key="other"
    )
    token = shared_s3_client(endpoint_url=moto_endpoint, region="us-east-1", session_token="t", **KEYS)
    region = shared_s3_client(endpoint_url=moto_endpoint, region="eu-west-1", **KEYS)
    endpoint = shared_s3_client(endpoint_url="http://127.0.0.1:1", region="us-east-1", **KEYS)
    clients = [base, other_key, other_secret, token, region, endpoint]
    assert len({id(c) for c in clients}) == len(clients)
    assert other_key._request_signer._credentials.access_key == "other"


def test_chain_credentials_follow_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client built from boto3's chain is not reused once the AWS_* variables change."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "FIRST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    first = S3Store("b", endpoint_url="http://127.0.0.1:3", region="us-east-1").client
    assert S3Store("b2", endpoint_url="http://127.0.0.1:3", region="us-east-1").client is first
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "SECOND")
    second = S3Store("b", endpoint_url="http://127.0.0.1:3", region="us-east-1").client
    assert second is not first
    assert second._request_signer._credentials.access_key == "SECOND"


def test_many_threads_share_one_client_against_moto(
    moto_endpoint: str, make_bucket: Callable[[], str]
) -> None:
    bucket = make_bucket()
    url = f"s3://{bucket}/pfx?endpoint_url={moto_endpoint}&region=us-east-1"
    start = threading.Barrier(32)

    def work(i: int) -> int:
        start.wait()  # every thread opens its store at once: still one build
        store = open_store(url, **KEYS)
        assert isinstance(store, S3Store)
        for j in range(5):
            store.put(f"t{i}/{j}", f"{i}:{j}".encode())
        assert [m.key for m in store.list(f"t{i}/")] == [f"t{i}/{j}" for j in range(5)]
        assert store.get(f"t{i}/3").data == f"{i}:3".encode()
        return id(store.client)

    with ThreadPoolExecutor(32) as pool:
        ids = list(pool.map(work, range(32)))
    assert len(set(ids)) == 1
    assert sum(1 for _ in open_store(url, **KEYS).list()) == 32 * 5
