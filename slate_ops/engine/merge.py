"""Merging sorted sources into one scan: the newest version of each key, tombstones hidden."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from operator import itemgetter

from slate_ops.engine.batch import KIND_VALUE
from slate_ops.engine.lsm import LsmState
from slate_ops.engine.memtable import Memtable

Entry = tuple[bytes, int, int, bytes]

_KEY = itemgetter(0)


def merge_newest(sources: list[Iterator[Entry]]) -> Iterator[tuple[bytes, bytes]]:
    """Yield ``(key, value)`` in key order from ``sources`` given newest first.

    Each source is in (key asc, seq desc) order. ``heapq.merge`` breaks ties by source position, so
    the first entry seen for a key comes from the newest source and, within a source, has the
    highest seq: that one wins, the rest are shadowed.
    """
    merged = sources[0] if len(sources) == 1 else heapq.merge(*sources, key=_KEY)
    last: bytes | None = None
    for key, _seq, kind, value in merged:
        if key == last:
            continue
        last = key
        if kind == KIND_VALUE:
            yield key, value


def prefix_end(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key starting with ``prefix`` (None: unbounded)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def lookup(key: bytes, memtables: Iterable[Memtable], lsm: LsmState) -> bytes | None:
    """The value of ``key``: the newest memtable that has it wins, then L0, then sorted runs."""
    for memtable in memtables:
        version = memtable.get(key)
        if version is not None:
            return version[2] if version[1] == KIND_VALUE else None
    entry = lsm.get(key)
    return None if entry is None or entry[2] != KIND_VALUE else entry[3]


def scan_merged(
    newest_first: list[Iterator[Entry]], lsm: LsmState, start: bytes | None, end: bytes | None
) -> Iterator[tuple[bytes, bytes]]:
    """Merge memtable scans (newest first) and the LSM state into one scan of live keys."""
    sources = newest_first + lsm.sources(start, end)
    if not sources:
        return iter(())
    return merge_newest(sources)
