"""Compaction of SlateDB databases through the admin handle: submitted to SlateDB's compactor (a
writer's embedded one, opened here through the binding), followed to COMPLETED and reported with
the same keys as ours; with no compactor running, a typed error and no second request. Effects are
read back with the binding (its manifest, its DbReader)."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from slate_ops import Db, admin
from slate_ops.admin.handle import SlateDbHandle
from slate_ops.compaction import CompactionReport, CompactorOptions, LocalExecutor
from slate_ops.errors import NoCompactorError, SlateDbCompactionFailedError
from slate_ops.objstore import LocalStore
from tests.support.engine import quiet
from tests.support.jsonable import to_jsonable
from tests.support.slatedb import fast_settings, local_store, read_slatedb

DB = "dbs/compact"
# Below SlateDB's own L0 trigger (4), so the writer's embedded scheduler does not race our request.
TWO = CompactorOptions(min_sources=2)


class Writer:
    """SlateDB's own Db with its embedded compactor polling every 100 ms, driven synchronously."""

    def __init__(self, sdb: Any, store: LocalStore) -> None:
        from slate_ops.engines.slatedb import LOOP

        self.sdb, self.loop = sdb, LOOP
        builder = sdb.DbBuilder(DB, local_store(sdb, store.root))
        builder.with_settings(fast_settings(sdb))
        self.db = LOOP.run(builder.build())
        self.rows: dict[bytes, bytes] = {}

    def flushes(self, n: int, tag: str) -> None:
        for r in range(n):
            for i in range(40):
                k, v = b"k%04d" % (i * 3 + r), f"{tag}-{r}-{i}".encode()
                self.loop.run(self.db.put(k, v))
                self.rows[k] = v
            flush = self.sdb.FlushOptions(flush_type=self.sdb.FlushType.MEM_TABLE)
            self.loop.run(self.db.flush_with_options(flush))

    def close(self) -> None:
        self.loop.run(self.db.shutdown())


@pytest.fixture
def writer(sdb: Any, local_dir_store: LocalStore) -> Iterator[Writer]:
    w = Writer(sdb, local_dir_store)
    yield w
    w.close()


def read_back(sdb: Any, store: LocalStore) -> dict[bytes, bytes]:
    return read_slatedb(store, DB)


def binding_manifest(sdb: Any, store: LocalStore) -> Any:
    """The latest manifest as SlateDB's own Admin reads it."""
    from slate_ops.engines.slatedb import LOOP

    return LOOP.run(sdb.AdminBuilder(DB, local_store(sdb, store.root)).build().read_manifest(None))


def test_compaction_by_a_writers_embedded_compactor(
    sdb: Any, local_dir_store: LocalStore, writer: Writer
) -> None:
    writer.flushes(3, "a")
    handle = admin.open(DB, local_dir_store)
    assert isinstance(handle, SlateDbHandle)
    assert not handle.needs_compaction()  # 3 L0 SSTs, below our default trigger of 4
    assert handle.needs_compaction(TWO) and handle.needs_compaction(full=True)
    l0 = [v.sst.id.value for v in binding_manifest(sdb, local_dir_store).l0]

    report = handle.compact(options=TWO, executor=LocalExecutor())
    assert isinstance(report, CompactionReport)
    assert (report.kind, report.sorted_run_id, report.executor) == ("l0", 0, "slatedb-compactor")
    assert len(report.sources) == 3 and all(s.startswith("l0:") for s in report.sources)
    assert sorted(report.input_ssts) == sorted(l0)
    assert report.output_ssts and report.bytes_read > 0 and report.bytes_written > 0
    assert any("local executor does not apply" in n for n in report.notes)
    m = binding_manifest(sdb, local_dir_store)
    assert not m.l0 and [r.id for r in m.compacted] == [0]
    assert {v.sst.id.value for v in m.compacted[0].sst_views} == set(report.output_ssts)
    assert report.manifest_id == m.id
    assert not handle.needs_compaction(TWO)
    assert handle.compact(options=TWO) is None  # nothing to compact

    writer.flushes(1, "b")
    assert not handle.needs_compaction(TWO) and handle.needs_compaction(full=True)
    full = handle.compact(full=True)
    assert full is not None and (full.kind, full.sorted_run_id) == ("full", 0)
    assert "sr:0" in full.sources and len(full.sources) == 2
    m = binding_manifest(sdb, local_dir_store)
    assert not m.l0 and [r.id for r in m.compacted] == [0]
    assert not handle.needs_compaction(full=True)
    writer.close()
    writer.close = lambda: None  # type: ignore[method-assign]
    assert read_back(sdb, local_dir_store) == writer.rows


def test_no_compactor_is_a_typed_error_and_the_request_is_not_repeated(
    sdb: Any, local_dir_store: LocalStore
) -> None:
    w = Writer(sdb, local_dir_store)
    w.flushes(3, "a")
    w.close()  # no writer, no compactor
    handle = admin.open(DB, local_dir_store)
    assert isinstance(handle, SlateDbHandle)
    handle.compaction_timeout_s = 0.5
    with pytest.raises(NoCompactorError, match="A SlateDB compactor must be running") as first:
        handle.compact(options=TWO)
    assert DB in str(first.value) and "still SUBMITTED" in str(first.value)
    queued = [c for c in handle.db.compactions() if c.active]
    assert [c.id for c in queued] == [first.value.compaction_id]
    assert binding_manifest(sdb, local_dir_store).l0  # nothing compacted, nothing reported as success

    with pytest.raises(NoCompactorError) as second:  # follows the queued request, submits nothing
        handle.compact(options=TWO)
    assert second.value.compaction_id == first.value.compaction_id
    assert [c.id for c in handle.db.compactions() if c.active] == [first.value.compaction_id]

    # A writer opened later runs the queued request (its embedded compactor picks it up).
    w2 = Writer(sdb, local_dir_store)
    try:
        handle.compaction_timeout_s = 20
        report = handle.compact(options=TWO)
        assert report is not None and str(report.id) == first.value.compaction_id
        assert any("already" in n and "followed it" in n for n in report.notes)
        assert not binding_manifest(sdb, local_dir_store).l0
    finally:
        w2.close()
    assert read_back(sdb, local_dir_store) == w.rows


def test_the_report_has_our_keys(
    sdb: Any, local_dir_store: LocalStore, writer: Writer, tmp_path: Path
) -> None:
    writer.flushes(2, "a")
    theirs = admin.open(DB, local_dir_store).compact(full=True)
    ours_store = LocalStore(tmp_path / "ours")
    with Db.open(DB, ours_store, quiet()) as db:
        for r in range(2):
            db.put(b"k%d" % r, b"v")
            db.flush_memtable()
    ours = admin.open(DB, ours_store).compact(full=True)
    assert ours is not None and theirs is not None
    assert list(to_jsonable(ours)) == list(to_jsonable(theirs))
    assert [f.name for f in dataclasses.fields(theirs)] == [f.name for f in dataclasses.fields(ours)]
    assert ours.notes == ()  # ours has nothing to add


def test_a_failed_compaction_is_a_typed_error(sdb: Any, local_dir_store: LocalStore) -> None:
    """A request SlateDB's compactor marks FAILED (here: one naming a sorted run that does not
    exist, queued while no compactor runs) is followed by ``compact`` and raised, never reported
    as a compaction."""
    w = Writer(sdb, local_dir_store)
    w.flushes(2, "a")
    w.close()
    handle = admin.open(DB, local_dir_store)
    assert isinstance(handle, SlateDbHandle)
    m = handle.db.read_manifest()
    assert m is not None
    bad = handle.db.submit_compaction([m.l0[0].view_id], [7], 7)
    handle.compaction_timeout_s = 20
    outcome: list[BaseException | CompactionReport | None] = []
    follower = threading.Thread(target=lambda: outcome.append(_capture(lambda: handle.compact(options=TWO))))
    follower.start()
    time.sleep(0.5)  # compact is following the queued request before a compactor exists
    w2 = Writer(sdb, local_dir_store)
    try:
        follower.join(30)
    finally:
        w2.close()
    assert len(outcome) == 1 and isinstance(outcome[0], SlateDbCompactionFailedError), outcome
    assert outcome[0].compaction_id == bad.id and DB in str(outcome[0])
    assert handle.db.read_compaction(bad.id) is not None
    assert read_back(sdb, local_dir_store) == w.rows


def _capture(call: Callable[[], CompactionReport | None]) -> BaseException | CompactionReport | None:
    try:
        return call()
    except BaseException as e:  # handed to the test's thread
        return e
