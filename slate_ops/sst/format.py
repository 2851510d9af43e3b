"""The on-disk layout of an SST, format version 1 (``docs/design/sst-format.md`` has the byte map).

A file is ``data blocks | index block | bloom block | footer``. Every block is a *framed* payload::

    payload   N bytes   an Arrow IPC record-batch message, possibly compressed as a whole
    raw_len   u32 LE    payload length before compression
    codec     u8        0 none, 1 lz4 (frame), 2 zstd
    crc       u32 LE    zlib.crc32 of payload || raw_len || codec

The footer holds the section offsets, the SST statistics and the first and last key, then a fixed
18-byte trailer ``footer_len u32 | version u16 | crc u32 | magic 8``. The trailer layout never
changes between versions, so a reader can always verify the footer checksum before it trusts the
version: a torn file reads as corrupt, an intact file of a newer version as unsupported.
"""

from __future__ import annotations

import struct
import threading
import zlib
from dataclasses import dataclass

import pyarrow as pa

from slate_ops.errors import CorruptObjectError, UnsupportedFormatVersionError

FORMAT_VERSION = 1
SUPPORTED_VERSIONS: tuple[int, ...] = (1,)
MAGIC = b"SLATESST"

KIND_VALUE = 0
KIND_TOMBSTONE = 1

ORDER_KEY = "key"
ORDER_SEQ = "seq"
_ORDER_CODES = {ORDER_KEY: 0, ORDER_SEQ: 1}
_ORDER_NAMES = {code: name for name, code in _ORDER_CODES.items()}

COLUMNS = ("key", "seq", "kind", "value")
SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary(), nullable=False),
        pa.field("seq", pa.uint64(), nullable=False),
        pa.field("kind", pa.uint8(), nullable=False),
        pa.field("value", pa.binary(), nullable=False),
    ]
)
# One row per data block. For order="key" files first/last are the block's first and last rows; for
# order="seq" files first_key/last_key are the block's min/max key and first_seq/last_seq its min/max seq.
INDEX_SCHEMA = pa.schema(
    [
        pa.field("first_key", pa.binary(), nullable=False),
        pa.field("last_key", pa.binary(), nullable=False),
        pa.field("first_seq", pa.uint64(), nullable=False),
        pa.field("last_seq", pa.uint64(), nullable=False),
        pa.field("offset", pa.uint64(), nullable=False),
        pa.field("size", pa.uint32(), nullable=False),
    ]
)

CODEC_NONE = 0
CODEC_LZ4 = 1
CODEC_ZSTD = 2
COMPRESSION_CODECS: dict[str | None, int] = {None: CODEC_NONE, "lz4": CODEC_LZ4, "zstd": CODEC_ZSTD}
_ARROW_CODEC_NAMES = {CODEC_LZ4: "lz4", CODEC_ZSTD: "zstd"}

_BLOCK_TRAILER_HEAD = struct.Struct("<IB")  # raw_len, codec
_CRC = struct.Struct("<I")
BLOCK_TRAILER_LEN = _BLOCK_TRAILER_HEAD.size + _CRC.size  # 9

# index_offset, index_size, bloom_offset, bloom_size, num_entries, min_seq, max_seq, num_blocks,
# order, reserved, first_key_len, last_key_len
_FOOTER_FIXED = struct.Struct("<QIQIQQQIBBII")
_TRAILER = struct.Struct("<IHI8s")  # footer_len, version, crc, magic
TRAILER_LEN = _TRAILER.size  # 18
MIN_FILE_LEN = _FOOTER_FIXED.size + TRAILER_LEN
MAX_U32 = 0xFFFFFFFF

# Arrow codecs are stateless for one-shot calls, but one instance per thread keeps that an
# implementation detail we do not depend on.
_codecs = threading.local()


def _codec(codec_id: int) -> pa.Codec:
    cache: dict[int, pa.Codec] | None = getattr(_codecs, "by_id", None)
    if cache is None:
        cache = _codecs.by_id = {}
    codec = cache.get(codec_id)
    if codec is None:
        codec = cache[codec_id] = pa.Codec(_ARROW_CODEC_NAMES[codec_id])
    return codec


def frame_block(raw: bytes | pa.Buffer, codec_id: int) -> list[bytes | pa.Buffer]:
    """The framed pieces of one block (to be joined); falls back to no compression if it does not pay."""
    raw_len = len(raw) if isinstance(raw, bytes) else raw.size
    payload: bytes | pa.Buffer = raw
    if codec_id != CODEC_NONE:
        compressed = _codec(codec_id).compress(raw, asbytes=True)
        if len(compressed) < raw_len:
            payload = compressed
        else:
            codec_id = CODEC_NONE
    head = _BLOCK_TRAILER_HEAD.pack(raw_len, codec_id)
    crc = zlib.crc32(head, zlib.crc32(payload))
    return [payload, head, _CRC.pack(crc)]


def unframe_block(path: str, what: str, framed: bytes | memoryview) -> pa.Buffer:
    """The verified, decompressed payload of a framed block; :class:`CorruptObjectError` otherwise.

    Zero-copy for uncompressed blocks: the result references ``framed``.
    """
    mv = framed if isinstance(framed, memoryview) else memoryview(framed)
    n = len(mv)
    if n < BLOCK_TRAILER_LEN:
        raise CorruptObjectError(path, f"{what} is {n} bytes, shorter than its trailer")
    body_end = n - _CRC.size
    head_at = n - BLOCK_TRAILER_LEN
    (stored_crc,) = _CRC.unpack_from(mv, body_end)
    payload = mv[:head_at]
    if zlib.crc32(mv[head_at:body_end], zlib.crc32(payload)) != stored_crc:
        raise CorruptObjectError(path, f"{what} fails its checksum")
    raw_len, codec_id = _BLOCK_TRAILER_HEAD.unpack_from(mv, head_at)
    if codec_id == CODEC_NONE:
        if head_at != raw_len:
            raise CorruptObjectError(path, f"{what} length {head_at} != recorded {raw_len}")
        return pa.py_buffer(payload)
    if codec_id not in _ARROW_CODEC_NAMES:
        raise CorruptObjectError(path, f"{what} has unknown codec {codec_id}")
    try:
        raw: pa.Buffer = _codec(codec_id).decompress(payload, decompressed_size=raw_len)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise CorruptObjectError(path, f"{what} does not decompress: {exc}") from exc
    if raw.size != raw_len:
        raise CorruptObjectError(path, f"{what} decompressed to {raw.size} bytes, not {raw_len}")
    return raw


@dataclass(frozen=True)
class Footer:
    """The decoded footer. Offsets are absolute; the index and bloom sections are contiguous."""

    index_offset: int
    index_size: int
    bloom_offset: int
    bloom_size: int
    num_entries: int
    min_seq: int
    max_seq: int
    num_blocks: int
    order: str
    first_key: bytes
    last_key: bytes
    version: int = FORMAT_VERSION


def encode_footer(f: Footer) -> bytes:
    body = _FOOTER_FIXED.pack(
        f.index_offset,
        f.index_size,
        f.bloom_offset,
        f.bloom_size,
        f.num_entries,
        f.min_seq,
        f.max_seq,
        f.num_blocks,
        _ORDER_CODES[f.order],
        0,
        len(f.first_key),
        len(f.last_key),
    )
    body += f.first_key + f.last_key
    checked = body + struct.pack("<IH", len(body), f.version)
    return checked + _CRC.pack(zlib.crc32(checked)) + MAGIC


def footer_length(path: str, tail: bytes) -> int:
    """Bytes the footer plus trailer occupy at the end of the file, from the (unverified) trailer."""
    if len(tail) < TRAILER_LEN:
        raise CorruptObjectError(path, f"file is {len(tail)} bytes, too short for an SST footer")
    footer_len, _, _, magic = _TRAILER.unpack_from(tail, len(tail) - TRAILER_LEN)
    if magic != MAGIC:
        raise CorruptObjectError(path, "no SST magic at the end of the file (truncated or not an SST)")
    return int(footer_len) + TRAILER_LEN


def decode_footer(path: str, tail: bytes, file_size: int) -> Footer:
    """Verify and parse the footer at the end of ``tail`` (the last ``len(tail)`` bytes of the file).

    Order matters: magic, length, checksum, *then* version, then the field consistency checks.
    """
    total = footer_length(path, tail)
    footer_len, version, stored_crc, _ = _TRAILER.unpack_from(tail, len(tail) - TRAILER_LEN)
    if total > len(tail) or total > file_size:
        raise CorruptObjectError(path, f"footer length {footer_len} exceeds the file")
    start = len(tail) - total
    if zlib.crc32(memoryview(tail)[start : len(tail) - 12]) != stored_crc:
        raise CorruptObjectError(path, "footer fails its checksum")
    if version not in SUPPORTED_VERSIONS:
        raise UnsupportedFormatVersionError(path, version, SUPPORTED_VERSIONS)
    if footer_len < _FOOTER_FIXED.size:
        raise CorruptObjectError(path, f"footer length {footer_len} is too short")
    (
        index_offset,
        index_size,
        bloom_offset,
        bloom_size,
        num_entries,
        min_seq,
        max_seq,
        num_blocks,
        order_code,
        _reserved,
        first_len,
        last_len,
    ) = _FOOTER_FIXED.unpack_from(tail, start)
    keys_at = start + _FOOTER_FIXED.size
    footer_start = file_size - total
    if (
        order_code not in _ORDER_NAMES
        or _FOOTER_FIXED.size + first_len + last_len != footer_len
        or index_offset + index_size != bloom_offset
        or bloom_offset + bloom_size != footer_start
        or index_size < BLOCK_TRAILER_LEN
        or (bloom_size != 0 and bloom_size < BLOCK_TRAILER_LEN)
        or (num_blocks == 0) != (num_entries == 0)
        or (num_blocks == 0 and index_offset != 0)
        or num_blocks > num_entries
        or min_seq > max_seq
    ):
        raise CorruptObjectError(path, "footer fields are inconsistent")
    return Footer(
        index_offset=index_offset,
        index_size=index_size,
        bloom_offset=bloom_offset,
        bloom_size=bloom_size,
        num_entries=num_entries,
        min_seq=min_seq,
        max_seq=max_seq,
        num_blocks=num_blocks,
        order=_ORDER_NAMES[order_code],
        first_key=bytes(tail[keys_at : keys_at + first_len]),
        last_key=bytes(tail[keys_at + first_len : keys_at + first_len + last_len]),
        version=version,
    )
