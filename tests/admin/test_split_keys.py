"""Split keys from SST block indexes: ranges of about equal stored bytes, views' visible ranges."""

from __future__ import annotations

import itertools
import random
import uuid
from datetime import timedelta

import pytest
from ulid import ULID

from slate_ops import Db, admin
from slate_ops.admin.split_keys import balanced_ranges, split_points, visible_blocks
from slate_ops.compaction import CompactorOptions
from slate_ops.config import CheckpointOptions
from slate_ops.errors import CheckpointExpiredError, CheckpointNotFoundError, InvalidArgumentError
from slate_ops.layout import COMPACTED_DIR, sst_key
from slate_ops.manifest.model import CompactedSst, KeyRange, SstView
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import MemoryStore
from slate_ops.objstore.base import GetResult
from slate_ops.runtime import ManualRuntime
from slate_ops.sst import KIND_VALUE, SstReader, encode_sst, entries_to_table
from tests.support.compaction import compact_once
from tests.support.engine import quiet

DB = "split"
N = 4
TOLERANCE = 0.15  # every range within 15 % of total / N


class RecordingStore(MemoryStore):
    """Records every ranged GET, to prove that only SST tails are read."""

    def __init__(self) -> None:
        super().__init__(f"split-{uuid.uuid4().hex}")
        self.gets: list[tuple[str, tuple[int, int] | None]] = []

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        self.gets.append((key, byte_range))
        return super().get(key, byte_range)


def skewed(store: MemoryStore, *, compact: bool) -> dict[bytes, bytes]:
    """4,500 keys; the 500 in the middle carry ~90 % of the bytes. Values are random (lz4 cannot
    shrink them), so stored bytes follow row bytes."""
    rng = random.Random(7)
    model: dict[bytes, bytes] = {}
    with Db.open(DB, store, quiet(l0_max_ssts=1000)) as db:
        for part in range(3):
            for i in range(part, 4500, 3):
                size = 4000 if 2000 <= i < 2500 else 40
                model[b"k%05d" % i] = rng.randbytes(size)
                db.put(b"k%05d" % i, model[b"k%05d" % i])
            db.flush_memtable()
    if compact:
        full = CompactorOptions(min_sources=2, target_sst_bytes=256 * 1024)
        assert compact_once(DB, store, full) is not None
    return model


def range_bytes(model: dict[bytes, bytes], cuts: list[bytes]) -> list[int]:
    edges: list[bytes | None] = [None, *cuts, None]
    sizes = []
    for lo, hi in itertools.pairwise(edges):
        sizes.append(
            sum(
                len(k) + len(v)
                for k, v in model.items()
                if (lo is None or k >= lo) and (hi is None or k < hi)
            )
        )
    return sizes


def balanced(sizes: list[int]) -> bool:
    target = sum(sizes) / len(sizes)
    return all(abs(size - target) <= TOLERANCE * target for size in sizes)


@pytest.mark.parametrize("compact", [False, True], ids=["l0", "sorted-run"])
def test_split_keys_balance_bytes_where_an_even_key_split_does_not(compact: bool) -> None:
    store = MemoryStore(f"split-{uuid.uuid4().hex}")
    model = skewed(store, compact=compact)
    cuts = admin.suggest_split_keys(DB, store, N)
    assert len(cuts) == N - 1 and cuts == sorted(set(cuts))
    sizes = range_bytes(model, cuts)
    assert balanced(sizes), sizes
    keys = sorted(model)
    naive = [keys[len(keys) * i // N] for i in range(1, N)]  # the same number of keys per range
    assert not balanced(range_bytes(model, naive))


def test_only_sst_tails_are_read() -> None:
    store = RecordingStore()
    skewed(store, compact=False)
    manifest = ManifestStore(store, DB).read_latest_required().value
    store.gets.clear()
    admin.suggest_split_keys(DB, store, N)
    sst_gets = [(key, r) for key, r in store.gets if f"/{COMPACTED_DIR}/" in key]
    sizes = {sst_key(DB, s.id): s.info.size_bytes for s in manifest.ssts}
    assert len(sst_gets) == len(manifest.l0) == 3
    for key, byte_range in sst_gets:
        assert byte_range is not None and byte_range[1] == sizes[key]  # the tail: footer and index
        assert byte_range[1] - byte_range[0] < sizes[key]  # never the whole file (data blocks)


def test_n_below_one_is_refused_and_n_one_or_an_empty_db_gives_no_keys() -> None:
    store = MemoryStore(f"split-{uuid.uuid4().hex}")
    admin.create_db(DB, store)
    assert admin.suggest_split_keys(DB, store, 8) == []
    for bad in (0, -1, True, 2.0, "3"):
        with pytest.raises(InvalidArgumentError, match="n must be an int >= 1"):
            admin.suggest_split_keys(DB, store, bad)  # type: ignore[arg-type]
    skewed(store, compact=False)
    assert admin.suggest_split_keys(DB, store, 1) == []
    assert balanced_ranges([], 4) == [KeyRange()]


def test_checkpoint_pins_the_weighed_state() -> None:
    clock = ManualRuntime(1_000_000.0)
    store = MemoryStore(f"split-{uuid.uuid4().hex}")
    with Db.open(DB, store, quiet(), clock=clock) as db:
        for i in range(2000):
            db.put(b"a%05d" % i, b"x" * 40)
        db.flush_memtable()
    checkpoint = admin.create_checkpoint(
        DB, store, CheckpointOptions(lifetime=timedelta(hours=1)), clock=clock
    )
    before = admin.suggest_split_keys(DB, store, 2, checkpoint=checkpoint.id, clock=clock)
    with Db.open(DB, store, quiet(), clock=clock) as db:
        for i in range(6000):
            db.put(b"b%05d" % i, b"y" * 40)
        db.flush_memtable()
    assert before[0].startswith(b"a")
    assert admin.suggest_split_keys(DB, store, 2, checkpoint=checkpoint.id, clock=clock) == before
    assert admin.suggest_split_keys(DB, store, 2, clock=clock)[0].startswith(b"b")
    with pytest.raises(CheckpointNotFoundError, match="list-checkpoints"):
        admin.suggest_split_keys(DB, store, 2, checkpoint=uuid.uuid4(), clock=clock)
    clock.advance(2 * 3600)
    with pytest.raises(CheckpointExpiredError, match=str(checkpoint.id)):
        admin.suggest_split_keys(DB, store, 2, checkpoint=checkpoint.id, clock=clock)


def write_sst(store: MemoryStore, keys: range) -> CompactedSst:
    entries = [(b"k%05d" % i, 1, KIND_VALUE, b"v" * 200) for i in keys]
    data, info = encode_sst(entries_to_table(entries))
    sst = CompactedSst(ULID(), info)
    store.put(sst_key(DB, sst.id), data)
    return sst


def test_views_contribute_only_their_visible_blocks() -> None:
    store = MemoryStore(f"split-{uuid.uuid4().hex}")
    admin.create_db(DB, store)
    sst = write_sst(store, range(10_000))
    visible = KeyRange(b"k06000", b"k08000")
    ManifestStore(store, DB).update(
        lambda current: current.value.with_changes(
            ssts=(sst,), l0=(SstView(ULID(), sst.id, visible),), last_l0_seq=1
        )
    )
    cuts = admin.suggest_split_keys(DB, store, 4)
    assert len(cuts) == 3 and all(b"k06000" < c < b"k08000" for c in cuts)
    assert abs(int(cuts[1][1:]) - 7000) < 100  # the middle of the visible part, not of the file

    # A projected database (a shard of a split) weighs only its own range.
    ManifestStore(store, DB).update(
        lambda current: current.value.with_changes(visible_range=KeyRange(b"k06000", b"k06500"))
    )
    cuts = admin.suggest_split_keys(DB, store, 2)
    assert len(cuts) == 1 and b"k06200" < cuts[0] < b"k06300"


def test_visible_blocks_and_balanced_ranges_are_pure() -> None:
    store = MemoryStore(f"split-{uuid.uuid4().hex}")
    sst = write_sst(store, range(1000))
    reader = SstReader.open(store, sst_key(DB, sst.id))
    blocks = reader.block_sizes()
    assert len(blocks) > 8
    assert visible_blocks(blocks, sst.info.last_key, None) == blocks
    third = blocks[3][0]
    inside = visible_blocks(blocks, sst.info.last_key, KeyRange(third, blocks[6][0]))
    assert inside == blocks[3:6]  # a block starting at the range's end is outside
    partial = visible_blocks(blocks, sst.info.last_key, KeyRange(third + b"5", None))
    assert partial[0] == (third + b"5", blocks[3][1]) and partial[1:] == blocks[4:]
    assert visible_blocks(blocks, sst.info.last_key, KeyRange(b"z", None)) == []

    weights = [(b"a", 10), (b"b", 10), (b"c", 10), (b"d", 10)]
    assert split_points(weights, 2) == [b"c"]
    assert split_points(weights, 4) == [b"b", b"c", b"d"]
    assert split_points([(b"a", 100), (b"b", 1), (b"c", 1)], 3) == [b"b"]  # one block outweighs 1/3
    assert balanced_ranges(weights, 2) == [KeyRange(None, b"c"), KeyRange(b"c", None)]
    bounded = balanced_ranges(weights, 4, bounds=KeyRange(b"b", b"cc"))
    assert bounded == [KeyRange(b"b", b"c"), KeyRange(b"c", b"cc")]
