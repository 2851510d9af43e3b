"""Seq-ordered (WAL) SSTs: keys repeat in any order; gets find the newest version; scans keep seq order."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from slate_ops.sst import KIND_TOMBSTONE, BlockCache, Entry, SstOptions
from tests.sst import model_get, model_scan, write_sst

keys = st.sampled_from([b"", b"a", b"b", b"b\x00", b"c", b"\xff", b"\x00"])
wal_entries = st.lists(
    st.tuples(keys, st.integers(0, 3), st.sampled_from([0, 1]), st.binary(max_size=30)),
    max_size=80,
).map(lambda rows: [(k, s, kind, b"" if kind else v) for k, s, kind, v in rows])


@settings(max_examples=150, deadline=None)
@given(entries=wal_entries, data=st.data())
def test_seq_ordered_round_trip(entries: list[Entry], data: st.DataObject) -> None:
    # Seqs grow in steps of 0..3: equal seqs (one write batch) and repeated keys are common.
    running = 0
    wal = []
    for key, step, kind, value in entries:
        running += step
        wal.append((key, running, kind, value))
    reader, _ = write_sst(wal, SstOptions(block_size=64), order="seq", cache=BlockCache(1 << 20))
    assert reader.order == "seq"
    assert list(reader.scan()) == wal
    assert reader.read_table().to_pylist() == [
        dict(zip(("key", "seq", "kind", "value"), e, strict=True)) for e in wal
    ]
    for key in [b"", b"a", b"b", b"b\x00", b"c", b"\xff", b"\x00", b"zz"]:
        for max_seq in (None, 0, 3, 10, 40, 1000):
            assert reader.get(key, max_seq) == model_get(wal, key, max_seq), (key, max_seq)
    start, end = data.draw(st.one_of(st.none(), keys)), data.draw(st.one_of(st.none(), keys))
    assert list(reader.scan(start, end)) == model_scan(wal, start, end)
    rows = [tuple(r.values()) for b in reader.scan_batches(start, end) for r in b.to_pylist()]
    assert rows == model_scan(wal, start, end)
    if wal:
        assert reader.info.first_key == min(e[0] for e in wal)
        assert reader.info.last_key == max(e[0] for e in wal)
        assert (reader.info.min_seq, reader.info.max_seq) == (wal[0][1], wal[-1][1])


def test_later_entry_wins_among_equal_seqs() -> None:
    wal = [(b"k", 5, 0, b"first"), (b"k", 5, KIND_TOMBSTONE, b""), (b"j", 5, 0, b"x")]
    reader, _ = write_sst(wal, order="seq")
    assert reader.get(b"k") == (b"k", 5, KIND_TOMBSTONE, b"")


def test_wal_sst_has_no_bloom_and_prunes_blocks_by_key_range() -> None:
    rng = random.Random(5)
    wal = [(b"key%03d" % rng.randrange(200), seq, 0, b"v" * 20) for seq in range(1, 2001)]
    reader, _ = write_sst(wal, SstOptions(block_size=512), order="seq")
    assert not reader.has_bloom and reader.may_contain(b"key000x")
    assert not reader.may_contain(b"zzz")
    for key in (b"key000", b"key100", b"key199", b"key500"):
        assert reader.get(key) == model_get(wal, key, None)
        assert reader.get(key, 1000) == model_get(wal, key, 1000)


def test_empty_wal_sst_is_a_fence() -> None:
    reader, _ = write_sst([], order="seq")
    assert reader.num_blocks == 0 and reader.info.num_entries == 0
    assert list(reader.scan()) == [] and reader.read_table().num_rows == 0
    assert reader.get(b"a") is None and not reader.may_contain(b"")
    key_reader, _ = write_sst([], order="key")
    assert key_reader.get(b"") is None and list(key_reader.scan(b"a", b"b")) == []
