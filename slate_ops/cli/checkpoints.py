"""Checkpoint commands: create, refresh, delete, list and expire checkpoints, on either engine
(through the admin handle: the same flags and JSON shapes)."""

from __future__ import annotations

import argparse
from typing import Any

from slate_ops.cli.args import checkpoint_id, duration
from slate_ops.cli.command import Command, arg, dry_run_flag
from slate_ops.cli.handle import open_db
from slate_ops.config import CheckpointOptions
from slate_ops.objstore import ObjectStore


def _create_checkpoint(args: argparse.Namespace, store: ObjectStore) -> Any:
    options = CheckpointOptions(lifetime=args.lifetime, source=args.source, name=args.name)
    return open_db(args, store).create_checkpoint(options)


def _refresh_checkpoint(args: argparse.Namespace, store: ObjectStore) -> Any:
    return open_db(args, store).refresh_checkpoint(args.id, args.lifetime)


def _delete_checkpoint(args: argparse.Namespace, store: ObjectStore) -> Any:
    return open_db(args, store).delete_checkpoint(args.id, dry_run=args.dry_run)


def _list_checkpoints(args: argparse.Namespace, store: ObjectStore) -> Any:
    return open_db(args, store).list_checkpoints(args.name)


def _expire_checkpoints(args: argparse.Namespace, store: ObjectStore) -> Any:
    return open_db(args, store).expire_checkpoints(dry_run=args.dry_run)


_ID = arg("-i", "--id", type=checkpoint_id, required=True)

COMMANDS = (
    Command(
        "create-checkpoint",
        _create_checkpoint,
        "Create a checkpoint of the current state.",
        (
            arg("-l", "--lifetime", type=duration, help='e.g. "7days 30min 10s"; default: never expires'),
            arg(
                "-s", "--source", type=checkpoint_id, help="take the checkpoint from this existing checkpoint"
            ),
            arg("-n", "--name", help="a name to list the checkpoint by (need not be unique)"),
        ),
    ),
    Command(
        "refresh-checkpoint",
        _refresh_checkpoint,
        "Set a checkpoint's expiry to now + lifetime.",
        (_ID, arg("-l", "--lifetime", type=duration, help="default: never expires")),
    ),
    Command(
        "delete-checkpoint",
        _delete_checkpoint,
        "Delete a checkpoint (dry run by default): what it protects may then be collected.",
        (_ID, dry_run_flag("checkpoint would be deleted")),
    ),
    Command(
        "list-checkpoints",
        _list_checkpoints,
        "List the checkpoints of the current manifest.",
        (arg("-n", "--name", help="only checkpoints with this name"),),
        read_only=True,
    ),
    Command(
        "expire-checkpoints",
        _expire_checkpoints,
        "Remove expired checkpoints (dry run by default).",
        (dry_run_flag("would be removed"),),
    ),
)
