"""The WAL chain walk (engine/wal_chain.py) against a model built the other way round, and the opener's
fence of the chain's end (WalStore.fence) on a real store (docs/design/engine.md, "Several WAL PUTs in
flight", rules 1 and 3).

The model *constructs* a WAL: a chain of elements from ``after + 1`` (data, legacy empty fences,
window fences whose covered ids hold anything: nothing, data, fences), then a missing id, then
arbitrary objects beyond it (orphans). What the chain replays and where it ends is known by
construction, so the walk is checked without re-implementing it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slate_ops.engine.wal_chain import first_writer_id, walk_chain
from slate_ops.engine.wal_fence import WAL_FENCE_WINDOW, WINDOW_FENCE
from slate_ops.engine.wal_store import WalStore, fence_chain_end
from slate_ops.errors import EpochCollisionError, FencedError, WalChainOvertakenError
from slate_ops.layout import parse_wal_key
from slate_ops.objstore import MemoryStore
from slate_ops.objstore.base import PutMode, PutResult

W = WAL_FENCE_WINDOW
FENCE = len(WINDOW_FENCE)
DATA_SIZES = st.integers(min_value=FENCE + 1, max_value=10_000) | st.integers(
    min_value=1, max_value=FENCE - 1
)
ANY_SIZE = DATA_SIZES | st.just(0) | st.just(FENCE)


@dataclass
class Layout:
    after: int
    listing: list[tuple[int, int]]
    replayed: list[tuple[int, int]]
    end: int


@st.composite
def layouts(draw: st.DrawFn) -> Layout:
    after = draw(st.integers(min_value=0, max_value=50))
    objects: dict[int, int] = {}
    replayed: list[tuple[int, int]] = []
    at = after + 1
    for element in draw(st.lists(st.sampled_from(["data", "legacy", "window"]), max_size=30)):
        if element == "data":
            size = draw(DATA_SIZES)
            objects[at] = size
            replayed.append((at, size))
            at += 1
        elif element == "legacy":
            objects[at] = 0
            at += 1
        else:
            objects[at] = FENCE
            for covered in range(at + 1, at + W):  # whatever the window covers is never read
                if draw(st.booleans()):
                    objects[covered] = draw(ANY_SIZE)
            at += W
    end = at  # the first missing id
    for beyond in draw(st.lists(st.integers(min_value=end + 1, max_value=end + 3 * W), max_size=6)):
        objects[beyond] = draw(ANY_SIZE)  # orphans past the end: never read
    if after > 0:
        for stale in draw(st.lists(st.integers(min_value=max(1, after - 5), max_value=after), max_size=3)):
            objects[stale] = draw(ANY_SIZE)  # at or below the replay point: not the chain's
    listing = list(objects.items())
    random.Random(draw(st.integers(0, 2**32))).shuffle(listing)
    return Layout(after, listing, replayed, end)


@given(layouts())
@settings(max_examples=400, deadline=None)
def test_the_walk_replays_the_chain_and_ends_at_its_first_missing_id(layout: Layout) -> None:
    walk = walk_chain(layout.listing, layout.after)
    assert list(walk.segments) == layout.replayed
    assert walk.end == layout.end
    above = [wal_id for wal_id, _ in layout.listing if wal_id > layout.after]
    assert walk.highest == max(above, default=layout.after)


@given(layouts(), st.integers(min_value=0, max_value=80))
@settings(max_examples=200, deadline=None)
def test_a_bounded_walk_is_the_chain_up_to_the_bound(layout: Layout, extra: int) -> None:
    upto = layout.after + extra
    walk = walk_chain(layout.listing, layout.after, upto)
    assert list(walk.segments) == [(i, size) for i, size in layout.replayed if i <= upto]
    assert walk.end <= layout.end and (walk.end == layout.end or walk.end > upto)


def test_the_walk_jumps_a_window_and_steps_over_a_legacy_fence() -> None:
    listing = [(1, 100), (2, 0), (3, 100), (4, FENCE), (5, 100), (11, 100), (12, 100), (14, 100)]
    walk = walk_chain(listing, 0)
    assert walk.segments == ((1, 100), (3, 100), (12, 100))  # 5 and 11 lie in the window 4..11
    assert (walk.end, walk.highest) == (13, 14)  # 14 is past the gap at 13
    assert first_writer_id(walk.end, walk.highest) == 13 + W


# --- the opener's fence on a real store --------------------------------------------------------------

DB = "db"
SST = b"x" * 200  # any object longer than a window fence is data to the walk


def stored(layout: dict[int, bytes]) -> WalStore:
    wal = WalStore(MemoryStore("chain"), DB)
    for wal_id, data in layout.items():
        assert wal.create(wal_id, data)
    return wal


def test_the_fence_goes_at_the_first_missing_id_and_the_writer_past_its_window() -> None:
    wal = stored({1: SST, 2: b"", 3: SST, 5: SST, 6: SST})  # 4 missing: 5 and 6 are orphans
    fence = wal.fence(0)
    assert fence.segments == ((1, len(SST)), (3, len(SST)))
    assert fence.fence_id == 4 and wal.size(4) == FENCE
    assert fence.first_id == 4 + W
    assert not wal.create(4, SST)  # a late PUT at the fence fails


def test_the_writer_starts_past_every_listed_id() -> None:
    wal = stored({1: SST, 2 + W + 3: SST})  # an object far past the window (not written by the protocol)
    fence = wal.fence(0)
    assert (fence.fence_id, fence.first_id) == (2, 2 + W + 4)


OVERWRITE = PutMode.overwrite()


class CreatingUnderTheOpener(MemoryStore):
    """Creates ``arrivals`` (id -> data) right before the opener's create-if-absent at that id."""

    def __init__(self, arrivals: dict[int, bytes]) -> None:
        super().__init__("racing")
        self.arrivals = dict(arrivals)

    def put(self, key: str, data: bytes, mode: PutMode = OVERWRITE, put_id: str | None = None) -> PutResult:
        wal_id = parse_wal_key(DB, key)
        if wal_id in self.arrivals:
            super().put(key, self.arrivals.pop(wal_id))
        return super().put(key, data, mode, put_id)


def test_ids_created_under_the_opener_are_walked_through() -> None:
    store = CreatingUnderTheOpener({2: SST, 3: WINDOW_FENCE, 3 + W: b"", 4 + W: SST})
    wal = WalStore(store, DB)
    assert wal.create(1, SST)
    fence = wal.fence(0)  # listed {1}; then 2 (data), 3 (window), 3+W (legacy), 4+W (data) appear
    assert fence.segments == ((1, len(SST)), (2, len(SST)), (4 + W, len(SST)))
    assert fence.fence_id == 5 + W
    assert fence.first_id == 5 + 2 * W


def test_more_than_a_window_of_ids_created_under_the_opener_is_another_writer() -> None:
    store = CreatingUnderTheOpener({i: SST for i in range(2, 3 + W)})
    wal = WalStore(store, DB)
    assert wal.create(1, SST)
    with pytest.raises(WalChainOvertakenError):
        wal.fence(0)


def test_an_overtaken_opener_is_fenced_if_a_newer_epoch_shows_else_a_same_epoch_collision() -> None:
    def overtaken() -> WalStore:
        store = CreatingUnderTheOpener({i: SST for i in range(2, 3 + W)})
        wal = WalStore(store, DB)
        assert wal.create(1, SST)
        return wal

    def newer_epoch() -> None:
        raise FencedError("memory://db", "writer", 1, 2)

    with pytest.raises(FencedError) as fenced:
        fence_chain_end(overtaken(), 0, newer_epoch, "memory://db", "writer", 1)
    assert not isinstance(fenced.value, EpochCollisionError)
    with pytest.raises(EpochCollisionError):
        fence_chain_end(overtaken(), 0, lambda: None, "memory://db", "writer", 1)
