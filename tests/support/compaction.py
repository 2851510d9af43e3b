"""Compaction helpers: small compactor options, a database filled with overlapping L0 SSTs, and
one compaction run to its end (:func:`compact_once`)."""

from __future__ import annotations

from contextlib import closing
from datetime import timedelta

from slate_ops import Db
from slate_ops.compaction import CompactionReport, Compactor, CompactorOptions, Executor
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime
from tests.support.engine import quiet

SMALL = CompactorOptions(
    min_sources=2,
    max_subcompaction_bytes=4096,
    target_sst_bytes=2048,
    poll_interval=timedelta(milliseconds=20),
)


def fill(store: ObjectStore, flushes: int = 4, keys: int = 200, path: str = "db") -> dict[bytes, bytes]:
    """Write ``flushes`` L0 SSTs of overlapping keys with overwrites and deletes; return the model."""
    model: dict[bytes, bytes] = {}
    with Db.open(path, store, quiet(l0_max_ssts=1000)) as db:
        for round_ in range(flushes):
            for i in range(round_, keys, 1 + round_):
                key, value = b"key%05d" % i, b"v%d-%d" % (round_, i) * 3
                db.put(key, value)
                model[key] = value
            for i in range(0, keys, 7 + round_):
                db.delete(b"key%05d" % i)
                model.pop(b"key%05d" % i, None)
            db.flush_memtable()
    return model


def compact_once(
    path: str,
    store: ObjectStore,
    options: CompactorOptions | None = None,
    executor: Executor | None = None,
    *,
    full: bool = True,
    clock: Runtime = SYSTEM_RUNTIME,
) -> CompactionReport | None:
    """``Compactor(...).run_once(full=full)``, then its "completed" record waited for (an error
    writing it is raised) and the compactor closed: nothing of the compaction is still being
    written when the test goes on (docs/design/compaction.md, "I/O: streaming from and to")."""
    with closing(Compactor(path, store, options, executor, clock=clock)) as compactor:
        report = compactor.run_once(full=full)
        compactor.wait_recorded()
        return report
