"""Compaction streaming from and to S3 (moto on loopback, through boto3): parallel ranged GETs,
outputs uploaded while the next is encoded, multipart uploads for large outputs."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from botocore.exceptions import ConnectionClosedError
from ulid import ULID

from slate_ops.compaction import CompactionReport, Compactor, CompactorOptions, LocalExecutor, subcompaction
from slate_ops.compaction import executor as executor_module
from slate_ops.errors import ObjectStoreError
from slate_ops.layout import sst_key
from slate_ops.manifest.model import CompactedSst, Manifest, SstView
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import LocalStore, MemoryStore, S3Store
from slate_ops.objstore.base import GetResult, ObjectMeta, ObjectStore, PutMode, PutResult
from slate_ops.objstore.s3 import MIN_PART_BYTES, make_s3_client
from slate_ops.objstore.wrappers import FaultInjectingStore
from slate_ops.sst import KIND_VALUE, SCHEMA, SstReader, encode_sst
from tests.support.compaction import SMALL, compact_once, fill
from tests.support.s3 import CREDENTIALS

pytestmark = pytest.mark.s3

DB = "db"
_OVERWRITE = PutMode.overwrite()
# ~16 subcompactions of write_l0(ssts=4, rows=3000, value_bytes=100), several outputs each
WINDOWED = CompactorOptions(min_sources=2, max_subcompaction_bytes=64 * 1024, target_sst_bytes=16 * 1024)
MiB = 1024 * 1024


def output_tables(store: ObjectStore, path: str = DB) -> list[tuple[bytes, pa.Table]]:
    """Each SST of the newest sorted run: its stored bytes and its rows, in key order."""
    manifest = ManifestStore(store, path).read_latest_required().value
    infos = {s.id: s for s in manifest.ssts}
    result = []
    for view in manifest.compacted[0].views:
        key = sst_key(path, view.sst_id)
        data = store.get(key).data
        result.append(
            (data, SstReader.open(store, key, size=infos[view.sst_id].info.size_bytes).read_table())
        )
    return result


def copy_store(source: ObjectStore, target: ObjectStore) -> None:
    for meta in source.list():
        target.put(meta.key, source.get(meta.key).data)


def counting_client(endpoint: str, max_attempts: int = 5) -> tuple[Any, Counter[str]]:
    """A fresh boto3 client and the S3 operations it sends, by name (every attempt counted)."""
    client = make_s3_client(endpoint_url=endpoint, max_attempts=max_attempts, **CREDENTIALS)
    calls: Counter[str] = Counter()
    lock = threading.Lock()

    def count(model: Any, **_: Any) -> None:
        with lock:
            calls[model.name] += 1

    client.meta.events.register("before-call.s3", count)
    return client, calls


def write_l0(store: ObjectStore, ssts: int, rows: int, value_bytes: int, seed: int = 3) -> dict[bytes, bytes]:
    """``ssts`` L0 SSTs of overlapping keys with incompressible values, and a manifest; the model."""
    rng = np.random.default_rng(seed)
    written: list[CompactedSst] = []
    model: dict[bytes, bytes] = {}
    seq = 0
    for n in range(ssts):  # oldest first
        ids = np.sort(rng.choice(rows * 2, size=rows, replace=False))
        keys = [b"key%08d" % i for i in ids]
        values = [rng.bytes(value_bytes) for _ in ids]
        seqs = list(range(seq + 1, seq + rows + 1))
        seq += rows
        table = pa.Table.from_arrays(
            [
                pa.array(keys, pa.binary()),
                pa.array(seqs, pa.uint64()),
                pa.array([KIND_VALUE] * rows, pa.uint8()),
                pa.array(values, pa.binary()),
            ],
            schema=SCHEMA,
        )
        data, info = encode_sst(table)
        sst_id = ULID()
        store.put(sst_key(DB, sst_id), data)
        written.append(CompactedSst(sst_id, info))
        model.update(zip(keys, values, strict=True))
        del n
    newest_first = tuple(reversed(written))
    ManifestStore(store, DB).create_initial(
        Manifest(
            initialized=True,
            ssts=newest_first,
            l0=tuple(SstView(ULID(), s.id) for s in newest_first),
            last_l0_seq=seq,
        )
    )
    return model


def rows_of(store: ObjectStore) -> dict[bytes, bytes]:
    merged: dict[bytes, bytes] = {}
    for _, table in output_tables(store):
        merged.update(zip(table.column("key").to_pylist(), table.column("value").to_pylist(), strict=True))
    return merged


@pytest.fixture
def multipart_store(
    moto_endpoint: str, make_bucket: Callable[[], str]
) -> Callable[..., tuple[S3Store, Counter[str]]]:
    """An S3Store with a fresh counting client whose outputs above 6 MiB go up in 5 MiB parts."""

    def make(max_attempts: int = 5) -> tuple[S3Store, Counter[str]]:
        client, calls = counting_client(moto_endpoint, max_attempts)
        store = S3Store(
            make_bucket(),
            "pfx",
            client=client,
            multipart_threshold=6 * MiB,
            multipart_part_bytes=MIN_PART_BYTES,
        )
        return store, calls

    return make


def test_compaction_on_s3_writes_the_same_ssts_as_on_a_local_directory(
    tmp_path: Path, make_s3_store: Callable[..., S3Store]
) -> None:
    local = LocalStore(tmp_path / "local")
    model = fill(local, flushes=4, keys=600)
    s3 = make_s3_store()
    copy_store(local, s3)
    reports = [compact_once(DB, store, SMALL) for store in (local, s3)]
    assert all(r is not None for r in reports)
    assert reports[0].subcompactions == reports[1].subcompactions > 2  # type: ignore[union-attr]
    ours, theirs = output_tables(s3), output_tables(local)
    assert len(ours) == len(theirs) > 2
    for (s3_bytes, s3_rows), (local_bytes, local_rows) in zip(ours, theirs, strict=True):
        assert s3_rows.equals(local_rows)
        assert s3_bytes == local_bytes
    assert rows_of(s3) == model


def test_a_large_output_is_a_parallel_multipart_upload(
    multipart_store: Callable[..., tuple[S3Store, Counter[str]]],
) -> None:
    store, calls = multipart_store()
    model = write_l0(store, ssts=2, rows=6000, value_bytes=1000)  # ~12 MB of incompressible rows
    calls.clear()
    report = compact_once(DB, store, CompactorOptions(min_sources=2), full=False)
    assert report is not None and len(report.output_ssts) == 1
    ((data, _),) = output_tables(store)
    assert len(data) > store.multipart_threshold
    parts = -(-len(data) // MIN_PART_BYTES)
    assert calls["CreateMultipartUpload"] == 1
    assert calls["UploadPart"] == parts >= 2
    assert calls["CompleteMultipartUpload"] == 1
    assert calls["AbortMultipartUpload"] == 0
    meta = store.head(sst_key(DB, ULID.from_str(report.output_ssts[0])))
    assert meta.put_id is not None and meta.etag.endswith(f"-{parts}")  # a multipart object
    assert rows_of(store) == model


def test_a_failed_part_leaves_no_output_and_the_compaction_can_be_retried(
    multipart_store: Callable[..., tuple[S3Store, Counter[str]]],
) -> None:
    store, calls = multipart_store()
    model = write_l0(store, ssts=2, rows=6000, value_bytes=1000)
    before = {m.key for m in store.list()}
    sent = Counter[str]()

    def break_second_part(params: dict[str, Any], **_: Any) -> None:  # the injected fault
        sent["parts"] += 1
        if sent["parts"] == 2:
            raise ConnectionClosedError(endpoint_url="http://moto/injected")

    store.client.meta.events.register("before-parameter-build.s3.UploadPart", break_second_part)
    compactor = Compactor(DB, store, CompactorOptions(min_sources=2))
    with pytest.raises(ObjectStoreError, match="part"):
        compactor.run_once()
    assert calls["AbortMultipartUpload"] == 1
    assert store.client.list_multipart_uploads(Bucket=store.bucket).get("Uploads", []) == []
    new_ssts = {m.key for m in store.list(f"{DB}/compacted/")} - before
    assert new_ssts == set()  # no output, not even half of one
    manifest = ManifestStore(store, DB).read_latest_required().value
    assert len(manifest.l0) == 2 and manifest.compacted == ()

    store.client.meta.events.unregister("before-parameter-build.s3.UploadPart", break_second_part)
    report = compactor.run_once()
    compactor.close()
    assert report is not None and report.rows_out == len(model)
    assert rows_of(store) == model


class _InFlight:
    """A store whose GETs take ``delay`` seconds, recording the most GETs of SSTs running at once
    (the compaction's record and manifest reads are not input fetches)."""

    def __init__(self, inner: ObjectStore, delay: float) -> None:
        self.inner = inner
        self.delay = delay
        self.max_gets = 0
        self._gets = 0
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return self.inner.url

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        if not key.endswith(".sst"):
            return self.inner.get(key, byte_range)
        with self._lock:
            self._gets += 1
            self.max_gets = max(self.max_gets, self._gets)
        try:
            time.sleep(self.delay)
            return self.inner.get(key, byte_range)
        finally:
            with self._lock:
                self._gets -= 1

    def head(self, key: str) -> ObjectMeta:
        return self.inner.head(key)

    def put(self, key: str, data: bytes, mode: PutMode = _OVERWRITE, put_id: str | None = None) -> PutResult:
        return self.inner.put(key, data, mode, put_id)

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[ObjectMeta]:
        return self.inner.list(prefix, start_after)

    def delete(self, key: str) -> None:
        self.inner.delete(key)


@pytest.mark.parametrize("bound", [3, 8])
def test_prefetch_keeps_at_most_the_bound_of_gets_in_flight(
    bound: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = MemoryStore("prefetch")
    model = write_l0(memory, ssts=4, rows=3000, value_bytes=100)  # ~80 blocks
    store = _InFlight(memory, delay=0.005)
    monkeypatch.setattr(subcompaction, "READ_CONCURRENCY", bound)
    monkeypatch.setattr(subcompaction, "FETCH_RUN_BYTES", 1)  # one GET per block: many GETs
    report = compact_once(DB, store, WINDOWED, LocalExecutor(threads=2))
    assert report is not None and report.subcompactions > 4
    assert 1 < store.max_gets <= bound
    assert rows_of(memory) == model


def test_inputs_are_held_by_at_most_one_subcompaction_more_than_the_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Prefetching holds at most ``threads + 1`` subcompactions' inputs (fetched, not yet merged),
    and frozen uploads stop the pipeline: encoded outputs waiting for upload are bounded too."""
    faults = FaultInjectingStore(MemoryStore("window"))
    model = write_l0(faults, ssts=4, rows=3000, value_bytes=100)
    lock = threading.Lock()
    fetched: list[object] = []
    held = [0, 0]  # now, most

    def fetch_spy(*args: Any) -> subcompaction.PendingInputs:
        with lock:
            fetched.append(args[2])
            held[0] += 1
            held[1] = max(held)
        return fetch_inputs(*args)

    def merge_spy(table: pa.Table, *, drop_tombstones: bool = False) -> pa.Table:
        merged = merge(table, drop_tombstones=drop_tombstones)
        with lock:
            held[0] -= 1
        return merged

    fetch_inputs, merge = subcompaction.fetch_inputs, subcompaction.newest_per_key
    monkeypatch.setattr(executor_module, "fetch_inputs", fetch_spy)
    monkeypatch.setattr(subcompaction, "newest_per_key", merge_spy)
    gate = faults.gate("put", key_contains="/compacted/")
    threads = 2
    compactor = Compactor(DB, faults, WINDOWED, LocalExecutor(threads))
    result: list[object] = []
    runner = threading.Thread(target=lambda: result.append(compactor.run_once(full=True)))
    runner.start()
    try:
        assert gate.wait_until_reached(10)
        time.sleep(0.3)  # room for any work that could still go on
        while_frozen = len(fetched)
    finally:
        gate.release()
        runner.join(30)
        compactor.close()
    (report,) = result
    assert isinstance(report, CompactionReport) and report.subcompactions == len(fetched) > while_frozen
    assert held[1] == threads + 1
    assert rows_of(faults) == model
