"""What reading costs in object-store requests: one GET to open, one per cold get, runs for scans."""

from __future__ import annotations

import pytest

from slate_ops.objstore import CountingStore, LocalStore, MemoryStore
from slate_ops.sst import BlockCache, Entry, SstOptions, SstReader, encode_sst, entries_to_table
from slate_ops.sst.reader import MAX_READAHEAD_BYTES, MIN_TAIL_BYTES
from tests.sst import write_sst

ENTRIES: list[Entry] = [(b"key%06d" % i, 7, 0, b"%06d" % i * 20) for i in range(20_000)]


@pytest.fixture(scope="module")
def blob() -> bytes:
    data, _ = encode_sst(entries_to_table(ENTRIES), SstOptions(block_size=4096))
    return data


def test_open_is_one_get_with_the_size_else_head_and_get(blob: bytes) -> None:
    store = CountingStore(MemoryStore())
    store.put("s.sst", blob)
    store.reset()
    SstReader.open(store, "s.sst", size=len(blob))
    assert store.counts == {"get": 1, "head": 0, "put": 0, "list": 0, "delete": 0}
    store.reset()
    SstReader.open(store, "s.sst")
    assert store.counts["head"] == 1 and store.counts["get"] == 1


def test_open_fetches_an_index_larger_than_the_tail_guess() -> None:
    entries = [(b"%08d" % i + b"k" * 200, 1, 0, b"v") for i in range(3000)]  # large keys, tiny values
    store = CountingStore(MemoryStore())
    reader, data = write_sst(entries, SstOptions(block_size=256), store=store)
    assert len(data) > MIN_TAIL_BYTES
    store.reset()
    reader = SstReader.open(store, "db/compacted/a.sst", size=len(data))
    assert store.counts["get"] == 2  # the tail, then the rest of the index
    assert reader.get(entries[1234][0]) == entries[1234]


def test_cold_get_is_one_ranged_get_then_cached(blob: bytes) -> None:
    store = CountingStore(MemoryStore())
    store.put("s.sst", blob)
    reader = SstReader.open(store, "s.sst", size=len(blob), cache=BlockCache(1 << 20))
    store.reset()
    assert reader.get(b"key012345") == ENTRIES[12345]
    assert reader.get(b"key012346") == ENTRIES[12346]  # same block: from the cache
    assert store.counts["get"] == 1
    uncached = SstReader.open(store, "s.sst", size=len(blob))
    store.reset()
    for i in range(0, 20_000, 1000):
        assert uncached.get(b"key%06d" % i) == ENTRIES[i]
    assert store.counts["get"] == 20


def test_range_scan_reads_only_overlapping_blocks(blob: bytes) -> None:
    store = CountingStore(MemoryStore())
    store.put("s.sst", blob)
    cache = BlockCache(1 << 30)
    reader = SstReader.open(store, "s.sst", size=len(blob), cache=cache)
    store.reset()
    assert list(reader.scan(b"key010000", b"key010003")) == ENTRIES[10000:10003]
    assert store.counts["get"] == 1 and len(cache) == 1
    rows = sum(b.num_rows for b in reader.scan_batches(b"key010000", b"key010500"))
    assert rows == 500
    assert sum(1 for _ in reader.scan(b"key000000", b"key000000\x00")) == 1


def test_full_scan_uses_growing_runs(blob: bytes) -> None:
    store = CountingStore(MemoryStore())
    store.put("s.sst", blob)
    reader = SstReader.open(store, "s.sst", size=len(blob))
    store.reset()
    assert sum(1 for _ in reader.scan()) == len(ENTRIES)
    runs = store.counts["get"]
    assert runs <= 10 < reader.num_blocks  # 1 block, then 64 KiB, 128 KiB, ... up to 8 MiB per GET
    store.reset()
    assert reader.read_table().num_rows == len(ENTRIES)
    assert store.counts["get"] <= max(2, len(blob) // MAX_READAHEAD_BYTES + 2)


def test_scan_is_lazy(blob: bytes) -> None:
    store = CountingStore(MemoryStore())
    store.put("s.sst", blob)
    reader = SstReader.open(store, "s.sst", size=len(blob))
    store.reset()
    it = reader.scan()
    assert next(it) == ENTRIES[0] and store.counts["get"] == 1
    assert [next(it) for _ in range(5)] == ENTRIES[1:6]


def test_scan_with_cache_off_does_not_fill_it(blob: bytes) -> None:
    cache = BlockCache(1 << 30)
    store = MemoryStore()
    store.put("s.sst", blob)
    reader = SstReader.open(store, "s.sst", size=len(blob), cache=cache)
    assert sum(1 for _ in reader.scan(fill_cache=False)) == len(ENTRIES) and len(cache) == 0
    assert sum(1 for _ in reader.scan()) == len(ENTRIES) and len(cache) == reader.num_blocks
    assert sum(1 for _ in reader.scan()) == len(ENTRIES) and cache.hits == reader.num_blocks


def test_local_store(tmp_path: object, blob: bytes) -> None:
    store = LocalStore(str(tmp_path))
    store.put("db/compacted/x.sst", blob)
    reader = SstReader.open(store, "db/compacted/x.sst", size=len(blob), cache=BlockCache(1 << 20))
    assert reader.get(b"key019999") == ENTRIES[-1] and reader.get(b"key02") is None
    assert list(reader.scan(b"key019990")) == ENTRIES[19990:]


def test_huge_keys_make_a_footer_larger_than_the_tail_guess() -> None:
    entries = [(b"a" * 50_000, 2, 0, b"x"), (b"m", 1, 0, b"y"), (b"z" * 50_000, 3, 1, b"")]
    store = CountingStore(MemoryStore())
    reader, data = write_sst(entries, SstOptions(), store=store)
    assert len(data) > MIN_TAIL_BYTES and reader.info.last_key == b"z" * 50_000
    store.reset()
    reader = SstReader.open(store, "db/compacted/a.sst", size=len(data))
    assert store.counts["get"] == 2  # the guessed tail held only part of the footer
    assert list(reader.scan()) == entries and reader.get(b"m") == entries[1]
