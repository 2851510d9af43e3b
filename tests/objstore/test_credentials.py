"""One credentials order for every S3 store: given explicitly, else ``SLATE_OPS_S3_*``, else boto3's
chain (issue 20, item 7), and the error without any naming ``SLATE_OPS_S3_*`` first."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from slate_ops.errors import InvalidArgumentError, ObjectStoreCredentialsError
from slate_ops.objstore import S3_CREDENTIAL_VARIABLES, S3Store, open_store, resolve_s3_credentials
from tests.support.s3 import remove_credentials

KEY, SECRET, TOKEN = S3_CREDENTIAL_VARIABLES.values()


@pytest.fixture
def no_aws(monkeypatch: pytest.MonkeyPatch, moto_endpoint: str) -> Iterator[str]:
    """moto's endpoint, with neither ``AWS_*`` credentials nor ``SLATE_OPS_S3_*`` in the environment
    (boto3's chain finds nothing: no profile files, no instance metadata)."""
    remove_credentials(monkeypatch)
    yield moto_endpoint


def signing_key(store: object) -> tuple[str, str, str | None]:
    assert isinstance(store, S3Store)
    credentials = store.client._request_signer._credentials
    return credentials.access_key, credentials.secret_key, credentials.token


def test_explicit_credentials_win_whole() -> None:
    env = {KEY: "ENVKEY", SECRET: "ENVSECRET", TOKEN: "ENVTOKEN"}
    # an explicit pair is taken as given: the variables' token is not mixed in
    assert resolve_s3_credentials("A", "B", environ=env) == {
        "access_key_id": "A",
        "secret_access_key": "B",
        "session_token": None,
    }


def test_the_variables_come_next_and_empty_ones_count_as_unset() -> None:
    env = {KEY: "ENVKEY", SECRET: "ENVSECRET", TOKEN: ""}
    assert resolve_s3_credentials(environ=env) == {
        "access_key_id": "ENVKEY",
        "secret_access_key": "ENVSECRET",
        "session_token": None,
    }
    assert resolve_s3_credentials(environ={}) == dict.fromkeys(
        ("access_key_id", "secret_access_key", "session_token")
    )


@pytest.mark.parametrize(
    ("env", "named"),
    [({KEY: "k"}, SECRET), ({SECRET: "s"}, KEY), ({TOKEN: "t"}, KEY)],
    ids=["key-only", "secret-only", "token-only"],
)
def test_half_a_pair_in_the_variables_is_refused_by_name(env: dict[str, str], named: str) -> None:
    with pytest.raises(InvalidArgumentError, match=named) as excinfo:
        resolve_s3_credentials(environ=env)
    assert "k" not in str(excinfo.value).split() and "s" not in str(excinfo.value).split()


@pytest.mark.s3
def test_only_the_documented_variables_reach_s3(
    no_aws: str, make_bucket: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fails before issue 20: with only SLATE_OPS_S3_* set, boto3 found no credentials."""
    bucket = make_bucket()
    monkeypatch.setenv(KEY, "slate-key")
    monkeypatch.setenv(SECRET, "slate-secret")
    store = open_store(f"s3://{bucket}/db?endpoint_url={no_aws}&region=us-east-1")
    store.put("k", b"v")
    assert store.get("k").data == b"v"
    assert signing_key(store) == ("slate-key", "slate-secret", None)


@pytest.mark.s3
def test_the_variables_come_before_boto3s_chain(no_aws: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "aws-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    url = f"s3://some-bucket?endpoint_url={no_aws}&region=us-east-1"
    assert signing_key(open_store(url))[0] == "aws-key"  # nothing else given: boto3's chain
    monkeypatch.setenv(KEY, "slate-key")
    monkeypatch.setenv(SECRET, "slate-secret")
    monkeypatch.setenv(TOKEN, "slate-token")
    assert signing_key(open_store(url)) == ("slate-key", "slate-secret", "slate-token")
    given = open_store(url, access_key_id="arg-key", secret_access_key="arg-secret")
    assert signing_key(given) == ("arg-key", "arg-secret", None)
    in_url = open_store(f"{url}&access_key_id=url-key&secret_access_key=url-secret")
    assert signing_key(in_url) == ("url-key", "url-secret", None)


@pytest.mark.s3
def test_no_credentials_names_the_variables_first(no_aws: str, make_bucket: Callable[[], str]) -> None:
    store = open_store(f"s3://{make_bucket()}?endpoint_url={no_aws}&region=us-east-1")
    with pytest.raises(ObjectStoreCredentialsError) as excinfo:
        list(store.list())
    message = str(excinfo.value)
    assert message.index(KEY) < message.index("AWS_ACCESS_KEY_ID")
    assert SECRET in message and "S3 credentials" in message
