"""SstReader.scan_runs: the read-ahead's plan of a scan covers exactly the blocks ``scan`` reads."""

from __future__ import annotations

from slate_ops.objstore import MemoryStore
from slate_ops.sst import BlockCache, Entry, SstOptions, SstReader, encode_sst, entries_to_table

ENTRIES: list[Entry] = [(b"key%06d" % i, 3, 0, b"%06d" % i * 20) for i in range(20_000)]
KIB = 1024


def open_reader(cache: BlockCache | None = None) -> SstReader:
    data, _ = encode_sst(entries_to_table(ENTRIES), SstOptions(block_size=4096))
    store = MemoryStore()
    store.put("s.sst", data)
    return SstReader.open(store, "s.sst", size=len(data), cache=cache)


def test_runs_grow_from_the_first_size_to_the_limit() -> None:
    reader = open_reader()
    steps = reader.scan_runs(None, None, 32 * KIB, 4, 256 * KIB)
    assert [s[2] for s in steps] == [None] * len(steps)  # nothing cached: every step is a fetch
    sizes = [reader.run_bytes(i, j) for i, j, _ in steps]
    assert len(steps) >= 4 and sizes[0] <= 32 * KIB < sizes[1] <= 128 * KIB < sizes[2] <= 256 * KIB
    assert all(size <= 256 * KIB for size in sizes)
    # contiguous, covering every block once
    assert [i for i, _, _ in steps] == [0] + [j for _, j, _ in steps[:-1]]
    assert steps[-1][1] == reader.num_blocks
    one_block = reader.scan_runs(None, None, 1, 4, 1)  # a run is at least one block
    assert [(i, j) for i, j, _ in one_block] == [(b, b + 1) for b in range(reader.num_blocks)]


def test_a_range_plans_only_its_blocks_and_rows_clip_to_it() -> None:
    reader = open_reader()
    start, end = b"key010000", b"key010500"
    steps = reader.scan_runs(start, end, 64 * KIB, 4, 512 * KIB)
    rows = [
        row
        for i, j, _ in steps
        for b, framed in reader.fetch_run(i, j).items()
        for row in reader.rows(reader.decode_framed(b, framed, False), start, end)
    ]
    assert rows == ENTRIES[10_000:10_500] == list(reader.scan(start, end))
    assert reader.scan_runs(end, start, 64 * KIB, 4, 512 * KIB) == []


def test_cached_blocks_are_taken_from_the_cache_and_runs_fetch_around_them() -> None:
    cache = BlockCache(1 << 30)
    reader = open_reader(cache)
    list(reader.scan(b"key005000", b"key006000"))  # warms the blocks of that range
    steps = reader.scan_runs(None, None, 64 * KIB, 4, 512 * KIB)
    cached = [(i, j) for i, j, blocks in steps if blocks is not None]
    assert len(cached) == 1
    (i, j), blocks = cached[0], next(b for _, _, b in steps if b is not None)
    assert len(blocks) == j - i == len(cache) and [b.keys[0] for b in blocks][:1] <= [b"key005000"]
    assert [i for i, _, _ in steps] == [0] + [j for _, j, _ in steps[:-1]]
