"""GC running concurrently with a writer, a compactor and a reader on a checkpoint.

Real clocks and stores (the local directory store and moto's S3), tiny min ages (below the floor,
so objects are collected within the test), GC in a thread or in a separate process. Throughout:
reads on the checkpoint return its data; after every GC run nothing that the latest manifest or a
live checkpoint references is missing; at the end the data equals the model.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from slate_ops import Db, DbOptions, DbReader
from slate_ops.compaction import Compactor, CompactorOptions
from slate_ops.engine.wal_chain import walk_chain
from slate_ops.engine.wal_store import WalStore
from slate_ops.errors import GcFailedError
from slate_ops.gc import GarbageCollector, GcReport
from slate_ops.manifest.model import resolve_sst_path
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import LocalStore, S3Store
from slate_ops.objstore.base import ObjectStore
from tests.support.gc import unsafe

WRITER = DbOptions(
    wal_flush_interval=timedelta(milliseconds=20),
    manifest_poll_interval=timedelta(milliseconds=50),
    l0_sst_size_bytes=16 * 1024,
    l0_max_ssts=1000,
)
COMPACTOR = CompactorOptions(
    min_sources=2,
    max_subcompaction_bytes=8192,
    target_sst_bytes=4096,
    poll_interval=timedelta(milliseconds=20),
    compaction_checkpoint_lifetime=timedelta(milliseconds=500),
)
WRITE_SECONDS = 3.0


def writes_per_pause(store: ObjectStore) -> int:
    """About 5,000 writes a second on a local directory, 1,250 on S3: moto serves this process's
    requests in this process, and closing the writer after 3 s at the full rate took 18 s there."""
    return 5 if isinstance(store, S3Store) else 20


def min_age_for(store: ObjectStore) -> float:
    # S3 reports last_modified in whole seconds: allow for the truncation.
    return 3.0 if isinstance(store, S3Store) else 1.5


def check_references(store: ObjectStore, path: str = "db") -> None:
    """Everything the latest manifest and its live checkpoints reference exists."""
    manifests = ManifestStore(store, path)
    latest = manifests.read_latest_required()
    pinned = [
        manifests.read(c.manifest_id).value for c in latest.value.checkpoints if not c.is_expired(time.time())
    ]
    for manifest in (latest.value, *pinned):
        for sst in manifest.ssts:
            store.head(resolve_sst_path(manifest, path, sst))
    replay_after = latest.value.replay_after_wal_id
    listing = WalStore(store, path).list_sizes(replay_after)
    ids = [wal_id for wal_id, _ in listing]
    walk = walk_chain(listing, replay_after)  # a gap ends the chain before a listed id
    # The live writer's WAL PUTs in flight may land out of order: past the chain's end only the ones it
    # started together with the missing one (docs/design/engine.md, "The writer's WAL pipeline").
    in_flight = WRITER.wal_puts_in_flight
    assert max(ids, default=replay_after) < walk.end + in_flight, (
        f"a WAL SST above replay_after is gone: the chain from {replay_after} ends at {walk.end}, ids {ids}"
    )


def seed(store: ObjectStore) -> tuple[dict[bytes, bytes], Any]:
    """Initial data and a checkpoint of it (never expires)."""
    with Db.open("db", store, WRITER) as db:
        model = {b"seed%04d" % i: b"s%d" % i for i in range(300)}
        for key, value in model.items():
            db.put(key, value)
        checkpoint = db.create_checkpoint()
    return model, checkpoint


def run_workload(
    store: ObjectStore, gc_loop: Callable[[threading.Event], None], collected: Callable[[], bool]
) -> None:
    """Write for WRITE_SECONDS, then keep GC, compactor and reader going until ``collected()``."""
    model, checkpoint = seed(store)
    stop_gc = threading.Event()
    failures: list[BaseException] = []
    reader_rounds = [0]

    def guarded(work: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                work()
            except BaseException as error:
                failures.append(error)

        return run

    def read_checkpoint() -> None:
        with DbReader.open("db", store, checkpoint.id) as reader:
            while not stop_gc.is_set():
                assert dict(reader.scan()) == model
                assert reader.get(b"seed0007") == b"s7"
                reader_rounds[0] += 1
                time.sleep(0.005)

    compactor = Compactor("db", store, COMPACTOR).start()
    threads = [
        threading.Thread(target=guarded(lambda: gc_loop(stop_gc)), name="gc"),
        threading.Thread(target=guarded(read_checkpoint), name="reader"),
    ]
    for thread in threads:
        thread.start()
    final = dict(model)
    rng = random.Random(7)
    pause_every = writes_per_pause(store)
    try:
        with Db.open("db", store, WRITER) as db:
            deadline = time.monotonic() + WRITE_SECONDS
            i = 0
            while time.monotonic() < deadline and not failures:
                key = b"k%04d" % rng.randrange(400)
                if rng.random() < 0.1:
                    db.delete(key)
                    final.pop(key, None)
                else:
                    value = b"v%d-" % i * 8
                    db.put(key, value)
                    final[key] = value
                i += 1
                if i % pause_every == 0:
                    time.sleep(0.002)
        deadline = time.monotonic() + 20
        while not collected() and time.monotonic() < deadline and not failures:
            time.sleep(0.1)
    finally:
        compactor.close()
        stop_gc.set()
        for thread in threads:
            thread.join(60)
    assert not failures, failures
    assert reader_rounds[0] > 0
    with DbReader.open("db", store) as reader:
        assert dict(reader.scan()) == final
    with DbReader.open("db", store, checkpoint.id) as reader:
        assert dict(reader.scan()) == model


def gc_thread_loop(store: ObjectStore, reports: list[GcReport]) -> Callable[[threading.Event], None]:
    collector = GarbageCollector("db", store, unsafe(min_age_for(store)))

    def loop(stop: threading.Event) -> None:
        while not stop.wait(0.1):
            try:
                reports.append(collector.run_once(dry_run=False))
            except GcFailedError as error:
                raise AssertionError(f"GC failed: {error}") from error
            check_references(store)

    return loop


def collected_resources(reports: list[GcReport]) -> set[str]:
    return {r.resource for report in list(reports) for r in report.resources if r.count}


def test_gc_in_a_thread_beside_writer_compactor_and_checkpoint_reader(engine_store: ObjectStore) -> None:
    reports: list[GcReport] = []
    expected = {"manifest", "wal", "compacted"}
    run_workload(
        engine_store,
        gc_thread_loop(engine_store, reports),
        lambda: expected <= collected_resources(reports),
    )
    assert expected <= collected_resources(reports), "the GC never collected anything"
    check_references(engine_store)


GC_PROCESS = """
import json, sys, time
from datetime import timedelta
from slate_ops.gc import GarbageCollector, GcOptions
from slate_ops.objstore import LocalStore
from pathlib import Path
root, stop_file, min_age = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3])
options = GcOptions.with_min_age(timedelta(seconds=min_age), allow_unsafe_min_age=True)
collector = GarbageCollector("db", LocalStore(root), options)
progress = Path(sys.argv[4])
deleted, runs = {}, 0
deadline = time.monotonic() + 60
while not stop_file.exists() and time.monotonic() < deadline:
    report = collector.run_once(dry_run=False)  # a GcFailedError ends the process with a traceback
    runs += 1
    for resource in report.resources:
        deleted[resource.resource] = deleted.get(resource.resource, 0) + resource.count
    progress.write_text(json.dumps({"runs": runs, **deleted}))
    time.sleep(0.1)
print(json.dumps({"runs": runs, "deleted": deleted}))
"""


@pytest.mark.e2e  # GC in a child process beside the workload (the thread case stays in the default run)
@pytest.mark.slow
def test_gc_in_a_separate_process(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = LocalStore(root)
    stop_file = tmp_path / "stop"
    progress = tmp_path / "progress.json"
    process: subprocess.Popen[str] | None = None

    def loop(stop: threading.Event) -> None:
        nonlocal process
        process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                GC_PROCESS,
                str(root),
                str(stop_file),
                str(min_age_for(store)),
                str(progress),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        stop.wait()

    def collected() -> bool:
        try:
            done = json.loads(progress.read_text())
        except (OSError, ValueError):
            return False
        # Keep the workload going until the GC process has run a few times (a loaded machine
        # slows it down) and has collected compacted SSTs.
        return bool(done.get("compacted", 0) > 0 and done.get("runs", 0) > 3)

    try:
        run_workload(store, loop, collected)
    finally:
        stop_file.touch()
        assert process is not None
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    summary = json.loads(out)
    assert summary["runs"] > 3 and summary["deleted"].get("compacted", 0) > 0, summary
    check_references(store)
