"""SSTs: sorted, immutable files of (key, seq, kind, value) rows in Arrow IPC blocks.

Layout and the measurements behind it: ``docs/design/sst-format.md``.
"""

from slate_ops.sst.bloom import BloomFilter
from slate_ops.sst.cache import BlockCache
from slate_ops.sst.format import (
    FORMAT_VERSION,
    KIND_TOMBSTONE,
    KIND_VALUE,
    SCHEMA,
    SUPPORTED_VERSIONS,
)
from slate_ops.sst.reader import SstReader
from slate_ops.sst.writer import DEFAULT_OPTIONS, Entry, SstOptions, encode_sst, entries_to_table

__all__ = [
    "DEFAULT_OPTIONS",
    "FORMAT_VERSION",
    "KIND_TOMBSTONE",
    "KIND_VALUE",
    "SCHEMA",
    "SUPPORTED_VERSIONS",
    "BlockCache",
    "BloomFilter",
    "Entry",
    "SstOptions",
    "SstReader",
    "encode_sst",
    "entries_to_table",
]
