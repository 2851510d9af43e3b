"""Group 1, damaged stored objects: truncated, byte-flipped and unknown-version manifests and SSTs (L0,
sorted run, WAL), garbage ``.compactions`` files and GC boundary files, read through ``Db``,
``DbReader``, the compactor, GC, the admin API and the CLI. GC boundary files have no format version
(an ASCII u64): any other content is corrupt."""

from __future__ import annotations

import json
import time
import uuid

from slate_ops import admin
from slate_ops.compaction import Compactor
from slate_ops.config import CheckpointOptions
from slate_ops.errors import CorruptObjectError, GcFailedError, SlateOpsError, UnsupportedFormatVersionError
from slate_ops.manifest.store import ManifestStore
from tests.reliability.bad_inputs.actions import compact_full, db, open_writer, read_all, run_gc
from tests.reliability.bad_inputs.catalogue import RESTORE, UPGRADE, Env, case, cli
from tests.reliability.bad_inputs.states import (
    Damage,
    build,
    compacted_once,
    damaged,
    flip,
    manifest_key,
    manifest_v7,
    newest_l0_key,
    sorted_run_key,
    sst_v2,
    truncate,
    wal_data_key,
    with_boundary,
    with_compactions,
    with_open_db,
)

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
    case(
        group, f"{label} latest manifest: GC", broken, run_gc(dry_run=False), GcFailedError, "{damaged}", fix
    )
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
    run_gc(dry_run=False),
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
    case(group, f".compactions {label}: GC", setup, run_gc(dry_run=False), GcFailedError, "{damaged}", fix)
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
        run_gc(only="manifest", dry_run=False),
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
    run_gc(only="compactions", dry_run=False),
    GcFailedError,
    "{boundary}",
    BOUNDARY_FIX,
)
