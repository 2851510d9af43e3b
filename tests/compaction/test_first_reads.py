"""The executor's first block GETs happen while the compaction is planned (issue 23, item 4).

Each input's first blocks are fetched as soon as its tail is read (``FirstReads``); the executor
takes them instead of requesting them again. Checked by recording every request (not by timing),
on a :class:`ManualRuntime` (every pool runs its calls inline, in program order, so the order of
the requests is deterministic): the executor sends no GET for a range planning fetched, the outputs
are byte-identical to a compaction with no overlap at all, a failed first read is fetched again,
and first reads of a guess that missed cost their GETs only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from ulid import ULID

from slate_ops.compaction import Compactor, CompactorOptions, LocalExecutor
from slate_ops.compaction.firstreads import FirstReads
from slate_ops.errors import ObjectStoreError
from slate_ops.layout import sst_key
from slate_ops.manifest.model import CompactedSst, Manifest, SstView
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import MemoryStore
from slate_ops.objstore.base import GetResult, ObjectMeta, ObjectStore, PutMode, PutResult
from slate_ops.runtime import ManualRuntime
from slate_ops.sst import KIND_VALUE, SCHEMA, SstReader, encode_sst
from tests.compaction.test_latency_hiding import (
    DB,
    MANY,
    Serial,
    assert_same_compaction,
    copy_of,
    output_bytes,
    write_l0,
)
from tests.support.compaction import compact_once

_OVERWRITE = PutMode.overwrite()
START = 1_700_000_000.0
# One subcompaction for everything: the first reads cover every input whole.
ONE = CompactorOptions(min_sources=2, max_subcompaction_bytes=64 * 1024 * 1024, target_sst_bytes=8 * 1024)


@dataclass(frozen=True)
class Call:
    op: str
    key: str
    byte_range: tuple[int, int] | None
    size: int  # the object's size (GETs of SSTs)

    @property
    def is_block_get(self) -> bool:
        """A GET of an SST's data blocks (not of its tail: footer, index, bloom filter)."""
        return (
            self.op == "get"
            and self.key.endswith(".sst")
            and self.byte_range is not None
            and self.byte_range[1] < self.size
        )

    @property
    def is_record_put(self) -> bool:
        return self.op == "put" and ".compactions" in self.key

    def overlaps(self, other: Call) -> bool:
        assert self.byte_range is not None and other.byte_range is not None
        return self.key == other.key and max(self.byte_range[0], other.byte_range[0]) < min(
            self.byte_range[1], other.byte_range[1]
        )


class Recording:
    """Every request, in order; ``fail`` decides which GETs raise (after being recorded)."""

    def __init__(self, inner: ObjectStore, fail: Callable[[Call], bool] = lambda call: False) -> None:
        self.inner = inner
        self.fail = fail
        self.calls: list[Call] = []
        self.failed: list[Call] = []
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return self.inner.url

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        size = self.inner.head(key).size if key.endswith(".sst") else 0
        call = Call("get", key, byte_range, size)
        with self._lock:
            self.calls.append(call)
        if self.fail(call):
            self.failed.append(call)
            raise ObjectStoreError(f"injected failure: get {key} {byte_range}", key)
        return self.inner.get(key, byte_range)

    def head(self, key: str) -> ObjectMeta:
        return self.inner.head(key)

    def put(self, key: str, data: bytes, mode: PutMode = _OVERWRITE, put_id: str | None = None) -> PutResult:
        with self._lock:
            self.calls.append(Call("put", key, None, len(data)))
        return self.inner.put(key, data, mode, put_id)

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[ObjectMeta]:
        return self.inner.list(prefix, start_after)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def running_recorded(self) -> bool:
        """Whether the "running" record (the first record after an SST was read) is written yet."""
        sst_read = False
        for call in self.calls:
            sst_read = sst_read or (call.op == "get" and call.key.endswith(".sst"))
            if sst_read and call.is_record_put:
                return True
        return False

    def split(self) -> tuple[list[Call], list[Call]]:
        """The block GETs before the "running" record (planning's) and after it (the executor's:
        on a ManualRuntime the record is written when planning is done, before the executor)."""
        first = next(n for n, c in enumerate(self.calls) if c.key.endswith(".sst") and c.op == "get")
        running = next(n for n, c in enumerate(self.calls) if n > first and c.is_record_put)
        planning = [c for c in self.calls[:running] if c.is_block_get]
        executor = [c for c in self.calls[running:] if c.is_block_get]
        return planning, executor


def inputs_of(store: ObjectStore) -> list[str]:
    manifest = ManifestStore(store, DB).read_latest_required().value
    return [sst_key(DB, s.id) for s in manifest.ssts]


def compact_both(memory: MemoryStore, options: CompactorOptions, store: ObjectStore) -> MemoryStore:
    """Compact ``memory`` through ``store`` with the local executor on a ManualRuntime, and a copy
    of it as before with :class:`Serial` (no overlap at all, no first reads); the copy."""
    serial = copy_of(memory)
    clock = ManualRuntime(START)
    ours = Compactor(DB, store, options, LocalExecutor(threads=2, clock=clock), clock=clock).run_once()
    theirs = compact_once(DB, serial, options, Serial(), full=False)
    assert_same_compaction(ours, memory, theirs, serial)
    return serial


def test_the_executor_sends_no_block_get_when_planning_fetched_every_first_run() -> None:
    memory = MemoryStore("whole")
    write_l0(memory, ssts=4, rows=3000, value_bytes=100, deletes=0.05, seed=3)  # ~400 KB each
    inputs = inputs_of(memory)
    store = Recording(memory)
    compact_both(memory, ONE, store)
    planning, executor = store.split()
    # Each input's blocks came with one GET, read right after its tail, while planning ...
    assert sorted(c.key for c in planning) == sorted(inputs)
    for call in planning:
        tail = store.calls[store.calls.index(call) - 1]
        assert (tail.key, tail.op, tail.is_block_get) == (call.key, "get", False)
    # ... and the executor sent none: it merged the blocks planning fetched.
    assert executor == []


def test_the_executor_never_requests_again_a_range_planning_fetched() -> None:
    """Many subcompactions (128 KiB each, so a first-read budget of 160 KiB: ~40 KiB per input):
    the first reads cover the start of each input, beyond the first cut; the executor requests
    only what they do not cover."""
    memory = MemoryStore("many")
    write_l0(memory, ssts=4, rows=3000, value_bytes=100, deletes=0.05, seed=5)
    options = MANY.model_copy(update={"max_subcompaction_bytes": 128 * 1024})
    store = Recording(memory)
    compact_both(memory, options, store)
    planning, executor = store.split()
    assert len(planning) == 4 and executor
    fetched = sum(c.byte_range[1] - c.byte_range[0] for c in planning if c.byte_range)
    assert fetched <= options.max_subcompaction_bytes * 5 // 4
    assert [(e.key, e.byte_range) for e in executor for p in planning if e.overlaps(p)] == []


def test_a_failed_first_read_is_fetched_again_by_the_executor() -> None:
    memory = MemoryStore("failed")
    write_l0(memory, ssts=4, rows=3000, value_bytes=100, deletes=0.05, seed=7)
    store = FailingFirstReads(memory)
    compact_both(memory, ONE, store)
    planning, executor = store.split()
    assert len(store.failed) == 4 and store.failed == planning
    # Every failed range was requested again by the executor, and nothing else.
    assert sorted((c.key, c.byte_range) for c in executor) == sorted((c.key, c.byte_range) for c in planning)


class FailingFirstReads(Recording):
    """Fails every block GET sent before the "running" record: the first reads."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner, fail=self._before_record)

    def _before_record(self, call: Call) -> bool:
        return call.is_block_get and not self.running_recorded()


def sst(store: ObjectStore, keys: range, seq: int, value: bytes) -> CompactedSst:
    rng = np.random.default_rng(seq)
    table = pa.Table.from_arrays(
        [
            pa.array([b"key%08d" % i for i in keys], pa.binary()),
            pa.array(range(seq, seq + len(keys)), pa.uint64()),
            pa.array([KIND_VALUE] * len(keys), pa.uint8()),
            pa.array([value + rng.bytes(100) for _ in keys], pa.binary()),  # ~400 KB stored
        ],
        schema=SCHEMA,
    )
    data, info = encode_sst(table)
    sst_id = ULID()
    store.put(sst_key(DB, sst_id), data)
    return CompactedSst(sst_id, info)


def test_first_reads_of_a_guess_that_missed_cost_their_gets_only() -> None:
    """The compactor guesses its inputs from the manifest it last saw (A, B). Before it runs, the
    manifest's L0 becomes C, D, E only: A and B are read on the guess, and the compaction of
    C, D, E is the same as one with no first reads at all."""
    memory = MemoryStore("missed")
    older = [sst(memory, range(0, 4000), 1, b"a"), sst(memory, range(2000, 6000), 5001, b"b")]
    manifests = ManifestStore(memory, DB)
    manifests.create_initial(
        Manifest(
            initialized=True,
            ssts=tuple(reversed(older)),
            l0=tuple(SstView(ULID(), s.id) for s in reversed(older)),
            last_l0_seq=9000,
        )
    )
    store = Recording(memory)
    clock = ManualRuntime(START)
    compactor = Compactor(DB, store, ONE, LocalExecutor(threads=2, clock=clock), clock=clock)
    rng = np.random.default_rng(1)
    newer = [
        sst(memory, range(int(lo), int(lo) + 3000), 10_001 + 3000 * n, b"cde"[n : n + 1])
        for n, lo in enumerate(rng.integers(0, 5000, size=3))
    ]
    newest_first = tuple(reversed(newer))
    l0 = tuple(SstView(ULID(), s.id) for s in newest_first)
    manifests.update(lambda current: current.value.with_changes(ssts=newest_first, l0=l0, last_l0_seq=20_000))
    serial = copy_of(memory)
    report = compactor.run_once()
    theirs = compact_once(DB, serial, ONE, Serial(), full=False)
    assert report is not None and theirs is not None
    assert sorted(report.input_ssts) == sorted(str(s.id) for s in newer)
    assert output_bytes(memory) == output_bytes(serial)
    planning, executor = store.split()
    guessed = {sst_key(DB, s.id) for s in older}
    assert {c.key for c in planning} == guessed | {sst_key(DB, s.id) for s in newer}
    assert executor == []  # the new inputs' first reads started once the manifest was re-read


def test_an_executor_in_another_process_gets_no_first_reads() -> None:
    """A spec is pickled without its first reads: only a LocalExecutor makes planning fetch blocks."""
    memory = MemoryStore("serial")
    write_l0(memory, ssts=3, rows=3000, value_bytes=100, deletes=0.0, seed=9)
    store = Recording(memory)
    assert compact_once(DB, store, ONE, Serial(), full=False) is not None
    planning, executor = store.split()
    assert planning == [] and len(executor) >= 3


def test_first_reads_stay_within_the_budget_and_forget_what_is_not_kept() -> None:
    memory = MemoryStore("budget")
    write_l0(memory, ssts=3, rows=3000, value_bytes=100, deletes=0.0, seed=2)
    keys = inputs_of(memory)
    readers = {key: SstReader.open(memory, key) for key in keys}
    first_reads = FirstReads(budget=100_000, max_run=4 * 1024 * 1024, concurrency=2)
    try:
        for key in keys:
            first_reads.start(key, readers[key], None, inputs=len(keys))
        assert 0 < first_reads.reserved_bytes <= 100_000
        first_reads.keep(keys[1:])
        assert first_reads.fetched(keys[0], 0, 5) == {}  # forgotten
        blocks = first_reads.fetched(keys[1], 0, 5)
        assert sorted(blocks) == list(range(len(blocks))) and blocks
        assert {b: bytes(v) for b, v in blocks.items()} == {
            b: bytes(v) for b, v in readers[keys[1]].fetch_run(0, len(blocks)).items()
        }
        first_reads.start(keys[0], readers[keys[0]], None, inputs=1)  # not kept: never started
        assert first_reads.fetched(keys[0], 0, 5) == {}
    finally:
        first_reads.close()
    assert first_reads.fetched(keys[1], 0, 5) == {}  # closed: every block dropped
