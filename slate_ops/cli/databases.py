"""Database commands: ``create-db``, ``describe``, ``verify``, ``read-manifest``, ``list-manifests``,
``history`` and ``list-dbs``.

``describe``, ``verify`` and ``history`` go through the admin handle (either engine, one JSON shape);
``create-db``, ``read-manifest`` and ``list-manifests`` are about slate_ops' own manifests and refuse a
SlateDB database; ``list-dbs`` lists both kinds, each with its ``engine``.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from slate_ops import admin
from slate_ops.admin.fleet import LIVE, UNINITIALIZED
from slate_ops.admin.fleet import SLATEDB as SLATEDB_STATE
from slate_ops.cli.args import manifest_id, positive_int
from slate_ops.cli.command import Command, Exit, arg
from slate_ops.cli.handle import SLATE_OPS, SLATEDB, engine_of, open_db, require_slate_ops
from slate_ops.cli.output import render_time
from slate_ops.errors import SlateOpsError, UnsupportedOnEngineError
from slate_ops.keytext import render_optional
from slate_ops.objstore import ObjectStore

_RAW_MANIFESTS = "describe, history or list-checkpoints, which read both engines"


def _create_db(args: argparse.Namespace, store: ObjectStore) -> Any:
    if engine_of(args) == SLATEDB:
        raise UnsupportedOnEngineError(
            args.path,
            SLATEDB,
            "`slate-ops create-db`",
            "create a SlateDB database by opening it with SlateDB's own Db (DbBuilder)",
        )
    require_slate_ops(args, store, "create-db", _RAW_MANIFESTS)
    created = admin.create_db(args.path, store, exist_ok=args.exist_ok)
    return {"path": args.path, "manifest_id": created.id}


def _read_manifest(args: argparse.Namespace, store: ObjectStore) -> Any:
    """The manifest as stored; its keys (``first_key``, ``last_key``, ``visible_range``) are printed
    as every key is (text, or ``hex:``) by the output layer."""
    require_slate_ops(args, store, "read-manifest", _RAW_MANIFESTS)
    manifest = admin.read_manifest(args.path, store, args.id)
    return {"id": manifest.id, "manifest": manifest.value}


def _list_manifests(args: argparse.Namespace, store: ObjectStore) -> Any:
    require_slate_ops(args, store, "list-manifests", _RAW_MANIFESTS)
    return admin.list_manifests(args.path, store)


def _describe(args: argparse.Namespace, store: ObjectStore) -> dict[str, Any]:
    """:class:`~slate_ops.admin.DbStatus` with views and SST objects told apart (``l0_views`` and
    ``sorted_run_views`` are LSM entries; ``sst_objects`` the files they read, ``own_ssts`` under this
    database's path, ``external_ssts`` under another's). The same shape on both engines."""
    detail = open_db(args, store).describe_detail()
    status, ssts = detail.status, detail.ssts
    key_range = detail.visible_range
    return {
        "path": status.path,
        "manifest_id": status.manifest_id,
        "initialized": status.initialized,
        "destroyed_at_s": status.destroyed_at_s,
        "writer_epoch": status.writer_epoch,
        "compactor_epoch": status.compactor_epoch,
        "key_range": None
        if key_range is None
        else {"start": render_optional(key_range.start), "end": render_optional(key_range.end)},
        "l0_views": ssts.l0_views,
        "sorted_runs": ssts.sorted_runs,
        "sorted_run_views": ssts.sorted_run_views,
        "sst_objects": ssts.sst_objects,
        "own_ssts": ssts.own_ssts,
        "external_ssts": ssts.external_ssts,
        "sst_bytes": status.sst_bytes,
        "own_sst_bytes": ssts.own_sst_bytes,
        "external_sst_bytes": ssts.external_sst_bytes,
        "checkpoints": status.checkpoints,
        "expired_checkpoints": status.expired_checkpoints,
        "external_dbs": status.external_dbs,
    }


def _verify(args: argparse.Namespace, store: ObjectStore) -> Exit:
    """Every check's result; exit 1 when a check of severity ``error`` failed (warnings exit 0)."""
    results = open_db(args, store).verify()
    failed = any(not r.passed and r.severity is admin.Severity.ERROR for r in results)
    return Exit(results, 1 if failed else 0)


def _history(args: argparse.Namespace, store: ObjectStore) -> list[dict[str, Any]]:
    rows = open_db(args, store).history(limit=args.limit)
    if args.format == "table":
        return [
            {
                "id": r.id,
                "time": render_time(r.time),
                "kinds": ", ".join(r.kinds),
                "details": "; ".join(r.details),
            }
            for r in rows
        ]
    return [{"id": r.id, "time": r.time, "kinds": r.kinds, "details": r.details} for r in rows]


def _list_dbs(args: argparse.Namespace, store: ObjectStore) -> list[dict[str, Any]]:
    """Every database under the prefix with its ``engine`` (``slate_ops`` or ``slatedb``). A SlateDB
    database's state and counters come from its handle (:meth:`describe`); if it cannot be read (e.g.
    the binding is not installed) it keeps state ``slatedb`` with ``error`` saying why."""
    rows = []
    for listing in admin.list_dbs(args.path, store):
        row: dict[str, Any] = {"path": listing.path, "engine": SLATE_OPS, **dataclasses.asdict(listing)}
        if listing.state == SLATEDB_STATE:
            row |= {"engine": SLATEDB, **_slatedb_listing(args, store, listing.path)}
        rows.append(row)
    return rows


def _slatedb_listing(args: argparse.Namespace, store: ObjectStore, path: str) -> dict[str, Any]:
    """A SlateDB database's listing fields from its handle (one manifest read through the binding):
    ``ssts`` and ``sst_bytes`` count its own SST objects, as for ours (not a parent's or a source's)."""
    try:
        detail = admin.open(path, store, SLATEDB).describe_detail()
    except SlateOpsError as error:
        return {"error": str(error)}
    status = detail.status
    return {
        "state": LIVE if status.initialized else UNINITIALIZED,
        "manifest_id": status.manifest_id,
        "initialized": status.initialized,
        "destroyed_at_s": None,
        "ssts": detail.ssts.own_ssts,
        "sst_bytes": detail.ssts.own_sst_bytes,
        "external_dbs": status.external_dbs,
        "error": None,
    }


COMMANDS = (
    Command(
        "create-db",
        _create_db,
        "Create an empty database (manifest 1).",
        (arg("--exist-ok", action="store_true", help="succeed if the database already exists"),),
    ),
    Command(
        "read-manifest",
        _read_manifest,
        "Print the current manifest, or version ID.",
        (arg("-i", "--id", type=manifest_id),),
        read_only=True,
    ),
    Command("list-manifests", _list_manifests, "List the stored manifest versions.", read_only=True),
    Command(
        "history",
        _history,
        "List the stored manifest versions, newest first, each with what it changed (L0 flush, "
        "compaction, checkpoint or tag added or removed, new writer, rollback, clone/split/merge, "
        "destroy).",
        (arg("--limit", metavar="N", type=positive_int, help="only the newest N versions"),),
        read_only=True,
    ),
    Command(
        "list-dbs",
        _list_dbs,
        "List the database at --path and the ones below it (default: the whole store) "
        "with their engine, state, owned SST bytes, latest manifest and last write.",
        needs_path=False,
        read_only=True,
    ),
    Command(
        "describe", _describe, "Summarise the current manifest.", aliases=("describe-db",), read_only=True
    ),
    Command(
        "verify",
        _verify,
        "Check the database read-only: SSTs exist, sorted runs ordered, checkpoints readable and "
        "unexpired, L0 below its limits, GC boundaries sane (the Dagster asset checks). Exits 1 if a "
        "check of severity error fails.",
        aliases=("verify-db",),
        read_only=True,
    ),
)
