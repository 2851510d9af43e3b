"""The ``slate-ops`` operator CLI: a thin adapter over :mod:`slate_ops.admin`.

Output is JSON (one object or a list) unless ``--format table``. Usage errors exit 2; operation
errors exit 1 with one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from slate_ops import admin, cli_clone, cli_compaction, cli_data, cli_gc, cli_rescale, cli_tags
from slate_ops.config import CheckpointOptions, parse_duration
from slate_ops.errors import SlateOpsError
from slate_ops.jsonable import to_jsonable
from slate_ops.objstore import ObjectStore, open_store

STORE_ENV = "SLATE_OPS_STORE"


def default_store_url() -> str:
    """``$SLATE_OPS_STORE``, else the embedded local store under ``./.slate``."""
    return os.environ.get(STORE_ENV) or (Path.cwd() / ".slate").resolve().as_uri()


def _duration(text: str) -> timedelta:
    try:
        return parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _manifest_id(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a manifest id (a positive integer)")
    return int(text)


Command = Callable[[argparse.Namespace, ObjectStore], Any]


def _create_db(args: argparse.Namespace, store: ObjectStore) -> Any:
    created = admin.create_db(args.path, store, exist_ok=args.exist_ok)
    return {"path": args.path, "manifest_id": created.id}


def _create_checkpoint(args: argparse.Namespace, store: ObjectStore) -> Any:
    options = CheckpointOptions(lifetime=args.lifetime, source=args.source, name=args.name)
    return admin.create_checkpoint(args.path, store, options)


def _refresh_checkpoint(args: argparse.Namespace, store: ObjectStore) -> Any:
    return admin.refresh_checkpoint(args.path, store, args.id, args.lifetime)


def _delete_checkpoint(args: argparse.Namespace, store: ObjectStore) -> Any:
    return admin.delete_checkpoint(args.path, store, args.id)


def _list_checkpoints(args: argparse.Namespace, store: ObjectStore) -> Any:
    return admin.list_checkpoints(args.path, store, args.name)


def _expire_checkpoints(args: argparse.Namespace, store: ObjectStore) -> Any:
    return admin.expire_checkpoints(args.path, store, dry_run=args.dry_run)


def _read_manifest(args: argparse.Namespace, store: ObjectStore) -> Any:
    manifest = admin.read_manifest(args.path, store, args.id)
    return {"id": manifest.id, "manifest": manifest.value}


def _list_manifests(args: argparse.Namespace, store: ObjectStore) -> Any:
    return admin.list_manifests(args.path, store)


def _describe(args: argparse.Namespace, store: ObjectStore) -> Any:
    return admin.describe_db(args.path, store)


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--store", default=argparse.SUPPRESS, help=f"store URL (default: ${STORE_ENV}, else ./.slate)"
    )
    common.add_argument("--path", default=argparse.SUPPRESS, help="database path inside the store")
    common.add_argument(
        "--format", choices=("json", "table"), default=argparse.SUPPRESS, help="output format"
    )

    parser = argparse.ArgumentParser(
        prog="slate-ops",
        description="Operate slate_ops databases: data, checkpoints and manifests.",
        parents=[common],
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, handler: Command, help: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help, parents=[common])
        sub.set_defaults(handler=handler)
        return sub

    sub = command("create-db", _create_db, "Create an empty database (manifest 1).")
    sub.add_argument("--exist-ok", action="store_true", help="succeed if the database already exists")

    sub = command("create-checkpoint", _create_checkpoint, "Create a checkpoint of the current state.")
    sub.add_argument(
        "-l", "--lifetime", type=_duration, help='e.g. "7days 30min 10s"; default: never expires'
    )
    sub.add_argument(
        "-s",
        "--source",
        type=cli_data.checkpoint_id_arg,
        help="take the checkpoint from this existing checkpoint",
    )
    sub.add_argument("-n", "--name", help="a name to list the checkpoint by (need not be unique)")

    sub = command("refresh-checkpoint", _refresh_checkpoint, "Set a checkpoint's expiry to now + lifetime.")
    sub.add_argument("-i", "--id", type=cli_data.checkpoint_id_arg, required=True)
    sub.add_argument("-l", "--lifetime", type=_duration, help="default: never expires")

    sub = command("delete-checkpoint", _delete_checkpoint, "Delete a checkpoint.")
    sub.add_argument("-i", "--id", type=cli_data.checkpoint_id_arg, required=True)

    sub = command("list-checkpoints", _list_checkpoints, "List the checkpoints of the current manifest.")
    sub.add_argument("-n", "--name", help="only checkpoints with this name")

    sub = command(
        "expire-checkpoints", _expire_checkpoints, "Remove expired checkpoints (dry run by default)."
    )
    sub.add_argument(
        "--dry-run",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="report what would be removed without removing it (default); --no-dry-run removes",
    )

    sub = command("read-manifest", _read_manifest, "Print the current manifest, or version ID.")
    sub.add_argument("-i", "--id", type=_manifest_id)

    command("list-manifests", _list_manifests, "List the stored manifest versions.")
    command("describe", _describe, "Summarise the current manifest.")
    cli_data.register(commands, command)
    cli_compaction.register(commands, command)
    cli_clone.register(commands, command)
    cli_gc.register(commands, command)
    cli_tags.register(commands, command)
    cli_rescale.register(commands, command)
    return parser


def render_table(value: Any) -> str:
    rows = value if isinstance(value, list) else [value]
    if not rows:
        return "(none)"
    if not all(isinstance(r, dict) for r in rows):
        return "\n".join(json.dumps(r) for r in rows)
    if not isinstance(value, list):
        width = max(len(k) for k in value)
        return "\n".join(f"{k.ljust(width)}  {_cell(v)}" for k, v in value.items())
    columns = list(dict.fromkeys(k for r in rows for k in r))
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(line.rstrip() for line in lines)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return value if isinstance(value, str) else json.dumps(value)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    path = getattr(args, "path", None)
    if path is None:
        parser.error("--path is required")
    args.path = path
    output_format = getattr(args, "format", "json")
    try:
        store = open_store(getattr(args, "store", None) or default_store_url())
        result = args.handler(args, store)
        if isinstance(result, Iterator):  # data commands stream JSON lines
            cli_data.print_json_lines(result)
            return 0
        result = to_jsonable(result)
    except SlateOpsError as error:
        print(f"slate-ops: error: {error}", file=sys.stderr)
        return 1
    text = render_table(result) if output_format == "table" else json.dumps(result, indent=2)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
