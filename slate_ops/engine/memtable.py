"""The in-memory table: the newest version of each key, with its sequence number, mostly packed.

Writes go into a small dict (the *hot* part: O(1) puts and gets). Once the hot part holds
:data:`HOT_BYTES`, it is *sealed*: converted once into a :class:`_Run`, a sorted Arrow table in the
SST schema (keys, seqs, kinds and values in contiguous buffers) with a fixed-width key index that
numpy binary-searches, and a new dict starts. :meth:`Memtable.merge_runs` (the writer's background
thread calls it, off the write path) merges the newest :data:`MERGE_FAN_IN` runs, newest version of
each key winning, once they are of similar size (size-tiered: a few runs per size, each row merged
about log4(size / HOT_BYTES) times); ``to_table`` merges whatever is left. A frozen memtable is all
runs.

Why: a dict entry of a 16-byte key and a 100-byte value costs ~330 bytes of Python objects; in a
run it costs the 116 payload bytes plus 13 (offsets, seq, kind). :attr:`Memtable.size_bytes` is the
memory held — the hot part at a measured per-entry cost, the runs by their Arrow buffers and index
— so ``l0_sst_size_bytes`` and ``max_unflushed_bytes`` bound memory, not only payload
(docs/design/engine.md, "Memory"). Transients are not counted: a merge or ``to_table`` briefly holds
its inputs and its output.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from slate_ops.sst import SCHEMA
from slate_ops.sst.merge import newest_entries, newest_per_key

# (seq, kind, value)
Version = tuple[int, int, bytes]
# (key, seq, kind, value), the SST entry shape
Entry = tuple[bytes, int, int, bytes]

HOT_ENTRY_OVERHEAD = 216
"""Bytes a hot entry costs beyond its key and value lengths, measured with tracemalloc on CPython
3.11 (tests/engine/test_memory_bound.py): the key and value objects' headers and allocator rounding,
the (seq, kind, value) tuple, the seq int and the dict slot."""
HOT_BYTES = 4 * 1024 * 1024
"""The hot part is sealed into a packed run at this accounted size."""
MERGE_FAN_IN = 4
""":meth:`Memtable.merge_runs` merges this many runs at a time."""
RUN_OVERHEAD = 1024  # a run's Python objects (table, arrays, memoryviews), whatever its size
MAX_INDEX_WIDTH = 32  # key bytes per row in a run's index when keys differ in length
SCAN_CHUNK = 1024  # rows converted to Python objects at a time by a run's scan


def _merge(runs: list[_Run]) -> pa.Table:
    """One row per key, in key order, from ``runs`` given newest first (the shared merge).

    A numpy stable sort of the runs' fixed-width key indexes did this for keys of one length until
    the merge was shared. Measured on 16-byte keys and 100-byte values (median of 21, numpy then
    shared): 4 runs of 12,600 rows 5.5 / 7.5 ms, of 50,000 20.4 / 17.7 ms, of 120,000 53.1 / 50.0
    ms, 2 runs of 400,000 66.4 / 67.5 ms: no consistent difference, and this runs off the write
    path (the background merge, the flusher's ``to_table``).
    """
    return newest_per_key(pa.concat_tables([run.table for run in runs])).combine_chunks()


class _Run:
    """Sorted, packed, immutable entries (one per key): an Arrow table in :data:`SCHEMA`.

    Point lookups binary-search ``_index``, a numpy array of fixed-width byte strings: the keys
    themselves (a zero-copy view of the key buffer) when all have one length, else their first
    :data:`MAX_INDEX_WIDTH` bytes. numpy compares such strings as if padded with zero bytes, which
    orders them consistently with the keys (never the other way round), so the rows whose index
    entry equals the probe's are the only ones left to compare in full.
    """

    __slots__ = (
        "_fixed",
        "_index",
        "_kdata",
        "_kinds",
        "_koff",
        "_seqs",
        "_vdata",
        "_voff",
        "_width",
        "first",
        "last",
        "nbytes",
        "rows",
        "table",
    )

    def __init__(self, table: pa.Table) -> None:
        table = table.combine_chunks()
        self.table = table
        self.rows = n = int(table.num_rows)
        keys, seqs, kinds, values = (table.column(i).chunk(0) for i in range(4))
        self._koff, self._kdata = _binary_views(keys)
        self._voff, self._vdata = _binary_views(values)
        self._seqs = memoryview(seqs.buffers()[1])[seqs.offset * 8 : (seqs.offset + n) * 8].cast("Q")
        self._kinds = memoryview(kinds.buffers()[1])[kinds.offset : kinds.offset + n]
        offsets = np.frombuffer(keys.buffers()[1], np.int32, n + 1, keys.offset * 4)
        lengths = np.diff(offsets)
        longest = int(lengths.max())
        self._fixed = longest == int(lengths.min()) > 0
        if self._fixed:
            self._width = longest
            self._index = np.frombuffer(keys.buffers()[2], f"S{longest}", n, int(offsets[0]))
            index_bytes = 0  # a view of the key buffer
        else:
            self._width = width = max(1, min(longest, MAX_INDEX_WIDTH))
            data = np.frombuffer(keys.buffers()[2] or b"", np.uint8)
            packed = np.zeros((n, width), np.uint8)
            starts = offsets[:-1]
            for j in range(width):
                has = lengths > j
                packed[has, j] = data[starts[has] + j]
            self._index = packed.view(f"S{width}").ravel()
            index_bytes = packed.nbytes
        self.first = self.key_at(0)
        self.last = self.key_at(n - 1)
        self.nbytes = table.get_total_buffer_size() + index_bytes + RUN_OVERHEAD

    def key_at(self, i: int) -> bytes:
        return self._kdata[self._koff[i] : self._koff[i + 1]].tobytes()

    def get(self, key: bytes) -> Version | None:
        if key < self.first or key > self.last:
            return None
        if self._fixed:  # the index is the keys: one search, and other lengths cannot match
            if len(key) != self._width:
                return None
            i = int(self._index.searchsorted(key))
        else:
            i = self.lower_bound(key)
        if i < self.rows and self.key_at(i) == key:
            return (
                self._seqs[i],
                self._kinds[i],
                self._vdata[self._voff[i] : self._voff[i + 1]].tobytes(),
            )
        return None

    def lower_bound(self, key: bytes) -> int:
        """The first row whose key is ``>= key``."""
        probe = key[: self._width]
        lo = int(self._index.searchsorted(probe, "left"))
        hi = int(self._index.searchsorted(probe, "right"))
        while lo < hi:  # rows whose index entry equals the probe's: compare whole keys
            mid = (lo + hi) // 2
            if self.key_at(mid) < key:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def scan(self, start: bytes | None, end: bytes | None) -> Iterator[Entry]:
        lo = 0 if start is None else self.lower_bound(start)
        hi = self.rows if end is None else self.lower_bound(end)
        return self._entries(lo, hi)

    def _entries(self, lo: int, hi: int) -> Iterator[Entry]:
        for first in range(lo, hi, SCAN_CHUNK):
            part = self.table.slice(first, min(SCAN_CHUNK, hi - first))
            yield from zip(*(part.column(i).to_pylist() for i in range(4)), strict=True)


def _binary_views(array: pa.Array) -> tuple[memoryview, memoryview]:
    """The offsets (as ints) and the data of a binary array, without copies."""
    n = len(array)
    offsets = memoryview(array.buffers()[1])[array.offset * 4 : (array.offset + n + 1) * 4].cast("i")
    data = array.buffers()[2]
    return offsets, memoryview(data if data is not None else b"")


class Memtable:
    """The newest version of each key; a later put of a key wins, whatever its seq."""

    def __init__(self, hot_bytes: int = HOT_BYTES) -> None:
        self._hot_limit = hot_bytes
        self._hot: dict[bytes, Version] = {}
        self._hot_bytes = 0
        self._sorted: list[bytes] | None = None  # the hot part's keys in order, until the next new key
        self._runs: tuple[_Run, ...] = ()  # oldest first
        self._runs_bytes = 0
        self._frozen = False
        self.frozen_bytes = 0  # size_bytes when frozen, as the writer counted it
        self._lock = threading.Lock()
        self.first_seq: int | None = None
        self.last_seq = 0
        self.max_wal_id = 0  # the highest WAL SST holding any of its writes

    @property
    def size_bytes(self) -> int:
        """The memory the memtable holds (see the module docstring)."""
        return self._hot_bytes + self._runs_bytes

    def __len__(self) -> int:
        """Entries held; a key put again after its first version was sealed counts twice."""
        return len(self._hot) + sum(run.rows for run in self._runs)

    def put(self, key: bytes, seq: int, kind: int, value: bytes) -> None:
        with self._lock:
            if self._frozen:
                raise RuntimeError("put into a frozen memtable")  # the writer's own invariant
            old = self._hot.get(key)
            if old is None:
                self._hot_bytes += len(key) + len(value) + HOT_ENTRY_OVERHEAD
                self._sorted = None
            else:
                self._hot_bytes += len(value) - len(old[2])
            self._hot[key] = (seq, kind, value)
            if self._hot_bytes >= self._hot_limit:
                self._seal_locked()
        if self.first_seq is None:
            self.first_seq = seq
        self.last_seq = seq

    def freeze(self) -> None:
        """Seal the hot part: from now on the memtable is immutable and packed."""
        with self._lock:
            self._frozen = True
            self._seal_locked()
            self.frozen_bytes = self.size_bytes

    def _seal_locked(self) -> None:
        """Move the hot part into a new run.

        Lock-free gets stay correct: the runs are published before the hot dict is replaced.
        """
        table = self._hot_table_locked()
        if table is None:
            return
        run = _Run(table)
        self._runs = (*self._runs, run)
        self._runs_bytes += run.nbytes
        self._hot = {}
        self._hot_bytes = 0
        self._sorted = None

    def merge_runs(self) -> bool:
        """Merge the newest :data:`MERGE_FAN_IN` runs if they are of similar size; True if it did.

        Call it from one thread at a time, and not during :meth:`to_table`: runs are then only
        appended meanwhile, so the merged ones keep their positions (a group replaced anyway is
        dropped). The merge runs without the lock; its result replaces its inputs in one
        assignment, so lock-free gets and running scans see either.
        """
        runs = self._runs
        if len(runs) < MERGE_FAN_IN:
            return False
        at = len(runs) - MERGE_FAN_IN
        group = runs[at:]
        if group[0].rows > 2 * sum(run.rows for run in group[1:]):
            return False  # the oldest of them is far larger: wait for more small runs
        merged = _Run(_merge(list(reversed(group))))
        with self._lock:
            current = self._runs
            if current[at : at + MERGE_FAN_IN] != group:
                return False  # replaced meanwhile (by to_table): nothing to do
            self._runs = (*current[:at], merged, *current[at + MERGE_FAN_IN :])
            self._runs_bytes += merged.nbytes - sum(run.nbytes for run in group)
        return True

    def _hot_keys_locked(self) -> list[bytes]:
        if self._sorted is None:
            self._sorted = sorted(self._hot)
        return self._sorted

    def _hot_table_locked(self) -> pa.Table | None:
        if not self._hot:
            return None
        keys = self._hot_keys_locked()
        versions = [self._hot[key] for key in keys]
        seqs = [v[0] for v in versions]
        kinds = [v[1] for v in versions]
        values = [v[2] for v in versions]
        return pa.Table.from_arrays(
            [
                pa.array(keys, pa.binary()),
                pa.array(seqs, pa.uint64()),
                pa.array(kinds, pa.uint8()),
                pa.array(values, pa.binary()),
            ],
            schema=SCHEMA,
        )

    def get(self, key: bytes) -> Version | None:
        """Lock-free: the hot dict is read before the runs (see :meth:`_seal_locked`)."""
        version = self._hot.get(key)
        if version is not None:
            return version
        for run in reversed(self._runs):
            version = run.get(key)
            if version is not None:
                return version
        return None

    def scan(self, start: bytes | None = None, end: bytes | None = None) -> Iterator[Entry]:
        """Entries with ``start <= key < end`` in key order, as of the call: the hot part of the
        range is copied now (runs are immutable), so later writes never show."""
        with self._lock:
            keys = self._hot_keys_locked()
            lo = 0 if start is None else bisect.bisect_left(keys, start)
            hi = len(keys) if end is None else bisect.bisect_left(keys, end)
            hot = self._hot
            copied: list[Entry] = [(key, *hot[key]) for key in keys[lo:hi]]
            runs = self._runs
        sources: list[Iterator[Entry]] = [iter(copied)] if copied else []
        sources += [run.scan(start, end) for run in reversed(runs)]
        if not sources:
            return iter(())
        return sources[0] if len(sources) == 1 else newest_entries(sources)

    def to_table(self) -> pa.Table:
        """All entries in (key asc) order as the SST columns, for flushing to L0.

        A frozen memtable keeps the result as its only run (its inputs are freed, so a flush does
        not hold both while it encodes the SST).
        """
        with self._lock:
            hot = self._hot_table_locked()
            runs = list(reversed(self._runs))
        if hot is not None:
            runs.insert(0, _Run(hot))
        if not runs:
            return SCHEMA.empty_table()
        if len(runs) == 1:
            return runs[0].table
        merged = _Run(_merge(runs))
        if self._frozen:
            with self._lock:
                self._runs = (merged,)
                self._runs_bytes = merged.nbytes
        return merged.table
