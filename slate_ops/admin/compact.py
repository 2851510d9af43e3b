"""One compaction on demand: what ``slate-ops compact`` and the Dagster compaction ops run."""

from __future__ import annotations

from slate_ops.compaction import CompactionReport, Compactor, CompactorOptions, Executor
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime


def compact(
    path: str,
    store: ObjectStore,
    *,
    full: bool = False,
    executor: Executor | None = None,
    options: CompactorOptions | None = None,
    clock: Runtime = SYSTEM_RUNTIME,
) -> CompactionReport | None:
    """One compaction of ``path``: what the scheduler picks next, or everything with ``full``.

    Fences any running compactor of the database (its next commit fails). Returns None when there
    is nothing to compact. The compactor is closed afterwards, once the compaction's "completed"
    record is durable too (a failure to write it is raised, after the commit).
    """
    compactor = Compactor(path, store, options, executor, clock=clock)
    try:
        report = compactor.run_once(full=full)
        compactor.wait_recorded()
        return report
    finally:
        compactor.close()


__all__ = ["compact"]
