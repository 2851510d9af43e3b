"""Damaged SSTs: every flipped byte and every truncation is reported as CorruptObjectError naming
the object; never another exception, never wrong data. Unknown versions are unsupported, not corrupt."""

from __future__ import annotations

import struct
import zlib

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slate_ops.errors import CorruptObjectError, UnsupportedFormatVersionError
from slate_ops.objstore import MemoryStore
from slate_ops.sst import BlockCache, Entry, SstOptions, SstReader, encode_sst, entries_to_table
from slate_ops.sst.format import BLOCK_TRAILER_LEN, CODEC_NONE, INDEX_SCHEMA, TRAILER_LEN, frame_block
from slate_ops.sst.reader import MIN_TAIL_BYTES

KEY = "db/compacted/01ARZ3NDEKTSV4RRFFQ69G5FAV.sst"
ENTRIES: list[Entry] = [
    (b"k%02d" % (i // 2), 100 - i, int(i % 3 == 0), b"" if i % 3 == 0 else b"value-%d" % i * (i % 4))
    for i in range(40)
]


def small_sst(order: str = "key") -> bytes:
    entries = ENTRIES if order == "key" else sorted(ENTRIES, key=lambda e: e[1])
    data, _ = encode_sst(entries_to_table(entries), SstOptions(block_size=128), order=order)  # type: ignore[arg-type]
    return data


def read_everything(store: MemoryStore, size: int | None, entries: list[Entry]) -> None:
    """Open and read every byte of the file; what it returns before failing must be correct."""
    reader = SstReader.open(store, KEY, size=size, cache=BlockCache(1 << 20))
    for key in sorted({e[0] for e in entries}):
        got = reader.get(key)  # may raise CorruptObjectError: its block is damaged
        assert got is None or got in entries
        if reader.order == "key":
            assert got == max((e for e in entries if e[0] == key), key=lambda e: e[1])
    assert list(reader.scan()) == entries
    assert reader.read_table().equals(entries_to_table(entries))


@pytest.mark.parametrize("order", ["key", "seq"])
def test_every_flipped_byte_is_detected(order: str) -> None:
    data = small_sst(order)
    entries = ENTRIES if order == "key" else sorted(ENTRIES, key=lambda e: e[1])
    store = MemoryStore()
    store.put(KEY, data)
    read_everything(store, len(data), entries)  # the undamaged file reads back exactly
    assert SstReader.open(store, KEY).num_blocks > 3
    for pos in range(len(data)):
        damaged = bytearray(data)
        damaged[pos] ^= pos % 255 + 1  # every bit position is flipped somewhere
        store.put(KEY, bytes(damaged))
        with pytest.raises(CorruptObjectError) as info:
            read_everything(store, len(data), entries)
        assert info.value.path == KEY and KEY in str(info.value)
        assert type(info.value) is CorruptObjectError, f"byte {pos}: {info.value}"


def test_every_truncation_is_detected() -> None:
    data = small_sst()
    store = MemoryStore()
    for length in range(len(data)):
        store.put(KEY, data[:length])
        for size in (len(data), None):  # the manifest's size, or found with a HEAD
            with pytest.raises(CorruptObjectError) as info:
                read_everything(store, size, ENTRIES)
            assert info.value.path == KEY


def test_file_truncated_after_open_is_detected_on_block_reads() -> None:
    entries = [(b"key%05d" % i, 1, 0, bytes(range(256)) * 2) for i in range(1000)]
    data, _ = encode_sst(entries_to_table(entries), SstOptions(compression=None))
    assert len(data) > 4 * MIN_TAIL_BYTES  # blocks are fetched after the open, not kept from it
    store = MemoryStore()
    store.put(KEY, data)
    reader = SstReader.open(store, KEY, size=len(data))
    store.put(KEY, data[: len(data) // 3])
    assert reader.get(b"key00000") == entries[0]  # block 0 is intact
    with pytest.raises(CorruptObjectError, match="truncated"):
        list(reader.scan())
    with pytest.raises(CorruptObjectError, match="truncated"):
        reader.get(b"key00999")


def test_wrong_size_from_the_manifest_is_corrupt() -> None:
    data = small_sst()
    store = MemoryStore()
    store.put(KEY, data)
    for size in (len(data) - 1, len(data) + 1, 10):
        with pytest.raises(CorruptObjectError):
            SstReader.open(store, KEY, size=size)


def _with_version(data: bytes, version: int, fix_crc: bool) -> bytes:
    footer_len = struct.unpack_from("<I", data, len(data) - TRAILER_LEN)[0]
    start = len(data) - TRAILER_LEN - footer_len
    out = bytearray(data)
    struct.pack_into("<H", out, len(data) - TRAILER_LEN + 4, version)
    if fix_crc:
        struct.pack_into("<I", out, len(data) - 12, zlib.crc32(bytes(out[start : len(data) - 12])))
    return bytes(out)


def test_unknown_version_is_unsupported_only_if_the_footer_is_intact() -> None:
    data = small_sst()
    store = MemoryStore()
    store.put(KEY, _with_version(data, 2, fix_crc=True))
    with pytest.raises(UnsupportedFormatVersionError) as info:
        SstReader.open(store, KEY)
    assert info.value.version == 2 and info.value.path == KEY and "Upgrade" in str(info.value)
    store.put(KEY, _with_version(data, 2, fix_crc=False))
    with pytest.raises(CorruptObjectError) as corrupt:
        SstReader.open(store, KEY)
    assert type(corrupt.value) is CorruptObjectError
    store.put(KEY, _with_version(data, 1, fix_crc=True))
    assert list(SstReader.open(store, KEY).scan()) == ENTRIES


def _reframe(payload: bytes, raw_len: int, codec: int) -> bytes:
    head = struct.pack("<IB", raw_len, codec)
    return payload + head + struct.pack("<I", zlib.crc32(head, zlib.crc32(payload)))


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_checksum_valid_garbage_in_a_block_is_still_corrupt(data: st.DataObject) -> None:
    """A block whose bytes were changed *and* re-checksummed (a bug, a forged file) is never
    dereferenced blindly: reading fails with CorruptObjectError or yields rows Arrow validated."""
    blob, _ = encode_sst(entries_to_table(ENTRIES), SstOptions(block_size=128, compression=None))
    store = MemoryStore()
    store.put(KEY, blob)
    reader = SstReader.open(store, KEY, size=len(blob))
    i = data.draw(st.integers(0, reader.num_blocks - 1))
    index = reader.block_index()
    start, end = index.offsets[i], index.ends[i]
    payload = bytearray(blob[start : end - BLOCK_TRAILER_LEN])  # uncompressed: the IPC message
    for _ in range(data.draw(st.integers(1, 4))):
        payload[data.draw(st.integers(0, len(payload) - 1))] = data.draw(st.integers(0, 255))
    codec = data.draw(st.sampled_from([0, 1, 2, 7]))  # none; lz4 or zstd (payload is neither); unknown
    raw_len = len(payload) if codec == 0 else data.draw(st.integers(0, 1000))
    store.put(KEY, blob[:start] + _reframe(bytes(payload), raw_len, codec) + blob[end:])
    reader = SstReader.open(store, KEY, size=len(blob))
    try:
        rows = list(reader.scan())
        reader.read_table()
    except CorruptObjectError as exc:
        assert exc.path == KEY
    else:
        assert len(rows) >= reader.num_blocks  # a re-checksummed valid change is a different file


def test_missing_object_is_not_corrupt() -> None:
    from slate_ops.errors import ObjectNotFoundError

    with pytest.raises(ObjectNotFoundError):
        SstReader.open(MemoryStore(), KEY)


def _index_block(reader: SstReader, d_offset: int = 0, d_size: int = 0) -> bytes:
    """``reader``'s index block re-encoded (uncompressed), the last block's offset/size shifted."""
    index = reader.block_index()
    offsets = list(index.offsets)
    sizes = [end - offset for offset, end in zip(index.offsets, index.ends, strict=True)]
    offsets[-1] += d_offset
    sizes[-1] += d_size
    columns = [index.first_keys, index.last_keys, index.first_seqs, index.last_seqs, offsets, sizes]
    batch = pa.RecordBatch.from_arrays(
        [pa.array(c, f.type) for c, f in zip(columns, INDEX_SCHEMA, strict=True)], schema=INDEX_SCHEMA
    )
    return b"".join(bytes(p) for p in frame_block(batch.serialize(), CODEC_NONE))


@pytest.mark.parametrize(("d_offset", "d_size"), [(-1, 0), (0, -1), (0, 1)])
def test_forged_index_with_inconsistent_offsets_is_corrupt(d_offset: int, d_size: int) -> None:
    """An index that checksums but whose block offsets do not tile the data region is refused."""
    data, _ = encode_sst(entries_to_table(ENTRIES), SstOptions(block_size=128, compression=None))
    store = MemoryStore()
    store.put(KEY, data)
    reader = SstReader.open(store, KEY, size=len(data))
    index_start = reader.block_index().ends[-1]
    original = _index_block(reader)
    assert data[index_start : index_start + len(original)] == original
    forged = _index_block(reader, d_offset, d_size)
    assert len(forged) == len(original)
    store.put(KEY, data[:index_start] + forged + data[index_start + len(original) :])
    with pytest.raises(CorruptObjectError, match="offsets"):
        SstReader.open(store, KEY, size=len(data))
