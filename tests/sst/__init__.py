"""Tests of ``slate_ops.sst``, with a few shared helpers: a reference model and a write-and-open."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from slate_ops.objstore import MemoryStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.sst import BlockCache, Entry, SstOptions, SstReader, encode_sst, entries_to_table

SMALL_BLOCKS = SstOptions(block_size=64, compression="lz4")


def key_sorted(entries: Iterable[Entry]) -> list[Entry]:
    """Entries in SST key order (key asc, seq desc), keeping the first of duplicate (key, seq)."""
    seen: set[tuple[bytes, int]] = set()
    unique = []
    for entry in entries:
        if (entry[0], entry[1]) not in seen:
            seen.add((entry[0], entry[1]))
            unique.append(entry)
    return sorted(unique, key=lambda e: (e[0], -e[1]))


def model_get(entries: list[Entry], key: bytes, max_seq: int | None) -> Entry | None:
    """The newest version of ``key`` with seq <= max_seq; among equal seqs, the later entry."""
    best: Entry | None = None
    for entry in entries:
        if (
            entry[0] == key
            and (max_seq is None or entry[1] <= max_seq)
            and (best is None or entry[1] >= best[1])
        ):
            best = entry
    return best


def model_scan(entries: list[Entry], start: bytes | None, end: bytes | None) -> list[Entry]:
    return [e for e in entries if (start is None or e[0] >= start) and (end is None or e[0] < end)]


def write_sst(
    entries: list[Entry],
    options: SstOptions = SMALL_BLOCKS,
    *,
    order: Literal["key", "seq"] = "key",
    store: ObjectStore | None = None,
    cache: BlockCache | None = None,
    key: str = "db/compacted/a.sst",
) -> tuple[SstReader, bytes]:
    store = MemoryStore() if store is None else store
    data, _ = encode_sst(entries_to_table(entries), options, order=order)
    store.put(key, data)
    return SstReader.open(store, key, size=len(data), cache=cache), data
