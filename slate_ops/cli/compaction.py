"""Compaction commands: ``compact`` and ``shape`` (docs/cli.md).

``compact`` runs one compaction (:func:`slate_ops.admin.compact`, which fences any running
compactor) and prints its report with ``"compacted": true``, or ``{"compacted": false, "reason":
...}`` with the current counts of L0 views and sorted runs (``l0_views``, ``sorted_runs``, as
``describe`` names them) and the ``requests`` the look cost when there is nothing to do (exit 0
either way).
``shape`` prints the LSM tree: every L0 SST and every sorted run with its SST count, key range,
bytes and entries, keys in the data commands' convention (pasteable into ``scan --from``).
Both go through the admin handle: on a SlateDB database ``compact`` submits the compaction to SlateDB
and follows it (a SlateDB compactor must be running; none picking it up is an error, exit 1).
"""

from __future__ import annotations

import argparse
from typing import Any

from slate_ops.admin.shape import LsmShape, shape_json, shape_rows
from slate_ops.cli.command import Command, arg
from slate_ops.cli.handle import open_db
from slate_ops.cli.output import jsonable
from slate_ops.compaction import CompactorOptions, LocalExecutor
from slate_ops.objstore import ObjectStore
from slate_ops.objstore.metering import RequestCounts


def nothing_to_compact(
    shape: LsmShape, *, full: bool, options: CompactorOptions, requests: RequestCounts
) -> dict[str, Any]:
    """What ``compact`` prints when the compactor found nothing to do in ``shape``; ``requests``:
    what finding that out cost (the claim of the compactor's epoch and the planning reads)."""
    l0, runs = len(shape.l0), len(shape.sorted_runs)
    if full:
        reason = f"nothing to compact: {l0} L0 view(s) and {runs} sorted run(s) are already fully compacted"
    else:
        reason = (
            f"below the compaction thresholds: {l0} L0 view(s) and {runs} sorted run(s) "
            f"(min_sources {options.min_sources}; --full merges everything)"
        )
    return {
        "compacted": False,
        "reason": reason,
        "manifest_id": shape.manifest_id,
        "l0_views": l0,
        "sorted_runs": runs,
        "requests": requests.to_dict(),
    }


def _compact(args: argparse.Namespace, store: ObjectStore) -> dict[str, Any]:
    options = CompactorOptions()
    db = open_db(args, store)
    if args.executor == "spark":
        # Imported here so that no other command imports pyspark or starts a JVM.
        from slate_ops.spark import SparkExecutor, local_spark_session

        session = local_spark_session()
        try:
            report = db.compact(full=args.full, executor=SparkExecutor(session), options=options)
        finally:
            session.stop()
    else:
        report = db.compact(full=args.full, executor=LocalExecutor(), options=options)
    if report is None:
        requests = db.last_requests
        return nothing_to_compact(db.shape(), full=args.full, options=options, requests=requests)
    return {"compacted": True, **jsonable(report)}


def _shape(args: argparse.Namespace, store: ObjectStore) -> dict[str, Any] | list[dict[str, Any]]:
    shape = open_db(args, store).shape()
    return shape_rows(shape) if args.format == "table" else shape_json(shape)


COMMANDS = (
    Command(
        "compact",
        _compact,
        "Run one compaction (what the compactor would pick next, or everything with --full) and print "
        "its report. Fences any running compactor.",
        (
            arg(
                "--executor",
                choices=("local", "spark"),
                default="local",
                help="run the merge on threads in this process (default) or on a local Spark session",
            ),
            arg("--full", action="store_true", help="merge every L0 SST and sorted run into one run"),
        ),
    ),
    Command(
        "shape",
        _shape,
        "Print the LSM tree: L0 SSTs and sorted runs with key ranges and sizes (newest first).",
        aliases=("lsm-shape",),
        read_only=True,
    ),
)
