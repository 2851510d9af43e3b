"""A store on S3 or an S3-compatible service (``s3://bucket/prefix``), via boto3.

Conditional puts use S3's native conditional writes (``If-None-Match: *`` and ``If-Match``). Every
put stores a unique put id in the object's user metadata so a put whose response was lost can be
settled by reading it back (:func:`resolve_put_outcome`) instead of guessed.

botocore's own retries make that necessary even without visible errors: if a conditional put is
applied but its response is lost, botocore resends it and the resend fails with 412 against our
own write. So a 412/409 seen after botocore retried is treated as an unknown outcome and resolved.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_EXCEPTION, wait
from typing import Any
from urllib.parse import urlencode

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    HTTPClientError,
    NoCredentialsError,
    PartialCredentialsError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError
from urllib3.exceptions import HTTPError as Urllib3Error

from slate_ops.errors import (
    InvalidArgumentError,
    ObjectNotFoundError,
    ObjectStoreCredentialsError,
    ObjectStoreError,
    PreconditionFailedError,
    PutOutcomeUnknownError,
)
from slate_ops.objstore.base import (
    GetResult,
    ObjectMeta,
    PutMode,
    PutResult,
    new_put_id,
    resolve_put_outcome,
    validate_key,
    validate_range,
)
from slate_ops.objstore.credentials import resolve_s3_credentials
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime

_OVERWRITE = PutMode.overwrite()  # a module constant: ruff B008 forbids calls in defaults
log = logging.getLogger(__name__)

PUT_ID_METADATA = "slate-ops-put-id"
# Errors raised after the request may have reached S3: the write may or may not have been applied.
# botocore reads the body of an error answer (a 404, a 412) outside its exception handling and
# retries, so a connection broken in the middle of one raises urllib3's own error to the caller.
_MAYBE_SENT = (HTTPClientError, BotoConnectionError, Urllib3Error)
_TRANSPORT = (BotoCoreError, Urllib3Error)
_ANY = (ClientError, BotoCoreError, Urllib3Error)
_NOT_FOUND_CODES = {"NoSuchKey", "404", "NotFound"}
_CONFLICT_CODES = {"PreconditionFailed", "ConditionalRequestConflict"}
# S3 refused the credentials themselves (unknown key, wrong secret, expired or invalid token).
_BAD_CREDENTIALS_CODES = {
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "InvalidToken",
    "TokenRefreshRequired",
}
_SET_CREDENTIALS = (
    "set SLATE_OPS_S3_ACCESS_KEY_ID and SLATE_OPS_S3_SECRET_ACCESS_KEY (plus SLATE_OPS_S3_SESSION_TOKEN "
    "for temporary credentials), read by the CLI, Dagster and Spark alike; else boto3's chain is used "
    "(AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, AWS_PROFILE, an instance role). See README.md "
    '"S3 credentials"'
)

# Connections in each client's pool: the most requests one process sends at once to one endpoint
# (WAL replay fetches 16 segments at a time; Spark tasks and the flusher add a few more).
MAX_POOL_CONNECTIONS = 32

MiB = 1024 * 1024
# put_multipart: objects above the threshold go up as parts of MULTIPART_PART_BYTES, this many at a
# time (S3 refuses parts below 5 MiB except the last; the AWS CLI uses 8 MiB parts above 8 MiB). One
# S3 connection moves tens of MB/s, so parts in parallel shorten a large upload there; moto, one
# Python server, gains nothing from them (benchmarks/notes/s3_compaction.md).
MIN_PART_BYTES = 5 * MiB
MULTIPART_THRESHOLD = 16 * MiB
MULTIPART_PART_BYTES = 8 * MiB
MULTIPART_CONCURRENCY = 4
_Parts = list[dict[str, Any]]  # (S3Store.list shadows the builtin in its body)


def make_s3_client(
    *,
    endpoint_url: str | None = None,
    region: str | None = None,
    access_key_id: str | None = None,
    secret_access_key: str | None = None,
    session_token: str | None = None,
    max_attempts: int = 5,
) -> Any:
    """A client with bounded timeouts and standard retries; unset credentials use boto3's chain.

    ``max_attempts`` is the total number of sends of one request (1: no botocore retries).

    A custom endpoint (MinIO, moto, ...) gets path-style addressing, which they all support.
    """
    session = boto3.session.Session(
        aws_access_key_id=access_key_id,
        aws_secret_access_key=secret_access_key,
        aws_session_token=session_token,
        region_name=region,
    )
    config = Config(
        connect_timeout=10,
        read_timeout=60,
        # botocore's "max_attempts" counts retries only; "total_max_attempts" includes the first.
        retries={"mode": "standard", "total_max_attempts": max_attempts},
        max_pool_connections=MAX_POOL_CONNECTIONS,
        tcp_keepalive=True,
        s3={"addressing_style": "path"} if endpoint_url else None,
    )
    return session.client("s3", endpoint_url=endpoint_url, config=config)


# The AWS_* variables that steer boto3's default chain (credentials, region, endpoint, profiles):
# a shared client is reused only while they are unchanged, so a changed environment gets its own.
_CHAIN_VARIABLES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CA_BUNDLE",
)
_shared_clients: dict[str, Any] = {}
_shared_lock = threading.Lock()


def shared_s3_client(
    *,
    endpoint_url: str | None = None,
    region: str | None = None,
    access_key_id: str | None = None,
    secret_access_key: str | None = None,
    session_token: str | None = None,
) -> Any:
    """The process's one client for this endpoint, region and credentials (built on first use).

    Building a client costs ~0.3 s (botocore parses its JSON service models), and each client has
    its own connection pool; boto3 clients are thread-safe, so every :class:`S3Store` and every
    thread with the same settings shares one. The key also holds the process id (a forked child
    builds its own: pooled sockets must not be shared across processes) and the AWS_* variables of
    boto3's chain; secrets enter it only as a hash. Hooks must not be registered on a shared client:
    tests that need them build their own with :func:`make_s3_client`.
    """
    parts = (
        str(os.getpid()),
        endpoint_url,
        region,
        access_key_id,
        secret_access_key,
        session_token,
        *(os.environ.get(name) for name in _CHAIN_VARIABLES),
    )
    key = hashlib.sha256(repr(parts).encode()).hexdigest()
    with _shared_lock:  # one build per key, even when many threads open stores at once
        client = _shared_clients.get(key)
        if client is None:
            client = _shared_clients[key] = make_s3_client(
                endpoint_url=endpoint_url,
                region=region,
                access_key_id=access_key_id,
                secret_access_key=secret_access_key,
                session_token=session_token,
            )
        return client


class S3Store:
    """Objects under ``prefix`` in ``bucket``. ``list`` reports no put ids (S3 listings omit metadata).

    Without ``client`` it uses the process's shared client for its endpoint, region and
    credentials (:func:`shared_s3_client`), so opening a store costs no client build after the first.
    The credentials are the ones given, else ``SLATE_OPS_S3_*``, else boto3's chain
    (:func:`~slate_ops.objstore.credentials.resolve_s3_credentials`).
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        session_token: str | None = None,
        client: Any = None,
        multipart_threshold: int = MULTIPART_THRESHOLD,
        multipart_part_bytes: int = MULTIPART_PART_BYTES,
        multipart_concurrency: int = MULTIPART_CONCURRENCY,
        clock: Runtime = SYSTEM_RUNTIME,
    ) -> None:
        self._clock = clock  # its executor sends a multipart upload's parts
        if not bucket or "/" in bucket:
            raise InvalidArgumentError(f"S3 bucket name must be non-empty without '/', got {bucket!r}")
        if client is None:  # explicit, else SLATE_OPS_S3_*, else boto3's chain (one order everywhere)
            credentials = resolve_s3_credentials(access_key_id, secret_access_key, session_token)
            access_key_id = credentials["access_key_id"]
            secret_access_key = credentials["secret_access_key"]
            session_token = credentials["session_token"]
        if client is None and (access_key_id is None) != (secret_access_key is None):
            given, missing = (
                ("access_key_id", "secret_access_key")
                if secret_access_key is None
                else ("secret_access_key", "access_key_id")
            )
            raise InvalidArgumentError(
                f"S3 credentials for bucket {bucket!r}: {given} is given without {missing}; give both, "
                "or neither to use SLATE_OPS_S3_* or boto3's chain (AWS_* variables, profiles, roles)"
            )
        if multipart_part_bytes < MIN_PART_BYTES or multipart_threshold < multipart_part_bytes:
            raise InvalidArgumentError(
                f"S3 multipart parts must be at least {MIN_PART_BYTES} bytes and the threshold at least "
                f"one part, got parts of {multipart_part_bytes} and threshold {multipart_threshold}"
            )
        if multipart_concurrency < 1:
            raise InvalidArgumentError(f"multipart_concurrency must be >= 1, got {multipart_concurrency}")
        self.multipart_threshold = multipart_threshold
        self.multipart_part_bytes = multipart_part_bytes
        self.multipart_concurrency = multipart_concurrency
        prefix = prefix.strip("/")
        if prefix:
            validate_key(prefix)
        self._bucket = bucket
        self._prefix = prefix
        self._key_prefix = f"{prefix}/" if prefix else ""
        self._client = client or shared_s3_client(
            endpoint_url=endpoint_url,
            region=region,
            access_key_id=access_key_id,
            secret_access_key=secret_access_key,
            session_token=session_token,
        )
        meta = getattr(self._client, "meta", None)
        endpoint = endpoint_url or getattr(meta, "endpoint_url", None)
        # A non-AWS endpoint (MinIO, moto) must travel with the URL so another process can reopen it.
        self._endpoint_url = endpoint if endpoint and "amazonaws.com" not in endpoint else None
        self._region = region or getattr(meta, "region_name", None)

    @property
    def url(self) -> str:
        """``s3://bucket/prefix``, plus ``endpoint_url`` and ``region`` for a custom endpoint, so
        ``open_store(store.url)`` reaches the same objects from another process (Spark tasks).
        Credentials never appear in it: they come from the environment there."""
        base = f"s3://{self._bucket}/{self._prefix}" if self._prefix else f"s3://{self._bucket}"
        if self._endpoint_url is None:
            return base
        query = {"endpoint_url": self._endpoint_url}
        if self._region:
            query["region"] = self._region
        return f"{base}?{urlencode(query)}"

    @property
    def bucket(self) -> str:
        return self._bucket

    @property
    def prefix(self) -> str:
        """The key prefix inside the bucket ("" for none; no slashes at either end)."""
        return self._prefix

    @property
    def client(self) -> Any:
        """The boto3 client, e.g. to register botocore event hooks in tests."""
        return self._client

    # --- reads -------------------------------------------------------------------------------

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        validate_key(key)
        validate_range(key, byte_range)
        if byte_range is not None and byte_range[0] == byte_range[1]:
            # "bytes=5-4" is not a valid range (S3 would return the whole object); only the
            # metadata, and NotFound for a missing key, are needed.
            return GetResult(b"", self.head(key))
        kwargs: dict[str, Any] = {"Bucket": self._bucket, "Key": self._full(key)}
        if byte_range is not None:
            kwargs["Range"] = f"bytes={byte_range[0]}-{byte_range[1] - 1}"
        try:
            response = self._client.get_object(**kwargs)
            data: bytes = response["Body"].read()
        except ClientError as exc:
            if _status(exc) == 416:  # range starts at or past the end: clipped to nothing
                return GetResult(b"", self.head(key))
            raise self._error("get", key, exc) from exc
        except _TRANSPORT as exc:
            raise self._error("get", key, exc) from exc
        size = response["ContentLength"]
        if "ContentRange" in response:  # "bytes 0-9/1234"
            size = int(response["ContentRange"].rsplit("/", 1)[1])
        meta = ObjectMeta(
            key,
            size,
            response["LastModified"],
            _unquote(response["ETag"]),
            response.get("Metadata", {}).get(PUT_ID_METADATA),
        )
        return GetResult(data, meta)

    def head(self, key: str) -> ObjectMeta:
        validate_key(key)
        try:
            response = self._client.head_object(Bucket=self._bucket, Key=self._full(key))
        except _ANY as exc:
            raise self._error("head", key, exc) from exc
        return ObjectMeta(
            key,
            response["ContentLength"],
            response["LastModified"],
            _unquote(response["ETag"]),
            response.get("Metadata", {}).get(PUT_ID_METADATA),
        )

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[ObjectMeta]:
        kwargs: dict[str, Any] = {"Bucket": self._bucket, "Prefix": self._key_prefix + prefix}
        if start_after is not None:
            kwargs["StartAfter"] = self._key_prefix + start_after
        return self._list_pages(kwargs, prefix)

    def _list_pages(self, kwargs: dict[str, Any], prefix: str) -> Iterator[ObjectMeta]:
        strip = len(self._key_prefix)
        try:
            for page in self._client.get_paginator("list_objects_v2").paginate(**kwargs):
                for obj in page.get("Contents", []):
                    key = obj["Key"][strip:]
                    yield ObjectMeta(key, obj["Size"], obj["LastModified"], _unquote(obj["ETag"]))
        except _ANY as exc:
            failed = f"S3 list of {self.url} (prefix {prefix!r}) failed: {_describe(exc)}"
            credentials = self._credentials_error(failed, None, exc)
            if credentials is not None:
                raise credentials from exc
            if isinstance(exc, ClientError) and _code(exc) == "NoSuchBucket":
                raise ObjectStoreError(
                    f"{failed}: bucket {self._bucket!r} does not exist; create it or fix the store URL"
                ) from exc
            raise ObjectStoreError(failed) from exc

    # --- writes ------------------------------------------------------------------------------

    def put(self, key: str, data: bytes, mode: PutMode = _OVERWRITE, put_id: str | None = None) -> PutResult:
        validate_key(key)
        put_id = put_id or new_put_id()
        try:
            return self._put_once(key, data, mode, put_id)
        except PutOutcomeUnknownError as exc:
            unknown = exc
        try:
            return resolve_put_outcome(_SinglePutView(self, self._put_once), key, data, mode, put_id)
        except (PreconditionFailedError, PutOutcomeUnknownError):
            raise
        except ObjectStoreError as exc:  # could not even read back: still unknown, not failed
            raise PutOutcomeUnknownError(
                f"put of {self.url}/{key} may or may not have been applied ({unknown}); reading it "
                f"back also failed: {exc}",
                key,
                put_id,
            ) from exc

    def _put_once(self, key: str, data: bytes, mode: PutMode, put_id: str) -> PutResult:
        """One put_object call (with botocore's retries); ambiguous outcomes raise PutOutcomeUnknown."""
        kwargs: dict[str, Any] = {
            "Bucket": self._bucket,
            "Key": self._full(key),
            "Body": data,
            "Metadata": {PUT_ID_METADATA: put_id},
        }
        if mode.kind == "create":
            kwargs["IfNoneMatch"] = "*"
        elif mode.kind == "if_match":
            kwargs["IfMatch"] = f'"{mode.etag}"'
        try:
            response = self._client.put_object(**kwargs)
        except _MAYBE_SENT as exc:
            raise self._unknown(key, put_id, exc) from exc
        except ClientError as exc:
            code, status = _code(exc), _status(exc)
            lost = code in _CONFLICT_CODES or status in (409, 412)
            if mode.kind == "if_match" and (code in _NOT_FOUND_CODES or status == 404):
                lost = True  # S3 answers If-Match on a missing key with 404
            if lost and mode.kind != "overwrite":
                if _retry_attempts(exc) > 0:  # maybe our own earlier attempt won
                    raise self._unknown(key, put_id, exc) from exc
                raise PreconditionFailedError(
                    f"conditional put ({mode}) of {self.url}/{key} lost: {_describe(exc)}", key
                ) from exc
            if status >= 500:
                raise self._unknown(key, put_id, exc) from exc
            raise self._error("put", key, exc) from exc
        except _TRANSPORT as exc:
            raise self._error("put", key, exc) from exc
        return PutResult(_unquote(response["ETag"]), put_id)

    def put_multipart(self, key: str, data: bytes, put_id: str | None = None) -> PutResult:
        """Overwrite ``key``; above ``multipart_threshold`` bytes as a multipart upload whose parts
        go up ``multipart_concurrency`` at a time (below it, one :meth:`put`).

        The object appears only when the upload completes; on any failure the upload is aborted, so
        a failed call leaves no object (and no parts to pay for). A completion whose response was
        lost is settled by reading back the put id, as for :meth:`put`.
        """
        validate_key(key)
        put_id = put_id or new_put_id()
        if len(data) <= self.multipart_threshold:
            return self.put(key, data, put_id=put_id)
        full = self._full(key)
        try:
            created = self._client.create_multipart_upload(
                Bucket=self._bucket, Key=full, Metadata={PUT_ID_METADATA: put_id}
            )
        except _ANY as exc:
            raise self._error("multipart upload", key, exc) from exc
        upload_id: str = created["UploadId"]
        try:
            parts = self._upload_parts(key, upload_id, data)
            return self._complete(key, upload_id, parts, put_id)
        except BaseException:
            self._abort(key, upload_id)
            raise

    def _upload_parts(self, key: str, upload_id: str, data: bytes) -> _Parts:
        step = self.multipart_part_bytes
        offsets = range(0, len(data), step)

        def send(number: int, offset: int) -> dict[str, Any]:
            try:
                response = self._client.upload_part(
                    Bucket=self._bucket,
                    Key=self._full(key),
                    UploadId=upload_id,
                    PartNumber=number,
                    Body=data[offset : offset + step],
                )
            except _ANY as exc:
                raise self._error(f"upload of part {number}", key, exc) from exc
            return {"PartNumber": number, "ETag": response["ETag"]}

        pool = self._clock.executor(min(self.multipart_concurrency, len(offsets)), "slate-ops-s3-parts")
        try:
            futures = [pool.submit(send, n, offset) for n, offset in enumerate(offsets, start=1)]
            wait(futures, return_when=FIRST_EXCEPTION)
            return [f.result() for f in futures]  # the first failure, in part order, is raised
        finally:
            pool.shutdown(wait=True, cancel_futures=True)  # no part outlives the call (or the abort)

    def _complete(self, key: str, upload_id: str, parts: _Parts, put_id: str) -> PutResult:
        try:
            response = self._client.complete_multipart_upload(
                Bucket=self._bucket,
                Key=self._full(key),
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},
            )
        except (ClientError, *_MAYBE_SENT) as exc:
            # A completion applied but unanswered: botocore's resend finds the upload gone.
            settled = isinstance(exc, _MAYBE_SENT) or (
                _code(exc) == "NoSuchUpload" and _retry_attempts(exc) > 0
            )
            if settled:
                with contextlib.suppress(ObjectNotFoundError):
                    meta = self.head(key)
                    if meta.put_id == put_id:
                        return PutResult(meta.etag, put_id)
            raise self._error("multipart completion", key, exc) from exc
        except _TRANSPORT as exc:
            raise self._error("multipart completion", key, exc) from exc
        return PutResult(_unquote(response["ETag"]), put_id)

    def _abort(self, key: str, upload_id: str) -> None:
        try:
            self._client.abort_multipart_upload(Bucket=self._bucket, Key=self._full(key), UploadId=upload_id)
        except _ANY as exc:  # the upload stays invisible; a bucket lifecycle rule reaps it
            log.warning("could not abort multipart upload %s of %s/%s: %s", upload_id, self.url, key, exc)

    def delete(self, key: str) -> None:
        validate_key(key)
        try:
            self._client.delete_object(Bucket=self._bucket, Key=self._full(key))
        except ClientError as exc:
            if _code(exc) in _NOT_FOUND_CODES:
                return
            raise self._error("delete", key, exc) from exc
        except _TRANSPORT as exc:
            raise self._error("delete", key, exc) from exc

    # --- helpers -----------------------------------------------------------------------------

    def _full(self, key: str) -> str:
        return self._key_prefix + key

    def _unknown(self, key: str, put_id: str, exc: Exception) -> PutOutcomeUnknownError:
        return PutOutcomeUnknownError(
            f"put of {self.url}/{key} has an unknown outcome: {_describe(exc)}", key, put_id
        )

    def _credentials_error(
        self, failed: str, key: str | None, exc: Exception
    ) -> ObjectStoreCredentialsError | None:
        """The typed error for missing or refused credentials (None: ``exc`` is something else)."""
        bucket = repr(self._bucket)
        if isinstance(exc, NoCredentialsError | PartialCredentialsError):
            return ObjectStoreCredentialsError(
                f"{failed}. No credentials for bucket {bucket}: {_SET_CREDENTIALS}", key
            )
        if not isinstance(exc, ClientError):
            return None
        code = _code(exc)
        if code in _BAD_CREDENTIALS_CODES:
            return ObjectStoreCredentialsError(
                f"{failed}. Bucket {bucket} refused the credentials: {_SET_CREDENTIALS}", key
            )
        if code == "AccessDenied" or (_status(exc) == 403 and code in ("403", "Forbidden")):
            return ObjectStoreCredentialsError(
                f"{failed}. The credentials may not use bucket {bucket}: grant them s3:GetObject, "
                f"s3:PutObject, s3:DeleteObject and s3:ListBucket on it, or {_SET_CREDENTIALS}",
                key,
            )
        return None

    def _error(self, op: str, key: str, exc: Exception) -> ObjectStoreError:
        where = f"{self.url}/{key}"
        credentials = self._credentials_error(f"S3 {op} of {where} failed: {_describe(exc)}", key, exc)
        if credentials is not None:
            return credentials
        if isinstance(exc, ClientError):
            code = _code(exc)
            if code in _NOT_FOUND_CODES:
                return ObjectNotFoundError(f"{where} does not exist", key)
            if code == "NoSuchBucket":
                return ObjectStoreError(
                    f"S3 {op} of {where} failed: bucket {self._bucket} does not exist", key
                )
        return ObjectStoreError(f"S3 {op} of {where} failed: {_describe(exc)}", key)


class _SinglePutView:
    """The store as :func:`resolve_put_outcome` must see it: its re-puts must not resolve again, so
    they go to ``put_once`` (the store's single put_object call)."""

    def __init__(self, store: S3Store, put_once: Callable[[str, bytes, PutMode, str], PutResult]) -> None:
        self._store = store
        self._put_once = put_once

    @property
    def url(self) -> str:
        return self._store.url

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        return self._store.get(key, byte_range)

    def head(self, key: str) -> ObjectMeta:
        return self._store.head(key)

    def put(self, key: str, data: bytes, mode: PutMode = _OVERWRITE, put_id: str | None = None) -> PutResult:
        return self._put_once(key, data, mode, put_id or new_put_id())

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[ObjectMeta]:
        return self._store.list(prefix, start_after)

    def delete(self, key: str) -> None:
        self._store.delete(key)


def _unquote(etag: str) -> str:
    return etag.strip('"')


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


def _retry_attempts(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("RetryAttempts", 0))


def _describe(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"{error.get('Code', '?')} (HTTP {_status(exc)}): {error.get('Message', '')}".rstrip(": ")
    return f"{type(exc).__name__}: {exc}"
