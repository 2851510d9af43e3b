"""Encoding an SST from an Arrow table: vectorized checks and block cutting, one IPC message per block."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from slate_ops.errors import InvalidArgumentError
from slate_ops.manifest.model import SstInfo
from slate_ops.sst.bloom import BloomFilter
from slate_ops.sst.format import (
    CODEC_NONE,
    COLUMNS,
    COMPRESSION_CODECS,
    FORMAT_VERSION,
    INDEX_SCHEMA,
    KIND_TOMBSTONE,
    MAX_U32,
    ORDER_KEY,
    ORDER_SEQ,
    SCHEMA,
    Footer,
    encode_footer,
    frame_block,
)

Entry = tuple[bytes, int, int, bytes]
"""``(key, seq, kind, value)``; ``value`` is ``b""`` for tombstones."""

# Per-row bytes of a block beyond key and value: two int32 offsets, the u64 seq and the u8 kind.
_ROW_FIXED_BYTES = 17


@dataclass(frozen=True)
class SstOptions:
    """How to encode an SST. Defaults chosen by ``benchmarks/bench_sst_formats.py``.

    ``block_size``: target bytes of uncompressed row data (keys, values, 17 B/row fixed) per block;
    a block closes at the first row that starts at or past a multiple of it, so a row larger than
    ``block_size`` gets a block of its own. ``compression``: ``None``, ``"lz4"`` or ``"zstd"``,
    applied per block (a block that does not shrink is stored raw). ``bloom_bits_per_key``:
    0 disables the filter; seq-ordered (WAL) SSTs never get one.
    """

    block_size: int = 16 * 1024
    compression: str | None = "lz4"
    bloom_bits_per_key: int = 10

    def __post_init__(self) -> None:
        if not isinstance(self.block_size, int) or not 64 <= self.block_size <= 64 * 1024 * 1024:
            raise InvalidArgumentError(f"block_size must be an int in [64, 64 MiB], got {self.block_size!r}")
        if self.compression not in COMPRESSION_CODECS:
            raise InvalidArgumentError(
                f"compression must be one of None, 'lz4', 'zstd', got {self.compression!r}"
            )
        if not isinstance(self.bloom_bits_per_key, int) or not 0 <= self.bloom_bits_per_key <= 64:
            raise InvalidArgumentError(
                f"bloom_bits_per_key must be an int in [0, 64], got {self.bloom_bits_per_key!r}"
            )


DEFAULT_OPTIONS = SstOptions()


def entries_to_table(entries: Iterable[Entry]) -> pa.Table:
    """A table in :data:`SCHEMA` from ``(key, seq, kind, value)`` tuples (for small inputs)."""
    rows = list(entries)
    if not rows:
        return SCHEMA.empty_table()
    keys, seqs, kinds, values = zip(*rows, strict=True)
    try:
        arrays = [
            pa.array(keys, pa.binary()),
            pa.array(seqs, pa.uint64()),
            pa.array(kinds, pa.uint8()),
            pa.array(values, pa.binary()),
        ]
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        raise InvalidArgumentError(f"entries must be (bytes, int, int, bytes) tuples: {exc}") from exc
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


def encode_sst(
    table: pa.Table | pa.RecordBatch,
    options: SstOptions = DEFAULT_OPTIONS,
    *,
    order: Literal["key", "seq"] = "key",
) -> tuple[bytes, SstInfo]:
    """Encode sorted rows into one SST file; returns its bytes and its manifest :class:`SstInfo`.

    ``order="key"``: rows strictly ascending by (key asc, seq desc), as in L0 and sorted-run SSTs.
    ``order="seq"``: seq non-decreasing (WAL SSTs; a key may repeat, and among equal seqs the later
    row is the newer); first/last key in the info are then the min/max key. The order is checked
    vectorized; a violation, a null, a kind other than 0/1 or a bad column raises
    :class:`InvalidArgumentError`. An empty table gives a valid empty SST (used as a WAL fence).
    """
    if order not in (ORDER_KEY, ORDER_SEQ):
        raise InvalidArgumentError(f"order must be 'key' or 'seq', got {order!r}")
    batch = _normalize(table)
    n = batch.num_rows
    keys, seqs, kinds, values = batch.columns
    distinct = _check_order(keys, seqs, order) if n else None
    if n and pc.max(kinds).as_py() > KIND_TOMBSTONE:
        raise InvalidArgumentError("kind must be 0 (value) or 1 (tombstone)")

    starts, ends = _cut_blocks(keys, values, options.block_size)
    codec_id = COMPRESSION_CODECS[options.compression]
    parts: list[bytes | pa.Buffer] = []
    offsets: list[int] = []
    sizes: list[int] = []
    offset = 0
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        raw = batch.slice(start, end - start).serialize()
        if raw.size > MAX_U32:
            raise InvalidArgumentError(f"rows {start}..{end} form a block over 4 GiB")
        framed = frame_block(raw, codec_id)
        size = sum(len(p) if isinstance(p, bytes) else p.size for p in framed)
        parts.extend(framed)
        offsets.append(offset)
        sizes.append(size)
        offset += size

    index = _index_batch(keys, seqs, starts, ends, order, offsets, sizes)
    index_framed = frame_block(index.serialize(), codec_id)
    index_offset = offset
    index_size = sum(len(p) if isinstance(p, bytes) else p.size for p in index_framed)
    parts.extend(index_framed)
    bloom_offset = index_offset + index_size
    bloom_size = 0
    if n and order == ORDER_KEY and options.bloom_bits_per_key > 0:
        unique_keys = keys if distinct is None else keys.filter(distinct)
        bloom = BloomFilter.build(unique_keys.to_pylist(), options.bloom_bits_per_key)
        bloom_framed = frame_block(bloom.encode(), CODEC_NONE)
        bloom_size = sum(len(p) if isinstance(p, bytes) else p.size for p in bloom_framed)
        parts.extend(bloom_framed)

    if n == 0:
        first_key = last_key = b""
        min_seq = max_seq = 0
    else:
        seq_range = pc.min_max(seqs)
        min_seq, max_seq = seq_range["min"].as_py(), seq_range["max"].as_py()
        if order == ORDER_KEY:
            first_key, last_key = keys[0].as_py(), keys[n - 1].as_py()
        else:
            key_range = pc.min_max(keys)
            first_key, last_key = key_range["min"].as_py(), key_range["max"].as_py()
    footer = Footer(
        index_offset=index_offset,
        index_size=index_size,
        bloom_offset=bloom_offset,
        bloom_size=bloom_size,
        num_entries=n,
        min_seq=min_seq,
        max_seq=max_seq,
        num_blocks=len(offsets),
        order=order,
        first_key=first_key,
        last_key=last_key,
    )
    parts.append(encode_footer(footer))
    data = b"".join(parts)
    info = SstInfo(
        first_key=first_key,
        last_key=last_key,
        size_bytes=len(data),
        num_entries=n,
        min_seq=min_seq,
        max_seq=max_seq,
        format_version=FORMAT_VERSION,
    )
    return data, info


def _normalize(table: pa.Table | pa.RecordBatch) -> pa.RecordBatch:
    """One record batch in :data:`SCHEMA`: columns by name (else by position), cast safely, no nulls."""
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if not isinstance(table, pa.Table):
        raise InvalidArgumentError(
            f"encode_sst needs a pyarrow Table or RecordBatch, got {type(table).__name__}"
        )
    names = table.column_names
    if all(name in names for name in COLUMNS):
        columns = [table.column(name) for name in COLUMNS]
    elif table.num_columns == len(COLUMNS):
        columns = list(table.columns)
    else:
        raise InvalidArgumentError(f"encode_sst needs columns {COLUMNS}, got {names}")
    arrays = []
    for field, column in zip(SCHEMA, columns, strict=True):
        if column.null_count:
            raise InvalidArgumentError(f"column {field.name} holds {column.null_count} nulls")
        if column.type != field.type:
            try:
                column = column.cast(field.type)
            except (pa.ArrowException, ValueError, TypeError) as exc:
                raise InvalidArgumentError(
                    f"column {field.name} ({column.type}) is not {field.type}: {exc}"
                ) from exc
        arrays.append(column.combine_chunks())
    return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)


def _check_order(keys: pa.Array, seqs: pa.Array, order: str) -> pa.Array | None:
    """Raise unless rows are in ``order``; for key order return the mask of each key's first row."""
    n = len(keys)
    if n < 2:
        return None
    s0, s1 = seqs.slice(0, n - 1), seqs.slice(1)
    if order == ORDER_SEQ:
        ok = pc.less_equal(s0, s1)
        what = "seq must be non-decreasing"
        same = None
    else:
        k0, k1 = keys.slice(0, n - 1), keys.slice(1)
        same = pc.equal(k0, k1)
        ok = pc.or_(pc.less(k0, k1), pc.and_(same, pc.greater(s0, s1)))
        what = "rows must be strictly ascending by (key asc, seq desc)"
    if not pc.all(ok).as_py():
        bad = pc.index(ok, False).as_py()
        raise InvalidArgumentError(f"{what}: rows {bad} and {bad + 1} are out of order")
    if same is None:
        return None
    return pa.concat_arrays([pa.array([True]), pc.invert(same)])


def _cut_blocks(keys: pa.Array, values: pa.Array, block_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Row ranges ``[starts[i], ends[i])`` of the blocks: a block starts at each row whose byte
    offset (uncompressed, cumulative) crosses a multiple of ``block_size``."""
    n = len(keys)
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    sizes = (
        pc.binary_length(keys).to_numpy().astype(np.int64)
        + pc.binary_length(values).to_numpy().astype(np.int64)
        + _ROW_FIXED_BYTES
    )
    row_start = np.cumsum(sizes) - sizes
    bucket = row_start // block_size
    starts = np.concatenate([np.zeros(1, dtype=np.int64), np.flatnonzero(np.diff(bucket)) + 1])
    ends = np.append(starts[1:], n)
    return starts, ends


def _index_batch(
    keys: pa.Array,
    seqs: pa.Array,
    starts: np.ndarray,
    ends: np.ndarray,
    order: str,
    offsets: list[int],
    sizes: list[int],
) -> pa.RecordBatch:
    if order == ORDER_KEY:
        first_key, last_key = keys.take(starts), keys.take(ends - 1)
        first_seq, last_seq = seqs.take(starts), seqs.take(ends - 1)
    else:  # blocks of a seq-ordered file are pruned by their key and seq ranges
        key_ranges = [
            pc.min_max(keys.slice(s, e - s)) for s, e in zip(starts.tolist(), ends.tolist(), strict=True)
        ]
        first_key = pa.array([r["min"].as_py() for r in key_ranges], pa.binary())
        last_key = pa.array([r["max"].as_py() for r in key_ranges], pa.binary())
        first_seq, last_seq = seqs.take(starts), seqs.take(ends - 1)
    return pa.RecordBatch.from_arrays(
        [
            first_key,
            last_key,
            first_seq,
            last_seq,
            pa.array(offsets, pa.uint64()),
            pa.array(sizes, pa.uint32()),
        ],
        schema=INDEX_SCHEMA,
    )
