"""The simulation's seeded order of WAL PUTs in flight (tests/reliability/sim/wal_puts.py): a writer under
it lands WAL ``N + 1`` before ``N`` in one reproducible order per seed, and still acknowledges only the
landed prefix, every write once."""

from __future__ import annotations

import random

import pytest

from slate_ops import Db
from slate_ops.engine.wal_store import WalStore
from slate_ops.layout import parse_wal_key
from slate_ops.objstore import MemoryStore
from slate_ops.objstore.base import GetResult, ObjectMeta, ObjectStore, PutMode, PutResult
from tests.reliability.sim.wal_puts import ReorderingExecutor, SimRuntime
from tests.support.engine import quiet

SEGMENTS = 4


class LandingOrder:
    """Records the WAL ids of WAL PUTs in the order they run."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.recording = False  # from the writer's open on (not its fence)
        self.puts: list[int] = []

    @property
    def url(self) -> str:
        return self.inner.url

    def put(self, key: str, data: bytes, mode: PutMode | None = None, put_id: str | None = None) -> PutResult:
        wal_id = parse_wal_key("db", key)
        if wal_id is not None and self.recording:
            self.puts.append(wal_id)
        return self.inner.put(key, data, mode or PutMode.overwrite(), put_id)

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        return self.inner.get(key, byte_range)

    def head(self, key: str) -> ObjectMeta:
        return self.inner.head(key)

    def list(self, prefix: str = "", start_after: str | None = None):  # type: ignore[no-untyped-def]
        return self.inner.list(prefix, start_after)

    def delete(self, key: str) -> None:
        self.inner.delete(key)


def _flush_segments(seed: int) -> tuple[list[int], MemoryStore, Db]:
    """A writer under the simulation's runtime (WAL PUTs reordered) with SEGMENTS sealed segments (each
    write freezes its memtable, so each has a segment of its own), flushed at once."""
    memory = MemoryStore()
    store = LandingOrder(memory)
    runtime = SimRuntime(1_700_000_000.0, seed=seed, wal_put_seed=seed, reorder=True)
    db = Db.open(
        "db", store, quiet(l0_sst_size_bytes=1, wal_puts_in_flight=SEGMENTS), clock=runtime, background=False
    )
    store.recording = True
    for i in range(SEGMENTS):
        db.put(b"k%d" % i, b"v")
    db.flush()
    assert db.durable_seq == SEGMENTS
    return store.puts, memory, db


def test_the_seed_chooses_the_order_and_replays_it() -> None:
    rng = random.Random(5)
    pool = ReorderingExecutor(rng)
    ran: list[int] = []
    futures = [pool.submit(ran.append, i) for i in range(6)]
    assert not any(f.done() for f in futures)  # held until waited for
    futures[0].result()
    assert sorted(ran) == list(range(6)) and all(f.done() for f in futures)
    again: list[int] = []
    pool2 = ReorderingExecutor(random.Random(5))
    [pool2.submit(again.append, i) for i in range(6)][3].result()
    assert again == ran


@pytest.mark.parametrize("seed", range(6))
def test_a_writer_lands_wal_puts_out_of_order_and_acknowledges_each_write_once(seed: int) -> None:
    puts, memory, db = _flush_segments(seed)
    first = min(puts)
    assert sorted(puts) == list(range(first, first + SEGMENTS)), "a WAL id written twice, or skipped"
    assert puts == _flush_segments(seed)[0], "the same seed gave another order of WAL PUTs"
    wal = WalStore(memory, "db")
    keys = [key for wal_id in wal.list_ids(first - 1) for key, _, _, _ in wal.read(wal_id)]
    assert keys == [b"k%d" % i for i in range(SEGMENTS)]  # WAL N holds the N-th write: id order kept
    db.close()


def test_some_seed_lands_a_later_wal_put_first() -> None:
    assert any(puts != sorted(puts) for puts in (_flush_segments(seed)[0] for seed in range(6)))
