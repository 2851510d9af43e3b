"""Data commands: ``put``, ``get``, ``delete`` and ``scan`` (docs/cli.md).

Keys and values are given as UTF-8 text, or as hex with a ``hex:`` prefix (``hex:00ff``); invalid
hex is a usage error (exit 2). Output is JSON lines, one ``{"key": ..., "value": ...}`` object per
row, in the same convention (:mod:`slate_ops.keytext`), so any output can be pasted back as input.

``put`` and ``delete`` open the database as its writer (fencing any running writer), write with
``await_durable=True`` and close; a database that does not exist is refused unless ``--create``.
``get`` and ``scan`` read through a :class:`~slate_ops.DbReader`, which never fences the writer; its
checkpoint of the current state (added, then removed: two manifest versions) is all they write.
They read and write slate_ops databases only: on a SlateDB database they refuse
(:class:`~slate_ops.errors.UnsupportedOnEngineError`, exit 1) and change nothing.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from slate_ops import Db, DbOptions, DbReader
from slate_ops.cli.args import checkpoint_id, parse_bytes, parse_key, positive_int
from slate_ops.cli.command import Command, arg, create_flag
from slate_ops.cli.handle import require_slate_ops
from slate_ops.errors import DbNotFoundError
from slate_ops.keytext import render_bytes
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import ObjectStore

Row = dict[str, str | None]


def row(key: bytes, value: bytes | None) -> Row:
    """One output line: ``value`` None means the key has no value."""
    return {"key": render_bytes(key), "value": None if value is None else render_bytes(value)}


def require_db(args: argparse.Namespace, store: ObjectStore) -> None:
    """Refuse to write to a database that does not exist unless ``--create`` was given: a mistyped
    ``--path`` must not silently create a new database (docs/cli.md "Safety")."""
    if args.create:
        return
    manifests = ManifestStore(store, args.path)
    if manifests.read_latest() is None:
        raise DbNotFoundError(
            f"no database at {manifests.location}; nothing was written. Create it with "
            f"`slate-ops --path {args.path} create-db` or pass --create (check --path for a typo)"
        )


_SLATEDB_DATA = "read and write a SlateDB database with SlateDB's own client (its Db and DbReader)"


def _put(args: argparse.Namespace, store: ObjectStore) -> Iterator[Row]:
    require_slate_ops(args, store, "put", _SLATEDB_DATA)
    require_db(args, store)
    with Db.open(args.path, store, options=DbOptions(await_durable=True)) as db:
        db.put(args.key, args.value)
    return iter([row(args.key, args.value)])


def _delete(args: argparse.Namespace, store: ObjectStore) -> Iterator[Row]:
    require_slate_ops(args, store, "delete", _SLATEDB_DATA)
    require_db(args, store)
    with Db.open(args.path, store, options=DbOptions(await_durable=True)) as db:
        db.delete(args.key)
    return iter([row(args.key, None)])


def _get(args: argparse.Namespace, store: ObjectStore) -> Iterator[Row]:
    require_slate_ops(args, store, "get", _SLATEDB_DATA)
    reader = DbReader.open(args.path, store)
    try:
        value = reader.get(args.key)
    finally:
        reader.close()
    return iter([row(args.key, value)])


def _scan_rows(args: argparse.Namespace, reader: DbReader) -> Iterator[Row]:
    try:
        rows: Iterator[tuple[bytes, bytes]] = (
            reader.scan_prefix(args.prefix) if args.prefix is not None else reader.scan(args.start, args.end)
        )
        for count, (key, value) in enumerate(rows, start=1):
            yield row(key, value)
            if args.max_keys is not None and count >= args.max_keys:
                break
    finally:
        reader.close()


def _scan(args: argparse.Namespace, store: ObjectStore) -> Iterator[Row]:
    if args.prefix is not None and (args.start is not None or args.end is not None):
        args.parser.error("--prefix cannot be combined with --from/--to")
    if args.start is not None and args.end is not None and args.start > args.end:
        args.parser.error(
            f"--from {render_bytes(args.start)} is after --to {render_bytes(args.end)}; the range is "
            "[from, to): swap them"
        )
    require_slate_ops(args, store, "scan", _SLATEDB_DATA)
    # Opened here, not lazily, so a missing database or checkpoint fails before any output.
    reader = DbReader.open(args.path, store, checkpoint_id=args.checkpoint)
    return _scan_rows(args, reader)


_TEXT = "UTF-8 text, or hex:<hex> (e.g. hex:00ff)"
_KEY = arg("key", metavar="KEY", type=parse_key, help=_TEXT)

COMMANDS = (
    Command(
        "put",
        _put,
        "Write KEY=VALUE durably. Opens the database as its writer, which fences any running writer.",
        (_KEY, arg("value", metavar="VALUE", type=parse_bytes, help=_TEXT), create_flag()),
    ),
    Command(
        "get",
        _get,
        'Print KEY\'s value ("value": null if absent). Never fences the writer.',
        (_KEY,),
        # not read_only: the reader adds and then removes its own checkpoint (two manifest versions)
    ),
    Command(
        "delete",
        _delete,
        "Delete KEY durably. Opens the database as its writer, which fences any running writer.",
        (_KEY, create_flag()),
    ),
    Command(
        "scan",
        _scan,
        "Print rows in key order as JSON lines. Reads a checkpoint; never fences the writer.",
        (
            arg("--prefix", metavar="P", type=parse_key, help="only keys starting with P (text or hex:)"),
            arg("--from", dest="start", metavar="A", type=parse_key, help="first key (inclusive)"),
            arg("--to", dest="end", metavar="B", type=parse_key, help="end key (exclusive)"),
            arg(
                "--checkpoint",
                metavar="ID",
                type=checkpoint_id,
                help="read this checkpoint's state (default: a fresh checkpoint of the current state)",
            ),
            arg("--max-keys", metavar="N", type=positive_int, help="stop after N rows"),
        ),
        # not read_only: without --checkpoint the reader adds and removes its own checkpoint
    ),
)
