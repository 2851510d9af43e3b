"""Rescaling commands (docs/cli.md, docs/design/rescaling.md).

``split --at KEY [--at KEY ...] --into PATH [--into PATH ...]`` splits the database at ``--path``;
``merge --source PATH [--source PATH ...]`` merges sources into a new database at ``--path``;
``suggest-split-keys -n N`` proposes keys that balance bytes; ``flush`` moves a database's WAL
writes into L0 (what split and merge require). All four go through the admin handle (either
engine: SlateDB's projection and union clones). Keys are text or ``hex:<hex>``; reports print keys
the same way, so they can be pasted back.
"""

from __future__ import annotations

import argparse
from typing import Any

from slate_ops import admin
from slate_ops.admin.handle import merge as merge_dbs
from slate_ops.cli.args import parse_key, positive_int
from slate_ops.cli.command import Arg, Command, arg
from slate_ops.cli.handle import engine_of, open_db
from slate_ops.keytext import render_bytes, render_optional
from slate_ops.manifest.model import KeyRange
from slate_ops.objstore import ObjectStore


def _range(key_range: KeyRange | None) -> dict[str, str | None] | None:
    if key_range is None:
        return None
    return {"start": render_optional(key_range.start), "end": render_optional(key_range.end)}


def _report(report: admin.RescaleReport) -> dict[str, Any]:
    return {
        "operation": report.operation,
        "sources": report.sources,
        "created": report.created,
        "source_checkpoints": report.source_checkpoints,
        "sst_bytes_copied": report.sst_bytes_copied,
        "seconds": round(report.seconds, 3),
        "requests": report.requests.to_dict(),
        "databases": [
            {
                "path": d.path,
                "key_range": _range(d.key_range),
                "manifest_id": d.manifest_id,
                "l0_views": d.l0_views,
                "sorted_runs": d.sorted_runs,
                "ssts": d.ssts,
                "bytes": d.bytes,
            }
            for d in report.databases
        ],
    }


def _split(args: argparse.Namespace, store: ObjectStore) -> dict[str, Any]:
    return _report(open_db(args, store).split(args.at, args.into, flush_wal=args.flush_wal))


def _merge(args: argparse.Namespace, store: ObjectStore) -> dict[str, Any]:
    return _report(merge_dbs(args.source, store, args.path, engine=engine_of(args), flush_wal=args.flush_wal))


def _suggest(args: argparse.Namespace, store: ObjectStore) -> dict[str, Any]:
    """The split keys; when there are fewer than ``n - 1``, ``reason`` says why (no SSTs, ``-n 1``, too
    few blocks, a block too heavy)."""
    suggestion = open_db(args, store).explain_split_keys(args.n)
    out: dict[str, Any] = {
        "path": args.path,
        "n": args.n,
        "split_keys": [render_bytes(k) for k in suggestion.keys],
    }
    if suggestion.reason is not None:
        out["reason"] = suggestion.reason
    return out


def _flush(args: argparse.Namespace, store: ObjectStore) -> dict[str, Any]:
    """Through the handle on either engine (a missing database is refused, never created); prints
    the manifest and the L0 count afterwards."""
    db = open_db(args, store)
    db.flush_wal()
    status = db.describe()
    return {"path": args.path, "manifest_id": status.manifest_id, "l0_views": status.l0_ssts}


def _flush_wal_flag(what: str) -> Arg:
    return arg(
        "--flush-wal",
        action="store_true",
        help=f"first move {what} WAL-only writes into L0 by opening it as its writer (FENCES a running "
        "writer; what `flush` does); without it such a database is refused",
    )


COMMANDS = (
    Command(
        "split",
        _split,
        "Split the database at --path into shards (metadata only: the shards reference its SSTs). "
        "Re-running it finishes an interrupted split.",
        (
            arg(
                "--at",
                action="append",
                required=True,
                type=parse_key,
                metavar="KEY",
                help="a split key (repeat)",
            ),
            arg(
                "--into",
                action="append",
                required=True,
                metavar="PATH",
                help="a shard path, one more than --at",
            ),
            _flush_wal_flag("the database's"),
        ),
    ),
    Command(
        "merge",
        _merge,
        "Merge databases with disjoint key ranges into a new database at --path (metadata only).",
        (
            arg("--source", action="append", required=True, metavar="PATH", help="a source (repeat)"),
            _flush_wal_flag("each source's"),
        ),
    ),
    Command(
        "suggest-split-keys",
        _suggest,
        "Propose split keys that balance the SST bytes.",
        (arg("-n", type=positive_int, required=True, help="the number of shards (>= 1)"),),
        read_only=True,
    ),
    Command(
        "flush",
        _flush,
        "Open the database as its writer (fencing the current one), move its WAL writes into L0, close.",
    ),
)
