"""Open a store from a URL: ``file:///abs/root`` (or a plain path), ``memory://name``, ``s3://bucket/prefix``.

S3 URLs take query options ``endpoint_url``, ``region``, ``access_key_id``, ``secret_access_key`` and
``session_token``; credentials may instead be given to :func:`open_store` as arguments (so they never
appear in a URL); anything not given comes from boto3's usual chain (``AWS_*`` environment
variables including ``AWS_ENDPOINT_URL_S3``, profiles, instance roles). Unknown options are refused
so that a typo does not silently fall back to a default endpoint or credentials.
"""

from __future__ import annotations

import threading
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from slate_ops.errors import InvalidArgumentError, InvalidStoreUrlError
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.local import LocalStore
from slate_ops.objstore.memory import MemoryStore
from slate_ops.objstore.s3 import S3Store

_S3_OPTIONS = ("endpoint_url", "region", "access_key_id", "secret_access_key", "session_token")
_SECRET_OPTIONS = ("secret_access_key", "session_token")

# memory:// stores live as long as the process, so that several opens of one URL share the data.
_memory_stores: dict[str, MemoryStore] = {}
_memory_lock = threading.Lock()


def open_store(
    url: str,
    *,
    access_key_id: str | None = None,
    secret_access_key: str | None = None,
    session_token: str | None = None,
) -> ObjectStore:
    """Return the store named by ``url``; raises :class:`InvalidStoreUrlError` naming a bad URL.

    The credentials apply to ``s3://`` URLs that do not give their own (other schemes ignore them).
    """
    if not isinstance(url, str) or not url.strip():
        raise InvalidStoreUrlError(f"store URL must be a non-empty string, got {url!r}")
    if "://" not in url:
        return LocalStore(Path(url))
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise InvalidStoreUrlError(f"file URL {url!r} must be file:///absolute/path")
        if parts.query or parts.fragment:
            raise InvalidStoreUrlError(f"file URL {url!r} takes no query or fragment")
        return LocalStore(Path(unquote(parts.path)))
    if scheme == "memory":
        name = (parts.netloc + parts.path).strip("/")
        if parts.query or parts.fragment:
            raise InvalidStoreUrlError(f"memory URL {url!r} takes no query or fragment")
        with _memory_lock:
            store = _memory_stores.get(name)
            if store is None:
                store = _memory_stores[name] = MemoryStore(name)
            return store
    if scheme == "s3":
        given = {
            "access_key_id": access_key_id,
            "secret_access_key": secret_access_key,
            "session_token": session_token,
        }
        return _open_s3(url, {k: v for k, v in given.items() if v is not None})
    raise InvalidStoreUrlError(
        f"store URL {_redact(url)!r} has unknown scheme {parts.scheme!r}; use file, memory or s3"
    )


def _redact(url: str) -> str:
    """The URL with secrets (query credentials, a password in the host part) masked, for errors."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    query = "&".join(
        f"{name}=***" if name in _SECRET_OPTIONS else item
        for item in parts.query.split("&")
        for name in [item.partition("=")[0]]
    )
    if (netloc, query) == (parts.netloc, parts.query):
        return url  # geturl() would also normalise the URL, e.g. "s3:///x" to "s3:/x"
    return parts._replace(netloc=netloc, query=query).geturl()


def _open_s3(raw_url: str, credentials: dict[str, str]) -> S3Store:
    parts = urlsplit(raw_url)
    url = _redact(raw_url)
    if not parts.netloc:
        raise InvalidStoreUrlError(f"S3 URL {url!r} names no bucket; use s3://bucket/prefix")
    if "@" in parts.netloc or ":" in parts.netloc:
        raise InvalidStoreUrlError(
            f"S3 URL {url!r}: give credentials and endpoint as query options, not in the host part"
        )
    query = parse_qs(parts.query, keep_blank_values=True, strict_parsing=False)
    unknown = sorted(set(query) - set(_S3_OPTIONS))
    if unknown:
        raise InvalidStoreUrlError(
            f"S3 URL {url!r} has unknown option(s) {', '.join(unknown)}; known: {', '.join(_S3_OPTIONS)}"
        )
    options: dict[str, str | None] = {}
    for name in _S3_OPTIONS:
        values = query.get(name)
        if values is not None and len(values) != 1:
            raise InvalidStoreUrlError(f"S3 URL {url!r} gives option {name} more than once")
        options[name] = values[0] if values else credentials.get(name)
    try:
        return S3Store(
            parts.netloc,
            unquote(parts.path),
            endpoint_url=options["endpoint_url"],
            region=options["region"],
            access_key_id=options["access_key_id"],
            secret_access_key=options["secret_access_key"],
            session_token=options["session_token"],
        )
    except InvalidArgumentError as exc:
        raise InvalidStoreUrlError(f"S3 URL {url!r} is invalid: {exc}") from exc
