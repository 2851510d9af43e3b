"""Point reads at block boundaries of one SST: the first and last key of every block, and the keys just
below and above them (issue 19, "blind spots"; the engine's run-level counterpart is
tests/engine/test_boundary_keys.py)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from slate_ops.objstore import MemoryStore
from slate_ops.sst import SstReader, encode_sst, entries_to_table
from slate_ops.sst.writer import SstOptions


def key(n: int) -> bytes:
    return b"k%06d" % (2 * n)  # even numbers only: the odd neighbours are absent


def neighbours(k: bytes) -> tuple[bytes, bytes]:
    n = int(k[1:])
    return b"k%06d" % (n - 1), b"k%06d" % (n + 1)


@settings(max_examples=40, deadline=None)
@given(
    st.sets(st.integers(0, 3_000), min_size=1, max_size=300).map(sorted),
    st.sampled_from([64, 200, 1_000]),
    st.sampled_from([0, 10]),
)
def test_every_block_boundary_key_and_its_neighbours(numbers: list[int], block_size: int, bloom: int) -> None:
    store = MemoryStore()
    keys = [key(n) for n in numbers]
    rows = [(k, 7, 0, b"v" + k) for k in keys]
    data, info = encode_sst(
        entries_to_table(rows), SstOptions(block_size=block_size, compression=None, bloom_bits_per_key=bloom)
    )
    store.put("t.sst", data)
    reader = SstReader.open(store, "t.sst", size=len(data))
    assert (info.first_key, info.last_key) == (keys[0], keys[-1])
    index = reader.block_index()
    boundaries = set(index.first_keys) | set(index.last_keys)
    assert boundaries <= set(keys)
    present = set(keys)
    for k in sorted(boundaries):
        entry = reader.get(k)
        assert entry is not None and entry[0] == k and entry[3] == b"v" + k, k
        for neighbour in neighbours(k):
            if neighbour not in present:
                assert reader.get(neighbour) is None, neighbour
