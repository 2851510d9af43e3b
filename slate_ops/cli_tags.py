"""Tag commands of the ``slate-ops`` CLI (docs/cli.md "Tags", spec 004).

``create-tag -n NAME [-s CHECKPOINT] [--replace]`` and ``delete-tag -n NAME [--dry-run]`` print the
tag as one JSON object; ``list-tags`` prints the ``$tags`` table as a JSON list of rows
(``--format table`` prints it as columns).
"""

from __future__ import annotations

import argparse
from typing import Any

from slate_ops.admin import create_tag, delete_tag, list_tags
from slate_ops.admin.tags import Tag
from slate_ops.cli_data import CommandHelper, checkpoint_id_arg
from slate_ops.objstore import ObjectStore


def _create_tag(args: argparse.Namespace, store: ObjectStore) -> Tag:
    return create_tag(args.path, store, args.name, checkpoint=args.source, replace=args.replace)


def _delete_tag(args: argparse.Namespace, store: ObjectStore) -> dict[str, Any]:
    tag = delete_tag(args.path, store, args.name, dry_run=args.dry_run)
    return {"dry_run": args.dry_run, "deleted": tag}


def _list_tags(args: argparse.Namespace, store: ObjectStore) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = list_tags(args.path, store).to_pylist()
    return rows


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser], command: CommandHelper) -> None:
    """Add ``create-tag``, ``delete-tag`` and ``list-tags`` through ``command`` (``commands`` is unused)."""
    del commands
    sub = command(
        "create-tag",
        _create_tag,
        "Tag the current state (or a checkpoint's): a never-expiring checkpoint with a unique name.",
    )
    sub.add_argument("-n", "--name", required=True, help="the tag's name (unique; no whitespace)")
    sub.add_argument(
        "-s",
        "--source",
        metavar="CHECKPOINT",
        type=checkpoint_id_arg,
        help="tag this live checkpoint's state",
    )
    sub.add_argument("--replace", action="store_true", help="replace an existing tag of that name")

    sub = command("delete-tag", _delete_tag, "Delete a tag (its checkpoint); GC may then release its data.")
    sub.add_argument("-n", "--name", required=True, help="the tag to delete")
    sub.add_argument(
        "--dry-run", action="store_true", help="report the tag that would be deleted; change nothing"
    )

    command(
        "list-tags", _list_tags, "List the tags ($tags: name, checkpoint, manifest, time, records, bytes)."
    )
