"""Databases written by each engine's own writer (ours, and SlateDB's through its binding), for the
tests that run one operation on both engines."""

from __future__ import annotations

import pytest

from slate_ops import Db
from slate_ops.objstore import LocalStore
from slate_ops.objstore.base import ObjectStore
from tests.support.engine import quiet

DB = "dbs/main"


def write_slate_ops(store: ObjectStore, path: str = DB) -> None:
    """Two L0 flushes, WAL SSTs and several manifests; the writer closed cleanly."""
    with Db.open(path, store, quiet()) as db:
        for round_ in range(2):
            for i in range(50):
                db.put(b"k%04d" % i, b"v%d" % round_)
            db.flush_memtable()


def write_slatedb(store: ObjectStore, path: str = DB) -> None:
    """Three L0 flushes and a compaction, by SlateDB's own Db (in a local directory or on S3); the
    checkpoint its compactor leaves (15 minutes) is removed so that what the compaction replaced
    is garbage."""
    sdb = pytest.importorskip("slatedb.uniffi")
    from slate_ops.engines.slatedb import LOOP
    from slate_ops.engines.slatedb import SlateDbAdmin as EngineHandle
    from slate_ops.engines.slatedb.store import binding_path, binding_store
    from tests.support.slatedb import write_db

    if isinstance(store, LocalStore):
        store.root.mkdir(parents=True, exist_ok=True)  # the binding's local store needs its root
    target = binding_store(store)
    LOOP.run(write_db(sdb, None, binding_path(store, path), rounds=3, keys=50, compact=True, store=target))
    h = EngineHandle(path, store)
    for c in h.list_checkpoints():
        h.delete_checkpoint(c.id)
