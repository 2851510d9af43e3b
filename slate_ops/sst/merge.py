"""The newest version of each key from sources given newest first: the one merge every layer uses.

Every source is in (key asc, seq desc) order, and the sources come newest first (a memtable before
L0, L0 newest first, then the sorted runs). The first version of a key in that order is its newest;
the others are shadowed. Two shapes of the same rule:

* :func:`newest_per_key`, vectorized, for Arrow tables (the memtable's runs, a subcompaction's
  inputs, a Spark read task's chunk): a *stable* sort on the key alone (Arrow's ``sort_indices`` is
  stable) keeps the sources' order among equal keys, so one ``take`` of the first row per key builds
  the result. This is ~40% faster than sorting on (key, seq) and taking the whole table before
  filtering.
* :func:`newest_entries` and :func:`merge_newest`, lazy, for iterators of entries (a memtable's
  scan; the merged scan of a writer or reader): ``heapq.merge`` breaks ties by source position, so
  the first entry of a key comes from the newest source and, within a source, has the highest seq.
  :func:`merge_newest` also hides tombstones and yields ``(key, value)``. It repeats the loop of
  :func:`newest_entries` rather than filtering its output: a second generator per row made a full
  scan 11% slower from three sources and 65% slower from one (300,000 rows a source, measured).

:func:`live_rows` drops tombstones (the oldest sorted run, a read of live values).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from operator import itemgetter

import pyarrow as pa
import pyarrow.compute as pc

from slate_ops.sst.format import KIND_VALUE
from slate_ops.sst.writer import Entry

_KEY = itemgetter(0)


def newest_per_key(table: pa.Table, *, drop_tombstones: bool = False) -> pa.Table:
    """The newest version of every key in ``table``, in key order; tombstones dropped if asked.

    ``table`` holds the sources newest first, each in (key asc, seq desc) order. Its chunks are not
    combined first: ``take`` gathers from them directly, which saves a copy of the whole input
    (measured 2-4x faster subcompaction merges, most at 100+ MB, where fresh pages cost the most);
    the result may be chunked (``combine_chunks`` it where one buffer per column is needed).
    """
    if table.num_rows == 0:
        return table
    order = pc.sort_indices(table, sort_keys=[("key", "ascending")])
    if table.num_rows > 1:
        keys = table.column("key").take(order)
        changed = pc.not_equal(keys.slice(1), keys.slice(0, table.num_rows - 1))
        order = order.filter(pa.concat_arrays([pa.array([True]), changed.combine_chunks()]))
    merged = table.take(order)
    return live_rows(merged) if drop_tombstones else merged


def live_rows(table: pa.Table) -> pa.Table:
    """The rows of ``table`` that are values, not tombstones."""
    return table.filter(pc.equal(table.column("kind"), KIND_VALUE))


def newest_entries(sources: list[Iterator[Entry]]) -> Iterator[Entry]:
    """The first entry of each key from key-ordered ``sources`` given newest first (lazily)."""
    merged = sources[0] if len(sources) == 1 else heapq.merge(*sources, key=_KEY)
    last: bytes | None = None
    for entry in merged:
        if entry[0] != last:
            last = entry[0]
            yield entry


def merge_newest(sources: list[Iterator[Entry]]) -> Iterator[tuple[bytes, bytes]]:
    """Yield ``(key, value)`` of the newest version of each key, in key order, tombstones hidden.

    The same rule as :func:`newest_entries`, fused with the tombstone filter (the scan's hot path).
    """
    merged = sources[0] if len(sources) == 1 else heapq.merge(*sources, key=_KEY)
    last: bytes | None = None
    for key, _seq, kind, value in merged:
        if key == last:
            continue
        last = key
        if kind == KIND_VALUE:
            yield key, value
