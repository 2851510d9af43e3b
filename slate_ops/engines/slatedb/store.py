"""The binding's object store for a slate_ops :class:`~slate_ops.objstore.base.ObjectStore`
(:func:`binding_store`) and the binding's path of a database in it (:func:`binding_path`).

* A :class:`~slate_ops.objstore.LocalStore`: the binding's LOCAL store on the same root.
* An :class:`~slate_ops.objstore.S3Store`: the binding's S3 store (``object_store``'s
  ``AmazonS3Builder`` keys) for the same bucket, endpoint and region, signed with the credentials
  the store's own boto3 client holds -- the ones slate_ops resolved (given, else
  ``SLATE_OPS_S3_*``, else boto3's chain: :mod:`slate_ops.objstore.credentials`), so both clients
  act as one identity. Nothing is read from ``AWS_*`` by the binding itself (the builder starts
  empty). The binding has no prefix store, so the store's prefix goes into the path:
  ``binding_path(store, "db") == "<prefix>/db"``.

A bucket that does not exist is refused before the binding is given it (the binding retries
against it for more than 15 minutes, measured on moto): :func:`binding_store` asks slate_ops' own
client once (one HeadBucket per bucket and process; a bucket seen once is not asked again) and
raises :class:`~slate_ops.errors.ObjectStoreError` naming it.

Credentials are copied as a snapshot when the binding store is built (temporary credentials from
a role are not refreshed by the binding; reopen the handle after they rotate). They never appear
in a message: :class:`BindingS3Config` leaves them out of its ``repr``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from slate_ops.engines.slatedb.loop import binding
from slate_ops.errors import ObjectStoreError, UnsupportedStoreError
from slate_ops.objstore import LocalStore, S3Store
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.metering import MeteredStore
from slate_ops.objstore.wrappers import CountingStore

__all__ = [
    "BindingS3Config",
    "binding_path",
    "binding_s3_config",
    "binding_store",
    "check_bucket_exists",
    "store_prefix",
]

_buckets_seen: set[tuple[str | None, str]] = set()  # (endpoint, bucket) that answered HeadBucket
_buckets_lock = threading.Lock()


def _unwrap(store: ObjectStore) -> ObjectStore:
    # A meter counts slate_ops' own requests; the binding's (its own client) it cannot see.
    while isinstance(store, CountingStore | MeteredStore):
        store = store.inner
    return store


@dataclass(frozen=True)
class BindingS3Config:
    """The ``object_store`` S3 configuration of one :class:`S3Store` (credentials kept out of
    ``repr``)."""

    bucket: str
    region: str | None
    endpoint: str | None  # None: AWS itself
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)

    def entries(self) -> list[tuple[str, str]]:
        """``(key, value)`` pairs for ``ObjectStoreBuilder.with_config``."""
        out = [("aws_bucket_name", self.bucket)]
        if self.region:
            out.append(("aws_region", self.region))
        if self.endpoint:
            out.append(("aws_endpoint", self.endpoint))
            # slate_ops' client addresses a custom endpoint path-style (make_s3_client); so does this
            out.append(("aws_virtual_hosted_style_request", "false"))
            if self.endpoint.lower().startswith("http://"):
                out.append(("aws_allow_http", "true"))
        if self.access_key_id and self.secret_access_key:
            out.append(("aws_access_key_id", self.access_key_id))
            out.append(("aws_secret_access_key", self.secret_access_key))
            if self.session_token:
                out.append(("aws_token", self.session_token))
        else:  # boto3 found no credentials: anonymous requests, as boto3 would send unsigned ones
            out.append(("aws_skip_signature", "true"))
        return out


def binding_s3_config(store: S3Store) -> BindingS3Config:
    """Bucket, region, endpoint and credentials of ``store``'s boto3 client."""
    client = store.client
    meta = client.meta
    endpoint = meta.endpoint_url
    if endpoint and "amazonaws.com" in endpoint:
        endpoint = None  # AWS: object_store derives the regional endpoint from the region
    creds: Any = None
    getter = getattr(client, "_get_credentials", None)  # botocore's, the signer's credentials
    if getter is not None:
        creds = getter()
    else:  # older botocore
        creds = getattr(getattr(client, "_request_signer", None), "_credentials", None)
    frozen = creds.get_frozen_credentials() if creds is not None else None
    return BindingS3Config(
        bucket=store.bucket,
        region=meta.region_name,
        endpoint=endpoint,
        access_key_id=frozen.access_key if frozen else None,
        secret_access_key=frozen.secret_key if frozen else None,
        session_token=frozen.token if frozen else None,
    )


def check_bucket_exists(store: S3Store) -> None:
    """:class:`ObjectStoreError` when ``store``'s bucket does not exist (HeadBucket: 404), so the
    binding is never given it. One request per bucket and process; any other answer (e.g. 403
    where HeadBucket is not allowed, an unreachable endpoint) is left for the binding's own call,
    bounded by :class:`~slate_ops.engines.slatedb.loop.CallTimeouts`, to report."""
    seen = (store.client.meta.endpoint_url, store.bucket)
    with _buckets_lock:
        if seen in _buckets_seen:
            return
    try:
        store.client.head_bucket(Bucket=store.bucket)
    except ClientError as e:
        code = str(e.response.get("Error", {}).get("Code", ""))
        if code in ("404", "NoSuchBucket", "NotFound"):
            raise ObjectStoreError(
                f"bucket {store.bucket!r} of {store.url} does not exist: create it or fix the store URL "
                "(SlateDB's binding would retry against it for minutes)"
            ) from e
        return
    except BotoCoreError:  # unreachable endpoint, no credentials...: the binding's call reports it (bounded)
        return
    with _buckets_lock:
        _buckets_seen.add(seen)


def store_prefix(store: ObjectStore) -> str:
    """The key prefix the binding must put before a database path in ``store`` ("" for none)."""
    store = _unwrap(store)
    if isinstance(store, S3Store):
        return store.prefix
    return ""


def binding_path(store: ObjectStore, db_path: str) -> str:
    """The binding's path of the database at ``db_path`` in ``store`` (the store's prefix + it)."""
    prefix, path = store_prefix(store), db_path.strip("/")
    return f"{prefix}/{path}" if prefix else path


def binding_store(store: ObjectStore) -> Any:
    """The binding's ``ObjectStore`` for the same location as ``store`` (a local directory or an
    S3 bucket; module docstring). Open databases in it at :func:`binding_path`."""
    sdb = binding()
    store = _unwrap(store)
    if isinstance(store, LocalStore):
        builder = sdb.ObjectStoreBuilder(sdb.ObjectStoreType.LOCAL)
        builder.with_config("local_path", str(store.root))
        return builder.build()
    if isinstance(store, S3Store):
        check_bucket_exists(store)
        builder = sdb.ObjectStoreBuilder(sdb.ObjectStoreType.S3)
        for key, value in binding_s3_config(store).entries():
            builder.with_config(key, value)
        return builder.build()
    raise UnsupportedStoreError(
        f"SlateDB databases live on local directories (file://) or S3 (s3://), not in "
        f"{type(store).__name__} {store.url}: the binding cannot reach it. Copy the database to a "
        "local directory or a bucket and open it there"
    )
