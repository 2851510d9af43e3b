"""Decoding one data block into the form the hot paths want.

A cached block is four parallel Python sequences: ``keys`` (bytes, for ``bisect``), ``seqs``
(ints), ``kinds`` (a ``bytes`` object: indexing yields the kind int without any conversion) and
``values``. A point get is then a bisect plus four indexings, all without touching Arrow.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.ipc as ipc

from slate_ops.sst.format import SCHEMA

# Estimated resident bytes of a decoded block beyond its key and value bytes: per row two bytes
# objects (~33 B header each), an int (28-32 B), three list slots (24 B) and a kind byte.
ROW_OVERHEAD_BYTES = 128
BLOCK_OVERHEAD_BYTES = 512


class Block:
    """A decoded data block (immutable by convention; shared through the cache)."""

    __slots__ = ("charge", "keys", "kinds", "seqs", "values")

    def __init__(self, keys: list[bytes], seqs: list[int], kinds: bytes, values: list[bytes], charge: int):
        self.keys = keys
        self.seqs = seqs
        self.kinds = kinds
        self.values = values
        self.charge = charge

    def __len__(self) -> int:
        return len(self.keys)


def decode_batch(raw: pa.Buffer) -> pa.RecordBatch:
    """The record batch of a verified block payload; raises Arrow or ValueError errors if malformed."""
    batch = ipc.read_record_batch(raw, SCHEMA)
    keys, seqs, kinds, values = batch.columns
    if not batch.num_rows or keys.null_count or seqs.null_count or kinds.null_count or values.null_count:
        raise ValueError("data block is empty or holds nulls")
    batch.validate(full=True)
    return batch


def decode_block(raw: pa.Buffer) -> Block:
    """A verified block payload decoded into a :class:`Block` (the cold path of a point get)."""
    batch = ipc.read_record_batch(raw, SCHEMA)
    keys, seqs, kinds, values = batch.columns
    if not batch.num_rows or keys.null_count or seqs.null_count or kinds.null_count or values.null_count:
        raise ValueError("data block is empty or holds nulls")
    # Checksums catch damage; this catches checksum-valid nonsense (a bug, a forged file) before
    # offsets that point outside the buffers are ever dereferenced.
    batch.validate(full=True)
    return _block(keys, seqs, kinds, values, raw.size)


def block_from_batch(batch: pa.RecordBatch, raw_size: int) -> Block:
    keys, seqs, kinds, values = batch.columns
    return _block(keys, seqs, kinds, values, raw_size)


def _block(keys: pa.Array, seqs: pa.Array, kinds: pa.Array, values: pa.Array, raw_size: int) -> Block:
    value_list = values.to_pylist()
    return Block(
        keys.to_pylist(),
        seqs.to_pylist(),
        kinds.to_numpy().tobytes(),
        value_list,
        raw_size + len(value_list) * ROW_OVERHEAD_BYTES + BLOCK_OVERHEAD_BYTES,
    )
