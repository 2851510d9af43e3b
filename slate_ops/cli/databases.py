"""Database commands: ``create-db``, ``describe``, ``verify``, ``read-manifest``, ``list-manifests``."""

from __future__ import annotations

import argparse
from typing import Any

from slate_ops import admin
from slate_ops.cli.args import manifest_id
from slate_ops.cli.command import Command, Exit, arg
from slate_ops.objstore import ObjectStore


def _create_db(args: argparse.Namespace, store: ObjectStore) -> Any:
    created = admin.create_db(args.path, store, exist_ok=args.exist_ok)
    return {"path": args.path, "manifest_id": created.id}


def _read_manifest(args: argparse.Namespace, store: ObjectStore) -> Any:
    manifest = admin.read_manifest(args.path, store, args.id)
    return {"id": manifest.id, "manifest": manifest.value}


def _list_manifests(args: argparse.Namespace, store: ObjectStore) -> Any:
    return admin.list_manifests(args.path, store)


def _describe(args: argparse.Namespace, store: ObjectStore) -> Any:
    return admin.describe_db(args.path, store)


def _verify(args: argparse.Namespace, store: ObjectStore) -> Exit:
    """Every check's result; exit 1 when a check of severity ``error`` failed (warnings exit 0)."""
    results = admin.verify_db(args.path, store)
    failed = any(not r.passed and r.severity is admin.Severity.ERROR for r in results)
    return Exit(results, 1 if failed else 0)


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
    ),
    Command("list-manifests", _list_manifests, "List the stored manifest versions."),
    Command("describe", _describe, "Summarise the current manifest.", aliases=("describe-db",)),
    Command(
        "verify",
        _verify,
        "Check the database read-only: SSTs exist, sorted runs ordered, checkpoints readable and "
        "unexpired, L0 below its limits, GC boundaries sane (the Dagster asset checks). Exits 1 if a "
        "check of severity error fails.",
        aliases=("verify-db",),
    ),
)
