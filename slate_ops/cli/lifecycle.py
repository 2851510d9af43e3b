"""Clone and destroy commands (docs/cli.md).

``clone --parent PARENT [--checkpoint ID]`` creates (or finishes) the clone at ``--path`` and prints
its summary; ``destroy [--hard] [--dry-run]`` destroys the database at ``--path`` and prints the
:class:`~slate_ops.admin.DestroyReport`.
"""

from __future__ import annotations

import argparse
from typing import Any

from slate_ops import admin
from slate_ops.cli.args import checkpoint_id
from slate_ops.cli.command import Command, arg, dry_run_flag
from slate_ops.objstore import ObjectStore


def _clone(args: argparse.Namespace, store: ObjectStore) -> dict[str, Any]:
    created = admin.create_clone(args.path, args.parent, store, args.checkpoint)
    manifest = created.value
    direct = manifest.external_dbs[-1] if manifest.external_dbs else None
    return {
        "path": args.path,
        "parent": args.parent,
        "manifest_id": created.id,
        "initialized": manifest.initialized,
        "source_checkpoint_id": None if direct is None else direct.source_checkpoint_id,
        "final_checkpoint_id": None if direct is None else direct.final_checkpoint_id,
        "external_dbs": [ed.path for ed in manifest.external_dbs],
        "writer_epoch": manifest.writer_epoch,
    }


def _destroy(args: argparse.Namespace, store: ObjectStore) -> Any:
    return admin.destroy(args.path, store, soft=not args.hard, dry_run=args.dry_run)


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
