"""Openers, readers and a fenced writer whose WAL PUTs land out of order (docs/design/engine.md, "Several
WAL PUTs in flight"), on real stores.

A pipelined old writer is simulated by creating its WAL objects directly: WAL ``N`` (its first
unacknowledged one) never lands, ``N + 1 .. N + 3`` do, and one more lands *after* the new writer
fenced, inside the fence's window. Nothing past ``N`` was ever acknowledged, so no opener may replay it;
everything acknowledged (below ``N``) must survive every reopen.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from slate_ops import Db, DbReader, admin
from slate_ops.engine.batch import KIND_VALUE
from slate_ops.engine.wal_fence import WAL_FENCE_WINDOW, WINDOW_FENCE
from slate_ops.engine.wal_store import WalStore
from slate_ops.layout import parse_wal_key
from slate_ops.objstore import LocalStore, MemoryStore
from slate_ops.objstore.base import ObjectStore, PutMode, PutResult
from slate_ops.sst import entries_to_table
from tests.reliability.hooked_store import HookedStore
from tests.support.engine import QUIET, QUIET_READER, simulate_crash

_R = TypeVar("_R")

DB = "db"
W = WAL_FENCE_WINDOW
ORPHAN_SEQ = 10_000  # far above anything acknowledged: replaying an orphan would show
OVERWRITE = PutMode.overwrite()


@pytest.fixture(params=["memory", "local"])
def memory_or_local(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    return MemoryStore("chain") if request.param == "memory" else LocalStore(tmp_path / "store")


def orphan(wal: WalStore, wal_id: int, key: bytes) -> None:
    """A fenced writer's WAL PUT landing: data never acknowledged."""
    assert wal.write(wal_id, entries_to_table([(key, ORPHAN_SEQ + wal_id, KIND_VALUE, b"orphan")]))


class LandingAfterTheFence(HookedStore):
    """``inner`` where ``landing`` (WAL id -> key) are created as orphans right after the next
    window fence is created: PUTs of a fenced writer that land after an opener's LIST and fence."""

    def __init__(self, inner: ObjectStore, landing: dict[int, bytes]) -> None:
        super().__init__(inner)
        self.landing = dict(landing)

    def _call(self, op: str, key: str, call: Callable[[], _R]) -> _R:
        return call()

    def put(self, key: str, data: bytes, mode: PutMode = OVERWRITE, put_id: str | None = None) -> PutResult:
        result = self.inner.put(key, data, mode, put_id)
        if parse_wal_key(DB, key) is not None and data == WINDOW_FENCE:
            wal = WalStore(self.inner, DB)
            for wal_id, orphan_key in self.landing.items():
                orphan(wal, wal_id, orphan_key)
            self.landing.clear()
        return result


def test_an_opener_replays_exactly_the_prefix_below_the_first_missing_wal(
    memory_or_local: ObjectStore,
) -> None:
    store = memory_or_local
    old = Db.open(DB, store, QUIET)
    for i in range(3):
        old.put(b"acked-%d" % i, b"v", await_durable=True)  # one WAL SST each, all acknowledged
    gap = old.next_wal_id  # the old writer's first unacknowledged WAL: it never lands
    wal = WalStore(store, DB)
    for wal_id in range(gap + 1, gap + 4):
        orphan(wal, wal_id, b"orphan-%d" % wal_id)
    simulate_crash(old)

    late = gap + 4  # in flight while the new writer opens: lands after its fence, inside the window
    new = Db.open(DB, LandingAfterTheFence(store, {late: b"orphan-late"}), QUIET)
    assert wal.size(gap) == len(WINDOW_FENCE)  # the new writer's window fence, at the first missing id
    assert wal.size(late) is not None  # the late orphan landed
    assert new.next_wal_id == gap + W
    assert [new.get(b"acked-%d" % i) for i in range(3)] == [b"v"] * 3
    assert [new.get(b"orphan-%d" % i) for i in range(gap + 1, gap + 5)] == [None] * 4
    assert new.get(b"orphan-late") is None
    assert not wal.write(gap, entries_to_table([(b"late-at-gap", ORPHAN_SEQ, KIND_VALUE, b"x")]))  # fenced
    new.put(b"new", b"n", await_durable=True)
    simulate_crash(new)  # before any L0 flush: the next opener walks the same WAL again

    with Db.open(DB, store, QUIET) as again:
        assert again.get(b"new") == b"n"
        assert [again.get(b"acked-%d" % i) for i in range(3)] == [b"v"] * 3
        assert again.get(b"orphan-late") is None and again.get(b"late-at-gap") is None
        assert [again.get(b"orphan-%d" % i) for i in range(gap + 1, gap + 4)] == [None] * 3
        again.flush_memtable()
    with DbReader.open(DB, store, options=QUIET_READER) as reader:
        assert reader.get(b"new") == b"n" and reader.get(b"orphan-late") is None


def test_a_wal_written_before_window_fences_replays_whole(memory_or_local: ObjectStore) -> None:
    store = memory_or_local
    """The layout of earlier versions: data, an empty fence (an opener's), data after it, another
    empty fence: every WAL SST is replayed, the fences stepped over."""
    admin.create_db(DB, store)
    wal = WalStore(store, DB)
    layout: list[bytes | None] = [b"a", b"b", None, b"c", None, b"d"]  # None: an empty fence
    for wal_id, key in enumerate(layout, start=1):
        if key is None:
            assert wal.create(wal_id, b"")
        else:
            assert wal.write(wal_id, entries_to_table([(key, wal_id, KIND_VALUE, b"v" + key)]))
    with Db.open(DB, store, QUIET) as db:
        assert [db.get(k) for k in (b"a", b"b", b"c", b"d")] == [b"va", b"vb", b"vc", b"vd"]
        assert wal.size(len(layout) + 1) == len(WINDOW_FENCE)
        assert db.next_wal_id == len(layout) + 1 + W
    with DbReader.open(DB, store, options=QUIET_READER) as reader:
        assert [reader.get(k) for k in (b"a", b"b", b"c", b"d")] == [b"va", b"vb", b"vc", b"vd"]


def test_a_reader_tail_stops_at_a_gap_and_resumes_there_when_it_fills(memory_or_local: ObjectStore) -> None:
    store = memory_or_local
    admin.create_db(DB, store)
    wal = WalStore(store, DB)

    def data(wal_id: int, key: bytes) -> None:
        assert wal.write(wal_id, entries_to_table([(key, wal_id, KIND_VALUE, b"v")]))

    data(1, b"one")
    data(3, b"three")  # 2 is still in flight
    with DbReader.open(DB, store, options=QUIET_READER, background=False) as reader:
        assert (reader.get(b"one"), reader.get(b"three")) == (b"v", None)
        reader.tail_wal()
        assert reader.get(b"three") is None  # still behind the gap
        data(2, b"two")
        data(4, b"four")
        reader.tail_wal()
        assert [reader.get(k) for k in (b"one", b"two", b"three", b"four")] == [b"v"] * 4
    with DbReader.open(DB, store, options=QUIET_READER, background=False) as fresh:
        assert fresh.get(b"four") == b"v"


def test_a_reader_skips_the_ids_a_window_fence_covers(memory_or_local: ObjectStore) -> None:
    store = memory_or_local
    admin.create_db(DB, store)
    wal = WalStore(store, DB)
    assert wal.write(1, entries_to_table([(b"one", 1, KIND_VALUE, b"v")]))
    with DbReader.open(DB, store, options=QUIET_READER, background=False) as reader:
        assert wal.create(2, WINDOW_FENCE)  # an opener fences: the old writer's 3 lands late
        orphan(wal, 3, b"orphan")
        assert wal.write(2 + W, entries_to_table([(b"new", 2 + W, KIND_VALUE, b"v")]))
        reader.tail_wal()
        assert (reader.get(b"orphan"), reader.get(b"new")) == (None, b"v")
