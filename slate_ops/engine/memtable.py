"""The in-memory table: the newest version of each key, with its sequence number.

A dict gives O(1) puts and gets; the sorted key list that scans need is built on demand and
cached until the next write (a frozen memtable sorts once).
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterator

import pyarrow as pa

from slate_ops.sst import SCHEMA

# (seq, kind, value)
Version = tuple[int, int, bytes]
# (key, seq, kind, value), the SST entry shape
Entry = tuple[bytes, int, int, bytes]

ENTRY_OVERHEAD = 48  # rough per-entry bookkeeping, so size tracks memory, not only payload


class Memtable:
    def __init__(self) -> None:
        self._data: dict[bytes, Version] = {}
        self._sorted: list[bytes] | None = None
        self._lock = threading.Lock()
        self.size_bytes = 0
        self.first_seq: int | None = None
        self.last_seq = 0
        self.max_wal_id = 0  # the highest WAL SST holding any of its writes

    def __len__(self) -> int:
        return len(self._data)

    def put(self, key: bytes, seq: int, kind: int, value: bytes) -> None:
        with self._lock:
            old = self._data.get(key)
            if old is None:
                self.size_bytes += len(key) + len(value) + ENTRY_OVERHEAD
                self._sorted = None
            else:
                self.size_bytes += len(value) - len(old[2])
            self._data[key] = (seq, kind, value)
        if self.first_seq is None:
            self.first_seq = seq
        self.last_seq = seq

    def get(self, key: bytes) -> Version | None:
        return self._data.get(key)

    def _sorted_keys(self) -> list[bytes]:
        with self._lock:
            if self._sorted is None:
                self._sorted = sorted(self._data)
            return self._sorted

    def scan(self, start: bytes | None = None, end: bytes | None = None) -> Iterator[Entry]:
        """Entries with ``start <= key < end`` in key order, as of the call (later writes may show)."""
        keys = self._sorted_keys()
        lo = 0 if start is None else bisect.bisect_left(keys, start)
        hi = len(keys) if end is None else bisect.bisect_left(keys, end)
        data = self._data
        for key in keys[lo:hi]:
            version = data.get(key)
            if version is not None:
                yield (key, version[0], version[1], version[2])

    def to_table(self) -> pa.Table:
        """All entries in (key asc) order as the SST columns, for flushing to L0."""
        keys = self._sorted_keys()
        versions = [self._data[k] for k in keys]
        return pa.Table.from_arrays(
            [
                pa.array(keys, pa.binary()),
                pa.array([v[0] for v in versions], pa.uint64()),
                pa.array([v[1] for v in versions], pa.uint8()),
                pa.array([v[2] for v in versions], pa.binary()),
            ],
            schema=SCHEMA,
        )
