"""The ``gc`` command (docs/cli.md, docs/design/gc.md).

``slate-ops --path P gc [--resource R ...] [--min-age 10min] [--dry-run]`` runs the garbage collector
once and prints its report: JSON by default, a summary table with ``--format table``. A dry run
prints exactly what a real run would delete. A run with errors prints its report as well, then the
error on stderr, and exits 1. The same flags and report on a SlateDB database (through the admin
handle: the dry run is slate_ops' plan, the run SlateDB's ``run_gc_once``; docs/cli.md "Two engines").
"""

from __future__ import annotations

import argparse
from typing import Any, get_args

from slate_ops.cli.args import duration, min_age, positive_int
from slate_ops.cli.command import Command, Exit, arg, dry_run_flag
from slate_ops.cli.handle import open_db
from slate_ops.cli.output import jsonable, print_value, render
from slate_ops.config import format_duration
from slate_ops.errors import GcFailedError
from slate_ops.gc import ALL_RESOURCES, MIN_AGE_FLOOR, GcOptions, GcReport, Resource
from slate_ops.objstore import ObjectStore
from slate_ops.objstore.metering import render_requests

RESOURCE_CHOICES = (*get_args(Resource), "all")


def gc_options(args: argparse.Namespace) -> GcOptions:
    chosen = set(args.resource or ["all"])
    resources = ALL_RESOURCES if "all" in chosen else frozenset(chosen)
    values: dict[str, Any] = {"resources": resources}
    if args.min_age is not None:
        values |= dict.fromkeys(
            ("manifest_min_age", "compactions_min_age", "wal_min_age", "compacted_min_age"), args.min_age
        )
    if getattr(args, "db_delete_grace", None) is not None:
        values["db_delete_grace"] = args.db_delete_grace
    if getattr(args, "interval", None) is not None:
        values["interval"] = args.interval
    return GcOptions.model_validate(values)


def report_rows(report: GcReport) -> list[dict[str, Any]]:
    """The table form: one row per resource, then checkpoints, clones and the destroyed database,
    and what the run cost in object-store requests."""
    action = "would delete" if report.dry_run else "deleted"
    rows = [
        {
            "resource": r.resource,
            "action": action,
            "objects": r.count,
            "bytes": r.bytes,
            "listed": r.listed,
            "boundary": r.boundary,
            "errors": len(r.errors),
        }
        for r in report.resources
    ]
    rows.append({"resource": "checkpoints", "action": "would expire" if report.dry_run else "expired",
                 "objects": len(report.checkpoints_expired)})  # fmt: skip
    rows.append({"resource": "clones", "action": "would detach" if report.dry_run else "detached",
                 "objects": len(report.clones_detached)})  # fmt: skip
    if report.destroyed:
        rows.append(
            {
                "resource": "database",
                "action": action,
                "objects": len(report.destroyed_objects),
                "bytes": sum(d.size for d in report.destroyed_objects),
            }
        )
    rows.append({"resource": "requests", "action": render_requests(report.requests)})
    return rows


def _as_output(report: GcReport, output_format: str) -> Any:
    return jsonable(report_rows(report) if output_format == "table" else report)


def _gc(args: argparse.Namespace, store: ObjectStore) -> Any:
    try:
        report = open_db(args, store).run_gc(gc_options(args), dry_run=args.dry_run)
        return _as_output(report, args.format)
    except GcFailedError as error:
        if isinstance(error.report, GcReport):  # the report first, then the error (exit 1)
            print_value(render(_as_output(error.report, args.format), args.format))
        raise


def _gc_health(args: argparse.Namespace, store: ObjectStore) -> Exit:
    """The GC health report (what the Dagster GC-health check shows); exit 1 when it fails."""
    health = open_db(args, store).gc_health(gc_options(args), intervals=args.intervals)
    return Exit(health, 0 if health.passed else 1)


_MIN_AGE = arg(
    "--min-age",
    type=min_age,
    help=f'minimum age of every deleted object, e.g. "10min" (default 5min, at least '
    f"{format_duration(MIN_AGE_FLOOR)}); SSTs count it from when they stopped being referenced",
)
_RESOURCE = arg(
    "--resource",
    action="append",
    choices=RESOURCE_CHOICES,
    help="run only this task (repeatable; default: all)",
)

COMMANDS = (
    Command(
        "gc",
        _gc,
        "Garbage-collect the database once: expired checkpoints, old manifests and .compactions files, "
        "unreferenced WAL and compacted SSTs, detachable clones, a destroyed database past its grace.",
        (
            _RESOURCE,
            _MIN_AGE,
            arg(
                "--db-delete-grace",
                type=duration,
                help="grace period of a soft-destroyed database (default 1days)",
            ),
            dry_run_flag("would be deleted, expired and detached"),
        ),
        aliases=("run-gc",),
    ),
    Command(
        "gc-health",
        _gc_health,
        "Check that GC keeps up: fails (exit 1) when garbage has been collectable for longer than "
        "--interval x --intervals, or no GC advanced a boundary that long while garbage waits. "
        "Reads only.",
        (
            _RESOURCE,
            _MIN_AGE,
            arg("--interval", type=duration, help='how often GC is meant to run (default "10min")'),
            arg(
                "--intervals",
                type=positive_int,
                default=3,
                help="how many missed intervals fail the check (default 3)",
            ),
        ),
        read_only=True,
    ),
)
