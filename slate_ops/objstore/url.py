"""Open a store from a URL: ``file:///abs/root`` (or a plain path), ``memory://name``, ``s3://bucket/prefix``.

S3 URLs take query options ``endpoint_url``, ``region``, ``access_key_id``, ``secret_access_key`` and
``session_token``; credentials may instead be given to :func:`open_store` as arguments (so they never
appear in a URL); without either, they come from ``SLATE_OPS_S3_*`` and then boto3's usual chain
(``AWS_*`` environment variables, profiles, instance roles), the one order of
:mod:`slate_ops.objstore.credentials`; the endpoint, when not given, from boto3's
(``AWS_ENDPOINT_URL_S3``). Unknown options (and items without ``=``, and fragments) are refused so
that a typo does not silently fall back to a default endpoint or credentials; so is an
``endpoint_url`` with a user or password (credentials never ride in a URL that messages and logs
show). Opening a ``file://`` store creates nothing (:class:`LocalStore`).

A URL that cannot be right fails here, for every entry point (CLI, Dagster, Spark, ``.ci/demo``):
an unknown scheme lists the known ones, and a plain path that looks like a mistyped scheme
(``s3//bucket``, ``s3:/bucket``, ``file:/tmp/x``) whose directory does not exist raises
:class:`StoreNotFoundError` with the URL probably meant. A database looked for in a ``file://``
store whose directory does not exist raises :class:`StoreRootNotFoundError` (both a
``StoreNotFoundError`` and a ``DbNotFoundError``; :func:`~slate_ops.objstore.local.db_not_found`).

:func:`redact_url` is the one redaction of store URLs for messages and logs: the store's errors, the
CLI, the Dagster config and resources, and the Spark side all use it (docs/cli.md "Safety").
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, unquote_plus, urlsplit

from slate_ops.errors import InvalidArgumentError, InvalidStoreUrlError, StoreNotFoundError
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.local import LocalStore
from slate_ops.objstore.memory import MemoryStore
from slate_ops.objstore.s3 import S3Store

_S3_OPTIONS = ("endpoint_url", "region", "access_key_id", "secret_access_key", "session_token")
HARMLESS_OPTIONS = frozenset({"endpoint_url", "region"})
"""The query options whose values :func:`redact_url` shows (still without userinfo); every other
option's value, known or not, is masked: an allow-list, so a mistyped or unforeseen name never leaks."""
REDACTED = "***"

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
    check_store_url(url)
    if "://" not in url:
        return LocalStore(Path(url))
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise InvalidStoreUrlError(f"file URL {redact_url(url)!r} must be file:///absolute/path")
        if parts.query or parts.fragment:
            raise InvalidStoreUrlError(f"file URL {redact_url(url)!r} takes no query or fragment")
        return LocalStore(Path(unquote(parts.path)))
    if scheme == "memory":
        name = (parts.netloc + parts.path).strip("/")
        if "@" in parts.netloc:
            raise InvalidStoreUrlError(f"memory URL {redact_url(url)!r} takes no user or password")
        if parts.query or parts.fragment:
            raise InvalidStoreUrlError(f"memory URL {redact_url(url)!r} takes no query or fragment")
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
    raise AssertionError(f"unreachable: check_store_url passed scheme {scheme!r}")


def check_store_url(url: str) -> None:
    """The checks of ``url``'s form that :func:`open_store` makes before opening anything, for callers
    that validate a URL early (the Dagster fleet config): :class:`InvalidStoreUrlError` for an empty
    or unparseable URL or an unknown scheme (naming the known ones), :class:`StoreNotFoundError`
    for a plain path that looks like a mistyped scheme (``s3//bucket``) whose directory does not
    exist (naming the URL probably meant)."""
    if not isinstance(url, str) or not url.strip():
        raise InvalidStoreUrlError(f"store URL must be a non-empty string, got {url!r}")
    if "://" not in url:
        meant = mistyped_scheme(url)
        if meant is not None and not Path(url).is_dir():
            raise StoreNotFoundError(
                f"no such directory {Path(url).absolute()} (store {redact_url(url)!r} is read as a local "
                f"path); nothing was created. Did you mean {redact_url(meant)}?"
            )
        return
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise InvalidStoreUrlError(f"store URL {redact_url(url)!r} cannot be parsed: {exc}") from None
    if parts.scheme.lower() not in KNOWN_SCHEMES:
        raise InvalidStoreUrlError(
            f"store URL {redact_url(url)!r} has unknown scheme {parts.scheme!r}; known schemes: "
            f"{', '.join(f'{known}://' for known in KNOWN_SCHEMES)} (or a plain local path)"
        )


KNOWN_SCHEMES = ("file", "memory", "s3")
"""The schemes :func:`open_store` knows."""

_MISTYPED_SCHEME = re.compile(r"(?i)^(s3|file|memory)[:/]+(.*)$")


def mistyped_scheme(text: str) -> str | None:
    """The URL probably meant by a store given as ``s3//bucket/x`` or ``s3:/bucket/x`` (which would
    be read as a relative directory), or None."""
    match = _MISTYPED_SCHEME.match(text)
    if "://" in text or match is None:
        return None
    scheme, rest = match.group(1).lower(), match.group(2)
    return f"file:///{rest}" if scheme == "file" else f"{scheme}://{rest}"


def redact_url(url: str) -> str:
    """``url`` fit to print: no userinfo, and only harmless option values.

    - userinfo (``user:password@``) of the URL becomes ``***@``;
    - each query option is judged by its *decoded* name (``secret%5Faccess%5Fkey`` is
      ``secret_access_key``): the value of an option in :data:`HARMLESS_OPTIONS` is shown decoded, itself
      redacted (``endpoint_url=http://user:pw@host`` shows ``***@host``); any other value is ``***``;
      an item without ``=`` is ``***`` (it may be a pasted secret);
    - a fragment becomes ``#***``.

    Text that is not a URL (a plain path) comes back unchanged; text that cannot be parsed as a URL
    keeps only its scheme.
    """
    if "://" not in url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unbalanced "[" in the host part
        return f"{url.partition('://')[0]}://{REDACTED}"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
    query = "&".join(_redact_option(item) for item in parts.query.split("&")) if parts.query else ""
    fragment = REDACTED if parts.fragment else ""
    if (netloc, query, fragment) == (parts.netloc, parts.query, parts.fragment):
        return url  # geturl() would also normalise the URL, e.g. "s3:///x" to "s3:/x"
    return parts._replace(netloc=netloc, query=query, fragment=fragment).geturl()


def _redact_option(item: str) -> str:
    raw_name, equals, raw_value = item.partition("=")
    if not equals:
        return REDACTED if item else item
    name = unquote_plus(raw_name)
    if name not in HARMLESS_OPTIONS:
        return f"{raw_name}={REDACTED}"
    return f"{raw_name}={quote(redact_url(unquote_plus(raw_value)), safe=':/*@[]')}"


def _has_userinfo(url: str) -> bool:
    try:
        return "@" in urlsplit(url).netloc
    except ValueError:
        return True  # unparseable: treat as unsafe to show


def _open_s3(raw_url: str, credentials: dict[str, str]) -> S3Store:
    parts = urlsplit(raw_url)
    url = redact_url(raw_url)
    if not parts.netloc:
        raise InvalidStoreUrlError(f"S3 URL {url!r} names no bucket; use s3://bucket/prefix")
    if "@" in parts.netloc or ":" in parts.netloc:
        raise InvalidStoreUrlError(
            f"S3 URL {url!r}: give credentials and endpoint as query options, not in the host part"
        )
    if parts.fragment:
        raise InvalidStoreUrlError(f"S3 URL {url!r} takes no fragment")
    query = parse_qs(parts.query, keep_blank_values=True, strict_parsing=False)
    unknown = sorted(set(query) - set(_S3_OPTIONS))
    bare = {unquote_plus(item) for item in parts.query.split("&") if item and "=" not in item}
    if unknown or bare:
        # Names only (never values); a bare item may be a pasted secret, so it is not named.
        shown = [name for name in unknown if name not in bare] + [REDACTED] * bool(bare)
        raise InvalidStoreUrlError(
            f"S3 URL {url!r} has unknown option(s) {', '.join(shown)}; known: {', '.join(_S3_OPTIONS)} "
            "(each as name=value)"
        )
    options: dict[str, str | None] = {}
    for name in _S3_OPTIONS:
        values = query.get(name)
        if values is not None and len(values) != 1:
            raise InvalidStoreUrlError(f"S3 URL {url!r} gives option {name} more than once")
        options[name] = values[0] if values else credentials.get(name)
    endpoint = options["endpoint_url"]
    if endpoint is not None and _has_userinfo(endpoint):
        raise InvalidStoreUrlError(
            f"S3 URL {url!r}: endpoint_url carries a user or password; give credentials as "
            "access_key_id/secret_access_key (or SLATE_OPS_S3_* / AWS_* variables), never in a URL"
        )
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
