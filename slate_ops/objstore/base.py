"""The object-store protocol every store implements, and the types it speaks."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from slate_ops.errors import (
    InvalidArgumentError,
    ObjectNotFoundError,
    PreconditionFailedError,
    PutOutcomeUnknownError,
)


@dataclass(frozen=True)
class PutMode:
    """How a put treats an existing object: ``overwrite()``, ``create()`` or ``if_match(etag)``."""

    kind: str
    etag: str | None = None

    @staticmethod
    def overwrite() -> PutMode:
        return _OVERWRITE

    @staticmethod
    def create() -> PutMode:
        """Create-if-absent: fails with :class:`PreconditionFailedError` if the key exists."""
        return _CREATE

    @staticmethod
    def if_match(etag: str) -> PutMode:
        """Replace only if the current etag equals ``etag``, else :class:`PreconditionFailedError`."""
        if not etag:
            raise InvalidArgumentError("PutMode.if_match needs a non-empty etag")
        return PutMode("if_match", etag)

    def __str__(self) -> str:
        return self.kind if self.etag is None else f"if_match({self.etag})"


_OVERWRITE = PutMode("overwrite")
_CREATE = PutMode("create")


@dataclass(frozen=True)
class ObjectMeta:
    """What ``head`` and ``list`` report about one object.

    ``put_id`` is the unique id the writing ``put`` stored with the object, when the store keeps it.
    """

    key: str
    size: int
    last_modified: datetime
    etag: str
    put_id: str | None = None


@dataclass(frozen=True)
class GetResult:
    """The bytes of a ``get`` (the whole object or the requested range) and the object's metadata."""

    data: bytes
    meta: ObjectMeta


@dataclass(frozen=True)
class PutResult:
    etag: str
    put_id: str


@runtime_checkable
class ObjectStore(Protocol):
    """A flat key space of immutable-per-version objects.

    Keys are ``/``-separated relative paths. ``get`` with ``byte_range=(start, end)`` returns bytes
    ``[start, end)``; a range past the end is clipped. ``list`` yields objects under ``prefix`` in key
    order, optionally only keys strictly greater than ``start_after``. ``delete`` of a missing key is
    not an error.
    """

    @property
    def url(self) -> str: ...

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult: ...

    def head(self, key: str) -> ObjectMeta: ...

    def put(
        self, key: str, data: bytes, mode: PutMode = _OVERWRITE, put_id: str | None = None
    ) -> PutResult: ...

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[ObjectMeta]: ...

    def delete(self, key: str) -> None: ...


@runtime_checkable
class MultipartPut(Protocol):
    """Optional capability: an overwrite sent in parts, in parallel, visible only once complete.

    A store implements it where one request per object is slow (S3's multipart upload); a failed
    upload leaves no object. Call it through :func:`put_large`.
    """

    def put_multipart(self, key: str, data: bytes, put_id: str | None = None) -> PutResult: ...


def put_large(store: ObjectStore, key: str, data: bytes) -> PutResult:
    """Overwrite ``key`` with a possibly large ``data``: by the store's :class:`MultipartPut` where it
    has one (it decides from the size whether parts pay off), else by one ``put``."""
    if isinstance(store, MultipartPut):
        return store.put_multipart(key, data)
    return store.put(key, data)


def new_put_id() -> str:
    """A request token from the OS's randomness, not the runtime: it must be unique across every
    process that writes the store (two runtimes with one seed would repeat it), and it is only ever
    compared with itself (slate_ops/runtime.py)."""
    return uuid.uuid4().hex  # noqa: TID251


def validate_key(key: str) -> str:
    """Refuse keys that could escape a store's root or alias another key."""
    if not isinstance(key, str) or not key:
        raise InvalidArgumentError(f"object key must be a non-empty string, got {key!r}")
    parts = key.split("/")
    if key.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise InvalidArgumentError(f"object key {key!r} must be a relative path without '.', '..' or '//'")
    return key


def validate_range(key: str, byte_range: tuple[int, int] | None) -> None:
    if byte_range is None:
        return
    start, end = byte_range
    if start < 0 or end < start:
        raise InvalidArgumentError(f"invalid byte range {byte_range} for {key}: need 0 <= start <= end")


def resolve_put_outcome(
    store: ObjectStore, key: str, data: bytes, mode: PutMode, put_id: str, attempts: int = 5
) -> PutResult:
    """Settle a put whose outcome is unknown by reading back the put id in the object's metadata.

    If the object carries our ``put_id``, the put was applied. Otherwise a create that finds
    another write, or an if-match that finds another etag, lost (:class:`PreconditionFailedError`);
    a create that finds nothing, or an if-match that finds the etag unchanged, never landed and is
    sent again with the same id. An overwrite is simply sent again (last writer wins).
    """
    for _ in range(attempts):
        try:
            meta = store.head(key)
        except ObjectNotFoundError:
            meta = None
        if meta is not None and meta.put_id == put_id:
            return PutResult(etag=meta.etag, put_id=put_id)
        if (
            meta is not None
            and mode.kind != "overwrite"
            and (mode.kind == "create" or meta.etag != mode.etag)
        ):
            raise PreconditionFailedError(
                f"conditional put ({mode}) of {key} did not apply: the object holds another write",
                key,
            )
        if meta is None and mode.kind == "if_match":
            raise PreconditionFailedError(f"conditional put ({mode}) of {key}: object is gone", key)
        try:
            return store.put(key, data, mode, put_id=put_id)
        except PutOutcomeUnknownError:
            continue
    raise PutOutcomeUnknownError(
        f"put of {key} stayed ambiguous after {attempts} read-backs; retry the operation", key, put_id
    )
