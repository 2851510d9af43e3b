"""Tag commands (docs/cli.md "Tags"): create, delete and list tags, roll back, apply a tag policy.

``create-tag`` and ``delete-tag`` print the tag as one JSON object; ``list-tags`` prints the ``$tags``
table as a JSON list of rows. ``rollback`` and ``apply-tag-policy`` print their report: what is (or
with ``--dry-run`` would be) discarded, created and deleted. Every command goes through the admin
handle (tags are named checkpoints on both engines); ``rollback`` in place is slate_ops' only: on a
SlateDB database use ``restore --tag NAME --into NEW``.
"""

from __future__ import annotations

import argparse
from typing import Any

from slate_ops import admin
from slate_ops.admin.tag_policy import DEFAULT_NAME_FORMAT, checked_tag_policy
from slate_ops.cli.args import checkpoint_id, duration, positive_int, time_of_day
from slate_ops.cli.command import Command, arg, dry_run_flag
from slate_ops.cli.handle import open_db
from slate_ops.cli.output import jsonable
from slate_ops.objstore import ObjectStore
from slate_ops.objstore.metering import render_requests


def _create_tag(args: argparse.Namespace, store: ObjectStore) -> dict[str, Any]:
    db = open_db(args, store)
    tag = db.create_tag(args.name, checkpoint=args.source, replace=args.replace)
    return {**jsonable(tag), "requests": db.last_requests.to_dict()}


def _delete_tag(args: argparse.Namespace, store: ObjectStore) -> dict[str, Any]:
    db = open_db(args, store)
    tag = db.delete_tag(args.name, dry_run=args.dry_run)
    return {"dry_run": args.dry_run, "deleted": tag, "requests": db.last_requests.to_dict()}


def _list_tags(args: argparse.Namespace, store: ObjectStore) -> list[dict[str, Any]]:
    """The ``$tags`` rows, with ``create_time_s`` (Unix seconds) beside ``create_time`` as in every
    other output."""
    rows: list[dict[str, Any]] = open_db(args, store).list_tags().to_pylist()
    out = []
    for row in rows:
        with_seconds: dict[str, Any] = {}
        for key, value in row.items():
            if key == "create_time":
                with_seconds["create_time_s"] = int(value.timestamp())
            with_seconds[key] = value
        out.append(with_seconds)
    return out


def _rollback(args: argparse.Namespace, store: ObjectStore) -> Any:
    report = open_db(args, store).rollback_to_tag(args.name, dry_run=args.dry_run)
    if args.format == "table":
        return rollback_rows(report)
    return {
        **jsonable(report),
        "discarded_bytes": report.discarded_bytes,
        "discarded_entries": report.discarded_entries,
    }


def rollback_rows(report: admin.RollbackReport) -> list[dict[str, Any]]:
    """The table form: the rollback itself (the tag, the manifests before and after, what it discards
    in all), then one row per discarded SST and WAL SST, then the new L0 SST, then what it cost in
    object-store requests. Never empty: a rollback that discards nothing still moves the database to
    the tag's state."""
    action = "would discard" if report.dry_run else "discarded"
    rolled = "would roll back to" if report.dry_run else "rolled back to"
    rows = [
        _row(
            rolled,
            f"tag {report.tag.name}",
            f"manifest {report.manifest_id_before} -> {report.manifest_id_after}",
            report.discarded_bytes,
            report.discarded_entries,
        )
    ]
    rows += [
        _row(action, f"sst {s.sst_id}", s.level, s.size_bytes, s.num_entries) for s in report.discarded_ssts
    ]
    rows += [
        _row(action, f"wal {w.wal_id}", "wal", w.size_bytes, w.num_entries) for w in report.discarded_wal
    ]
    if report.flushed_sst is not None:
        info = report.flushed_sst.info
        wrote = "would write" if report.dry_run else "wrote"
        rows.append(_row(wrote, f"sst {report.flushed_sst.id}", "l0", info.size_bytes, info.num_entries))
    rows.append({"action": "requests", "object": render_requests(report.requests)})
    return rows


def _row(action: str, name: str, where: str, size: int, entries: int) -> dict[str, Any]:
    return {"action": action, "object": name, "where": where, "bytes": size, "entries": entries}


def _apply_tag_policy(args: argparse.Namespace, store: ObjectStore) -> Any:
    policy = checked_tag_policy(
        create_time=args.create_time,
        create_interval_days=args.interval_days,
        name_format=args.name_format,
        num_retained_max=args.keep,
        expire_after=args.expire_after,
    )
    return open_db(args, store).apply_tag_policy(policy, dry_run=args.dry_run)


_NAME = "-n", "--name"

COMMANDS = (
    Command(
        "create-tag",
        _create_tag,
        "Tag the current state (or a checkpoint's): a never-expiring checkpoint with a unique name.",
        (
            arg(*_NAME, required=True, help="the tag's name (unique; no whitespace)"),
            arg(
                "-s",
                "--source",
                metavar="CHECKPOINT",
                type=checkpoint_id,
                help="tag this live checkpoint's state",
            ),
            arg("--replace", action="store_true", help="replace an existing tag of that name"),
        ),
    ),
    Command(
        "delete-tag",
        _delete_tag,
        "Delete a tag (its checkpoint); GC may then release its data.",
        (
            arg(*_NAME, required=True, help="the tag to delete"),
            dry_run_flag("tag would be deleted"),
        ),
    ),
    Command(
        "list-tags",
        _list_tags,
        "List the tags ($tags: name, checkpoint, manifest, time, records, bytes).",
        read_only=True,
    ),
    Command(
        "rollback",
        _rollback,
        "Make a tag's state current again: fence the writer and the compactor, discard everything "
        "written after the tag, and print what was discarded.",
        (
            arg(*_NAME, required=True, help="the tag to roll back to"),
            dry_run_flag("would be discarded"),
        ),
        aliases=("rollback-to-tag",),
    ),
    Command(
        "apply-tag-policy",
        _apply_tag_policy,
        "Create the tag of the current period if missing and delete expired or excess policy tags.",
        (
            arg(
                "--create-time",
                type=time_of_day,
                default="00:00",
                help="HH:MM, UTC: when periods start (default 00:00)",
            ),
            arg("--interval-days", type=positive_int, default=1, help="days between two periods (default 1)"),
            arg(
                "--name-format",
                default=DEFAULT_NAME_FORMAT,
                help=f"strftime format of the period start giving the tag name (default "
                f"{DEFAULT_NAME_FORMAT.replace('%', '%%')}); only tags with names it produces are managed",
            ),
            arg("--keep", type=positive_int, help="keep at most N policy tags, the newest (default: all)"),
            arg(
                "--expire-after",
                type=duration,
                help='delete policy tags whose period began this long ago, e.g. "30days" (default: never)',
            ),
            dry_run_flag("would be created and deleted"),
        ),
    ),
)
