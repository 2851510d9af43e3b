"""Clone and destroy commands of the ``slate-ops`` CLI (docs/cli.md).

``clone --parent PARENT [--checkpoint ID]`` creates (or finishes) the clone at ``--path`` and prints
its summary; ``destroy [--hard] [--dry-run]`` destroys the database at ``--path`` and prints the
:class:`~slate_ops.admin.DestroyReport`. Both print one JSON object (``--format table`` prints it as
``key  value`` lines).
"""

from __future__ import annotations

import argparse
from typing import Any

from slate_ops.admin import create_clone, destroy
from slate_ops.cli_data import CommandHelper, checkpoint_id_arg
from slate_ops.objstore import ObjectStore


def _clone(args: argparse.Namespace, store: ObjectStore) -> dict[str, Any]:
    created = create_clone(args.path, args.parent, store, args.checkpoint)
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
    return destroy(args.path, store, soft=not args.hard, dry_run=args.dry_run)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser], command: CommandHelper) -> None:
    """Add ``clone`` and ``destroy`` through the CLI's ``command`` helper (``commands`` is unused)."""
    del commands
    sub = command(
        "clone",
        _clone,
        "Create the clone at --path of PARENT (from a checkpoint, else from its current state); "
        "re-running it finishes an interrupted clone.",
    )
    sub.add_argument("--parent", required=True, metavar="PARENT", help="the parent database's path")
    sub.add_argument(
        "--checkpoint",
        metavar="ID",
        type=checkpoint_id_arg,
        help="clone the parent at this checkpoint (default: a new 5-minute checkpoint of its current state)",
    )

    sub = command(
        "destroy",
        _destroy,
        "Destroy the database: softly by default (fences the writer, marks it destroyed; GC deletes it "
        "later), or with --hard delete everything now.",
    )
    sub.add_argument(
        "--hard",
        action="store_true",
        help="delete every object now; refused while unexpired checkpoints exist",
    )
    sub.add_argument(
        "--dry-run", action="store_true", help="report what would be deleted and changed; change nothing"
    )
