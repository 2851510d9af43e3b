"""The ``slate-ops`` operator CLI: a thin adapter over :mod:`slate_ops.admin` (docs/cli.md).

Every maintenance command opens its database through the admin handle (:mod:`slate_ops.cli.handle`,
``--engine {auto,slate_ops,slatedb}``), so the same commands, flags and JSON shapes serve databases
slate_ops wrote and databases SlateDB wrote; the CLI never imports an engine.

Output is JSON (one object or a list; data commands stream JSON lines) unless ``--format table``,
in one language (:mod:`slate_ops.cli.output`: keys as text or ``hex:``, times in ISO 8601 UTC).
Usage errors exit 2; operation errors exit 1 with one line on stderr, in the CLI's words
(:mod:`slate_ops.cli.hints`), store URLs in them redacted (:func:`~slate_ops.objstore.redact_url`).

Safety (docs/cli.md "Safety"): no option may be abbreviated (a mistyped one gets "did you mean");
read-only commands write nothing and fail on a local root that does not exist; writes never create a
database that was not named (``create-db``, or ``--create`` on ``put``/``delete``), nor a local root
that looks like a mistyped scheme.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.metadata
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NoReturn

from slate_ops.cli import checkpoints, compaction, cost, data, databases, gc, lifecycle, rescale, tags
from slate_ops.cli.command import DRY_RUN_NOTE, Command, Exit
from slate_ops.cli.handle import AUTO, ENGINE_CHOICES
from slate_ops.cli.hints import cli_message
from slate_ops.cli.output import jsonable, print_json_lines, print_value, render
from slate_ops.errors import DbNotFoundError, SlateOpsError, StoreNotFoundError, StoreRootNotFoundError
from slate_ops.objstore import LocalStore, ObjectStore, open_store, redact_url

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
    cost.COMMANDS,
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
    """The CLI's parser. No parser of the tree accepts abbreviated options (``allow_abbrev=False``):
    ``gc --no-dry`` is an error with a hint, never ``--no-dry-run``."""
    common = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    common.add_argument(
        "--store", default=argparse.SUPPRESS, help=f"store URL (default: ${STORE_ENV}, else ./.slate)"
    )
    common.add_argument("--path", default=argparse.SUPPRESS, help="database path inside the store")
    common.add_argument(
        "--format", choices=("json", "table"), default=argparse.SUPPRESS, help="output format"
    )
    common.add_argument(
        "--engine",
        choices=ENGINE_CHOICES,
        default=argparse.SUPPRESS,
        help="the engine that wrote the database (default auto: detected from its manifest)",
    )
    parser = argparse.ArgumentParser(
        prog="slate-ops",
        description="Operate slate_ops and SlateDB databases: data, checkpoints, tags, clones, compaction, "
        "GC.",
        parents=[common],
        allow_abbrev=False,
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
                allow_abbrev=False,
            )
            sub.set_defaults(handler=command.handler, parser=sub, needs_path=command.needs_path, spec=command)
            for argument in command.args:
                sub.add_argument(*argument.flags, **argument.options)
    return parser


def unrecognized(parser: argparse.ArgumentParser, extras: Sequence[str]) -> NoReturn:
    """Exit 2 (a usage error, as argparse does) naming ``extras``, with "did you mean" for each
    mistyped option: the one option of ``parser`` it abbreviates, else the closest by ``difflib``."""
    options = sorted({flag for action in parser._actions for flag in action.option_strings})
    hints: list[str] = []
    for token in extras:
        if not token.startswith("-"):
            continue
        flag = token.split("=", 1)[0]
        extended = [option for option in options if option.startswith(flag)]
        close = extended if len(extended) == 1 else difflib.get_close_matches(flag, options, n=1)
        if close:
            hints.append(f"{flag}: did you mean {close[0]}?")
    message = f"unrecognized arguments: {' '.join(extras)}"
    if hints:
        message += f" ({'; '.join(hints)} Options are never abbreviated.)"
    parser.error(message)


def missing_root(store: ObjectStore, url: str, cause: str | None = None) -> StoreNotFoundError | None:
    """The error of a read against a local store whose root does not exist (None if it exists):
    ``cause`` (the command's own error, e.g. "no database at ...") and then the missing directory."""
    if not isinstance(store, LocalStore) or store.root.is_dir():
        return None
    what = f"{cause}; the store's" if cause else "no database there: the store's"
    return StoreNotFoundError(
        f"{what} directory {store.root} does not exist (store {redact_url(url)!r}); nothing was read "
        f"or created. Check --store or ${STORE_ENV} (a new store starts with "
        "`slate-ops --path PATH create-db`)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:
        unrecognized(getattr(args, "parser", parser), extras)
    path = getattr(args, "path", None)
    if path is None:
        if args.needs_path:
            parser.error("--path is required")
        path = ""  # list-dbs: the whole store
    args.path = path
    args.format = getattr(args, "format", "json")
    args.engine = getattr(args, "engine", AUTO)
    url = getattr(args, "store", None) or default_store_url()
    try:
        store = open_store(url)  # refuses a mistyped scheme (s3//bucket) whose directory is missing
        try:
            result = args.handler(args, store)
        except StoreRootNotFoundError:  # the store's own error already names the missing directory
            raise
        except DbNotFoundError as error:  # also name a missing store directory, the likelier typo
            missing = missing_root(store, url, str(error))
            if missing is None:
                raise
            raise missing from error
        missing = missing_root(store, url) if args.spec.is_read_only(args) else None
        if missing is not None:  # e.g. list-dbs: an empty listing would hide the typo
            raise missing
        if isinstance(result, Iterator):  # data commands stream JSON lines
            print_json_lines(result)
            return 0
        code = 0
        if isinstance(result, Exit):
            result, code = result.value, result.code
        result = jsonable(result)
    except SlateOpsError as error:
        message = cli_message(str(error), args.path)
        if url != redact_url(url):  # a message quoting the URL as given shows it redacted
            message = message.replace(url, redact_url(url))
        print(f"slate-ops: error: {message}", file=sys.stderr)
        return 1
    print_value(render(result, args.format))
    if getattr(args, "dry_run", False):
        print(DRY_RUN_NOTE, file=sys.stderr)
    return code
