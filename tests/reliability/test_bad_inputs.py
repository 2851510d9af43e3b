"""The bad-input catalogue (issue 8): everything a user or the environment can get wrong.

One table of cases. Each builds a store state (``setup``), does one thing to it (``action``: a
Python call, or a ``slate-ops`` command line), and expects a typed error (a :class:`SlateOpsError`
subclass, never a bare ``KeyError``/``ValueError``/``struct.error``/botocore error) or a CLI exit
code (2: usage, 1: operation error with one ``slate-ops: error:`` line on stderr), with a message
that contains given substrings -- the object's key or path, and the fix -- and a store that is left
as it was, by one of three standards (``writes``):

``none``
    Every object's key and etag are the same before and after (``snapshot``).
``net``
    The operation had to write before it could fail (opening a writer or a compactor fences the
    previous one; a reader pins its state with a checkpoint before reading it): objects that
    existed are unchanged, the only new ones are manifest / ``.compactions`` versions and empty WAL
    fence objects, and the latest manifest has the same checkpoints and the same data (L0, sorted
    runs, SSTs) as before -- nothing was left behind.
``unconfirmed``
    A damaged GC boundary file: the version was written before the boundary could be read (spec
    002 checks the boundary after the create), so the error names that version as unconfirmed.

Groups: damaged stored objects (manifests, SSTs, WAL SSTs, ``.compactions``, boundary files, read
through ``Db``, ``DbReader``, the compactor, GC, the admin API and the CLI), keys and values,
ranges, checkpoints, split and merge, every CLI command with missing or malformed arguments
(generated from the argparse parser), commands on a missing database, and S3 credentials. GC
boundary files have no format version (an ASCII u64): any other content is corrupt. Spark's
``read_db`` is left out (it reads through the same ``DbReader`` code).

``python -m tests.reliability.test_bad_inputs`` prints the catalogue's size per group.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import struct
import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

import pytest

from slate_ops import Db, DbReader, admin
from slate_ops.cli import build_parser, main
from slate_ops.clock import ManualClock
from slate_ops.compaction import Compactor
from slate_ops.config import CheckpointOptions
from slate_ops.engine import DbOptions, ReaderOptions, WriteBatch
from slate_ops.errors import (
    CheckpointExpiredError,
    CheckpointNotFoundError,
    CloneMismatchError,
    CorruptObjectError,
    DbAlreadyExistsError,
    DbNotFoundError,
    GcFailedError,
    InvalidArgumentError,
    InvalidDeletionError,
    InvalidStoreUrlError,
    NonAdjacentSourcesError,
    ObjectNotFoundError,
    ObjectStoreCredentialsError,
    ObjectStoreError,
    OutOfRangeError,
    OverlappingSourcesError,
    SlateOpsError,
    UnsupportedFormatVersionError,
    WalNotFlushedError,
)
from slate_ops.gc import GarbageCollector, GcOptions
from slate_ops.manifest.model import Manifest
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import S3Store, open_store
from slate_ops.objstore.base import ObjectStore
from slate_ops.sst.format import TRAILER_LEN
from tests.conftest import CREDENTIALS, snapshot

Writes = Literal["none", "net", "unconfirmed"]

QUIET = DbOptions(wal_flush_interval=timedelta(hours=1), manifest_poll_interval=timedelta(hours=1))
QUIET_READER = ReaderOptions(
    manifest_poll_interval=timedelta(hours=1), checkpoint_lifetime=timedelta(hours=3)
)
RESTORE = "restore it from a backup"  # CorruptObjectError's fix
UPGRADE = "Upgrade slate_ops"  # UnsupportedFormatVersionError's fix
NO_DB = "no database at"


# --- the table --------------------------------------------------------------------------------------


@dataclass
class Env:
    """One case's world: the store, values the case's templates refer to, things to close."""

    store: ObjectStore
    request: pytest.FixtureRequest
    monkeypatch: pytest.MonkeyPatch
    vars: dict[str, str] = field(default_factory=dict)
    objects: dict[str, Any] = field(default_factory=dict)
    cleanup: list[Callable[[], None]] = field(default_factory=list)
    listing: ObjectStore | None = None  # what snapshots list (S3 cases: a client with good credentials)

    @property
    def url(self) -> str:
        return self.vars.get("url", self.store.url)

    def format(self, template: str) -> str:
        return template.format(**self.vars)


@dataclass(frozen=True)
class Cli:
    """A ``slate-ops`` command line; ``--store`` is prepended. Items are ``Env.vars`` templates."""

    argv: tuple[str, ...]

    def resolve(self, env: Env) -> list[str]:
        return ["--store", env.url, *(env.format(a) for a in self.argv)]


def cli(*argv: str) -> Cli:
    return Cli(argv)


Action = Callable[[Env], object] | Cli
Setup = Callable[[Env], None]


@dataclass(frozen=True)
class Case:
    group: str
    name: str
    setup: Setup
    action: Action
    expect: type[SlateOpsError] | int | None  # an error type, a CLI exit code, or None: succeeds
    contains: tuple[str, ...] = ()  # Env.vars templates the message must contain
    writes: Writes = "none"
    db: str = "db"  # the database whose latest manifest "net" compares
    marks: tuple[pytest.MarkDecorator, ...] = ()


CASES: list[Case] = []


def case(
    group: str,
    name: str,
    setup: Setup,
    action: Action,
    expect: type[SlateOpsError] | int | None,
    *contains: str,
    writes: Writes = "none",
    db: str = "db",
    marks: tuple[pytest.MarkDecorator, ...] = (),
) -> None:
    CASES.append(Case(group, name, setup, action, expect, contains, writes, db, marks))


# --- store states -----------------------------------------------------------------------------------


def nothing(env: Env) -> None:
    del env


def build(env: Env, path: str = "db", *, rounds: int = 2, wal_tail: bool = False) -> None:
    """``rounds`` L0 SSTs holding ``k00``..``k09``; ``wal_tail``: then ``w1`` durable only in the WAL."""
    with Db.open(path, env.store, QUIET) as db:
        for round_ in range(rounds):
            for i in range(10):
                db.put(b"k%02d" % i, b"v%d" % round_)
            db.flush()
            db.flush_memtable()
        if wal_tail:
            db.put(b"w1", b"wal only")
            db.flush()


def latest_manifest(env: Env, path: str = "db") -> Manifest:
    return ManifestStore(env.store, path).read_latest_required().value


def manifest_key(env: Env, path: str = "db") -> str:
    current = ManifestStore(env.store, path).read_latest_required()
    return ManifestStore(env.store, path).sequence.key(current.id)


def newest_l0_key(env: Env) -> str:
    view = latest_manifest(env).l0[0]
    return f"db/compacted/{view.sst_id}.sst"


def sorted_run_key(env: Env) -> str:
    view = latest_manifest(env).compacted[0].views[0]
    return f"db/compacted/{view.sst_id}.sst"


def wal_data_key(env: Env) -> str:
    return [m.key for m in env.store.list("db/wal/") if m.size > 0][-1]


def compactions_key(env: Env) -> str:
    return [m.key for m in env.store.list("db/compactions/")][-1]


Damage = Callable[[bytes], bytes]


def truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


def flip(data: bytes) -> bytes:
    out = bytearray(data)
    out[len(out) // 2] ^= 0xFF
    return bytes(out)


def manifest_v7(data: bytes) -> bytes:
    """An intact manifest file of format version 7 (the framing never changes: u16 version, CRC)."""
    body = struct.pack("<H", 7) + data[2:-4]
    return body + struct.pack("<I", zlib.crc32(body))


def sst_v2(data: bytes) -> bytes:
    """An intact SST of format version 2: the trailer's version and the footer checksum rewritten."""
    footer_len = struct.unpack_from("<I", data, len(data) - TRAILER_LEN)[0]
    start = len(data) - TRAILER_LEN - footer_len
    out = bytearray(data)
    struct.pack_into("<H", out, len(data) - TRAILER_LEN + 4, 2)
    struct.pack_into("<I", out, len(data) - 12, zlib.crc32(bytes(out[start : len(data) - 12])))
    return bytes(out)


def damaged(
    locate: Callable[[Env], str], damage: Damage, *, before: Setup | None = None, **build_args: Any
) -> Setup:
    """Build the database (``before`` instead, if given), then damage the object ``locate`` finds;
    its key is ``{damaged}``."""

    def setup(env: Env) -> None:
        (before or (lambda e: build(e, **build_args)))(env)
        key = locate(env)
        env.store.put(key, damage(env.store.get(key).data))
        env.vars["damaged"] = key

    return setup


def compacted_once(env: Env) -> None:
    build(env, rounds=4)
    report = Compactor("db", env.store).run_once(full=True)
    assert report is not None


def with_compactions(content: bytes) -> Setup:
    def setup(env: Env) -> None:
        compacted_once(env)
        key = compactions_key(env)
        env.store.put(key, content)
        env.vars["damaged"] = key

    return setup


def with_boundary(namespace: str, content: bytes) -> Setup:
    def setup(env: Env) -> None:
        build(env)
        key = env.vars["boundary"] = f"db/gc/{namespace}.boundary"
        env.store.put(key, content)
        time.sleep(0.01)  # older than the 1 ms minimum age of the GC cases

    return setup


def with_checkpoints(env: Env) -> None:
    """A database, plus ``{unknown}`` (an id no checkpoint has) and ``{expired}`` (one that expired)."""
    build(env)
    env.vars["unknown"] = str(uuid.uuid4())
    an_hour_ago = ManualClock(time.time() - 3600)
    expired = admin.create_checkpoint("db", env.store, CheckpointOptions(lifetime="10s"), clock=an_hour_ago)
    env.vars["expired"] = str(expired.id)


def with_open_db(env: Env) -> None:
    build(env)
    db = Db.open("db", env.store, QUIET)
    env.objects["db"] = db
    env.cleanup.append(db.close)


def with_open_reader(env: Env) -> None:
    build(env)
    reader = DbReader.open("db", env.store, options=QUIET_READER)
    env.objects["reader"] = reader
    env.cleanup.append(reader.close)


def with_shards(env: Env) -> None:
    """``db`` split at ``k05`` into ``s0`` [-inf, k05) and ``s1`` [k05, +inf); ``s1`` split at k08."""
    build(env)
    admin.split("db", env.store, [b"k05"], ["s0", "s1"])
    admin.split("s1", env.store, [b"k08"], ["s10", "s11"])


def with_two_overlapping(env: Env) -> None:
    build(env)
    build(env, "other", rounds=1)


def unflushed(env: Env) -> None:
    build(env, wal_tail=True)
    env.vars["wal"] = wal_data_key(env)


def nested_db(env: Env) -> None:
    build(env)
    env.vars["location"] = f"{env.store.url}/db"


def db(env: Env) -> Db:
    result: Db = env.objects["db"]
    return result


def reader(env: Env) -> DbReader:
    result: DbReader = env.objects["reader"]
    return result


def read_all(path: str = "db", checkpoint: str | None = None) -> Callable[[Env], object]:
    """A reader's full scan (closed afterwards, which removes its own checkpoint)."""

    def action(env: Env) -> object:
        checkpoint_id = None if checkpoint is None else uuid.UUID(env.format(checkpoint))
        with DbReader.open(path, env.store, checkpoint_id, QUIET_READER) as r:
            return list(r.scan())

    return action


def open_writer(env: Env) -> object:
    Db.open("db", env.store, QUIET).close()
    return None


def compact_full(env: Env) -> object:
    compactor = Compactor("db", env.store)
    try:
        return compactor.run_once(full=True)
    finally:
        compactor.close()


def run_gc(*, dry_run: bool = False, only: str | None = None) -> Callable[[Env], object]:
    """One GC run; ``only``: just that resource, with a 1 ms minimum age, so it has work to do (other
    resources would delete their own garbage, which is not what the case is about)."""

    def action(env: Env) -> object:
        options = (
            None
            if only is None
            else GcOptions.with_min_age(
                timedelta(milliseconds=1), allow_unsafe_min_age=True, resources=frozenset({only})
            )
        )
        return GarbageCollector("db", env.store, options).run_once(dry_run=dry_run)

    return action


# --- 1. damaged stored objects ------------------------------------------------------------------------

DAMAGES: list[tuple[str, Damage, Damage, type[SlateOpsError], str]] = [
    # name, damage for a manifest, damage for an SST, expected error, the fix in its message
    ("truncated", truncate, truncate, CorruptObjectError, RESTORE),
    ("byte-flipped", flip, flip, CorruptObjectError, RESTORE),
    ("unknown version", manifest_v7, sst_v2, UnsupportedFormatVersionError, UPGRADE),
]

for label, manifest_damage, sst_damage, error, fix in DAMAGES:
    group = "damaged manifest"
    broken = damaged(manifest_key, manifest_damage)
    case(group, f"{label} latest manifest: Db.open", broken, open_writer, error, "{damaged}", fix)
    case(group, f"{label} latest manifest: DbReader", broken, read_all(), error, "{damaged}", fix)
    case(group, f"{label} latest manifest: Compactor", broken, compact_full, error, "{damaged}", fix)
    case(group, f"{label} latest manifest: GC", broken, run_gc(), GcFailedError, "{damaged}", fix)
    case(
        group,
        f"{label} latest manifest: GC dry run",
        broken,
        run_gc(dry_run=True),
        GcFailedError,
        "{damaged}",
    )
    case(
        group,
        f"{label} latest manifest: describe_db",
        broken,
        lambda env: admin.describe_db("db", env.store),
        error,
        "{damaged}",
        fix,
    )
    case(
        group,
        f"{label} latest manifest: CLI describe",
        broken,
        cli("--path", "db", "describe"),
        1,
        "{damaged}",
        fix,
    )
    case(
        group,
        f"{label} latest manifest: CLI get",
        broken,
        cli("--path", "db", "get", "k01"),
        1,
        "{damaged}",
        fix,
    )
    case(
        group,
        f"{label} latest manifest: CLI gc",
        broken,
        cli("--path", "db", "gc", "--dry-run"),
        1,
        "{damaged}",
    )

    group = "damaged L0 SST"
    broken = damaged(newest_l0_key, sst_damage)
    case(group, f"{label} L0 SST: DbReader scan", broken, read_all(), error, "{damaged}", fix, writes="net")
    case(group, f"{label} L0 SST: Compactor", broken, compact_full, error, "{damaged}", fix, writes="net")
    case(
        group,
        f"{label} L0 SST: CLI scan",
        broken,
        cli("--path", "db", "scan"),
        1,
        "{damaged}",
        fix,
        writes="net",
    )
    case(
        group,
        f"{label} L0 SST: CLI get",
        broken,
        cli("--path", "db", "get", "k01"),
        1,
        "{damaged}",
        writes="net",
    )
    case(
        group,
        f"{label} L0 SST: suggest_split_keys",
        broken,
        lambda env: admin.suggest_split_keys("db", env.store, 2),
        error,
        "{damaged}",
        fix,
    )

    group = "damaged WAL SST"
    broken = damaged(wal_data_key, sst_damage, wal_tail=True)
    case(group, f"{label} WAL SST: Db.open", broken, open_writer, error, "{damaged}", fix, writes="net")
    case(group, f"{label} WAL SST: DbReader", broken, read_all(), error, "{damaged}", fix, writes="net")
    case(
        group,
        f"{label} WAL SST: CLI get",
        broken,
        cli("--path", "db", "get", "w1"),
        1,
        "{damaged}",
        writes="net",
    )
    case(
        group,
        f"{label} WAL SST: CLI flush",
        broken,
        cli("--path", "db", "flush"),
        1,
        "{damaged}",
        writes="net",
    )
    case(
        group,
        f"{label} WAL SST: split",
        broken,
        lambda env: admin.split("db", env.store, [b"k05"], ["a", "b"]),
        error,
        "{damaged}",
        fix,
    )

group = "damaged manifest"
case(
    group,
    "empty latest manifest: Db.open",
    damaged(manifest_key, lambda d: b""),
    open_writer,
    CorruptObjectError,
    "{damaged}",
    "truncated",
    RESTORE,
)


def _pinned_manifest_damaged(env: Env) -> None:
    """A checkpoint ``{checkpoint}`` whose (older) manifest ``{damaged}`` is byte-flipped."""
    build(env)
    checkpoint = admin.create_checkpoint("db", env.store, CheckpointOptions(lifetime="1h"))
    build(env, rounds=1)  # the checkpoint's manifest is no longer the latest
    key = ManifestStore(env.store, "db").sequence.key(checkpoint.manifest_id)
    env.store.put(key, flip(env.store.get(key).data))
    env.vars |= {"damaged": key, "checkpoint": str(checkpoint.id)}


case(
    group,
    "checkpoint's manifest byte-flipped: DbReader at it",
    _pinned_manifest_damaged,
    read_all(checkpoint="{checkpoint}"),
    CorruptObjectError,
    "{damaged}",
    RESTORE,
)
case(
    group,
    "checkpoint's manifest byte-flipped: CLI scan --checkpoint",
    _pinned_manifest_damaged,
    cli("--path", "db", "scan", "--checkpoint", "{checkpoint}"),
    1,
    "{damaged}",
    RESTORE,
)
case(
    group,
    "checkpoint's manifest byte-flipped: clone from it",
    _pinned_manifest_damaged,
    lambda env: admin.create_clone("c", "db", env.store, uuid.UUID(env.vars["checkpoint"])),
    CorruptObjectError,
    "{damaged}",
    RESTORE,
)
case(
    group,
    "checkpoint's manifest byte-flipped: GC",
    _pinned_manifest_damaged,
    run_gc(),
    GcFailedError,
    "{damaged}",
    RESTORE,
)

group = "damaged sorted-run SST"
for label, _, sst_damage, error, fix in DAMAGES:
    broken = damaged(sorted_run_key, sst_damage, before=compacted_once)
    case(
        group,
        f"{label} sorted-run SST: DbReader scan",
        broken,
        read_all(),
        error,
        "{damaged}",
        fix,
        writes="net",
    )
    case(
        group,
        f"{label} sorted-run SST: CLI scan",
        broken,
        cli("--path", "db", "scan"),
        1,
        "{damaged}",
        fix,
        writes="net",
    )

group = "damaged L0 SST"
broken_l0 = damaged(newest_l0_key, flip)


def _damaged_under_open_db(env: Env) -> None:
    with_open_db(env)
    key = newest_l0_key(env)
    env.store.put(key, flip(env.store.get(key).data))
    env.vars["damaged"] = key


case(
    group,
    "byte-flipped L0 SST: Db.get",
    _damaged_under_open_db,
    lambda env: db(env).get(b"k01"),
    CorruptObjectError,
    "{damaged}",
    RESTORE,
)
case(
    group,
    "byte-flipped L0 SST: Db.scan",
    _damaged_under_open_db,
    lambda env: list(db(env).scan()),
    CorruptObjectError,
    "{damaged}",
    RESTORE,
)
# Neither reads SST contents: a damaged SST is not their business (they succeed and change nothing).
case(
    group,
    "byte-flipped L0 SST: describe_db reads only the manifest",
    broken_l0,
    lambda env: admin.describe_db("db", env.store),
    None,
)
case(group, "byte-flipped L0 SST: GC dry run never reads SSTs", broken_l0, run_gc(dry_run=True), None)

group = "damaged .compactions"
COMPACTIONS_GARBAGE: list[tuple[str, bytes, type[SlateOpsError], str]] = [
    ("binary garbage", b"\x00\xffnot json", CorruptObjectError, RESTORE),
    ("empty", b"", CorruptObjectError, RESTORE),
    ("truncated JSON", b'{"version": 1, "compactor_epoch": 1, "compa', CorruptObjectError, RESTORE),
    ("a JSON list", b"[1, 2]", CorruptObjectError, RESTORE),
    ("missing field", json.dumps({"version": 1, "compactor_epoch": 1}).encode(), CorruptObjectError, RESTORE),
    (
        "malformed record",
        json.dumps({"version": 1, "compactor_epoch": 1, "compactions": [{"id": 1}]}).encode(),
        CorruptObjectError,
        RESTORE,
    ),
    (
        "non-numeric epoch",
        json.dumps({"version": 1, "compactor_epoch": "x", "compactions": []}).encode(),
        CorruptObjectError,
        RESTORE,
    ),
    (
        "version 2",
        json.dumps({"version": 2, "compactor_epoch": 1, "compactions": []}).encode(),
        UnsupportedFormatVersionError,
        UPGRADE,
    ),
    ("version 'one'", json.dumps({"version": "one"}).encode(), CorruptObjectError, RESTORE),
]
for label, content, error, fix in COMPACTIONS_GARBAGE:
    setup = with_compactions(content)
    case(group, f".compactions {label}: Compactor", setup, compact_full, error, "{damaged}", fix)
    case(group, f".compactions {label}: GC", setup, run_gc(), GcFailedError, "{damaged}", fix)
for label, content, _, fix in COMPACTIONS_GARBAGE[:2]:
    setup = with_compactions(content)
    case(
        group,
        f".compactions {label}: CLI compact",
        setup,
        cli("--path", "db", "compact"),
        1,
        "{damaged}",
        fix,
    )
    case(group, f".compactions {label}: CLI gc", setup, cli("--path", "db", "gc"), 1, "{damaged}", fix)

group = "damaged boundary file"
BOUNDARY_FIX = "with the id of the newest"
UNCONFIRMED = "not confirmed"
for label, content in [("garbage", b"abc"), ("empty", b""), ("negative", b"-1"), ("above u64", b"9" * 25)]:
    manifest_boundary = with_boundary("manifest", content)
    case(
        group,
        f"manifest.boundary {label}: create_checkpoint",
        manifest_boundary,
        lambda env: admin.create_checkpoint("db", env.store),
        CorruptObjectError,
        "{boundary}",
        BOUNDARY_FIX,
        UNCONFIRMED,
        writes="unconfirmed",
    )
    case(
        group,
        f"manifest.boundary {label}: GC that would delete manifests",
        manifest_boundary,
        run_gc(only="manifest"),
        GcFailedError,
        "{boundary}",
        BOUNDARY_FIX,
    )
case(
    group,
    "manifest.boundary garbage: Db.open",
    with_boundary("manifest", b"abc"),
    open_writer,
    CorruptObjectError,
    "{boundary}",
    BOUNDARY_FIX,
    UNCONFIRMED,
    writes="unconfirmed",
)
case(
    group,
    "manifest.boundary garbage: CLI create-checkpoint",
    with_boundary("manifest", b"abc"),
    cli("--path", "db", "create-checkpoint"),
    1,
    "{boundary}",
    BOUNDARY_FIX,
    UNCONFIRMED,
    writes="unconfirmed",
)
case(
    group,
    "compactions.boundary garbage: Compactor",
    with_boundary("compactions", b"x1"),
    compact_full,
    CorruptObjectError,
    "{boundary}",
    BOUNDARY_FIX,
    UNCONFIRMED,
    writes="unconfirmed",
)


def _compacted_then_boundary(env: Env) -> None:
    compacted_once(env)
    Compactor("db", env.store).close()  # a second .compactions version for GC to delete
    key = env.vars["boundary"] = "db/gc/compactions.boundary"
    env.store.put(key, b"x1")
    time.sleep(0.01)


case(
    group,
    "compactions.boundary garbage: GC that would delete .compactions",
    _compacted_then_boundary,
    run_gc(only="compactions"),
    GcFailedError,
    "{boundary}",
    BOUNDARY_FIX,
)

# --- 2. keys and values -------------------------------------------------------------------------------

group = "keys and values"
BYTES_FIX = "encode text"
EMPTY_FIX = "at least one byte"
for name, call, fix in [
    ("Db.put str key", lambda env: db(env).put("k", b"v"), BYTES_FIX),  # type: ignore[arg-type]
    ("Db.put int key", lambda env: db(env).put(7, b"v"), BYTES_FIX),  # type: ignore[arg-type]
    ("Db.put empty key", lambda env: db(env).put(b"", b"v"), EMPTY_FIX),
    ("Db.put None value", lambda env: db(env).put(b"k", None), "delete()"),  # type: ignore[arg-type]
    ("Db.put str value", lambda env: db(env).put(b"k", "v"), BYTES_FIX),  # type: ignore[arg-type]
    ("Db.delete str key", lambda env: db(env).delete("k"), BYTES_FIX),  # type: ignore[arg-type]
    ("Db.delete empty key", lambda env: db(env).delete(b""), EMPTY_FIX),
    ("Db.get str key", lambda env: db(env).get("k"), BYTES_FIX),  # type: ignore[arg-type]
    ("Db.get None key", lambda env: db(env).get(None), BYTES_FIX),  # type: ignore[arg-type]
    ("Db.get empty key", lambda env: db(env).get(b""), EMPTY_FIX),
    ("Db.scan str bound", lambda env: list(db(env).scan("a")), BYTES_FIX),  # type: ignore[arg-type]
    ("Db.scan empty bound", lambda env: list(db(env).scan(b"", b"k05")), EMPTY_FIX),
    ("Db.scan_prefix empty prefix", lambda env: list(db(env).scan_prefix(b"")), EMPTY_FIX),
    ("Db.scan_prefix str prefix", lambda env: list(db(env).scan_prefix("k")), BYTES_FIX),  # type: ignore[arg-type]
    ("Db.write a list", lambda env: db(env).write([(b"k", b"v")]), "WriteBatch()"),  # type: ignore[arg-type]
    ("Db.write None", lambda env: db(env).write(None), "WriteBatch()"),  # type: ignore[arg-type]
    ("WriteBatch.put str key", lambda env: WriteBatch().put("k", b"v"), BYTES_FIX),  # type: ignore[arg-type]
    ("WriteBatch.put empty key", lambda env: WriteBatch().put(b"", b"v"), EMPTY_FIX),
    ("WriteBatch.put int value", lambda env: WriteBatch().put(b"k", 5), BYTES_FIX),  # type: ignore[arg-type]
    ("WriteBatch.delete int key", lambda env: WriteBatch().delete(3), BYTES_FIX),  # type: ignore[arg-type]
]:
    case(group, name, with_open_db, call, InvalidArgumentError, fix)
for name, call, fix in [
    ("DbReader.get str key", lambda env: reader(env).get("k"), BYTES_FIX),  # type: ignore[arg-type]
    ("DbReader.get empty key", lambda env: reader(env).get(b""), EMPTY_FIX),
    ("DbReader.scan float bound", lambda env: list(reader(env).scan(1.5)), BYTES_FIX),  # type: ignore[arg-type]
    ("DbReader.scan_prefix empty", lambda env: list(reader(env).scan_prefix(b"")), EMPTY_FIX),
]:
    case(group, name, with_open_reader, call, InvalidArgumentError, fix)
HEX_FIX = "even number of hex digits"
for name, argv, fix in [
    ("CLI put key odd hex", ("put", "hex:0", "v"), HEX_FIX),
    ("CLI put key non-hex", ("put", "hex:zz", "v"), HEX_FIX),
    ("CLI put value bad hex", ("put", "k", "hex:0g"), HEX_FIX),
    ("CLI get bad hex", ("get", "hex:abc"), HEX_FIX),
    ("CLI delete bad hex", ("delete", "hex:xyz1"), HEX_FIX),
    ("CLI scan --from bad hex", ("scan", "--from", "hex:1"), HEX_FIX),
    ("CLI scan --prefix hex with space", ("scan", "--prefix", "hex:00 ff"), HEX_FIX),
    ("CLI split --at bad hex", ("split", "--at", "hex:q", "--into", "a", "--into", "b"), HEX_FIX),
    ("CLI put empty key", ("put", "", "v"), "empty key"),
    ("CLI put hex: key (empty)", ("put", "hex:", "v"), "empty key"),
    ("CLI get empty key", ("get", ""), "empty key"),
    ("CLI delete hex: key (empty)", ("delete", "hex:"), "empty key"),
    ("CLI scan --from empty", ("scan", "--from", ""), "empty key"),
    ("CLI scan --prefix empty", ("scan", "--prefix", "hex:"), "empty key"),
    ("CLI split --at empty", ("split", "--at", "", "--into", "a", "--into", "b"), "empty key"),
]:
    case(group, name, build, cli("--path", "db", *argv), 2, fix)


def _shard_db(env: Env) -> None:
    with_shards(env)
    shard = Db.open("s0", env.store, QUIET)
    env.objects["db"] = shard
    env.cleanup.append(shard.close)
    env.vars["location"] = f"{env.store.url}/s0"


case(
    group,
    "Db.put outside the shard's range",
    _shard_db,
    lambda env: db(env).put(b"k09", b"x"),
    OutOfRangeError,
    "{location}",
    "shard whose range holds it",
)
case(
    group,
    "Db.get outside the shard's range",
    _shard_db,
    lambda env: db(env).get(b"k09"),
    OutOfRangeError,
    "{location}",
    "shard whose range holds it",
)
case(
    group,
    "WriteBatch partly outside the shard's range",
    _shard_db,
    lambda env: db(env).write(WriteBatch().put(b"k01", b"x").put(b"k07", b"y")),
    OutOfRangeError,
    "{location}",
    "nothing was written",
)

# --- 3. ranges ----------------------------------------------------------------------------------------

group = "ranges"
SWAP = "swap them"
case(
    group,
    "Db.scan start > end",
    with_open_db,
    lambda env: list(db(env).scan(b"k07", b"k02")),
    InvalidArgumentError,
    "b'k07'",
    SWAP,
)
case(
    group,
    "DbReader.scan start > end",
    with_open_reader,
    lambda env: list(reader(env).scan(b"z", b"a")),
    InvalidArgumentError,
    "b'z'",
    SWAP,
)
case(
    group,
    "CLI scan --from after --to",
    build,
    cli("--path", "db", "scan", "--from", "k07", "--to", "k02"),
    2,
    "k07",
    SWAP,
)
case(
    group,
    "CLI scan --prefix with --from",
    build,
    cli("--path", "db", "scan", "--prefix", "k", "--from", "k1"),
    2,
    "cannot be combined",
)
# Defined behaviour, not errors: [k, k) is empty; a scan entirely outside a shard is refused.
case(
    group, "Db.scan start == end is empty", with_open_db, lambda env: list(db(env).scan(b"k03", b"k03")), None
)
case(
    group,
    "scan entirely outside the shard",
    _shard_db,
    lambda env: list(db(env).scan(b"k06", b"k09")),
    OutOfRangeError,
    "{location}",
    "scan the shard",
)

# --- 4. split and merge -------------------------------------------------------------------------------

group = "split and merge"
ORDER_FIX = "Sort the keys"


def split(keys: list[bytes], into: list[str], source: str = "db") -> Callable[[Env], object]:
    return lambda env: admin.split(source, env.store, keys, into)


case(
    group,
    "split keys out of order",
    nested_db,
    split([b"k05", b"k02"], ["a", "b", "c"]),
    InvalidArgumentError,
    "b'k05' >= b'k02'",
    "{location}",
    ORDER_FIX,
)
case(
    group,
    "split keys duplicated",
    nested_db,
    split([b"k05", b"k05"], ["a", "b", "c"]),
    InvalidArgumentError,
    "{location}",
    ORDER_FIX,
)
case(
    group,
    "split key beyond the shard's range",
    with_shards,
    split([b"k07"], ["a", "b"], "s0"),
    InvalidArgumentError,
    "b'k07'",
    "s0",
    "non-empty range",
)
case(
    group,
    "split key at the shard's start",
    with_shards,
    split([b"k05"], ["a", "b"], "s1"),
    InvalidArgumentError,
    "b'k05'",
    "s1",
    "non-empty range",
)
case(group, "split without keys", build, split([], ["a"]), InvalidArgumentError, "at least one split key")
case(
    group,
    "split with too many paths",
    build,
    split([b"k05"], ["a", "b", "c"]),
    InvalidArgumentError,
    "pass one more path than keys",
)
case(
    group,
    "split into the source's path",
    build,
    split([b"k05"], ["db", "b"]),
    InvalidArgumentError,
    "'db' is the source",
)
case(
    group,
    "split into nested paths",
    build,
    split([b"k05"], ["a", "a/b"]),
    InvalidArgumentError,
    "'a/b' is inside 'a'",
)
case(group, "split key of the wrong type", build, split(["k05"], ["a", "b"]), InvalidArgumentError, BYTES_FIX)  # type: ignore[list-item]


def _target_taken(env: Env) -> None:
    build(env)
    build(env, "a", rounds=1)


case(
    group,
    "split onto an existing database",
    _target_taken,
    split([b"k05"], ["a", "b"]),
    CloneMismatchError,
    "'a'",
    "destroy it or choose another target path",
)
case(
    group,
    "split with writes only in the WAL",
    unflushed,
    split([b"k05"], ["a", "b"]),
    WalNotFlushedError,
    "{wal}",
    "flush",
)
case(
    group,
    "CLI split with writes only in the WAL",
    unflushed,
    cli("--path", "db", "split", "--at", "k05", "--into", "a", "--into", "b"),
    1,
    "{wal}",
    "flush",
)
case(
    group,
    "CLI split keys out of order",
    build,
    cli("--path", "db", "split", "--at", "k05", "--at", "k01", "--into", "a", "--into", "b", "--into", "c"),
    1,
    ORDER_FIX,
)


def merge(sources: list[str], target: str = "m") -> Callable[[Env], object]:
    return lambda env: admin.merge(sources, env.store, target)


case(
    group,
    "merge overlapping sources",
    with_two_overlapping,
    merge(["db", "other"]),
    OverlappingSourcesError,
    "'db'",
    "'other'",
    "disjoint key ranges",
)
case(
    group,
    "CLI merge overlapping sources",
    with_two_overlapping,
    cli("--path", "m", "merge", "--source", "db", "--source", "other"),
    1,
    "'db'",
    "'other'",
    "disjoint",
)
case(
    group,
    "merge shards that are not neighbours",
    with_shards,
    merge(["s0", "s11"]),
    NonAdjacentSourcesError,
    "'s0'",
    "'s11'",
    "neighbouring shards",
)


def _unflushed_shard(env: Env) -> None:
    with_shards(env)
    with Db.open("s0", env.store, QUIET) as shard:
        shard.put(b"k01", b"wal only")
        shard.flush()
    env.vars["wal"] = [m.key for m in env.store.list("s0/wal/") if m.size > 0][-1]


case(
    group,
    "merge a source with writes only in the WAL",
    _unflushed_shard,
    merge(["s0", "s1"]),
    WalNotFlushedError,
    "{wal}",
    "flush",
)
case(group, "merge a missing source", build, merge(["db", "nope"]), DbNotFoundError, "nope", "create-db")
case(
    group,
    "merge missing sources onto an existing database",
    build,
    merge(["nope1", "nope2"], "db"),
    DbNotFoundError,
    "nope1",
    "create-db",
)
case(
    group,
    "CLI merge missing sources onto an existing database",
    build,
    cli("--path", "db", "merge", "--source", "nope1", "--source", "nope2"),
    1,
    "nope1",
    "create-db",
)
case(
    group,
    "merge into a source's path",
    with_shards,
    merge(["s0", "s1"], "s0"),
    InvalidArgumentError,
    "'s0' is a source",
)
case(group, "merge the same source twice", with_shards, merge(["s0", "s0"]), InvalidArgumentError, "distinct")

# --- 5. checkpoints -----------------------------------------------------------------------------------

group = "checkpoints"
UNKNOWN_FIX = "list-checkpoints"
EXPIRED_FIX = "create a new one"
for which, error, fix in [
    ("unknown", CheckpointNotFoundError, UNKNOWN_FIX),
    ("expired", CheckpointExpiredError, EXPIRED_FIX),
]:
    ref = "{" + which + "}"

    def the_id(env: Env, ref: str = ref) -> uuid.UUID:
        return uuid.UUID(env.format(ref))

    case(
        group,
        f"DbReader at an {which} checkpoint",
        with_checkpoints,
        read_all(checkpoint=ref),
        error,
        ref,
        fix,
    )
    case(
        group,
        f"create_checkpoint from an {which} source",
        with_checkpoints,
        lambda env, f=the_id: admin.create_checkpoint("db", env.store, CheckpointOptions(source=f(env))),
        error,
        ref,
        fix,
    )
    case(
        group,
        f"clone from an {which} checkpoint",
        with_checkpoints,
        lambda env, f=the_id: admin.create_clone("c", "db", env.store, f(env)),
        error,
        ref,
        fix,
    )
    case(
        group,
        f"tag an {which} checkpoint",
        with_checkpoints,
        lambda env, f=the_id: admin.create_tag("db", env.store, "t1", checkpoint=f(env)),
        error,
        ref,
        fix,
    )
    case(
        group,
        f"suggest_split_keys at an {which} checkpoint",
        with_checkpoints,
        lambda env, f=the_id: admin.suggest_split_keys("db", env.store, 2, checkpoint=f(env)),
        error,
        ref,
        fix,
    )
    case(
        group,
        f"CLI scan --checkpoint {which}",
        with_checkpoints,
        cli("--path", "db", "scan", "--checkpoint", ref),
        1,
        ref,
        fix,
    )
    case(
        group,
        f"CLI create-checkpoint -s {which}",
        with_checkpoints,
        cli("--path", "db", "create-checkpoint", "-s", ref),
        1,
        ref,
        fix,
    )
    case(
        group,
        f"CLI clone --checkpoint {which}",
        with_checkpoints,
        cli("--path", "c", "clone", "--parent", "db", "--checkpoint", ref),
        1,
        ref,
        fix,
    )
    case(
        group,
        f"CLI create-tag -s {which}",
        with_checkpoints,
        cli("--path", "db", "create-tag", "-n", "t1", "-s", ref),
        1,
        ref,
        fix,
    )
case(
    group,
    "refresh an unknown checkpoint",
    with_checkpoints,
    lambda env: admin.refresh_checkpoint("db", env.store, uuid.UUID(env.vars["unknown"]), None),
    CheckpointNotFoundError,
    "{unknown}",
    UNKNOWN_FIX,
)
case(
    group,
    "delete an unknown checkpoint",
    with_checkpoints,
    lambda env: admin.delete_checkpoint("db", env.store, uuid.UUID(env.vars["unknown"])),
    CheckpointNotFoundError,
    "{unknown}",
    UNKNOWN_FIX,
)
case(
    group,
    "CLI refresh-checkpoint unknown",
    with_checkpoints,
    cli("--path", "db", "refresh-checkpoint", "-i", "{unknown}"),
    1,
    "{unknown}",
    UNKNOWN_FIX,
)
case(
    group,
    "CLI delete-checkpoint unknown",
    with_checkpoints,
    cli("--path", "db", "delete-checkpoint", "-i", "{unknown}"),
    1,
    "{unknown}",
    UNKNOWN_FIX,
)
case(
    group,
    "DbReader with a checkpoint id given as text",
    with_checkpoints,
    lambda env: DbReader.open("db", env.store, env.vars["unknown"], QUIET_READER),  # type: ignore[arg-type]
    InvalidArgumentError,
    "{unknown}",
    "uuid.UUID(text)",
)

# --- 6. other operator mistakes -------------------------------------------------------------------------

group = "operator mistakes"
case(
    group,
    "create_db on an existing database",
    build,
    lambda env: admin.create_db("db", env.store),
    DbAlreadyExistsError,
    "/db",
    "--exist-ok",
)
case(
    group,
    "CLI create-db on an existing database",
    build,
    cli("--path", "db", "create-db"),
    1,
    "/db",
    "--exist-ok",
)
case(
    group,
    "read a manifest version that does not exist",
    build,
    lambda env: admin.read_manifest("db", env.store, 999),
    ObjectNotFoundError,
    "manifest 999",
    "list-manifests",
)
case(
    group,
    "CLI read-manifest -i of a missing version",
    build,
    cli("--path", "db", "read-manifest", "-i", "999"),
    1,
    "manifest 999",
    "list-manifests",
)


def _live_checkpoint(env: Env) -> None:
    build(env)
    env.vars["live"] = str(admin.create_checkpoint("db", env.store, CheckpointOptions(lifetime="1h")).id)


case(
    group,
    "CLI destroy --hard with a live checkpoint",
    _live_checkpoint,
    cli("--path", "db", "destroy", "--hard"),
    1,
    "{live}",
    "Nothing was deleted",
)
case(
    group,
    "destroy --hard with a live checkpoint",
    _live_checkpoint,
    lambda env: admin.destroy("db", env.store, soft=False),
    InvalidDeletionError,
    "{live}",
)
case(
    group,
    "database path with '..'",
    build,
    lambda env: admin.describe_db("../db", env.store),
    InvalidArgumentError,
    "'../db'",
    "must not contain",
)


def store_url(url: str) -> Setup:
    def setup(env: Env) -> None:
        env.vars["url"] = url

    return setup


case(
    group,
    "CLI unknown store scheme",
    store_url("ftp://host/x"),
    cli("--path", "db", "describe"),
    1,
    "ftp",
    "use file, memory or s3",
)
case(
    group,
    "CLI S3 URL without a bucket",
    store_url("s3://"),
    cli("--path", "db", "describe"),
    1,
    "names no bucket",
    "s3://bucket/prefix",
)
case(
    group,
    "CLI S3 URL with an unknown option",
    store_url("s3://b/p?endpoint=http://x"),
    cli("--path", "db", "describe"),
    1,
    "endpoint",
    "known: endpoint_url",
)

# --- 7. every CLI command with missing or malformed arguments (generated from the parser) ------------

COMMON = {"help", "store", "path", "format"}


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    # Each command once, by its own name (an alias maps to the same parser).
    return {name: sub for name, sub in action.choices.items() if sub.prog.split()[-1] == name}


def arguments(sub: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in sub._actions if a.dest not in COMMON]


def positionals(sub: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in arguments(sub) if not a.option_strings]


def type_name(action: argparse.Action) -> str:
    kind = action.type
    if kind is None:
        return "str"
    return f"{getattr(kind, '__module__', '')}.{getattr(kind, '__qualname__', kind)}"


# A valid value of each argument type, to fill in the other required arguments.
SAMPLES = {
    "str": "x",
    "slate_ops.cli.args.checkpoint_id": "01234567-89ab-cdef-0123-456789abcdef",
    "slate_ops.cli.args.parse_key": "k",
    "slate_ops.cli.args.parse_bytes": "v",
    "slate_ops.cli.args.positive_int": "2",
}
# A malformed value of each argument type and what its usage error says.
MALFORMED = {
    "slate_ops.cli.args.checkpoint_id": ("not-a-uuid", "is not a checkpoint id (a UUID"),
    "slate_ops.cli.args.parse_key": ("hex:0", HEX_FIX),
    "slate_ops.cli.args.parse_bytes": ("hex:zz", HEX_FIX),
    "slate_ops.cli.args.positive_int": ("0", "is not a positive integer"),
    "slate_ops.cli.args.duration": ("7 parsecs", "unknown unit"),
    "slate_ops.cli.args.manifest_id": ("0", "is not a manifest id"),
    "slate_ops.cli.args.min_age": ("1s", "below the minimum age floor"),
    "slate_ops.cli.args.time_of_day": ("25:00", "is not a time of day"),
}


def display(action: argparse.Action) -> str:
    return "/".join(action.option_strings) if action.option_strings else str(action.metavar or action.dest)


def command_line(
    name: str,
    sub: argparse.ArgumentParser,
    leave_out: argparse.Action | None = None,
    replace: tuple[argparse.Action, str] | None = None,
) -> list[str]:
    """``name`` with every required argument (a sample value), minus ``leave_out``; ``replace``
    gives one argument (required or not) another value."""
    argv = [name]
    for action in arguments(sub):
        if action is leave_out:
            continue
        if replace is not None and action is replace[0]:
            value = replace[1]
        elif action.required:
            value = SAMPLES[type_name(action)]
        else:
            continue
        argv += [action.option_strings[0], value] if action.option_strings else [value]
    return argv


for name, sub in subcommands().items():
    case(
        "CLI usage",
        f"{name}: no --path",
        nothing,
        Cli(tuple(command_line(name, sub))),
        2,
        "--path is required",
    )
    for action in arguments(sub):
        if action.required:
            argv = command_line(name, sub, leave_out=action)
            # Without one positional, the later ones move up: argparse reports the last one missing.
            reported = action if action.option_strings else positionals(sub)[-1]
            case(
                "CLI usage",
                f"{name}: missing {display(action)}",
                nothing,
                cli("--path", "db", *argv),
                2,
                f"usage: slate-ops {name}",
                f"required: {display(reported)}",
            )
        if action.choices is not None and action.nargs is None:
            argv = command_line(name, sub, replace=(action, "bogus"))
            case(
                "CLI usage",
                f"{name}: {display(action)} bogus",
                nothing,
                cli("--path", "db", *argv),
                2,
                f"argument {display(action)}",
                "invalid choice",
            )
        elif action.type is not None:
            bad, hint = MALFORMED[type_name(action)]
            argv = command_line(name, sub, replace=(action, bad))
            case(
                "CLI usage",
                f"{name}: malformed {display(action)}",
                nothing,
                cli("--path", "db", *argv),
                2,
                f"usage: slate-ops {name}",
                f"argument {display(action)}",
                hint,
            )

# --- 8. every command on a missing database ------------------------------------------------------------

CREATES_DB = {"create-db", "put", "delete"}  # documented: a writer creates the database it opens
ON_MISSING_DB: dict[str, tuple[str, ...]] = {
    "create-checkpoint": (),
    "refresh-checkpoint": ("-i", SAMPLES["slate_ops.cli.args.checkpoint_id"]),
    "delete-checkpoint": ("-i", SAMPLES["slate_ops.cli.args.checkpoint_id"]),
    "list-checkpoints": (),
    "expire-checkpoints": (),
    "read-manifest": (),
    "list-manifests": (),
    "describe": (),
    "verify": (),
    "get": ("k",),
    "scan": (),
    "compact": (),
    "shape": (),
    "clone": ("--parent", "nope2"),
    "destroy": (),
    "gc": (),
    "create-tag": ("-n", "t1"),
    "delete-tag": ("-n", "t1"),
    "list-tags": (),
    "rollback": ("-n", "t1"),
    "apply-tag-policy": (),
    "split": ("--at", "k", "--into", "a", "--into", "b"),
    "merge": ("--source", "nope2"),
    "suggest-split-keys": ("-n", "2"),
    "flush": (),
}
for name, extra in ON_MISSING_DB.items():
    missing = "nope2" if name in ("clone", "merge") else "nope"
    case(
        "missing database",
        f"CLI {name} on a missing database",
        build,
        cli("--path", "nope", name, *extra),
        1,
        NO_DB,
        missing,
    )

# --- 9. S3 credentials ----------------------------------------------------------------------------------

S3 = (pytest.mark.s3,)
SET_KEYS = "AWS_ACCESS_KEY_ID"


def s3_store(env: Env, *, credentials: dict[str, str] | None = None, bucket: str | None = None) -> None:
    """The case's store is an S3 bucket on moto, opened by URL with ``credentials`` (None: none at
    all, from an environment without any); snapshots list it with good credentials."""
    endpoint: str = env.request.getfixturevalue("moto_endpoint")
    client = env.request.getfixturevalue("s3_client")
    name = bucket or env.request.getfixturevalue("make_bucket")()
    env.vars["bucket"] = name
    query = f"endpoint_url={endpoint}&region=us-east-1"
    if credentials is None:
        for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
            env.monkeypatch.delenv(variable, raising=False)
        env.monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance-metadata probing
    else:
        query += "".join(f"&{k}={v}" for k, v in credentials.items())
    env.vars["url"] = f"s3://{name}/pfx?{query}"
    if bucket is None:  # else there is nothing to list: the bucket does not exist
        good = S3Store(name, "pfx", client=client)
        build(Env(good, env.request, env.monkeypatch))
        env.listing = env.store = good


WRONG = {"access_key_id": "AKIAWRONGWRONGWRONG", "secret_access_key": "wrong"}


def no_credentials(env: Env) -> None:
    s3_store(env)


def wrong_credentials(env: Env) -> None:
    s3_store(env, credentials=WRONG)


def with_iam(action: Callable[[Env], object] | Cli) -> Callable[[Env], object]:
    """Run ``action`` while moto checks credentials (by default it accepts any)."""
    from moto.core.authorization import enable_iam_authentication

    def run(env: Env) -> object:
        with enable_iam_authentication():
            if isinstance(action, Cli):
                raise SystemExit(main(action.resolve(env)))
            return action(env)

    return run


case(
    "S3 credentials",
    "no credentials: describe_db",
    no_credentials,
    lambda env: admin.describe_db("db", open_store(env.url)),
    ObjectStoreCredentialsError,
    "{bucket}",
    SET_KEYS,
    marks=S3,
)
case(
    "S3 credentials",
    "no credentials: Db.open",
    no_credentials,
    lambda env: Db.open("db", open_store(env.url)),
    ObjectStoreCredentialsError,
    "{bucket}",
    SET_KEYS,
    marks=S3,
)
case(
    "S3 credentials",
    "no credentials: CLI get",
    no_credentials,
    cli("--path", "db", "get", "k01"),
    1,
    "{bucket}",
    SET_KEYS,
    marks=S3,
)
case(
    "S3 credentials",
    "wrong credentials: create_db",
    wrong_credentials,
    with_iam(lambda env: admin.create_db("db2", open_store(env.url))),
    ObjectStoreCredentialsError,
    "{bucket}",
    "refused the credentials",
    SET_KEYS,
    marks=S3,
)
case(
    "S3 credentials",
    "wrong credentials: DbReader",
    wrong_credentials,
    with_iam(lambda env: DbReader.open("db", open_store(env.url), options=QUIET_READER)),
    ObjectStoreCredentialsError,
    "{bucket}",
    "refused the credentials",
    marks=S3,
)
case(
    "S3 credentials",
    "wrong credentials: CLI put",
    wrong_credentials,
    with_iam(cli("--path", "db", "put", "k", "v")),
    1,
    "{bucket}",
    "refused the credentials",
    SET_KEYS,
    marks=S3,
)
case(
    "S3 credentials",
    "access key without secret",
    nothing,
    lambda env: open_store("s3://bkt/pfx?access_key_id=AKIAONLY"),
    InvalidStoreUrlError,
    "bkt",
    "without secret_access_key",
    "give both",
)
case(
    "S3 credentials",
    "missing bucket",
    lambda env: s3_store(
        env,
        credentials=dict(
            access_key_id=CREDENTIALS["access_key_id"], secret_access_key=CREDENTIALS["secret_access_key"]
        ),
        bucket="no-such-bucket",
    ),
    lambda env: admin.describe_db("db", open_store(env.url)),
    ObjectStoreError,
    "no-such-bucket",
    "does not exist",
    marks=S3,
)


# --- running a case ---------------------------------------------------------------------------------------


def summary() -> dict[str, int]:
    """The catalogue's size per group (docs/reliability.md quotes the total)."""
    groups: dict[str, int] = {}
    for entry in CASES:
        groups[entry.group] = groups.get(entry.group, 0) + 1
    return groups


def _params() -> Iterator[Any]:
    for entry in CASES:
        yield pytest.param(entry, id=f"{entry.group}: {entry.name}", marks=entry.marks)


def _consume(result: object) -> object:
    if isinstance(result, Iterator):
        return list(result)
    close = getattr(result, "close", None)
    if isinstance(result, Db | DbReader) and close is not None:
        close()
    return result


def _run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    return code, capsys.readouterr().err


def _manifest_state(store: ObjectStore, path: str) -> Manifest | None:
    try:
        current = ManifestStore(store, path).read_latest()
    except SlateOpsError:
        return None  # damaged: "net" is not used on such cases
    return None if current is None else current.value


def _check_writes(
    case_: Case,
    env: Env,
    before: dict[str, str],
    after: dict[str, str],
    manifest_before: Manifest | None,
    message: str,
) -> None:
    if case_.writes == "none":
        assert after == before, f"the store changed: {sorted(set(after) ^ set(before))}"
        return
    listing = env.listing or env.store
    changed = [k for k, etag in before.items() if after.get(k) != etag]
    assert not changed, f"existing objects changed or vanished: {changed}"
    new = sorted(set(after) - set(before))
    for key in new:
        metadata = "/manifest/" in key or "/compactions/" in key
        fence = "/wal/" in key and listing.head(key).size == 0
        assert metadata or fence, f"{key} was left behind"
    if case_.writes == "unconfirmed":
        assert any(key in message for key in new), f"the message names none of the new versions {new}"
        return
    manifest_after = _manifest_state(listing, case_.db)
    assert manifest_before is not None and manifest_after is not None
    assert {c.id for c in manifest_after.checkpoints} == {c.id for c in manifest_before.checkpoints}
    assert (manifest_after.l0, manifest_after.compacted, manifest_after.ssts) == (
        manifest_before.l0,
        manifest_before.compacted,
        manifest_before.ssts,
    )


@pytest.mark.parametrize("entry", list(_params()))
def test_bad_input(
    entry: Case,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = open_store(f"memory://bad-inputs-{uuid.uuid4().hex}")
    env = Env(store, request, monkeypatch)
    try:
        entry.setup(env)
        listing = env.listing or env.store
        before = snapshot(listing)
        manifest_before = _manifest_state(listing, entry.db)
        message = _act(entry, env, capsys)
        after = snapshot(listing)
        for template in entry.contains:
            assert env.format(template) in message, f"{env.format(template)!r} not in: {message}"
        _check_writes(entry, env, before, after, manifest_before, message)
    finally:
        for close in reversed(env.cleanup):
            with contextlib.suppress(SlateOpsError):
                close()


def _act(entry: Case, env: Env, capsys: pytest.CaptureFixture[str]) -> str:
    """Run the action; returns the message to check (the error's text, or the CLI's stderr)."""
    action = entry.action
    if isinstance(entry.expect, int):
        if isinstance(action, Cli):
            code, err = _run_cli(action.resolve(env), capsys)
        else:
            try:
                action(env)
                code = 0
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else 1
            err = capsys.readouterr().err
        assert code == entry.expect, f"exit {code}, stderr: {err}"
        if code == 1:
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("slate-ops: error: "), err
        if code == 2:
            assert "usage: slate-ops" in err, err
        return err
    assert not isinstance(action, Cli)
    if entry.expect is None:
        _consume(action(env))
        return ""
    with pytest.raises(SlateOpsError) as info:
        _consume(action(env))
    assert isinstance(info.value, entry.expect), f"{type(info.value).__name__}: {info.value}"
    return str(info.value)


def test_catalogue_covers_every_command() -> None:
    """Sections 7 and 8 reach every subcommand: a new command needs its missing-database case."""
    names = set(subcommands())
    assert set(ON_MISSING_DB) == names - CREATES_DB
    assert len(CASES) == sum(summary().values()) >= 200


def _main(groups: Iterable[tuple[str, int]]) -> None:
    for group_name, count in groups:
        print(f"{count:4d}  {group_name}")
    print(f"{len(CASES):4d}  bad inputs in the catalogue")


if __name__ == "__main__":
    _main(summary().items())
