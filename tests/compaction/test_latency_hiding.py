"""Compaction hides object-store latency (issue 23, item 4) without changing what it writes.

The overlaps: every input's reader (footer, index, bloom filter) is opened once, by planning, and
reused by the executor; the "running" record is written while the executor fetches and merges;
outputs upload while the next ones are encoded. These tests check the output is the same as a
compaction with no overlap at all, that the overlaps happen (requests counted in flight, not wall
time), and that a failure in flight fails the compaction cleanly.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ulid import ULID

from slate_ops.compaction import CompactionReport, Compactor, CompactorOptions, LocalExecutor
from slate_ops.compaction.executor import combine
from slate_ops.compaction.spec import CompactionSpec, ExecutionResult
from slate_ops.compaction.state import CompactionsStore
from slate_ops.compaction.subcompaction import CompactionIo, run_subcompaction
from slate_ops.engine import DbReader
from slate_ops.errors import ObjectStoreError
from slate_ops.layout import sst_key
from slate_ops.manifest.model import CompactedSst, Manifest, SstView
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import MemoryStore
from slate_ops.objstore.base import GetResult, ObjectMeta, ObjectStore, PutMode, PutResult
from slate_ops.objstore.wrappers import FaultInjectingStore
from slate_ops.sst import KIND_TOMBSTONE, KIND_VALUE, SCHEMA, encode_sst
from tests.support.compaction import SMALL, compact_once, fill
from tests.support.engine import QUIET_READER

DB = "db"
_OVERWRITE = PutMode.overwrite()
# Several subcompactions of a few outputs each, on inputs of a few thousand rows.
MANY = CompactorOptions(min_sources=2, max_subcompaction_bytes=32 * 1024, target_sst_bytes=8 * 1024)


def write_l0(store: ObjectStore, ssts: int, rows: int, value_bytes: int, deletes: float, seed: int) -> None:
    """``ssts`` L0 SSTs of overlapping keys (some tombstones), newest first in a new manifest."""
    rng = np.random.default_rng(seed)
    written: list[CompactedSst] = []
    seq = 0
    for _ in range(ssts):  # oldest first
        ids = np.sort(rng.choice(rows * 2, size=rows, replace=False))
        kinds = np.where(rng.random(rows) < deletes, KIND_TOMBSTONE, KIND_VALUE)
        table = pa.Table.from_arrays(
            [
                pa.array([b"key%08d" % i for i in ids], pa.binary()),
                pa.array(range(seq + 1, seq + rows + 1), pa.uint64()),
                pa.array(kinds, pa.uint8()),
                pa.array([b"" if k == KIND_TOMBSTONE else rng.bytes(value_bytes) for k in kinds]),
            ],
            schema=SCHEMA,
        )
        seq += rows
        data, info = encode_sst(table)
        sst_id = ULID()
        store.put(sst_key(DB, sst_id), data)
        written.append(CompactedSst(sst_id, info))
    newest_first = tuple(reversed(written))
    ManifestStore(store, DB).create_initial(
        Manifest(
            initialized=True,
            ssts=newest_first,
            l0=tuple(SstView(ULID(), s.id) for s in newest_first),
            last_l0_seq=seq,
        )
    )


def output_bytes(store: ObjectStore) -> list[bytes]:
    """The stored bytes of each SST of the newest sorted run, in key order (none: every row was
    a dropped tombstone)."""
    manifest = ManifestStore(store, DB).read_latest_required().value
    views = manifest.compacted[0].views if manifest.compacted else ()
    return [store.get(sst_key(DB, view.sst_id)).data for view in views]


def assert_same_compaction(
    ours: CompactionReport | None,
    our_store: MemoryStore,
    theirs: CompactionReport | None,
    their_store: MemoryStore,
) -> None:
    """Two compactions of the same inputs cut the same subcompactions and wrote the same SSTs."""
    assert ours is not None and theirs is not None
    assert (ours.subcompactions, ours.rows_in, ours.rows_out) == (
        theirs.subcompactions,
        theirs.rows_in,
        theirs.rows_out,
    )
    assert output_bytes(our_store) == output_bytes(their_store)


class Serial:
    """An executor with no overlap at all: subcompactions one after another, each with its own
    single-request pools, its inputs' readers opened anew, every output written before the next."""

    name = "serial"

    def execute(self, store: ObjectStore, spec: CompactionSpec) -> ExecutionResult:
        spec = dataclasses.replace(spec, opened={})
        results = []
        for key_range in spec.subcompactions:
            with CompactionIo(store, read_concurrency=1, write_concurrency=1) as io:
                results.append(run_subcompaction(store, spec, key_range, io=io))
        return combine(results)


def copy_of(store: MemoryStore) -> MemoryStore:
    copy = MemoryStore("copy")
    for meta in store.list():
        copy.put(meta.key, store.get(meta.key).data)
    return copy


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ssts=st.integers(2, 5),
    rows=st.integers(1, 1500),
    value_bytes=st.integers(0, 300),
    deletes=st.sampled_from([0.0, 0.1, 0.5]),
    subcompaction_kib=st.sampled_from([1, 8, 64, 1024]),
    seed=st.integers(0, 2**16),
)
def test_overlapped_compaction_writes_the_same_ssts_as_one_with_no_overlap(
    ssts: int, rows: int, value_bytes: int, deletes: float, subcompaction_kib: int, seed: int
) -> None:
    overlapped = MemoryStore("overlapped")
    write_l0(overlapped, ssts, rows, value_bytes, deletes, seed)
    serial = copy_of(overlapped)
    options = MANY.model_copy(update={"max_subcompaction_bytes": subcompaction_kib * 1024})
    ours = compact_once(DB, overlapped, options, LocalExecutor(threads=2), full=False)
    theirs = compact_once(DB, serial, options, Serial(), full=False)
    assert_same_compaction(ours, overlapped, theirs, serial)


class InFlight:
    """A store whose SST requests, manifest reads and ``.compactions`` writes take ``delay`` seconds,
    recording how many of each kind run at once and whether an SST GET ran during a record's PUT
    or during a manifest read."""

    def __init__(self, inner: ObjectStore, delay: float) -> None:
        self.inner = inner
        self.delay = delay
        self.now: Counter[str] = Counter()
        self.most: Counter[str] = Counter()
        self.get_during_record = False
        self.get_during_manifest_read = False
        self.tails: Counter[str] = Counter()  # GETs that end at an SST's end, per SST
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return self.inner.url

    def _kind(self, op: str, key: str) -> str | None:
        if key.endswith(".sst"):
            return f"sst {op}"
        if op in ("get", "list") and "/manifest/" in key:
            return "manifest read"
        return "record put" if op == "put" and key.endswith(".compactions") else None

    def _enter(self, kind: str | None) -> None:
        if kind is None:
            return
        with self._lock:
            self.now[kind] += 1
            self.most[kind] = max(self.most[kind], self.now[kind])
            if self.now["sst get"] and self.now["record put"]:
                self.get_during_record = True
            if self.now["sst get"] and self.now["manifest read"]:
                self.get_during_manifest_read = True
        time.sleep(self.delay)

    def _exit(self, kind: str | None) -> None:
        if kind is not None:
            with self._lock:
                self.now[kind] -= 1

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        kind = self._kind("get", key)
        self._enter(kind)
        try:
            result = self.inner.get(key, byte_range)
            if kind and byte_range is not None and byte_range[1] == result.meta.size:
                with self._lock:
                    self.tails[key] += 1
            return result
        finally:
            self._exit(kind)

    def head(self, key: str) -> ObjectMeta:
        return self.inner.head(key)

    def put(self, key: str, data: bytes, mode: PutMode = _OVERWRITE, put_id: str | None = None) -> PutResult:
        kind = self._kind("put", key)
        self._enter(kind)
        try:
            return self.inner.put(key, data, mode, put_id)
        finally:
            self._exit(kind)

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[ObjectMeta]:
        kind = self._kind("list", prefix)
        self._enter(kind)
        try:
            return iter(list(self.inner.list(prefix, start_after)))
        finally:
            self._exit(kind)

    def delete(self, key: str) -> None:
        self.inner.delete(key)


def test_uploads_input_fetches_and_the_running_record_overlap_and_tails_are_read_once() -> None:
    memory = MemoryStore("latency")
    write_l0(memory, ssts=4, rows=3000, value_bytes=100, deletes=0.05, seed=7)
    inputs = [m.key for m in memory.list(f"{DB}/compacted/")]
    store = InFlight(memory, delay=0.05)
    compactor = Compactor(DB, store, MANY, LocalExecutor(threads=2))
    report = compactor.run_once()
    compactor.close()  # waits for the "completed" record, written in the background
    assert report is not None and len(report.output_ssts) >= 8 and report.subcompactions >= 4
    # Outputs upload while the next ones are encoded: several PUTs at once (one at a time, N
    # outputs would cost N x 50 ms on their own).
    assert store.most["sst put"] >= 2
    assert store.most["sst get"] >= 2
    # The "running" record is written while the inputs are fetched, not before.
    assert store.get_during_record
    # Planning opened every input (its tail: footer, index, bloom filter) and the executor reused
    # the readers: one tail GET per input SST per compaction, not two; and the tails were read
    # while the manifest was re-read (the inputs guessed from the manifest the compactor had).
    assert {key: store.tails[key] for key in inputs} == dict.fromkeys(inputs, 1)
    assert store.get_during_manifest_read
    assert CompactionsStore(memory, DB).read().compactions[-1].status == "completed"


def unreferenced_outputs(store: ObjectStore, before: set[str]) -> set[str]:
    manifest = ManifestStore(store, DB).read_latest_required().value
    referenced = {sst_key(DB, s.id) for s in manifest.ssts}
    return {m.key for m in store.list(f"{DB}/compacted/")} - before - referenced


def test_a_failed_upload_in_flight_fails_the_compaction_cleanly_and_a_retry_succeeds() -> None:
    faults = FaultInjectingStore(MemoryStore("upload"))
    write_l0(faults, ssts=4, rows=3000, value_bytes=100, deletes=0.05, seed=11)
    before = {m.key for m in faults.list(f"{DB}/compacted/")}
    manifest_before = ManifestStore(faults, DB).read_latest_required().value
    faults.latency("put", 0.02)  # several uploads in flight when one fails
    faults.fail("put", key_contains="/compacted/", times=1)
    compactor = Compactor(DB, faults, MANY, LocalExecutor(threads=2))
    with pytest.raises(ObjectStoreError, match="injected failure: put"):
        compactor.run_once()
    settled = len(faults.calls)
    time.sleep(0.2)
    assert len(faults.calls) == settled  # nothing of the failed compaction still runs
    manifest = ManifestStore(faults, DB).read_latest_required().value
    assert (manifest.l0, manifest.compacted) == (manifest_before.l0, ())  # no commit
    assert CompactionsStore(faults, DB).read().compactions[-1].status == "failed"
    orphans = unreferenced_outputs(faults, before)  # outputs written meanwhile: GC's to delete
    report = compactor.run_once()
    compactor.close()
    assert report is not None
    assert unreferenced_outputs(faults, before) == orphans  # the retry's outputs are all referenced


def test_a_failed_running_record_fails_the_compaction_before_its_commit() -> None:
    faults = FaultInjectingStore(MemoryStore("record"))
    write_l0(faults, ssts=4, rows=2000, value_bytes=100, deletes=0.0, seed=13)
    compactor = Compactor(DB, faults, MANY, LocalExecutor(threads=2))
    before = ManifestStore(faults, DB).read_latest_required()
    faults.fail("put", key_contains=".compactions", times=1)  # the "running" record
    with pytest.raises(ObjectStoreError, match="compactions"):
        compactor.run_once()
    after = ManifestStore(faults, DB).read_latest_required()
    assert after.id == before.id  # no commit
    assert [r.status for r in CompactionsStore(faults, DB).read().compactions] == ["failed"]


def test_inputs_added_after_the_guess_are_planned_and_compacted_too(memory_store: MemoryStore) -> None:
    """The compactor guesses its inputs from the manifest it last saw; a writer's newer L0 SSTs are
    opened after the re-read, and the plan and the output follow the latest manifest."""
    fill(memory_store, flushes=2)
    compactor = Compactor(DB, memory_store, SMALL)  # has seen 2 L0 SSTs
    fill(memory_store, flushes=3, keys=300)  # 3 more since: overwrites and deletes of older keys
    assert len(ManifestStore(memory_store, DB).read_latest_required().value.l0) == 5
    before = contents(memory_store)
    report = compactor.run_once()
    compactor.close()
    assert report is not None and len(report.input_ssts) == 5
    manifest = ManifestStore(memory_store, DB).read_latest_required().value
    assert manifest.l0 == () and len(manifest.compacted) == 1
    assert contents(memory_store) == before


def contents(store: ObjectStore) -> dict[bytes, bytes]:
    with DbReader.open(DB, store, options=QUIET_READER) as reader:
        return dict(reader.scan())
