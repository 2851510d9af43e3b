"""Round trips of key-ordered SSTs against a reference model (hypothesis), incl. max_seq and ranges."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slate_ops.objstore import MemoryStore
from slate_ops.sst import (
    KIND_TOMBSTONE,
    KIND_VALUE,
    SCHEMA,
    BlockCache,
    Entry,
    SstOptions,
    SstReader,
    encode_sst,
    entries_to_table,
)
from tests.sst import key_sorted, model_get, model_scan, write_sst

# Short keys over a tiny alphabet incl. 0x00 and 0xff: many duplicates, prefixes and the empty key.
keys = st.binary(max_size=4).map(lambda b: bytes(c % 4 * 85 for c in b))
entries_strategy = st.lists(
    st.tuples(
        keys,
        st.integers(0, 20),
        st.sampled_from([KIND_VALUE, KIND_TOMBSTONE]),
        st.binary(max_size=40),
    ).map(lambda e: (e[0], e[1], e[2], b"" if e[2] == KIND_TOMBSTONE else e[3])),
    max_size=120,
).map(key_sorted)
options_strategy = st.builds(
    SstOptions,
    block_size=st.sampled_from([64, 100, 300, 4096]),
    compression=st.sampled_from([None, "lz4", "zstd"]),
)
bounds = st.one_of(st.none(), keys)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=entries_strategy, options=options_strategy, data=st.data())
def test_round_trip_matches_the_model(entries: list[Entry], options: SstOptions, data: st.DataObject) -> None:
    cache = BlockCache(1 << 20) if data.draw(st.booleans()) else None
    reader, blob = write_sst(entries, options, cache=cache)
    assert list(reader.scan()) == entries
    assert reader.read_table().equals(entries_to_table(entries))
    assert reader.info.num_entries == len(entries)
    assert reader.info.size_bytes == len(blob)
    probe_keys = {e[0] for e in entries} | set(data.draw(st.lists(keys, max_size=5)))
    for key in probe_keys:
        for max_seq in (None, 0, 5, 10, 25):
            assert reader.get(key, max_seq) == model_get(entries, key, max_seq), (key, max_seq)
    for _ in range(4):
        start, end = data.draw(bounds), data.draw(bounds)
        expected = model_scan(entries, start, end)
        assert list(reader.scan(start, end)) == expected
        rows = pa.Table.from_batches(list(reader.scan_batches(start, end)), schema=SCHEMA)
        assert rows.equals(entries_to_table(expected))


def test_many_versions_of_one_key_span_blocks() -> None:
    """A key's versions straddle several blocks: every snapshot finds exactly its version."""
    entries = [(b"k", seq, seq % 2, b"" if seq % 2 else b"v%d" % seq) for seq in range(300, 0, -3)]
    entries = [(b"a", 1, 0, b"first"), *entries, (b"z", 7, 0, b"last")]
    reader, _ = write_sst(entries, SstOptions(block_size=64))
    assert reader.num_blocks > 10
    for max_seq in range(0, 305):
        assert reader.get(b"k", max_seq) == model_get(entries, b"k", max_seq), max_seq
    assert reader.get(b"k") == (b"k", 300, 0, b"v300")
    assert reader.get(b"k", 299) == (b"k", 297, 1, b"")  # a tombstone is returned, not skipped


def test_range_bounds_between_blocks_and_empty_ranges() -> None:
    entries = [(b"%04d" % i, 1, 0, b"x" * 30) for i in range(0, 400, 2)]
    reader, _ = write_sst(entries, SstOptions(block_size=256))
    assert reader.num_blocks > 20
    first_keys = list(reader.block_index().first_keys)
    last_keys = list(reader.block_index().last_keys)
    edges = [*first_keys, *last_keys, b"", b"0", b"0001", b"0399", b"9", b"\xff"]
    edges += [k + b"\x00" for k in last_keys]  # strictly between a block's last key and the next first
    for start in [None, *edges]:
        for end in [None, *edges[::7]]:
            expected = model_scan(entries, start, end)
            assert list(reader.scan(start, end)) == expected, (start, end)
    assert list(reader.scan(b"0100", b"0100")) == []
    assert list(reader.scan(b"0200", b"0100")) == []
    assert list(reader.scan_batches(b"0200", b"0100")) == []
    assert list(reader.scan(b"0101", b"0102")) == []  # between two keys


def test_columns_by_name_or_position_and_cast() -> None:
    entries = [(b"a", 2, 0, b"1"), (b"b", 1, 1, b"")]
    by_name = pa.table(
        {
            "value": pa.array([b"1", b""], pa.large_binary()),
            "kind": pa.array([0, 1], pa.int8()),
            "key": pa.array(["a", "b"], pa.string()),
            "seq": pa.array([2, 1], pa.int64()),
        }
    )
    positional = pa.table({"k": [b"a", b"b"], "s": [2, 1], "t": [0, 1], "v": [b"1", b""]})
    reference, _ = encode_sst(entries_to_table(entries))
    for table in (by_name, positional, entries_to_table(entries).to_batches()[0]):
        data, info = encode_sst(table)
        assert data == reference
        assert info.first_key == b"a" and info.last_key == b"b" and (info.min_seq, info.max_seq) == (1, 2)


def test_sst_info_matches_the_file() -> None:
    entries = [(b"b", 9, 0, b"x"), (b"b", 3, 1, b""), (b"c", 5, 0, b"y")]
    data, info = encode_sst(entries_to_table(entries))
    assert (info.first_key, info.last_key, info.num_entries, info.min_seq, info.max_seq) == (
        b"b",
        b"c",
        3,
        3,
        9,
    )
    assert info.size_bytes == len(data) and info.format_version == 1
    store = MemoryStore()
    store.put("x.sst", data)
    assert SstReader.open(store, "x.sst").info == info  # size found with a HEAD


@pytest.mark.parametrize("compression", [None, "lz4", "zstd"])
def test_compression_shrinks_compressible_blocks(compression: str | None) -> None:
    entries = [(b"key%06d" % i, 1, 0, b"abcd" * 50) for i in range(2000)]
    data, _ = encode_sst(entries_to_table(entries), SstOptions(compression=compression))
    raw_bytes = sum(len(e[0]) + len(e[3]) for e in entries)
    if compression is None:
        assert len(data) > raw_bytes
    else:
        assert len(data) < raw_bytes / 5
    store = MemoryStore()
    store.put("c.sst", data)
    assert list(SstReader.open(store, "c.sst").scan()) == entries


def test_blocks_follow_block_size() -> None:
    entries = [(b"key%06d" % i, 1, 0, b"v" * 90) for i in range(1000)]  # 116 B of row data each
    for block_size in (1024, 4096, 16384):
        reader, _ = write_sst(entries, SstOptions(block_size=block_size))
        assert reader.num_blocks == math.ceil(1000 * 116 / block_size)  # a block starts at each multiple
    big = [(b"a", 1, 0, b"v" * 10_000), (b"b", 1, 0, b"w")]
    reader, _ = write_sst(big, SstOptions(block_size=1024))
    assert reader.num_blocks == 2  # an oversized row gets a block of its own
    assert reader.get(b"a") == big[0]
