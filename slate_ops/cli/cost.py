"""The ``cost`` command (docs/cli.md "Request cost"): what keeping each database under ``--path`` (default:
the whole store) maintained costs in object-store requests and dollars per day, measured on it
(:mod:`slate_ops.admin.cost`: one sensor observe, one GC dry run; reads only), most expensive
first, beside the same figures for SlateDB's defaults; then the fleet's own cost, discovering
``--path`` at ``--discover-interval`` (:func:`~slate_ops.admin.cost.fleet_discovery_cost`)."""

from __future__ import annotations

import argparse
from typing import Any

from slate_ops.admin.cost import (
    DISCOVER_INTERVAL_S,
    GC_INTERVAL_S,
    SENSOR_POLL_INTERVAL_S,
    DatabaseCost,
    DiscoveryCost,
    Intervals,
    fleet_cost,
    fleet_discovery_cost,
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


def _discovery_row(cost: DiscoveryCost) -> dict[str, Any]:
    """The table form of the fleet's discovery: a row of its own after the databases'."""
    return {
        "path": f"(discovery: {cost.objects} objects)",
        "engine": "-",
        "requests/day": cost.per_day.requests,
        "$/month": f"{cost.dollars_per_month:.4f}",
    }


def _cost(args: argparse.Namespace, store: ObjectStore) -> Any:
    prices = load_prices(args.prices) if args.prices is not None else S3_STANDARD
    intervals = Intervals(
        poll_s=args.poll_interval.total_seconds(),
        gc_s=args.gc_interval.total_seconds(),
        writers=args.writers,
    )
    costs = fleet_cost(store, args.path, intervals, prices)
    discovery = fleet_discovery_cost(store, args.path, args.discover_interval.total_seconds(), prices)
    if args.format == "table":
        return [*(_row(c) for c in costs), _discovery_row(discovery)]
    return {
        "prices": prices,
        "intervals": intervals,
        "databases": [c.to_dict() for c in costs],
        "discovery": discovery.to_dict(),
    }


COMMANDS = (
    Command(
        "cost",
        _cost,
        "What keeping each database under --path (default: the whole store) maintained costs in "
        "object-store requests per day by source and dollars, measured on it (one sensor poll, one GC "
        "dry run), most expensive first, beside SlateDB's defaults (GC every 10 min, compactor polls "
        "every 5 s, writer polls every second); then what a Dagster fleet discovering --path pays "
        "for its discovery LISTs (a fleet-level cost). Reads only.",
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
                "--discover-interval",
                type=duration,
                default=duration(f"{DISCOVER_INTERVAL_S}s"),
                help=f"how long the fleet's sensors reuse a discovery listing (discover.interval_minutes; "
                f'default "{DISCOVER_INTERVAL_S}s"; "30s" or less: every tick)',
            ),
            arg(
                "--json", dest="format", action="store_const", const="json", help="JSON output (the default)"
            ),
        ),
        needs_path=False,
        read_only=True,
    ),
)
