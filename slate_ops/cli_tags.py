"""Tag commands of the ``slate-ops`` CLI (docs/cli.md "Tags", spec 004).

``create-tag -n NAME [-s CHECKPOINT] [--replace]`` and ``delete-tag -n NAME [--dry-run]`` print the
tag as one JSON object; ``list-tags`` prints the ``$tags`` table as a JSON list of rows
(``--format table`` prints it as columns).

``rollback -n NAME [--dry-run]`` and ``apply-tag-policy ... [--dry-run]`` change the database unless
``--dry-run`` is given (as ``destroy``, ``gc`` and ``delete-tag``; the Python API defaults to a dry
run), and print their report either way: what is (or would be) discarded, created and deleted.
"""

from __future__ import annotations

import argparse
import re
from datetime import timedelta
from typing import Any

from slate_ops.admin import (
    RollbackReport,
    apply_tag_policy,
    create_tag,
    delete_tag,
    list_tags,
    rollback_to_tag,
)
from slate_ops.admin.tag_policy import DEFAULT_NAME_FORMAT, checked_tag_policy
from slate_ops.admin.tags import Tag
from slate_ops.cli_data import CommandHelper, checkpoint_id_arg
from slate_ops.config import parse_duration
from slate_ops.jsonable import to_jsonable
from slate_ops.objstore import ObjectStore


def _create_tag(args: argparse.Namespace, store: ObjectStore) -> Tag:
    return create_tag(args.path, store, args.name, checkpoint=args.source, replace=args.replace)


def _delete_tag(args: argparse.Namespace, store: ObjectStore) -> dict[str, Any]:
    tag = delete_tag(args.path, store, args.name, dry_run=args.dry_run)
    return {"dry_run": args.dry_run, "deleted": tag}


def _list_tags(args: argparse.Namespace, store: ObjectStore) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = list_tags(args.path, store).to_pylist()
    return rows


def _rollback(args: argparse.Namespace, store: ObjectStore) -> Any:
    report = rollback_to_tag(args.path, store, args.name, dry_run=args.dry_run)
    if getattr(args, "format", "json") == "table":
        return rollback_rows(report)
    return {
        **to_jsonable(report),
        "discarded_bytes": report.discarded_bytes,
        "discarded_entries": report.discarded_entries,
    }


def rollback_rows(report: RollbackReport) -> list[dict[str, Any]]:
    """The table form: one row per discarded SST and WAL SST, then the new L0 SST."""
    action = "would discard" if report.dry_run else "discarded"
    rows = [
        _row(action, f"sst {s.sst_id}", s.level, s.size_bytes, s.num_entries) for s in report.discarded_ssts
    ]
    rows += [
        _row(action, f"wal {w.wal_id}", "wal", w.size_bytes, w.num_entries) for w in report.discarded_wal
    ]
    if report.flushed_sst is not None:
        info = report.flushed_sst.info
        wrote = "would write" if report.dry_run else "wrote"
        rows.append(_row(wrote, f"sst {report.flushed_sst.id}", "l0", info.size_bytes, info.num_entries))
    return rows


def _row(action: str, name: str, where: str, size: int, entries: int) -> dict[str, Any]:
    return {"action": action, "object": name, "where": where, "bytes": size, "entries": entries}


_HH_MM = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$")


def _hh_mm(text: str) -> str:
    if not _HH_MM.match(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a time of day 'HH:MM' (UTC, 00:00 to 23:59)")
    return text


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return int(text)


def _duration(text: str) -> timedelta:
    try:
        return parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _apply_tag_policy(args: argparse.Namespace, store: ObjectStore) -> Any:
    policy = checked_tag_policy(
        create_time=args.create_time,
        create_interval_days=args.interval_days,
        name_format=args.name_format,
        num_retained_max=args.keep,
        expire_after=args.expire_after,
    )
    return apply_tag_policy(args.path, store, policy, dry_run=args.dry_run)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser], command: CommandHelper) -> None:
    """Add the tag commands through ``command`` (``commands`` is unused)."""
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

    sub = command(
        "rollback",
        _rollback,
        "Make a tag's state current again: fence the writer and the compactor, discard everything "
        "written after the tag, and print what was discarded.",
    )
    sub.add_argument("-n", "--name", required=True, help="the tag to roll back to")
    sub.add_argument(
        "--dry-run", action="store_true", help="print exactly what would be discarded; change nothing"
    )

    sub = command(
        "apply-tag-policy",
        _apply_tag_policy,
        "Create the tag of the current period if missing and delete expired or excess policy tags.",
    )
    sub.add_argument(
        "--create-time", type=_hh_mm, default="00:00", help="HH:MM, UTC: when periods start (default 00:00)"
    )
    sub.add_argument(
        "--interval-days", type=_positive, default=1, help="days between two periods (default 1)"
    )
    sub.add_argument(
        "--name-format",
        default=DEFAULT_NAME_FORMAT,
        help=f"strftime format of the period start giving the tag name (default "
        f"{DEFAULT_NAME_FORMAT.replace('%', '%%')}); "
        "only tags with names it produces are managed",
    )
    sub.add_argument("--keep", type=_positive, help="keep at most N policy tags, the newest (default: all)")
    sub.add_argument(
        "--expire-after",
        type=_duration,
        help='delete policy tags whose period began this long ago, e.g. "30days" (default: never)',
    )
    sub.add_argument(
        "--dry-run",
        action="store_true",
        help="print exactly what would be created and deleted; change nothing",
    )
