"""Compaction commands of the ``slate-ops`` CLI: ``compact`` and ``shape`` (docs/cli.md).

``compact`` runs one compaction with a :class:`~slate_ops.compaction.Compactor` (which fences any
running compactor) and prints its report with ``"compacted": true``, or
``{"compacted": false, "reason": ...}`` with the current L0 and sorted-run counts when the compactor
finds nothing to do (exit 0 either way). ``shape`` prints the LSM tree: every L0 SST and every sorted
run with its SST count, key range, bytes and entries. Keys are rendered like the data commands'
output (text, else ``hex:<hex>``), so they can be pasted into ``scan --from``.
"""

from __future__ import annotations

import argparse
from typing import Any

from slate_ops.admin import LsmShape, RunSummary, SstSummary, lsm_shape
from slate_ops.cli_data import CommandHelper, render_bytes
from slate_ops.clock import SYSTEM_CLOCK, Clock
from slate_ops.compaction import CompactionReport, Compactor, CompactorOptions, Executor, LocalExecutor
from slate_ops.jsonable import to_jsonable
from slate_ops.objstore import ObjectStore


def run_compaction(
    path: str,
    store: ObjectStore,
    *,
    full: bool = False,
    executor: Executor | None = None,
    options: CompactorOptions | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> CompactionReport | None:
    """One compaction of ``path`` (None: nothing to compact); the compactor is closed afterwards."""
    compactor = Compactor(path, store, options, executor, clock=clock)
    try:
        return compactor.run_once(full=full)
    finally:
        compactor.close()


def nothing_to_compact(shape: LsmShape, *, full: bool, options: CompactorOptions) -> dict[str, Any]:
    """What ``compact`` prints when the compactor found nothing to do in ``shape``."""
    l0, runs = len(shape.l0), len(shape.sorted_runs)
    if full:
        reason = f"nothing to compact: {l0} L0 SST(s) and {runs} sorted run(s) are already fully compacted"
    else:
        reason = (
            f"below the compaction thresholds: {l0} L0 SST(s) and {runs} sorted run(s) "
            f"(min_sources {options.min_sources}; --full merges everything)"
        )
    return {
        "compacted": False,
        "reason": reason,
        "manifest_id": shape.manifest_id,
        "l0_ssts": l0,
        "sorted_runs": runs,
    }


def _summary(summary: SstSummary | RunSummary) -> dict[str, Any]:
    def key(value: bytes | None) -> str | None:
        return None if value is None else render_bytes(value)

    return {**to_jsonable(summary), "first_key": key(summary.first_key), "last_key": key(summary.last_key)}


def shape_json(shape: LsmShape) -> dict[str, Any]:
    """``shape`` as JSON, keys in the data commands' text/``hex:`` convention."""
    return {
        "manifest_id": shape.manifest_id,
        "l0": [_summary(s) for s in shape.l0],
        "sorted_runs": [_summary(r) for r in shape.sorted_runs],
    }


def shape_rows(shape: LsmShape) -> list[dict[str, Any]]:
    """One row per L0 SST, then one per sorted run (newest first): the table form of ``shape``."""
    rows: list[dict[str, Any]] = []
    for sst in shape.l0:
        rows.append({"level": "L0", "id": sst.id, "ssts": 1, **_range(sst)})
    for run in shape.sorted_runs:
        rows.append({"level": "SR", "id": str(run.id), "ssts": run.ssts, **_range(run)})
    return rows


def _range(summary: SstSummary | RunSummary) -> dict[str, Any]:
    keys = _summary(summary)
    return {
        "first_key": keys["first_key"],
        "last_key": keys["last_key"],
        "bytes": summary.size_bytes,
        "entries": summary.num_entries,
    }


def _compact(args: argparse.Namespace, store: ObjectStore) -> dict[str, Any]:
    options = CompactorOptions()
    if args.executor == "spark":
        # Imported here so that no other command imports pyspark or starts a JVM.
        from slate_ops.spark import SparkExecutor, local_spark_session

        session = local_spark_session()
        try:
            report = run_compaction(
                args.path, store, full=args.full, executor=SparkExecutor(session), options=options
            )
        finally:
            session.stop()
    else:
        report = run_compaction(args.path, store, full=args.full, executor=LocalExecutor(), options=options)
    if report is None:
        return nothing_to_compact(lsm_shape(args.path, store), full=args.full, options=options)
    return {"compacted": True, **to_jsonable(report)}


def _shape(args: argparse.Namespace, store: ObjectStore) -> dict[str, Any] | list[dict[str, Any]]:
    shape = lsm_shape(args.path, store)
    if getattr(args, "format", "json") == "table":
        return shape_rows(shape)
    return shape_json(shape)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser], command: CommandHelper) -> None:
    """Add ``compact`` and ``shape`` through the CLI's ``command`` helper."""
    del commands
    sub = command(
        "compact",
        _compact,
        "Run one compaction (what the compactor would pick next, or everything with --full) and print "
        "its report. Fences any running compactor.",
    )
    sub.add_argument(
        "--executor",
        choices=("local", "spark"),
        default="local",
        help="run the merge on threads in this process (default) or on a local Spark session",
    )
    sub.add_argument("--full", action="store_true", help="merge every L0 SST and sorted run into one run")

    command(
        "shape",
        _shape,
        "Print the LSM tree: L0 SSTs and sorted runs with key ranges and sizes (newest first).",
    )
