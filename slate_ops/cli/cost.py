"""The ``cost`` command (docs/cli.md "Request cost"): what keeping each database under ``--path`` (default:
the whole store) maintained costs in object-store requests and dollars per day, measured on it
(:mod:`slate_ops.admin.cost`: one sensor observe, one GC dry run; reads only), most expensive
first, beside the same figures for SlateDB's defaults."""

from __future__ import annotations

import argparse
from typing import Any

from slate_ops.admin.cost import (
    GC_INTERVAL_S,
    SENSOR_POLL_INTERVAL_S,
    DatabaseCost,
    Intervals,
    fleet_cost,
    load_prices,
)
from slate_ops.cli.args import count, duration
from slate_ops.cli.command import Command, arg
from slate_ops.objstore import ObjectStore
from slate_ops.objstore.metering import S3_STANDARD


def _row(cost: DatabaseCost) -> dict[str, Any]:
    """The table form of one database: requests per day by source, then the totals of both sides."""
    row: dict[str, Any] = {"path": cost.path, "engine": cost.engine}
    row |= {s.source: s.per_day.requests for s in cost.ours}
    row |= {
        "requests/day": cost.per_day(cost.ours).requests,
        "$/month": f"{cost.dollars_per_month:.4f}",
        "slatedb requests/day": cost.per_day(cost.slatedb_defaults).requests,
        "slatedb $/month": f"{cost.slatedb_dollars_per_month:.4f}",
    }
    return row


def _cost(args: argparse.Namespace, store: ObjectStore) -> Any:
    prices = load_prices(args.prices) if args.prices is not None else S3_STANDARD
    intervals = Intervals(
        poll_s=args.poll_interval.total_seconds(),
        gc_s=args.gc_interval.total_seconds(),
        writers=args.writers,
    )
    costs = fleet_cost(store, args.path, intervals, prices)
    if args.format == "table":
        return [_row(c) for c in costs]
    return {"prices": prices, "intervals": intervals, "databases": [c.to_dict() for c in costs]}


COMMANDS = (
    Command(
        "cost",
        _cost,
        "What keeping each database under --path (default: the whole store) maintained costs in "
        "object-store requests per day by source and dollars, measured on it (one sensor poll, one GC "
        "dry run), most expensive first, beside SlateDB's defaults (GC every 10 min, compactor polls "
        "every 5 s, writer polls every second). Reads only.",
        (
            arg("--prices", metavar="FILE", help="price table (YAML or JSON; default S3 Standard us-east-1)"),
            arg(
                "--poll-interval",
                type=duration,
                default=duration(f"{SENSOR_POLL_INTERVAL_S}s"),
                help=f'how often each manifest sensor polls (default "{SENSOR_POLL_INTERVAL_S}s")',
            ),
            arg(
                "--gc-interval",
                type=duration,
                default=duration(f"{GC_INTERVAL_S // 3600}h"),
                help=f'how often GC runs (default "{GC_INTERVAL_S // 3600}h", the GC schedule\'s)',
            ),
            arg("--writers", type=count, default=1, help="writers polling each database (default 1)"),
            arg(
                "--json", dest="format", action="store_const", const="json", help="JSON output (the default)"
            ),
        ),
        needs_path=False,
        read_only=True,
    ),
)
