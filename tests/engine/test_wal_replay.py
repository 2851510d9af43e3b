"""Reopening replays the WAL with one LIST and bounded parallel GETs (issue 15, item 2).

The replay must keep its semantics exactly: WAL SSTs after ``replay_after_wal_id`` and below the
new fence, applied in id order, an empty object (an older writer's fence) never read as data, and
memtables frozen at the same WAL ids as a one-by-one replay would.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Generator

import pytest

from slate_ops import Db
from slate_ops.engine.flusher import MemtableFlusher
from slate_ops.engine.memtable import Memtable
from slate_ops.engine.wal_chain import is_data
from slate_ops.engine.wal_fence import WAL_FENCE_WINDOW, WINDOW_FENCE
from slate_ops.engine.wal_store import WalStore
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import FaultInjectingStore, MemoryStore
from slate_ops.objstore.base import ObjectStore
from tests.support.engine import quiet, simulate_crash

DB = "db"


def write_wal(store: ObjectStore, first: int, count: int, model: dict[bytes, bytes], **options: int) -> None:
    """``count`` WAL SSTs (one flush each) of puts, overwrites and deletes, also applied to
    ``model``; then the writer dies."""
    db = Db.open(DB, store, quiet(**options))
    for i in range(first, first + count):
        key, filler = f"k{i % 7}".encode(), f"u{i}".encode()
        db.put(key, f"v{i}".encode())
        db.put(filler, b"x" * 50)
        model[key], model[filler] = f"v{i}".encode(), b"x" * 50
        if i % 5 == 0:
            gone = f"k{(i + 3) % 7}".encode()
            db.delete(gone)
            model.pop(gone, None)
        db.flush()
    simulate_crash(db)


Memtables = list[tuple[int, list[tuple[bytes, int, int, bytes]]]]


def one_by_one(store: ObjectStore, after: int, fence_id: int, limit: int) -> Memtables:
    """The replay as it was: each WAL SST read alone, in id order; returns each memtable's last
    WAL id and entries."""
    wal = WalStore(store, DB)
    memtables: Memtables = []
    memtable = Memtable()
    for wal_id in wal.list_ids(after):
        if wal_id >= fence_id:
            break
        for key, seq, kind, value in wal.read(wal_id):
            memtable.put(key, seq, kind, value)
        memtable.max_wal_id = wal_id
        if memtable.size_bytes >= limit:
            memtables.append((memtable.max_wal_id, list(memtable.scan())))
            memtable = Memtable()
    memtables.append((memtable.max_wal_id, list(memtable.scan())))
    return memtables


def wal_calls(store: FaultInjectingStore, op: str) -> list[str]:
    return [key for called, key in store.calls if called == op and "/wal/" in key]


@pytest.mark.parametrize("limit", [64 * 1024 * 1024, 2500])  # 2500 B: replay freezes memtables
def test_replay_gives_the_same_state_with_one_get_per_wal_sst(
    engine_store: ObjectStore, limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    model: dict[bytes, bytes] = {}
    write_wal(engine_store, 0, 25, model)
    # A second writer fences (a window fence in the middle of the WAL), writes more and dies too.
    write_wal(engine_store, 25, 15, model)
    wal = WalStore(engine_store, DB)
    sizes = wal.list_sizes()
    fences = [wal_id for wal_id, size in sizes if size == len(WINDOW_FENCE)]
    assert len(fences) == 2  # the first writer's (at open) and the second's

    latest = ManifestStore(engine_store, DB).read_latest()
    assert latest is not None
    after = latest.value.replay_after_wal_id
    frozen: Memtables = []  # recorded as replay (and the final flush_memtable) freezes them
    add = MemtableFlusher.add

    def recording(flusher: MemtableFlusher, memtable: Memtable) -> None:
        frozen.append((memtable.max_wal_id, list(memtable.scan())))
        add(flusher, memtable)

    monkeypatch.setattr(MemtableFlusher, "add", recording)
    store = FaultInjectingStore(engine_store)
    with Db.open(DB, store, quiet(l0_sst_size_bytes=limit), background=False) as db:
        fence_id = db.next_wal_id - WAL_FENCE_WINDOW
        expected = one_by_one(engine_store, after, fence_id, limit)
        assert dict(db.scan()) == model
        wal_gets, wal_lists = wal_calls(store, "get"), wal_calls(store, "list")
        db.flush_memtable()  # freezes the memtable replay left mutable
        assert frozen == expected
        assert frozen[-1][0] == fence_id - 1
        if limit == 2500:
            assert len(expected) > 1  # the small limit does freeze during replay

        replayed = [wal_id for wal_id, _ in sizes if after < wal_id < fence_id]
        data = [wal_id for wal_id, size in sizes if is_data(size) and wal_id in replayed]
        assert wal_calls(store, "head") == []  # no HEAD per segment
        assert sorted(wal_gets) == [wal.key(i) for i in data]  # one GET each, none for fences
        assert len(wal_lists) == 1  # the fence's LIST, which the replay reuses


def test_replay_fetches_overlap(memory_store: MemoryStore) -> None:
    n, latency = 32, 0.05
    write_wal(memory_store, 0, n, {})
    store = FaultInjectingStore(memory_store)
    store.latency("get", latency)
    started = time.perf_counter()
    with Db.open(DB, store, quiet()) as db:
        elapsed = time.perf_counter() - started
        assert db.get(f"u{n - 1}".encode()) == b"x" * 50
    wal_gets = len(wal_calls(store, "get"))
    assert wal_gets == n
    # One after another this is >= 32 x 50 ms = 1.6 s; 16 at a time, about 2 x 50 ms plus the
    # manifest's few GETs.
    assert elapsed < n * latency / 3, f"reopen took {elapsed:.2f} s for {wal_gets} GETs of {latency} s"


class _Slow:
    """A store whose GETs of chosen keys wait for an event, to shuffle completion order."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.url = inner.url
        self.in_flight = 0
        self.most_in_flight = 0
        self._lock = threading.Lock()

    def get(self, key: str, byte_range: tuple[int, int] | None = None):  # type: ignore[no-untyped-def]
        with self._lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            # Earlier ids take longer, so later ones finish first.
            time.sleep(0.002 * (40 - int(key.rsplit("/", 1)[-1][:20]) % 40))
            return self.inner.get(key, byte_range)
        finally:
            with self._lock:
                self.in_flight -= 1

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self.inner, name)


def test_read_many_yields_in_id_order_with_bounded_parallelism(memory_store: MemoryStore) -> None:
    write_wal(memory_store, 0, 30, {})
    slow = _Slow(memory_store)
    wal = WalStore(slow, DB)
    sizes = wal.list_sizes()
    got = [(wal_id, list(entries)) for wal_id, entries in wal.read_many(sizes, parallelism=4)]
    assert [wal_id for wal_id, _ in got] == [wal_id for wal_id, _ in sizes]
    plain = WalStore(memory_store, DB)
    assert [entries for _, entries in got] == [list(plain.read(wal_id)) for wal_id, _ in sizes]
    assert 1 < slow.most_in_flight <= 4


def test_read_many_stops_early_and_reports_errors(memory_store: MemoryStore) -> None:
    write_wal(memory_store, 0, 30, {})
    store = FaultInjectingStore(memory_store)
    wal = WalStore(store, DB)
    sizes = wal.list_sizes()
    stream = wal.read_many(sizes, parallelism=4)
    assert isinstance(stream, Generator)
    next(stream)
    stream.close()  # stopping early fetches no more than the window ahead
    assert len(wal_calls(store, "get")) <= 5

    store.fail("get", key_contains=wal.key(sizes[10][0]))
    with pytest.raises(Exception, match="injected failure"):
        for _ in wal.read_many(sizes, parallelism=4):
            pass
