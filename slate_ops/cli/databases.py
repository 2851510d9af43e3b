"""Database commands: ``create-db``, ``describe``, ``verify``, ``read-manifest``, ``list-manifests``,
``history`` and ``list-dbs``."""

from __future__ import annotations

import argparse
from typing import Any

from slate_ops import admin
from slate_ops.cli.args import manifest_id, positive_int
from slate_ops.cli.command import Command, Exit, arg
from slate_ops.cli.output import render_time
from slate_ops.keytext import render_optional
from slate_ops.objstore import ObjectStore


def _create_db(args: argparse.Namespace, store: ObjectStore) -> Any:
    created = admin.create_db(args.path, store, exist_ok=args.exist_ok)
    return {"path": args.path, "manifest_id": created.id}


def _read_manifest(args: argparse.Namespace, store: ObjectStore) -> Any:
    """The manifest as stored; its keys (``first_key``, ``last_key``, ``visible_range``) are printed
    as every key is (text, or ``hex:``) by the output layer."""
    manifest = admin.read_manifest(args.path, store, args.id)
    return {"id": manifest.id, "manifest": manifest.value}


def _list_manifests(args: argparse.Namespace, store: ObjectStore) -> Any:
    return admin.list_manifests(args.path, store)


def _describe(args: argparse.Namespace, store: ObjectStore) -> dict[str, Any]:
    """:class:`~slate_ops.admin.DbStatus` with views and SST objects told apart (``l0_views`` and
    ``sorted_run_views`` are LSM entries; ``sst_objects`` the files they read, ``own_ssts`` under this
    database's path, ``external_ssts`` under another's)."""
    detail = admin.describe_db_detail(args.path, store)
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
    results = admin.verify_db(args.path, store)
    failed = any(not r.passed and r.severity is admin.Severity.ERROR for r in results)
    return Exit(results, 1 if failed else 0)


def _history(args: argparse.Namespace, store: ObjectStore) -> list[dict[str, Any]]:
    rows = admin.manifest_history(args.path, store, limit=args.limit)
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


def _list_dbs(args: argparse.Namespace, store: ObjectStore) -> Any:
    return admin.list_dbs(args.path, store)


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
        "List the databases whose path starts with --path (a store prefix; default: the whole store) "
        "with their state, owned SST bytes, latest manifest and last write.",
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
