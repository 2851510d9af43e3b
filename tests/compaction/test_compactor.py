from __future__ import annotations

import itertools
import multiprocessing
import threading
import time
import uuid
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from slate_ops import Db, DbReader
from slate_ops.compaction import (
    COMPACTION_CHECKPOINT,
    CompactionsStore,
    Compactor,
    LocalExecutor,
    embedded,
)
from slate_ops.errors import FencedError
from slate_ops.manifest.model import ExternalDb
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import MemoryStore, open_store
from slate_ops.objstore.base import ObjectStore
from tests.support.compaction import SMALL, compact_once, fill
from tests.support.engine import QUIET_READER, quiet, simulate_crash


def contents(store: ObjectStore, path: str = "db") -> dict[bytes, bytes]:
    with DbReader.open(path, store, options=QUIET_READER) as reader:
        return dict(reader.scan())


def test_l0_compaction_keeps_every_key_and_empties_l0(engine_store: ObjectStore) -> None:
    model = fill(engine_store, keys=2000)  # several blocks per SST: the merge can split
    compactor = Compactor("db", engine_store, SMALL.model_copy(update={"min_sources": 4}))
    report = compactor.run_once()
    assert report is not None and report.kind == "l0" and len(report.input_ssts) == 4
    assert report.subcompactions >= 3 and len(report.output_ssts) >= 3  # small limits: a split merge
    manifest = ManifestStore(engine_store, "db").read_latest_required().value
    assert manifest.l0 == () and len(manifest.compacted) == 1
    assert [str(v.sst_id) for v in manifest.compacted[0].views] == list(report.output_ssts)
    assert {str(s.id) for s in manifest.ssts} == set(report.output_ssts)
    assert report.rows_out == len(model)  # only run: shadowed versions and tombstones are gone
    assert report.rows_in > report.rows_out
    assert contents(engine_store) == model
    assert compactor.run_once() is None
    compactor.close()


def test_output_ssts_are_ordered_and_non_overlapping(memory_store: MemoryStore) -> None:
    fill(memory_store, keys=400)
    compact_once("db", memory_store, SMALL, full=False)
    manifest = ManifestStore(memory_store, "db").read_latest_required().value
    infos = {s.id: s.info for s in manifest.ssts}
    views = manifest.compacted[0].views
    for left, right in itertools.pairwise(views):
        assert infos[left.sst_id].last_key < infos[right.sst_id].first_key


def test_tombstones_survive_when_older_runs_exist(memory_store: MemoryStore) -> None:
    with Db.open("db", memory_store, quiet(l0_max_ssts=100)) as db:
        for i in range(10):
            db.put(b"k%d" % i, b"old")
        db.flush_memtable()
        db.flush_memtable()
    compact_once("db", memory_store, SMALL)  # run 0 holds k0..k9
    with Db.open("db", memory_store, quiet(l0_max_ssts=100)) as db:
        db.delete(b"k3")
        db.flush_memtable()
        db.put(b"k4", b"new")
        db.flush_memtable()
    report = compact_once("db", memory_store, SMALL, full=False)
    assert report is not None and report.kind == "l0" and report.rows_out == 2  # the tombstone is kept
    assert contents(memory_store) == {b"k%d" % i: (b"new" if i == 4 else b"old") for i in range(10) if i != 3}
    full = compact_once("db", memory_store, SMALL)
    assert full is not None and full.rows_out == 9  # now the oldest run: the tombstone is dropped
    assert contents(memory_store) == {b"k%d" % i: (b"new" if i == 4 else b"old") for i in range(10) if i != 3}


def test_a_second_compactor_fences_the_first(memory_store: MemoryStore) -> None:
    fill(memory_store, flushes=2)
    first = Compactor("db", memory_store, SMALL)
    second = Compactor("db", memory_store, SMALL)
    assert second.epoch == first.epoch + 1
    with pytest.raises(FencedError, match="compactor"):
        first.run_once()
    assert second.run_once() is not None
    second.close()
    fill(memory_store, flushes=2)
    with pytest.raises(FencedError):
        first.run_once()


def test_state_records_compactions_and_failed_ones(memory_store: MemoryStore) -> None:
    fill(memory_store, flushes=2)

    class Exploding(LocalExecutor):
        def execute(self, store: ObjectStore, spec: object) -> object:  # type: ignore[override]
            raise RuntimeError("worker lost")

    with pytest.raises(RuntimeError, match="worker lost"):
        Compactor("db", memory_store, SMALL, executor=Exploding()).run_once()
    compactor = Compactor("db", memory_store, SMALL)
    report = compactor.run_once()
    compactor.close()  # waits for the "completed" record, written in the background
    assert report is not None
    records = CompactionsStore(memory_store, "db").read().compactions
    assert [r.status for r in records] == ["failed", "completed"]
    assert records[1].outputs == report.output_ssts and records[1].manifest_id == report.manifest_id
    # the failed compaction committed nothing; the second one did
    assert ManifestStore(memory_store, "db").read_latest_required().value.l0 == ()


def test_restart_marks_unfinished_compactions_failed(memory_store: MemoryStore) -> None:
    fill(memory_store, flushes=2)
    gate = threading.Event()

    class Stalling(LocalExecutor):
        def execute(self, store: ObjectStore, spec: object) -> object:  # type: ignore[override]
            gate.wait(5)
            raise RuntimeError("process died")

    first = Compactor("db", memory_store, SMALL, executor=Stalling())

    def run() -> None:
        with pytest.raises(RuntimeError, match="process died"):
            first.run_once()

    worker = threading.Thread(target=run)
    worker.start()
    for _ in range(100):
        if CompactionsStore(memory_store, "db").read().compactions:
            break
        threading.Event().wait(0.02)
    Compactor("db", memory_store, SMALL)  # a new compactor takes over while the first is stuck
    assert [r.status for r in CompactionsStore(memory_store, "db").read().compactions] == ["failed"]
    gate.set()
    worker.join()


def test_checkpoint_readers_keep_reading_old_ssts(memory_store: MemoryStore) -> None:
    model = fill(memory_store)
    with Db.open("db", memory_store, quiet(l0_max_ssts=1000)) as db:
        checkpoint = db.create_checkpoint()
    before = ManifestStore(memory_store, "db").read_latest_required().value
    report = compact_once("db", memory_store, SMALL, full=False)
    assert report is not None
    after = ManifestStore(memory_store, "db").read_latest_required().value
    compaction_checkpoints = [c for c in after.checkpoints if c.name == COMPACTION_CHECKPOINT]
    assert len(compaction_checkpoints) == 1
    pinned = ManifestStore(memory_store, "db").read(compaction_checkpoints[0].manifest_id).value
    assert {v.sst_id for v in pinned.l0} == {v.sst_id for v in before.l0}  # the inputs stay pinned
    with DbReader.open("db", memory_store, checkpoint.id, QUIET_READER) as reader:
        assert dict(reader.scan()) == model  # reads the pre-compaction SSTs


def test_compaction_prunes_external_sst_ids(memory_store: MemoryStore) -> None:
    fill(memory_store, flushes=2, path="parent")
    parent = ManifestStore(memory_store, "parent").read_latest_required().value
    external = ExternalDb("parent", uuid.uuid4(), uuid.uuid4(), tuple(s.id for s in parent.ssts))
    clone = replace(parent, external_dbs=(external,), checkpoints=(), writer_epoch=0, compactor_epoch=0)
    ManifestStore(memory_store, "clone").create_initial(clone)
    expected = contents(memory_store, "parent")
    assert contents(memory_store, "clone") == expected  # reads resolve to the parent's SSTs
    compact_once("clone", memory_store, SMALL, full=False)
    manifest = ManifestStore(memory_store, "clone").read_latest_required().value
    assert manifest.external_dbs[0].sst_ids == ()  # no longer referenced: pruned in the same commit
    assert list(memory_store.list("clone/compacted/"))  # outputs are written under the clone
    assert contents(memory_store, "clone") == expected


def test_embedded_compactor_relieves_l0_backpressure(memory_store: MemoryStore) -> None:
    options = quiet(
        l0_max_ssts=3,
        backpressure_timeout=timedelta(seconds=30),
        manifest_poll_interval=timedelta(milliseconds=20),
    )
    with Db.open(
        "db", memory_store, options, compactor=embedded(SMALL.model_copy(update={"min_sources": 3}))
    ) as db:
        for i in range(12):  # four times l0_max_ssts: only possible if compaction keeps up
            db.put(b"k%02d" % i, b"v%d" % i)
            db.flush_memtable()
        assert len(db.manifest.l0) <= 3 and db.manifest.compacted  # never past the limit; compacted
        assert dict(db.scan()) == {b"k%02d" % i: b"v%d" % i for i in range(12)}


def test_writer_and_compactor_in_threads_lose_nothing(engine_store: ObjectStore) -> None:
    stop = threading.Event()
    model: dict[bytes, bytes] = {}
    with Db.open("db", engine_store, quiet(l0_max_ssts=1000)) as db:
        compactor = Compactor("db", engine_store, SMALL)
        thread = threading.Thread(target=compactor.run, args=(stop,))
        thread.start()
        try:
            for round_ in range(12):
                for i in range(0, 60, 1 + round_ % 4):
                    key, value = b"k%03d" % i, b"r%d" % round_
                    db.put(key, value)
                    model[key] = value
                db.flush_memtable()
        finally:
            stop.set()
            thread.join()
            compactor.close()
        assert dict(db.scan()) == model
    assert contents(engine_store) == model
    assert CompactionsStore(engine_store, "db").read().compactions  # it did compact


def _compact_forever(store_url: str, stop_file: str) -> int:
    store = open_store(store_url)  # a separate process: only the URL crosses over
    compactor = Compactor("db", store, SMALL)
    Path(stop_file + ".ready").touch()
    done = 0
    while not Path(stop_file).exists():
        done += compactor.run_once() is not None
    return done


def test_writer_and_compactor_in_separate_processes(engine_store: ObjectStore, tmp_path: Path) -> None:
    store = engine_store
    stop_file = tmp_path / "stop"
    simulate_crash(Db.open("db", store, quiet()))  # create the database
    model: dict[bytes, bytes] = {}
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        result = pool.apply_async(_compact_forever, (store.url, str(stop_file)))
        deadline = time.monotonic() + 60
        while not Path(str(stop_file) + ".ready").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        with Db.open("db", store, quiet(l0_max_ssts=1000)) as db:
            for round_ in range(15):
                for i in range(0, 80, 1 + round_ % 5):
                    key, value = b"k%03d" % i, b"r%d" % round_
                    db.put(key, value)
                    model[key] = value
                db.flush_memtable()
            while len(ManifestStore(store, "db").read_latest_required().value.l0) >= SMALL.min_sources:
                assert time.monotonic() < deadline, "the compactor process never caught up"
                time.sleep(0.05)
            assert dict(db.scan()) == model
        stop_file.touch()
        compactions = result.get(60)
    assert compactions >= 1
    assert contents(store) == model


def test_compactor_refuses_a_destroyed_database_and_writes_nothing(memory_store: MemoryStore) -> None:
    from slate_ops.errors import DbDestroyedError
    from slate_ops.manifest.model import Manifest
    from tests.support.stores import snapshot

    ManifestStore(memory_store, "gone").create_initial(Manifest(destroyed_at_s=5))
    before = snapshot(memory_store)
    with pytest.raises(DbDestroyedError):
        Compactor("gone", memory_store, SMALL)
    assert snapshot(memory_store) == before
