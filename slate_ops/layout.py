"""Where every object of a database lives in the store: pure key builders and parsers, as SlateDB's
``paths.rs``, and the rule that decides which paths can be databases. No I/O.

A database at path ``<db>`` (``""`` is the store's root) owns these keys, and only these::

    <db>/manifest/<20-digit id>.manifest        manifests: ManifestStore (slate_ops.manifest.store)
    <db>/compactions/<20-digit id>.compactions  the compactor's state: CompactionsStore (compaction.state)
    <db>/wal/<20-digit id>.sst                  WAL SSTs and fences (wal_fence): WalStore (engine.wal_store)
    <db>/compacted/<ULID>.sst                   L0 and sorted-run SSTs: Db's flush, the compactor, bulk load
    <db>/gc/<namespace>.boundary                GC boundaries (manifest, compactions): BoundaryObject (txn)
    <db>/gc/deleted.<20-digit id>               the marker of a deletion: delete_database (gc.destroyed)

An SST listed by one of the manifest's ``external_dbs`` lives under that database's path instead
(clones, shards, merges: :func:`slate_ops.manifest.model.resolve_sst_path`).

Every parser matches a key by comparing it in full with the key built for the parsed id, never by
its last component alone, so the objects of a database nested under this one are never taken for
its own. The directory names are reserved: no component of a database path may be one of them
(:func:`normalize_db_path`), so ``<db>/wal/wal/...`` can never be the WAL of a database ``<db>/wal``
(docs/design/names.md). Databases are found from a listing by :func:`live_databases`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from ulid import ULID

from slate_ops.errors import InvalidArgumentError, InvalidDatabaseNameError

# --- names --------------------------------------------------------------------------------------

MANIFEST_DIR = "manifest"
WAL_DIR = "wal"
COMPACTED_DIR = "compacted"
COMPACTIONS_DIR = "compactions"
GC_DIR = "gc"
OWN_DIRECTORIES = (MANIFEST_DIR, WAL_DIR, COMPACTED_DIR, COMPACTIONS_DIR, GC_DIR)
"""Every directory a database owns under its path."""
RESERVED_DIRECTORIES: frozenset[str] = frozenset(OWN_DIRECTORIES)
"""The names no component of a database path may have (compared case-insensitively: on a
case-insensitive file system ``WAL`` is ``wal``): a database there would mix its objects with
another's."""

MANIFEST_SUFFIX = "manifest"
COMPACTIONS_SUFFIX = "compactions"
SST_SUFFIX = "sst"
BOUNDARY_SUFFIX = "boundary"
BOUNDARY_NAMESPACES = (MANIFEST_SUFFIX, COMPACTIONS_SUFFIX)
"""The sequenced namespaces with a GC boundary (:func:`boundary_key`), in both engines."""
DELETED_MARKER = "deleted"
ID_DIGITS = 20
"""Sequenced ids (manifests, compactions, WAL, deletion markers) are zero-padded to 20 digits (a u64)."""

MAX_PATH_BYTES = 512
"""The longest database path, in UTF-8 bytes: its keys (``<path>/manifest/<20 digits>.manifest``)
stay well inside S3's 1024-byte key limit."""

MAX_COMPONENT_BYTES = 255
"""The longest component of a database path, in UTF-8 bytes: a directory name of the local store."""

_RESERVED_LIST = ", ".join(sorted(RESERVED_DIRECTORIES))

# --- database paths (docs/design/names.md) --------------------------------------------------------


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


def is_valid_db_path(path: str) -> bool:
    """Whether ``path`` can be a database path (:func:`normalize_db_path` accepts it); a key whose
    path it refuses belongs to no database."""
    try:
        normalize_db_path(path)
    except InvalidArgumentError:
        return False
    return True


def join(path: str, *parts: str) -> str:
    """``path`` and ``parts`` joined by ``/``, empty parts (the root) left out."""
    return "/".join(p for p in (path, *parts) if p)


@functools.lru_cache(maxsize=4096)
def _normalize(path: str) -> str:
    # Called for every key built: cached, it is a dictionary lookup. Refusals are not cached.
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


# --- sequenced objects: manifests, compactions, WAL ------------------------------------------------


def _id_of(name: str, suffix: str) -> int | None:
    """The id of a file name ``<20 digits>.<suffix>``, else None."""
    stem, dot, rest = name.partition(".")
    if not dot or rest != suffix or len(stem) != ID_DIGITS or not (stem.isascii() and stem.isdigit()):
        return None
    return int(stem)


def sequenced_key(db_path: str, directory: str, object_id: int, suffix: str) -> str:
    """``<db>/<directory>/<20-digit id>.<suffix>``: a version of a sequenced namespace."""
    return join(normalize_db_path(db_path), directory, f"{object_id:0{ID_DIGITS}d}.{suffix}")


def parse_sequenced_key(db_path: str, directory: str, suffix: str, key: str) -> int | None:
    """The id if ``key`` is :func:`sequenced_key` of the database at ``db_path`` (full key), else None."""
    object_id = _id_of(key.rpartition("/")[2], suffix)
    if object_id is None or key != sequenced_key(db_path, directory, object_id, suffix):
        return None
    return object_id


def manifest_key(db_path: str, manifest_id: int) -> str:
    """``<db>/manifest/<20-digit id>.manifest``."""
    return sequenced_key(db_path, MANIFEST_DIR, manifest_id, MANIFEST_SUFFIX)


def parse_own_manifest_key(db_path: str, key: str) -> int | None:
    """The id if ``key`` is a manifest of the database at ``db_path`` itself (full key), else None."""
    return parse_sequenced_key(db_path, MANIFEST_DIR, MANIFEST_SUFFIX, key)


def parse_manifest_key(key: str) -> tuple[str, int] | None:
    """``(database path, manifest id)`` if ``key`` is the manifest of some database (the database is
    everything before its last ``/manifest/``, and must be a valid path), else None."""
    found = _owner_of(key, MANIFEST_DIR)
    if found is None:
        return None
    db_path, name = found
    object_id = _id_of(name, MANIFEST_SUFFIX)
    if object_id is None or key != manifest_key(db_path, object_id):
        return None
    return db_path, object_id


def compactions_key(db_path: str, compactions_id: int) -> str:
    """``<db>/compactions/<20-digit id>.compactions``."""
    return sequenced_key(db_path, COMPACTIONS_DIR, compactions_id, COMPACTIONS_SUFFIX)


def parse_compactions_key(db_path: str, key: str) -> int | None:
    """The id if ``key`` is a ``.compactions`` file of the database at ``db_path`` (full key)."""
    return parse_sequenced_key(db_path, COMPACTIONS_DIR, COMPACTIONS_SUFFIX, key)


def wal_key(db_path: str, wal_id: int) -> str:
    """``<db>/wal/<20-digit id>.sst``: a WAL SST, or a fence (``engine/wal_fence.py``)."""
    return sequenced_key(db_path, WAL_DIR, wal_id, SST_SUFFIX)


def parse_wal_key(db_path: str, key: str) -> int | None:
    """The id if ``key`` is a WAL SST (or fence) of the database at ``db_path`` (full key), else None."""
    return parse_sequenced_key(db_path, WAL_DIR, SST_SUFFIX, key)


# --- compacted SSTs -------------------------------------------------------------------------------


def sst_key(db_path: str, sst_id: ULID | str) -> str:
    """``<db>/compacted/<ULID>.sst``: SST ``sst_id`` of the database at ``db_path`` (a ULID, or its
    text as SlateDB's binding reports it)."""
    return join(normalize_db_path(db_path), COMPACTED_DIR, f"{sst_id}.{SST_SUFFIX}")


def parse_sst_key(db_path: str, key: str) -> ULID | None:
    """The SST id if ``key`` is an SST under the database's own ``compacted/`` (full key), else None."""
    stem, dot, suffix = key.rpartition("/")[2].partition(".")
    if not dot or suffix != SST_SUFFIX:
        return None
    try:
        sst_id = ULID.from_str(stem)
    except ValueError:
        return None
    return sst_id if key == sst_key(db_path, sst_id) else None


# --- gc/: boundaries and deletion markers ---------------------------------------------------------


def boundary_key(db_path: str, namespace: str) -> str:
    """``<db>/gc/<namespace>.boundary``: the GC boundary of a sequenced namespace (``manifest``,
    ``compactions``)."""
    return join(normalize_db_path(db_path), GC_DIR, f"{namespace}.{BOUNDARY_SUFFIX}")


def parse_boundary_key(db_path: str, key: str) -> str | None:
    """The namespace if ``key`` is a GC boundary of the database at ``db_path`` (full key), else None."""
    namespace, dot, suffix = key.rpartition("/")[2].rpartition(".")
    if not dot or suffix != BOUNDARY_SUFFIX or not namespace or key != boundary_key(db_path, namespace):
        return None
    return namespace


def deleted_marker_key(db_path: str, tombstone_id: int) -> str:
    """``<db>/gc/deleted.<20-digit id>``: the empty marker a deletion writes beside its tombstone
    manifest ``tombstone_id``, so that one LIST tells a deleted database from a live one."""
    return join(normalize_db_path(db_path), GC_DIR, f"{DELETED_MARKER}.{tombstone_id:0{ID_DIGITS}d}")


def parse_deleted_marker_key(key: str) -> tuple[str, int] | None:
    """``(database path, tombstone id)`` if ``key`` is a deletion marker of some database, else None."""
    found = _owner_of(key, GC_DIR)
    if found is None:
        return None
    db_path, name = found
    stem, dot, digits = name.partition(".")
    if stem != DELETED_MARKER or not dot or len(digits) != ID_DIGITS or not digits.isdigit():
        return None
    return (db_path, int(digits)) if key == deleted_marker_key(db_path, int(digits)) else None


# --- listings ---------------------------------------------------------------------------------------


def own_directory(db_path: str, directory: str) -> str:
    """The listing prefix of one of the database's own directories: ``<db>/<directory>/``."""
    return join(normalize_db_path(db_path), directory) + "/"


def _owner_of(key: str, directory: str) -> tuple[str, str] | None:
    """``(database path, file name)`` if ``key`` is ``<db>/<directory>/<name>`` for a valid database
    path ``<db>`` (``a/wal/manifest/…`` is no database's: docs/design/names.md), else None."""
    head, _, name = key.rpartition("/")
    if head == directory:
        db_path = ""
    elif head.endswith("/" + directory):
        db_path = head[: -len(directory) - 1]
    else:
        return None
    return (db_path, name) if is_valid_db_path(db_path) else None


def discovery_prefix(prefix: str) -> str:
    """The listing prefix that finds the databases under ``prefix``: the database at ``prefix`` and
    every one below it (``"team"`` and ``"team/"`` find ``team`` and ``team/a``, never ``team2``;
    ``""`` the whole store). ``prefix`` is a database path: refused as :func:`normalize_db_path` does."""
    root = normalize_db_path(prefix)
    return f"{root}/" if root else ""


def live_databases(keys: Iterable[str]) -> dict[str, int]:
    """The databases in a listing (from :func:`discovery_prefix`): ``{path: latest manifest id}`` in
    path order.

    A path holds a database when it holds manifests (:func:`parse_manifest_key`, so a manifest
    under a path no database may have is none) and was not deleted: a deletion leaves a tombstone
    manifest ``T`` and the marker ``<path>/gc/deleted.<T>``, so a path whose highest manifest is
    such a tombstone is left out (a database created there later has higher ids).
    """
    highest: dict[str, int] = {}
    deleted: dict[str, int] = {}
    for key in keys:
        if (manifest := parse_manifest_key(key)) is not None:
            path, manifest_id = manifest
            highest[path] = max(highest.get(path, 0), manifest_id)
        elif (marker := parse_deleted_marker_key(key)) is not None:
            path, tombstone_id = marker
            deleted[path] = max(deleted.get(path, 0), tombstone_id)
    return {path: highest[path] for path in sorted(highest) if highest[path] > deleted.get(path, 0)}
