"""open_store maps each URL scheme to its store and refuses bad URLs by name."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from slate_ops import admin
from slate_ops.engine import DbReader
from slate_ops.errors import DbNotFoundError, InvalidStoreUrlError, StoreNotFoundError, StoreRootNotFoundError
from slate_ops.objstore import LocalStore, MemoryStore, S3Store, open_store, redact_url

pytestmark = pytest.mark.usefixtures("aws_env")


def test_file_url(tmp_path: Path) -> None:
    store = open_store((tmp_path / "db").as_uri())
    assert isinstance(store, LocalStore)
    assert store.root == tmp_path / "db"
    store.put("k", b"v")
    assert open_store(store.url).get("k").data == b"v"


def test_file_url_with_escaped_characters(tmp_path: Path) -> None:
    root = tmp_path / "with space%"
    store = open_store(root.as_uri())
    assert isinstance(store, LocalStore)
    assert store.root == root


def test_plain_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    absolute = open_store(str(tmp_path / "abs"))
    assert isinstance(absolute, LocalStore)
    assert absolute.root == tmp_path / "abs"
    monkeypatch.chdir(tmp_path)
    relative = open_store("rel/db")
    assert isinstance(relative, LocalStore)
    assert relative.root == tmp_path / "rel" / "db"


def test_memory_registry_returns_same_instance() -> None:
    name = f"reg-{uuid.uuid4().hex}"
    first = open_store(f"memory://{name}")
    assert isinstance(first, MemoryStore)
    first.put("k", b"shared")
    second = open_store(f"memory://{name}")
    assert second is first
    assert second.get("k").data == b"shared"
    other = open_store(f"memory://{name}-other")
    assert other is not first
    assert open_store(first.url) is first


def test_s3_url() -> None:
    store = open_store("s3://my-bucket/some/prefix?endpoint_url=http://127.0.0.1:1&region=eu-west-1")
    assert isinstance(store, S3Store)
    assert store.bucket == "my-bucket"
    # a custom endpoint travels with the URL (never credentials), so another process can reopen it
    assert store.url == "s3://my-bucket/some/prefix?endpoint_url=http%3A%2F%2F127.0.0.1%3A1&region=eu-west-1"
    assert open_store(store.url).url == store.url
    assert store.client.meta.endpoint_url == "http://127.0.0.1:1"
    assert store.client.meta.region_name == "eu-west-1"


def test_s3_url_credentials_from_query() -> None:
    store = open_store(
        "s3://b1?access_key_id=AKID&secret_access_key=SECRET&session_token=TOK&region=us-east-1"
    )
    assert isinstance(store, S3Store)
    assert store.url == "s3://b1" and "SECRET" not in store.url
    credentials = store.client._request_signer._credentials
    assert (credentials.access_key, credentials.secret_key, credentials.token) == ("AKID", "SECRET", "TOK")


def test_s3_url_credentials_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "ENVKEY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "ENVSECRET")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:2")
    store = open_store("s3://b2/p?region=us-east-1")
    assert isinstance(store, S3Store)
    assert store.client._request_signer._credentials.access_key == "ENVKEY"
    assert store.client.meta.endpoint_url == "http://127.0.0.1:2"


@pytest.mark.s3
def test_s3_url_against_moto(moto_endpoint: str, make_bucket: Callable[[], str]) -> None:
    bucket = make_bucket()
    store = open_store(f"s3://{bucket}/db?endpoint_url={moto_endpoint}&region=us-east-1")
    store.put("k", b"v")
    assert [m.key for m in store.list()] == ["k"]
    again = open_store(f"s3://{bucket}?endpoint_url={moto_endpoint}&region=us-east-1")
    assert again.get("db/k").data == b"v"


@pytest.mark.parametrize(
    "url",
    [
        "",
        "ftp://host/x",
        "gs://bucket/x",
        "s3://",
        "s3:///prefix",
        "s3://bucket?endpoint=http://x",
        "s3://bucket?region=a&region=b",
        "s3://user:pw@bucket/x",
        "file://remote-host/path",
        "file:///tmp/x?opt=1",
        "memory://x?opt=1",
    ],
)
def test_bad_urls_refused(url: str) -> None:
    with pytest.raises(InvalidStoreUrlError) as excinfo:
        open_store(url)
    if url:
        assert url.split("?")[0].split("@")[-1] in str(excinfo.value)
    assert "pw" not in str(excinfo.value)


def test_secrets_are_masked_in_errors() -> None:
    with pytest.raises(InvalidStoreUrlError) as excinfo:
        open_store("s3://bucket?secret_access_key=TOPSECRET&bogus=1")
    assert "TOPSECRET" not in str(excinfo.value)
    assert "bogus" in str(excinfo.value)


def test_url_options_do_not_leak_into_environment() -> None:
    before = dict(os.environ)
    open_store("s3://b3?access_key_id=A&secret_access_key=B&region=us-east-1")
    assert dict(os.environ) == before


# --- redaction (docs/cli.md "Safety") -------------------------------------------------------------

SECRET = "S3CR3T-value-0123"

SECRET_URLS = [
    # percent-encoded option names, with an unknown option beside them
    f"s3://bucket/x?secret%5Faccess%5Fkey={SECRET}&bogus=1",
    f"s3://bucket/x?session%5Ftoken={SECRET}&bogus=1",
    f"s3://bucket/x?access_key_id=AKID&Secret_Access_Key={SECRET}&bogus=1",
    # userinfo in a URL-valued option, with and without an unknown option
    f"s3://bucket/x?endpoint_url=http://user:{SECRET}@127.0.0.1:1&bogus=1",
    f"s3://bucket/x?endpoint_url=http://user:{SECRET}@127.0.0.1:1",
    f"s3://bucket/x?endpoint_url=http%3A%2F%2Fuser%3A{SECRET}%40127.0.0.1%3A1&region=eu-west-1",
    # a mistyped name, a bare item, userinfo in the store URL itself, a fragment
    f"s3://bucket/x?aws_secret_access_key={SECRET}",
    f"s3://bucket/x?{SECRET}",
    f"s3://user:{SECRET}@bucket/x",
    f"s3://bucket/x#{SECRET}",
    f"file://user:{SECRET}@host/tmp/x",
    f"memory://user:{SECRET}@name",
    f"gs://user:{SECRET}@bucket/x",
]


@pytest.mark.parametrize("url", SECRET_URLS)
def test_a_secret_never_appears_in_the_error(url: str) -> None:
    with pytest.raises(InvalidStoreUrlError) as raised:
        open_store(url)
    assert SECRET not in str(raised.value)
    assert SECRET not in redact_url(url)
    assert "bucket" in str(raised.value) or "host" in str(raised.value) or "name" in str(raised.value)


def test_redaction_is_an_allow_list_on_decoded_names() -> None:
    # harmless options keep their values, decoded; everything else is masked
    assert (
        redact_url("s3://b/p?endpoint_url=http%3A%2F%2F127.0.0.1%3A9&region=eu-west-1")
        == "s3://b/p?endpoint_url=http://127.0.0.1:9&region=eu-west-1"
    )
    assert redact_url("s3://b/p?region=x&mystery=1") == "s3://b/p?region=x&mystery=***"
    assert redact_url("s3://b/p?secret%5Faccess%5Fkey=v") == "s3://b/p?secret%5Faccess%5Fkey=***"
    assert redact_url("s3://b/p?endpoint_url=http://u:pw@h:1") == "s3://b/p?endpoint_url=http://***@h:1"
    assert redact_url("s3://u:pw@b/p") == "s3://***@b/p"
    assert redact_url("s3://b/p#frag") == "s3://b/p#***"
    # text that is not a URL, and URLs with nothing to hide, come back unchanged
    for text in ("relative/dir", "/abs/dir?x=1", "s3//bucket/x", "s3:///x", "memory://name", "file:///tmp/x"):
        assert redact_url(text) == text


def test_the_unknown_option_is_named_but_not_its_value() -> None:
    with pytest.raises(InvalidStoreUrlError) as raised:
        open_store(f"s3://bucket/x?aws_secret_access_key={SECRET}")
    assert "aws_secret_access_key" in str(raised.value) and SECRET not in str(raised.value)


# --- a store URL that cannot be right fails fast, with a hint (issue 20, item 7) ----------------------


@pytest.mark.parametrize(
    ("text", "meant"),
    [("s3//bucket/x", "s3://bucket/x"), ("s3:/bucket", "s3://bucket"), ("file:/tmp/x", "file:///tmp/x")],
)
def test_a_mistyped_scheme_is_refused_by_open_store(
    text: str, meant: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before issue 20 only the CLI refused these; open_store read them as a relative directory."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreNotFoundError, match=f"Did you mean {meant}") as excinfo:
        open_store(text)
    assert "no such directory" in str(excinfo.value)
    assert list(tmp_path.iterdir()) == []


def test_an_existing_directory_with_such_a_name_is_still_a_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s3" / "bucket").mkdir(parents=True)
    store = open_store("s3//bucket")
    assert isinstance(store, LocalStore) and store.root == tmp_path / "s3" / "bucket"


def test_an_unknown_scheme_lists_the_known_ones() -> None:
    with pytest.raises(InvalidStoreUrlError, match=r"known schemes: file://, memory://, s3://"):
        open_store("gs://bucket/x")


def test_a_missing_file_root_is_named_by_every_read(tmp_path: Path) -> None:
    root = tmp_path / "nowhere"
    store = open_store(root.as_uri())
    for read in (lambda: admin.read_manifest("db", store), lambda: DbReader.open("db", store)):
        with pytest.raises(StoreRootNotFoundError) as excinfo:
            read()
        assert isinstance(excinfo.value, DbNotFoundError) and isinstance(excinfo.value, StoreNotFoundError)
        assert f"directory {root} does not exist" in str(excinfo.value)
    with pytest.raises(StoreRootNotFoundError):
        admin.run_gc("db", store, dry_run=True)
    assert not root.exists()
    root.mkdir()  # an existing, empty root: no database, and nothing about the directory
    with pytest.raises(DbNotFoundError) as empty:
        admin.read_manifest("db", store)
    assert not isinstance(empty.value, StoreNotFoundError)
