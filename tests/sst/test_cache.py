"""BlockCache: bounded in bytes, least-recently-used eviction, counters, sharing across readers."""

from __future__ import annotations

import threading

import pytest

from slate_ops.errors import InvalidArgumentError
from slate_ops.objstore import CountingStore, MemoryStore
from slate_ops.sst import BlockCache, SstOptions, SstReader
from slate_ops.sst.block import Block
from tests.sst import write_sst


def block(charge: int) -> Block:
    return Block([b"k"], [1], b"\x00", [b"v"], charge)


def test_bounded_in_bytes_with_lru_eviction() -> None:
    cache = BlockCache(1000)
    for i in range(4):
        cache.put(("f", i), block(300))
    assert cache.size_bytes == 900 and len(cache) == 3  # block 0 was evicted when 3 arrived
    assert cache.get(("f", 0)) is None
    assert cache.get(("f", 1)) is not None  # 1 is now the most recently used
    cache.put(("f", 4), block(300))  # evicts 2, the least recently used
    assert cache.get(("f", 2)) is None and cache.get(("f", 1)) is not None and cache.get(("f", 3)) is not None
    cache.put(("f", 5), block(650))  # needs two evictions
    assert cache.size_bytes <= 1000 and cache.get(("f", 5)) is not None
    assert (cache.hits, cache.misses) == (4, 2)


def test_replacing_oversized_and_clear() -> None:
    cache = BlockCache(1000)
    cache.put(("f", 1), block(400))
    cache.put(("f", 1), block(500))
    assert cache.size_bytes == 500 and len(cache) == 1
    cache.put(("f", 2), block(1001))  # larger than the whole cache: not cached, nothing evicted
    assert cache.get(("f", 2)) is None and cache.size_bytes == 500
    cache.clear()
    assert cache.size_bytes == 0 and len(cache) == 0 and cache.misses == 1
    with pytest.raises(InvalidArgumentError):
        BlockCache(-1)


def test_charge_estimates_decoded_size() -> None:
    entries = [(b"key%06d" % i, 1, 0, b"v" * 100) for i in range(2000)]
    cache = BlockCache(1 << 30)
    reader, _ = write_sst(entries, SstOptions(), cache=cache)
    list(reader.scan())
    payload = sum(len(e[0]) + len(e[3]) for e in entries)
    assert len(cache) == reader.num_blocks
    assert payload * 1.5 < cache.size_bytes < payload * 3  # bytes plus Python object overhead


def test_readers_share_the_cache_and_it_stays_bounded() -> None:
    entries = [(b"key%06d" % i, 1, 0, b"v" * 100) for i in range(5000)]
    store = CountingStore(MemoryStore())
    cache = BlockCache(64 * 1024)
    reader, data = write_sst(entries, SstOptions(block_size=4096), store=store, cache=cache)
    assert reader.get(b"key000010") is not None
    store.reset()
    other = SstReader.open(store, "db/compacted/a.sst", size=len(data), cache=cache)
    assert other.get(b"key000011") == (b"key000011", 1, 0, b"v" * 100)
    assert store.counts["get"] == 1  # the open; the block came from the cache
    for i in range(0, 5000, 7):
        assert reader.get(b"key%06d" % i) is not None
        assert cache.size_bytes <= 64 * 1024
    assert 0 < len(cache) < reader.num_blocks


def test_concurrent_gets_are_consistent() -> None:
    entries = [(b"key%06d" % i, i + 1, 0, b"%d" % i) for i in range(3000)]
    reader, _ = write_sst(entries, SstOptions(block_size=1024), cache=BlockCache(32 * 1024))
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for i in range(offset, 3000, 3):
                assert reader.get(b"key%06d" % i) == entries[i]
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
