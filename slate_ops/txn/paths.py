"""Database paths (names) and joining them with the keys below them (docs/design/names.md).

The directory names a database owns under its path are defined here, in the lowest layer that
builds keys, and imported by :mod:`slate_ops.manifest.store` and :mod:`slate_ops.layout`: they are
also the names no component of a database path may have. A database at ``a/wal`` would put its
objects inside database ``a``'s WAL directory (and ``wal/x`` inside the root database's), so every
entry point that takes a database path refuses it, here, where the path is normalised.
"""

from __future__ import annotations

import functools

from slate_ops.errors import InvalidArgumentError, InvalidDatabaseNameError

MANIFEST_DIR = "manifest"
WAL_DIR = "wal"
COMPACTED_DIR = "compacted"
COMPACTIONS_DIR = "compactions"
GC_DIR = "gc"
RESERVED_DIRECTORIES: frozenset[str] = frozenset(
    (MANIFEST_DIR, WAL_DIR, COMPACTED_DIR, COMPACTIONS_DIR, GC_DIR)
)
"""Every directory a database owns under its path; no component of a database path may be one of
these (compared case-insensitively: on a case-insensitive file system ``WAL`` is ``wal``)."""

_RESERVED_LIST = ", ".join(sorted(RESERVED_DIRECTORIES))

MAX_PATH_BYTES = 512
"""The longest database path, in UTF-8 bytes: its keys (``<path>/manifest/<20 digits>.manifest``)
stay well inside S3's 1024-byte key limit."""

MAX_COMPONENT_BYTES = 255
"""The longest component of a database path, in UTF-8 bytes: a directory name of the local store."""


def normalize_db_path(path: str) -> str:
    """The normal form of a database path: ``"/a//b/"`` → ``"a/b"``; ``""`` (or ``"/"``) is the root.

    Normalised: leading, trailing and repeated ``/``. Refused with
    :class:`~slate_ops.errors.InvalidDatabaseNameError`, naming the rule and the component: a
    component that is a reserved directory name (:data:`RESERVED_DIRECTORIES`, any case), ``.`` or
    ``..``; a backslash or a control character anywhere; text that is not valid Unicode (a lone
    surrogate); a component longer than :data:`MAX_COMPONENT_BYTES` or a path longer than
    :data:`MAX_PATH_BYTES` (UTF-8 bytes). Nothing else is changed: the result round-trips.
    """
    if not isinstance(path, str):
        raise InvalidArgumentError(f"database path must be a string, got {type(path).__name__}")
    return _normalize(path)


@functools.lru_cache(maxsize=4096)
def _normalize(path: str) -> str:
    # Called for every key built (layout): cached, it is a dictionary lookup. Refusals are not cached.
    parts = [p for p in path.split("/") if p]
    normal = "/".join(parts)
    _check_text(path)
    for part in parts:
        _check_component(path, part)
    size = len(normal.encode("utf-8"))
    if size > MAX_PATH_BYTES:
        raise InvalidDatabaseNameError(
            f"database path {_shown(path)} is {size} bytes long (UTF-8); the limit is {MAX_PATH_BYTES}: "
            "pick a shorter name"
        )
    return normal


def _check_text(path: str) -> None:
    if "\\" in path:
        raise InvalidDatabaseNameError(
            f"database path {_shown(path)} contains a backslash; components are separated by '/' only "
            "(a backslash is a separator on some file systems): use '/'"
        )
    bad = next((c for c in path if not c.isprintable()), None)  # " " is printable; tabs, newlines are not
    if bad is not None:
        raise InvalidDatabaseNameError(
            f"database path {_shown(path)} contains the control character {bad!r}; names are printable "
            "text (spaces allowed)"
        )
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidDatabaseNameError(
            f"database path {_shown(path)} is not valid Unicode text (a lone surrogate); names are UTF-8"
        ) from None


def _check_component(path: str, part: str) -> None:
    if part in (".", ".."):
        raise InvalidDatabaseNameError(
            f"database path {_shown(path)} must not contain '.' or '..' (the component {part!r}): a path "
            "names a database from the store's root, never relative to another"
        )
    if part.lower() in RESERVED_DIRECTORIES:
        raise InvalidDatabaseNameError(
            f"database path {_shown(path)} has the component {part!r}, a reserved name: every database "
            f"keeps its own objects in directories of these names ({_RESERVED_LIST}, in any case), so a "
            f"database there would mix its objects with another's. Rename that component (e.g. "
            f"{part + '_db'!r})"
        )
    size = len(part.encode("utf-8"))
    if size > MAX_COMPONENT_BYTES:
        raise InvalidDatabaseNameError(
            f"database path {_shown(path)} has a component of {size} bytes (UTF-8); the limit is "
            f"{MAX_COMPONENT_BYTES}: pick a shorter name"
        )


def _shown(path: str) -> str:
    """``path`` as quoted in an error: repr (so control characters show), at most 120 characters."""
    return repr(path) if len(path) <= 120 else repr(path[:100]) + f"... ({len(path)} characters)"


def is_valid_db_path(path: str) -> bool:
    """Whether :func:`normalize_db_path` accepts ``path`` (discovery: a key whose path it refuses is
    no database)."""
    try:
        normalize_db_path(path)
    except InvalidArgumentError:
        return False
    return True


def join(path: str, *parts: str) -> str:
    return "/".join(p for p in (path, *parts) if p)
