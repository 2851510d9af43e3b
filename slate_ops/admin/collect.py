"""One garbage-collection run on demand: what ``slate-ops gc`` and the Dagster GC ops run."""

from __future__ import annotations

from slate_ops.gc import GarbageCollector, GcOptions, GcReport
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime


def run_gc(
    path: str,
    store: ObjectStore,
    options: GcOptions | None = None,
    *,
    dry_run: bool = True,
    clock: Runtime = SYSTEM_RUNTIME,
) -> GcReport:
    """Collect the garbage of ``path`` once (docs/design/gc.md) and return what was (or, in the
    default dry run, would be) deleted, expired and detached; ``dry_run=False`` acts.

    Raises :class:`~slate_ops.errors.GcFailedError`, carrying the report, when a task failed.
    """
    return GarbageCollector(path, store, options or GcOptions(), clock=clock).run_once(dry_run=dry_run)


__all__ = ["run_gc"]
