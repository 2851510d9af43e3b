"""Data commands of the ``slate-ops`` CLI: ``put``, ``get``, ``delete`` and ``scan`` (docs/cli.md).

Keys and values are given as UTF-8 text, or as hex with a ``hex:`` prefix (``hex:00ff``); invalid
hex is a usage error (exit 2). Output is JSON lines, one ``{"key": ..., "value": ...}`` object per
row, with keys and values in the same convention (text when the bytes are UTF-8 that does not start
with ``hex:``, else ``hex:<lowercase hex>``), so any output can be pasted back as input.

``put`` and ``delete`` open the database as its writer (fencing any running writer), write with
``await_durable=True`` and close. ``get`` and ``scan`` read through a :class:`~slate_ops.DbReader`,
which never fences the writer.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TextIO

from slate_ops import Db, DbOptions, DbReader
from slate_ops.jsonable import to_jsonable
from slate_ops.objstore import ObjectStore

HEX_PREFIX = "hex:"
_HEX = re.compile(r"(?:[0-9a-fA-F]{2})*")

Row = dict[str, str | None]
Handler = Callable[[argparse.Namespace, ObjectStore], Any]
CommandHelper = Callable[[str, Handler, str], argparse.ArgumentParser]


def parse_bytes(text: str) -> bytes:
    """``hex:<hex>`` as the bytes it spells, anything else as its UTF-8 encoding.

    Raises :class:`argparse.ArgumentTypeError` (a usage error) for malformed hex. Arguments that
    the OS passed as undecodable bytes come back byte for byte (``surrogateescape``).
    """
    if text.startswith(HEX_PREFIX):
        digits = text[len(HEX_PREFIX) :]
        if not _HEX.fullmatch(digits):
            raise argparse.ArgumentTypeError(
                f"{text!r} is not valid hex: after 'hex:' give an even number of hex digits (e.g. hex:00ff)"
            )
        return bytes.fromhex(digits)
    return text.encode("utf-8", "surrogateescape")


def parse_key(text: str) -> bytes:
    """:func:`parse_bytes` for a key: also refuses the empty key (a usage error)."""
    key = parse_bytes(text)
    if not key:
        raise argparse.ArgumentTypeError(
            f"{text!r} is an empty key; keys are at least one byte (text, or hex:<hex> such as hex:00)"
        )
    return key


def render_bytes(data: bytes) -> str:
    """The inverse of :func:`parse_bytes`: UTF-8 text when that round-trips, else ``hex:<hex>``."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return HEX_PREFIX + data.hex()
    return HEX_PREFIX + data.hex() if text.startswith(HEX_PREFIX) else text


def row(key: bytes, value: bytes | None) -> Row:
    """One output line: ``value`` None means the key has no value."""
    return {"key": render_bytes(key), "value": None if value is None else render_bytes(value)}


def print_json_lines(rows: Iterable[Any], file: TextIO | None = None) -> int:
    """Print each row as one compact JSON line; returns the number printed.

    Rows are passed through :func:`slate_ops.jsonable.to_jsonable`. A generator is closed when done
    (so a scan releases its reader even if printing stops early); a closed pipe (``| head``) ends
    the output quietly.
    """
    out = file if file is not None else sys.stdout
    count = 0
    try:
        for item in rows:
            out.write(json.dumps(to_jsonable(item)) + "\n")
            count += 1
        out.flush()
    except BrokenPipeError:
        if out is not sys.stdout:
            raise
        # Point stdout at devnull so the interpreter's final flush does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        close = getattr(rows, "close", None)
        if close is not None:
            close()
    return count


def positive_int(text: str) -> int:
    """argparse type of a count: an integer >= 1 (else a usage error)."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return int(text)


def checkpoint_id_arg(text: str) -> uuid.UUID:
    """argparse type of a checkpoint id; shared by every command that takes one."""
    try:
        return uuid.UUID(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a checkpoint id (a UUID, as printed by create-checkpoint)"
        ) from None


def _put(args: argparse.Namespace, store: ObjectStore) -> Iterator[Row]:
    with Db.open(args.path, store, options=DbOptions(await_durable=True)) as db:
        db.put(args.key, args.value)
    return iter([row(args.key, args.value)])


def _delete(args: argparse.Namespace, store: ObjectStore) -> Iterator[Row]:
    with Db.open(args.path, store, options=DbOptions(await_durable=True)) as db:
        db.delete(args.key)
    return iter([row(args.key, None)])


def _get(args: argparse.Namespace, store: ObjectStore) -> Iterator[Row]:
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
        args.scan_parser.error("--prefix cannot be combined with --from/--to")
    if args.start is not None and args.end is not None and args.start > args.end:
        args.scan_parser.error(
            f"--from {render_bytes(args.start)} is after --to {render_bytes(args.end)}; the range is "
            "[from, to): swap them"
        )
    # Opened here, not lazily, so a missing database or checkpoint fails before any output.
    reader = DbReader.open(args.path, store, checkpoint_id=args.checkpoint)
    return _scan_rows(args, reader)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser], command: CommandHelper) -> None:
    """Add ``put``, ``get``, ``delete`` and ``scan`` through the CLI's ``command`` helper.

    ``commands`` (the subparsers action) is accepted for commands that need it; these do not.
    """
    del commands
    key_help = "UTF-8 text, or hex:<hex> (e.g. hex:00ff)"

    sub = command(
        "put",
        _put,
        "Write KEY=VALUE durably. Opens the database as its writer, which fences any running writer.",
    )
    sub.add_argument("key", metavar="KEY", type=parse_key, help=key_help)
    sub.add_argument("value", metavar="VALUE", type=parse_bytes, help=key_help)

    sub = command("get", _get, 'Print KEY\'s value ("value": null if absent). Never fences the writer.')
    sub.add_argument("key", metavar="KEY", type=parse_key, help=key_help)

    sub = command(
        "delete",
        _delete,
        "Delete KEY durably. Opens the database as its writer, which fences any running writer.",
    )
    sub.add_argument("key", metavar="KEY", type=parse_key, help=key_help)

    sub = command(
        "scan", _scan, "Print rows in key order as JSON lines. Reads a checkpoint; never fences the writer."
    )
    sub.set_defaults(scan_parser=sub)  # for usage errors found after parsing
    sub.add_argument("--prefix", metavar="P", type=parse_key, help="only keys starting with P (text or hex:)")
    sub.add_argument("--from", dest="start", metavar="A", type=parse_key, help="first key (inclusive)")
    sub.add_argument("--to", dest="end", metavar="B", type=parse_key, help="end key (exclusive)")
    sub.add_argument(
        "--checkpoint",
        metavar="ID",
        type=checkpoint_id_arg,
        help="read this checkpoint's state (default: a fresh checkpoint of the current state)",
    )
    sub.add_argument("--max-keys", metavar="N", type=positive_int, help="stop after N rows")
