"""Scan read-ahead (slate_ops.sst.readahead): the same rows as reading each run when reached, fetches
that overlap within their bounds, an abandoned scan that stops, and cold gets that cost the same."""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Iterator
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st
from ulid import ULID

from slate_ops import Db
from slate_ops.engine import DbOptions
from slate_ops.engine.lsm import LsmState, SstReaders
from slate_ops.engine.merge import scan_merged
from slate_ops.layout import sst_key
from slate_ops.manifest.model import CompactedSst, KeyRange, Manifest, SortedRun, SstView
from slate_ops.objstore import CountingStore, MemoryStore
from slate_ops.objstore.base import GetResult, ObjectMeta, ObjectStore, PutMode, PutResult
from slate_ops.sst import (
    KIND_TOMBSTONE,
    KIND_VALUE,
    BlockCache,
    Entry,
    SstOptions,
    encode_sst,
    entries_to_table,
)
from slate_ops.sst.readahead import ReadAhead, ReadAheadLimits
from slate_ops.sst.reader import MIN_TAIL_BYTES

SMALL_BLOCKS = SstOptions(block_size=512)
THREAD_PREFIX = "slate-ops-read-ahead"
OVERWRITE = PutMode.overwrite()


class InFlightStore:
    """A store whose GETs take ``delay`` seconds, recording how many (and how many bytes) overlap."""

    def __init__(self, inner: ObjectStore, delay: float) -> None:
        self.inner = inner
        self.delay = delay
        self.gets = 0
        self.overlapped = 0  # GETs that started while another was running
        self.bytes = 0
        self.in_flight = 0
        self.in_flight_bytes = 0
        self.max_in_flight = 0
        self.max_in_flight_bytes = 0
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return self.inner.url

    def reset(self) -> None:
        with self._lock:
            self.gets = self.overlapped = self.bytes = self.max_in_flight = self.max_in_flight_bytes = 0

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        size = 0 if byte_range is None else byte_range[1] - byte_range[0]
        with self._lock:
            self.gets += 1
            self.overlapped += self.in_flight > 0
            self.bytes += size
            self.in_flight += 1
            self.in_flight_bytes += size
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.max_in_flight_bytes = max(self.max_in_flight_bytes, self.in_flight_bytes)
        try:
            time.sleep(self.delay)
            return self.inner.get(key, byte_range)
        finally:
            with self._lock:
                self.in_flight -= 1
                self.in_flight_bytes -= size

    def head(self, key: str) -> ObjectMeta:
        return self.inner.head(key)

    def put(self, key: str, data: bytes, mode: PutMode = OVERWRITE, put_id: str | None = None) -> PutResult:
        return self.inner.put(key, data, mode, put_id)

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[ObjectMeta]:
        return self.inner.list(prefix, start_after)

    def delete(self, key: str) -> None:
        self.inner.delete(key)


def write_sst(store: ObjectStore, rows: list[Entry]) -> CompactedSst:
    sst_id = ULID()
    data, info = encode_sst(entries_to_table(sorted(rows, key=lambda e: (e[0], -e[1]))), SMALL_BLOCKS)
    store.put(sst_key("db", sst_id), data)
    return CompactedSst(sst_id, info)


def manifest_of(
    store: ObjectStore, l0: list[list[Entry]], runs: list[list[list[Entry]]], visible: KeyRange | None = None
) -> Manifest:
    """L0 SSTs (newest first) and sorted runs (newest first, each a list of adjacent SSTs)."""
    ssts: list[CompactedSst] = []

    def view(rows: list[Entry]) -> SstView:
        sst = write_sst(store, rows)
        ssts.append(sst)
        return SstView(ULID(), sst.id, visible)

    l0_views = tuple(view(rows) for rows in l0 if rows)
    sorted_runs = tuple(SortedRun(n, tuple(view(rows) for rows in run if rows)) for n, run in enumerate(runs))
    return Manifest(initialized=True, ssts=tuple(ssts), l0=l0_views, compacted=sorted_runs)


def read_all(
    lsm: LsmState, start: bytes | None, end: bytes | None, limits: ReadAheadLimits | None
) -> list[list[Entry]]:
    """Every entry of every source (tombstones and shadowed versions included), per source."""
    read_ahead = None if limits is None else ReadAhead(limits)
    try:
        return [list(source) for source in lsm.sources(start, end, read_ahead)]
    finally:
        if read_ahead is not None:
            read_ahead.close()


def key(i: int) -> bytes:
    return b"k%05d" % i


ROWS = st.lists(
    st.tuples(st.integers(0, 300), st.integers(1, 50), st.sampled_from([KIND_VALUE, KIND_TOMBSTONE])),
    max_size=120,
)


def entries(rows: list[tuple[int, int, int]]) -> list[Entry]:
    unique = {(key(k), seq): kind for k, seq, kind in rows}
    return [
        (k, seq, kind, b"" if kind == KIND_TOMBSTONE else b"v%d-" % seq + k * 8)
        for (k, seq), kind in unique.items()
    ]


@settings(max_examples=60, deadline=None)
@given(
    l0=st.lists(ROWS, max_size=4),
    run=st.lists(st.integers(0, 300), max_size=6).map(sorted),
    bounds=st.tuples(st.none() | st.integers(0, 310), st.none() | st.integers(0, 310)),
    limits=st.sampled_from([ReadAheadLimits(1, 1), ReadAheadLimits(2048, 2), ReadAheadLimits()]),
    cached=st.booleans(),
    visible=st.none() | st.tuples(st.integers(0, 150), st.integers(150, 310)),
)
def test_read_ahead_gives_exactly_the_rows_of_the_plain_scan(
    l0: list[list[tuple[int, int, int]]],
    run: list[int],
    bounds: tuple[int | None, int | None],
    limits: ReadAheadLimits,
    cached: bool,
    visible: tuple[int, int] | None,
) -> None:
    store = MemoryStore()
    # overlapping L0 SSTs of random keys; one sorted run of adjacent SSTs cut at ``run``
    everything = sorted(
        {key(k): (key(k), 1, KIND_VALUE, b"run" + key(k) * 4) for k in range(0, 300, 3)}.values()
    )
    cuts = [0, *(c // 3 for c in run), len(everything)]
    pieces = [everything[a:b] for a, b in itertools.pairwise(cuts)]
    window = None if visible is None else KeyRange(key(visible[0]), key(visible[1]))
    manifest = manifest_of(store, [entries(rows) for rows in l0], [pieces], window)
    start, end = (None if b is None else key(b) for b in bounds)
    plain = read_all(LsmState(manifest, "db", SstReaders(store, None)), start, end, None)
    cache = BlockCache(1 << 20) if cached else None
    lsm = LsmState(manifest, "db", SstReaders(store, cache))
    if cached:  # some blocks come from the cache, the rest are fetched around them
        read_all(lsm, key(100), key(180), limits)
    assert read_all(lsm, start, end, limits) == plain
    assert read_all(lsm, start, end, limits) == plain  # readers open, blocks cached


def test_db_scans_are_the_same_with_and_without_read_ahead() -> None:
    store = MemoryStore()
    quiet = DbOptions(wal_flush_interval=timedelta(hours=1), manifest_poll_interval=timedelta(hours=1))
    with Db.open("db", store, quiet) as db:
        for part in range(4):  # overlapping L0 SSTs, newer ones overwriting and deleting
            for i in range(part, 2000, 3):
                if i % 7 == part:
                    db.delete(key(i))
                else:
                    db.put(key(i), b"%d-%d" % (part, i) * 10)
            db.flush_memtable()
        db.put(key(5), b"in the memtable")
    plain = quiet.model_copy(update={"scan_read_ahead_bytes": 0})
    with Db.open("db", store, plain) as db:
        expected = [list(db.scan()), list(db.scan(key(500), key(1500))), list(db.scan(key(1999)))]
    with Db.open("db", store, quiet) as db:
        got = [list(db.scan()), list(db.scan(key(500), key(1500))), list(db.scan(key(1999)))]
    assert got == expected and len(expected[0]) > 1000


def overlapping_l0(store: ObjectStore, n: int = 4, keys: int = 4000) -> Manifest:
    """``n`` L0 SSTs of interleaved (shuffled) keys, each over the whole key range."""
    rng = random.Random(n)  # incompressible values: the SSTs' sizes are what the test expects
    return manifest_of(
        store,
        [[(key(i), 1, KIND_VALUE, rng.randbytes(100)) for i in range(p, keys, n)] for p in range(n)],
        [],
    )


def read_ahead_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX)]


def wait_for_no_threads(timeout: float = 5) -> bool:
    deadline = time.monotonic() + timeout
    while read_ahead_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    return not read_ahead_threads()


def test_fetches_overlap_within_the_bounds() -> None:
    slow = InFlightStore(MemoryStore(), delay=0.02)
    manifest = overlapping_l0(slow.inner)
    limits = ReadAheadLimits(max_bytes=128 * 1024, max_fetches=4)
    lsm = LsmState(manifest, "db", SstReaders(slow, None, limits))
    read_ahead = lsm.read_ahead()
    assert read_ahead is not None
    sources = lsm.sources(None, None, read_ahead)
    assert slow.max_in_flight == 4  # the four SSTs' tails were opened at once
    slow.reset()
    assert sum(len(list(s)) for s in sources) == 4000
    assert read_ahead.reserved_bytes == 0
    read_ahead.close()
    assert 1 < slow.max_in_flight <= limits.max_fetches
    # prefetches stay within the bound; each stream may add the one run it needs now
    assert slow.max_in_flight_bytes <= limits.max_bytes + 4 * limits.run_bytes
    assert wait_for_no_threads()


def test_one_stream_stays_within_the_byte_bound() -> None:
    slow = InFlightStore(MemoryStore(), delay=0.01)
    rng = random.Random(1)
    manifest = manifest_of(
        slow.inner, [[(key(i), 1, KIND_VALUE, rng.randbytes(200)) for i in range(6000)]], []
    )
    limits = ReadAheadLimits(max_bytes=96 * 1024, max_fetches=3)
    lsm = LsmState(manifest, "db", SstReaders(slow, None, limits))
    lsm.get(key(0))  # the SST is open: only block runs are measured
    slow.reset()
    read_ahead = ReadAhead(limits)
    (source,) = lsm.sources(None, None, read_ahead)
    assert len(list(source)) == 6000
    assert read_ahead.reserved_bytes == 0  # every fetched run was taken
    read_ahead.close()
    assert slow.max_in_flight > 1
    assert slow.gets > 10 and slow.overlapped >= slow.gets / 2  # the next run is fetched while one is read
    assert slow.max_in_flight_bytes <= limits.max_bytes


def test_an_abandoned_scan_stops_fetching_and_its_threads_end() -> None:
    slow = InFlightStore(MemoryStore(), delay=0.02)
    manifest = overlapping_l0(slow.inner, keys=20_000)
    limits = ReadAheadLimits(max_bytes=64 * 1024, max_fetches=2)
    lsm = LsmState(manifest, "db", SstReaders(slow, None, limits))
    scan = scan_merged([], lsm, None, None)
    assert [next(scan)[0] for _ in range(3)] == [key(0), key(1), key(2)]
    del scan  # dropped half-way: its read-ahead is closed
    assert wait_for_no_threads()
    fetched = (slow.gets, slow.bytes)
    time.sleep(0.1)
    assert (slow.gets, slow.bytes) == fetched
    # the four SSTs' tails, then per SST its first block and its share of the read-ahead
    total = sum(s.info.size_bytes for s in manifest.ssts)
    bound = 4 * MIN_TAIL_BYTES + limits.max_bytes + 4 * limits.run_bytes
    assert slow.bytes <= bound < total / 3

    never_started = scan_merged([], lsm, None, None)
    assert read_ahead_threads()  # it opened its SSTs' tails and started fetching
    del never_started
    assert wait_for_no_threads()


def test_cold_gets_cost_the_same_requests_with_read_ahead() -> None:
    store = CountingStore(MemoryStore())
    manifest = overlapping_l0(store.inner)
    counts = []
    for limits in (ReadAheadLimits(0), ReadAheadLimits()):
        lsm = LsmState(manifest, "db", SstReaders(store, BlockCache(1 << 20), limits))
        store.reset()
        found = [lsm.get(key(i)) for i in range(0, 4000, 97)]
        assert all(f is not None for f in found)
        counts.append(store.counts)
    assert counts[0] == counts[1]
