"""The bloom filter: no false negatives, false positives near theory, and gets that use it."""

from __future__ import annotations

import random

import pytest

from slate_ops.objstore import CountingStore, MemoryStore
from slate_ops.sst import BloomFilter, SstOptions
from slate_ops.sst.bloom import num_probes_for, theoretical_fpr
from tests.sst import write_sst


@pytest.mark.parametrize("bits_per_key", [4, 10, 16])
@pytest.mark.parametrize("shape", ["sequential", "random"])
def test_no_false_negatives_and_fpr_near_theory(bits_per_key: int, shape: str) -> None:
    rng = random.Random(bits_per_key)

    def key(i: int) -> bytes:
        return b"user%012d" % i if shape == "sequential" else rng.randbytes(rng.randint(1, 24))

    members = [key(i) for i in range(20_000)]
    bloom = BloomFilter.build(members, bits_per_key)
    assert all(bloom.may_contain(k) for k in members)
    member_set = set(members)
    probes = [k for k in (key(i) for i in range(20_000, 80_000)) if k not in member_set]
    rate = sum(map(bloom.may_contain, probes)) / len(probes)
    expected = theoretical_fpr(bits_per_key, num_probes_for(bits_per_key))
    assert expected * 0.7 < rate < expected * 1.3, (rate, expected)


def test_round_trip_and_shape() -> None:
    bloom = BloomFilter.build([b"a", b"b", b""], 10)
    decoded = BloomFilter.decode(bloom.encode())
    assert decoded.num_bits == bloom.num_bits == 64 and decoded.num_probes == bloom.num_probes == 7
    assert decoded.may_contain(b"") and decoded.may_contain(b"a")
    with pytest.raises(ValueError):
        BloomFilter.decode(bloom.encode()[:-1])


def test_reader_bloom_skips_block_reads_for_absent_keys() -> None:
    entries = [(b"key%06d" % i, 1, 0, b"v") for i in range(0, 20_000, 2)]
    store = CountingStore(MemoryStore())
    reader, _ = write_sst(entries, SstOptions(), store=store)
    store.reset()
    absent = [b"key%06d" % i for i in range(1, 20_000, 2)]  # all inside the key range
    assert all(reader.get(k) is None for k in absent)
    assert not all(reader.may_contain(k) for k in absent)
    assert store.counts["get"] < len(absent) * 0.03  # ~0.8 % false positives fetch a block
    assert (
        reader.may_contain(b"key000000") and not reader.may_contain(b"zzz") and not reader.may_contain(b"a")
    )


def test_bloom_can_be_disabled() -> None:
    entries = [(b"k%03d" % i, 1, 0, b"v") for i in range(100)]
    reader, _ = write_sst(entries, SstOptions(bloom_bits_per_key=0))
    assert reader.may_contain(b"k005x")  # in range and no filter: maybe
    assert reader.get(b"k005x") is None and reader.get(b"k005") == (b"k005", 1, 0, b"v")
