"""SlateDB databases written and read by the binding's own ``Db`` / ``DbReader``, for every test
folder that needs one (tests/engines, tests/admin, tests/cli, tests/spark, tests/orchestration):
import from here. The fixture ``sdb`` (the binding, or a skip without it) is defined here; the
stores it works on (``local_dir_store``, ``local_or_s3_store``) are in tests/support/stores.py.

The async helpers (:func:`write_db`, :func:`read_all`) run on slate_ops' loop owner
(``LOOP.run(write_db(...))``) or inside another coroutine; :func:`write_slatedb` and
:func:`read_slatedb` do that for a slate_ops store (a local directory or S3, prefix included)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchmarks.s3_fixtures import compact_l0_with_binding
from slate_ops.objstore import LocalStore
from slate_ops.objstore.base import ObjectStore

__all__ = [
    "binding",
    "fast_settings",
    "in_child",
    "local_store",
    "read_all",
    "read_slatedb",
    "write_db",
    "write_slatedb",
]


@pytest.fixture
def sdb() -> Any:
    """SlateDB's Python binding (``slatedb.uniffi``); the test is skipped without it."""
    return pytest.importorskip("slatedb.uniffi")


def binding() -> Any:
    """SlateDB's binding (``slatedb.uniffi``); the calling test is skipped without it."""
    return pytest.importorskip("slatedb.uniffi")


def local_store(sdb: Any, root: Path) -> Any:
    """The binding's LOCAL ObjectStore on ``root``."""
    b = sdb.ObjectStoreBuilder(sdb.ObjectStoreType.LOCAL)
    b.with_config("local_path", str(root))
    return b.build()


def fast_settings(sdb: Any, wal: bool = True) -> Any:
    """SlateDB's defaults with the embedded compactor polling every 100 ms (not 5 s); ``wal``
    False sets ``wal_enabled`` false (writes go to L0 only)."""
    st = sdb.Settings.default()
    if not wal:
        st.set("wal_enabled", "false")
    comp = json.loads(st.to_json_string())["compactor_options"]
    comp["poll_interval"] = "100ms"
    comp["commit_compacted_interval"] = "100ms"
    comp["worker"]["compactions_poll_interval"] = "100ms"
    st.set("compactor_options", json.dumps(comp))
    return st


async def write_db(
    sdb: Any,
    root: Path | None,
    path: str,
    rounds: int = 3,
    keys: int = 100,
    compact: bool = False,
    before_close: Callable[[Any, Any], Any] | None = None,
    wal: bool = True,
    store: Any = None,
) -> dict[bytes, bytes]:
    """``rounds`` memtable flushes of ``keys`` keys each (later rounds overwrite), optionally one
    compaction of all L0 into sorted run 0 submitted through Admin and followed to COMPLETED.
    Returns the expected contents.

    With the WAL on, SlateDB 0.17 leaves the last data WAL SST inside the manifest's replay range
    after a memtable flush and after shutdown (measured: ``replay_after_wal_id`` lags one data WAL),
    so such a database cannot be the source of a projection or union clone
    (InvalidCloneSourceWithWal); the split/merge tests write their sources with ``wal=False``.

    ``store``: a binding ObjectStore to write in instead of the local directory ``root`` (e.g.
    ``binding_store(s3_store)``, with ``path`` its ``binding_path``)."""

    if store is None:
        assert root is not None
        store = local_store(sdb, root)
    builder = sdb.DbBuilder(path, store)
    builder.with_settings(fast_settings(sdb, wal))
    db = await builder.build()
    expected: dict[bytes, bytes] = {}
    for r in range(rounds):
        for i in range(keys):
            k, v = b"k%04d" % i, b"v%d-%d" % (i, r)
            await db.put(k, v)
            expected[k] = v
        await db.flush_with_options(sdb.FlushOptions(flush_type=sdb.FlushType.MEM_TABLE))
    if compact:
        c = await compact_l0_with_binding(sdb, path, store, polls=300)
        assert c is not None and c.status == sdb.CompactionStatus.COMPLETED, c
    if before_close is not None:
        await before_close(db, store)
    await db.shutdown()
    return expected


async def read_all(
    sdb: Any, root: Path | None, path: str, checkpoint: str | None = None, store: Any = None
) -> dict[bytes, bytes]:
    """Every row SlateDB's own DbReader sees (at ``checkpoint`` if given); ``store`` as in
    :func:`write_db`."""
    if store is None:
        assert root is not None
        store = local_store(sdb, root)
    builder = sdb.DbReaderBuilder(path, store)
    if checkpoint is not None:
        builder.with_reader_mode(sdb.ReaderMode.CHECKPOINT(checkpoint))
    reader = await builder.build()
    it = await reader.scan(sdb.KeyRange(start=None, start_inclusive=False, end=None, end_inclusive=False))
    out: dict[bytes, bytes] = {}
    while True:
        kv = await it.next()
        if kv is None:
            break
        out[kv.key] = kv.value
    await reader.shutdown()
    return out


def write_slatedb(
    store: ObjectStore, path: str, *, drop_checkpoints: bool = False, **kwargs: Any
) -> dict[bytes, bytes]:
    """:func:`write_db` at ``path`` in the slate_ops store ``store`` (a local directory, created if
    missing, or S3 with its prefix), run on the loop owner; ``kwargs`` as :func:`write_db`'s.
    ``drop_checkpoints``: then delete every checkpoint (SlateDB's compactor leaves one for 15
    minutes), so that what a compaction replaced is garbage."""
    from slate_ops.engines.slatedb import LOOP, SlateDbAdmin
    from slate_ops.engines.slatedb.store import binding_path, binding_store

    sdb = binding()
    if isinstance(store, LocalStore):
        store.root.mkdir(parents=True, exist_ok=True)
    rows: dict[bytes, bytes] = LOOP.run(
        write_db(sdb, None, binding_path(store, path), store=binding_store(store), **kwargs)
    )
    if drop_checkpoints:
        db = SlateDbAdmin(path, store)
        for c in db.list_checkpoints():
            db.delete_checkpoint(c.id)
    return rows


def read_slatedb(store: ObjectStore, path: str, checkpoint: str | None = None) -> dict[bytes, bytes]:
    """:func:`read_all` of the database at ``path`` in the slate_ops store ``store``."""
    from slate_ops.engines.slatedb import LOOP
    from slate_ops.engines.slatedb.store import binding_path, binding_store

    rows: dict[bytes, bytes] = LOOP.run(
        read_all(binding(), None, binding_path(store, path), checkpoint, store=binding_store(store))
    )
    return rows


def _report(target: Callable[..., Any], args: tuple[Any, ...], out: Any) -> None:
    try:
        out.put(("ok", target(*args)))
    except Exception as e:
        out.put((type(e).__name__, str(e)))


def in_child(method: str, target: Callable[..., Any], *args: Any, timeout: float = 60) -> tuple[str, Any]:
    """``target(*args)`` in a child process started by ``method`` ("fork" or "spawn"; ``target``
    module-level): ``("ok", its result)`` or ``(its error's class name, message)``. Fails the
    test if the child is still running after ``timeout`` seconds (then kills it): how the fork
    guard is tested (a child forked after its parent used the binding must fail, not hang)."""
    import multiprocessing

    ctx: Any = multiprocessing.get_context(method)
    out = ctx.Queue()
    p = ctx.Process(target=_report, args=(target, args, out))
    p.start()
    p.join(timeout)
    alive = p.is_alive()
    if alive:
        p.kill()
        p.join()
    assert not alive, f"the {method}ed child still ran after {timeout} s"
    result: tuple[str, Any] = out.get(timeout=5)
    return result
