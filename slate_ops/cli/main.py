"""The ``slate-ops`` operator CLI: a thin adapter over :mod:`slate_ops.admin` (docs/cli.md).

Output is JSON (one object or a list; data commands stream JSON lines) unless ``--format table``,
in one language (:mod:`slate_ops.cli.output`: keys as text or ``hex:``, times in ISO 8601 UTC).
Usage errors exit 2; operation errors exit 1 with one line on stderr, in the CLI's words
(:mod:`slate_ops.cli.hints`).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from slate_ops.cli import checkpoints, compaction, data, databases, gc, lifecycle, rescale, tags
from slate_ops.cli.command import DRY_RUN_NOTE, Command, Exit
from slate_ops.cli.hints import cli_message
from slate_ops.cli.output import jsonable, print_json_lines, print_value, render
from slate_ops.errors import SlateOpsError
from slate_ops.objstore import open_store

STORE_ENV = "SLATE_OPS_STORE"

GROUPS: tuple[tuple[Command, ...], ...] = (
    databases.COMMANDS,
    checkpoints.COMMANDS,
    data.COMMANDS,
    compaction.COMMANDS,
    lifecycle.COMMANDS,
    gc.COMMANDS,
    tags.COMMANDS,
    rescale.COMMANDS,
)


def default_store_url() -> str:
    """``$SLATE_OPS_STORE``, else the embedded local store under ``./.slate``."""
    return os.environ.get(STORE_ENV) or (Path.cwd() / ".slate").resolve().as_uri()


def package_version() -> str:
    """The installed slate_ops distribution's version (``importlib.metadata``)."""
    try:
        return importlib.metadata.version("slate_ops")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


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
    parser.add_argument("--version", action="version", version=f"slate-ops {package_version()}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        for command in group:
            sub = subparsers.add_parser(
                command.name,
                aliases=list(command.aliases),
                help=command.help,
                description=command.help,
                parents=[common],
            )
            sub.set_defaults(handler=command.handler, parser=sub, needs_path=command.needs_path)
            for argument in command.args:
                sub.add_argument(*argument.flags, **argument.options)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    path = getattr(args, "path", None)
    if path is None:
        if args.needs_path:
            parser.error("--path is required")
        path = ""  # list-dbs: the whole store
    args.path = path
    args.format = getattr(args, "format", "json")
    try:
        store = open_store(getattr(args, "store", None) or default_store_url())
        result = args.handler(args, store)
        if isinstance(result, Iterator):  # data commands stream JSON lines
            print_json_lines(result)
            return 0
        code = 0
        if isinstance(result, Exit):
            result, code = result.value, result.code
        result = jsonable(result)
    except SlateOpsError as error:
        print(f"slate-ops: error: {cli_message(str(error), args.path)}", file=sys.stderr)
        return 1
    print_value(render(result, args.format))
    if getattr(args, "dry_run", False):
        print(DRY_RUN_NOTE, file=sys.stderr)
    return code
