"""How a CLI command is declared: a name, a handler, a help text and its arguments.

Each command-group module lists its commands in ``COMMANDS``; :mod:`slate_ops.cli.main` builds the
parser from them, so no module registers anything by hand.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from slate_ops.objstore import ObjectStore

Handler = Callable[[argparse.Namespace, ObjectStore], Any]
"""Runs one command: the parsed arguments (``args.path``, ``args.parser`` for usage errors found
after parsing, ``args.format``) and the opened store. Returns what to print: a JSON-able value, or
an iterator of rows printed as JSON lines."""


@dataclass(frozen=True)
class Arg:
    """One ``add_argument`` call."""

    flags: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)


def arg(*flags: str, **options: Any) -> Arg:
    return Arg(flags, options)


@dataclass(frozen=True)
class Exit:
    """What a handler returns to print ``value`` and exit with ``code`` (e.g. 1: a check failed)."""

    value: Any
    code: int


@dataclass(frozen=True)
class Command:
    name: str
    handler: Handler
    help: str
    args: tuple[Arg, ...] = ()
    aliases: tuple[str, ...] = ()
    """Other names: the operator API's name in kebab case where the command's own is shorter."""
    needs_path: bool = True
    """False for a command that may run without ``--path`` (``list-dbs``: it then lists the store)."""
    read_only: bool = False
    """True for a command that never writes to the store (a command with ``--dry-run`` is read-only
    when dry). Read-only commands refuse a local store root that does not exist (docs/cli.md "Safety")."""

    def is_read_only(self, args: argparse.Namespace) -> bool:
        """Whether this run of the command writes nothing: a read-only command, or a dry run."""
        return self.read_only or getattr(args, "dry_run", False) is True


def create_flag() -> Arg:
    """``--create`` of a write command that would otherwise create a database that was never named."""
    return arg(
        "--create",
        action="store_true",
        help="create the database at --path if it does not exist (default: refuse; see create-db)",
    )


DRY_RUN_NOTE = "dry run: nothing was changed; run the same command with --no-dry-run to act"


def dry_run_flag(what: str) -> Arg:
    """The ``--dry-run/--no-dry-run`` switch of a command that deletes data, history or protection.

    The rule on every surface (docs/cli.md "Dry run by default"): such a command only reports, unless
    ``--no-dry-run`` is given; the report is exactly what a real run would do.
    """
    return arg(
        "--dry-run",
        action=argparse.BooleanOptionalAction,
        default=True,
        help=f"print exactly what {what}, and change nothing (the default); --no-dry-run acts",
    )
