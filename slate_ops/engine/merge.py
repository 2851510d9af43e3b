"""Merging sorted sources into one scan: the newest version of each key, tombstones hidden.

The merge itself is :func:`slate_ops.sst.merge.merge_newest`, shared with every other merge.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from slate_ops.engine.batch import KIND_VALUE
from slate_ops.engine.lsm import LsmState
from slate_ops.engine.memtable import Memtable
from slate_ops.sst.merge import merge_newest
from slate_ops.sst.readahead import closing
from slate_ops.sst.writer import Entry


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
    """Merge memtable scans (newest first) and the LSM state into one scan of live keys.

    The scan's read-ahead (if on) stops when the scan ends, is closed, or is garbage collected.
    """
    read_ahead = lsm.read_ahead()
    if read_ahead is None:
        sources = newest_first + lsm.sources(start, end)
        return merge_newest(sources) if sources else iter(())
    try:
        sources = newest_first + lsm.sources(start, end, read_ahead)
    except BaseException:
        read_ahead.close()
        raise
    return closing(merge_newest(sources) if sources else iter(()), read_ahead.close)
