"""Clone, restore and destroy commands (docs/cli.md), on either engine through the admin handle.

``clone --parent PARENT [--checkpoint ID]`` creates (or finishes) the clone at ``--path`` and prints
its summary; ``restore --into TARGET (--tag NAME | --checkpoint ID)`` creates a new database at
``TARGET`` holding ``--path``'s data at that tag or checkpoint (a clone: the database itself is not
touched; SlateDB cannot roll back in place); ``destroy [--hard] [--dry-run]`` destroys the database at
``--path`` and prints the :class:`~slate_ops.admin.DestroyReport`.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from slate_ops.admin.db import DbStatus
from slate_ops.cli.args import checkpoint_id
from slate_ops.cli.command import Command, arg, dry_run_flag
from slate_ops.cli.handle import open_db
from slate_ops.objstore import ObjectStore
from slate_ops.objstore.metering import RequestCounts


def _created(status: DbStatus, requests: RequestCounts, **given: Any) -> dict[str, Any]:
    """What ``clone`` and ``restore`` print: what was asked (``given``), then the new database's
    :class:`~slate_ops.admin.DbStatus` (``describe``'s summary), the same on both engines, and the
    object-store requests the operation made."""
    return {"path": status.path, **given, **dataclasses.asdict(status), "requests": requests.to_dict()}


def _clone(args: argparse.Namespace, store: ObjectStore) -> dict[str, Any]:
    parent = open_db(args, store, args.parent)
    status = parent.clone_to(args.path, checkpoint=args.checkpoint)
    return _created(status, parent.last_requests, parent=args.parent, checkpoint=args.checkpoint)


def _restore(args: argparse.Namespace, store: ObjectStore) -> dict[str, Any]:
    if (args.tag is None) == (args.checkpoint is None):
        args.parser.error("give exactly one of --tag NAME and --checkpoint ID")
    source = open_db(args, store)
    status = source.restore_to_new(args.into, checkpoint=args.checkpoint, tag=args.tag)
    return _created(status, source.last_requests, source=args.path, tag=args.tag, checkpoint=args.checkpoint)


def _destroy(args: argparse.Namespace, store: ObjectStore) -> Any:
    return open_db(args, store).destroy(soft=not args.hard, dry_run=args.dry_run)


COMMANDS = (
    Command(
        "clone",
        _clone,
        "Create the clone at --path of PARENT (from a checkpoint, else from its current state); "
        "re-running it finishes an interrupted clone.",
        (
            arg("--parent", required=True, metavar="PARENT", help="the parent database's path"),
            arg(
                "--checkpoint",
                metavar="ID",
                type=checkpoint_id,
                help="clone the parent at this checkpoint (default: a new 5-minute checkpoint of its "
                "current state)",
            ),
        ),
        aliases=("create-clone",),
    ),
    Command(
        "restore",
        _restore,
        "Restore --path's data at a tag or checkpoint into a NEW database TARGET (a clone; --path is "
        "not changed). On SlateDB databases, the way back to a tag (rollback in place is ours only).",
        (
            arg("--into", required=True, metavar="TARGET", help="the new database's path"),
            arg("--tag", metavar="NAME", help="restore this tag's state"),
            arg("--checkpoint", metavar="ID", type=checkpoint_id, help="restore this checkpoint's state"),
        ),
        aliases=("restore-to-new",),
    ),
    Command(
        "destroy",
        _destroy,
        "Destroy the database: softly by default (fences the writer, marks it destroyed; GC deletes it "
        "later), or with --hard delete everything now.",
        (
            arg(
                "--hard",
                action="store_true",
                help="delete every object now; refused while unexpired checkpoints exist",
            ),
            dry_run_flag("would be deleted and changed"),
        ),
    ),
)
