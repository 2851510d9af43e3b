"""Reading a SlateDB database at a checkpoint, range by range (what a Spark task does):
:func:`key_ranges` cuts the key space from the checkpoint manifest's SST key ranges;
:class:`CheckpointReader` opens the binding's ``DbReader`` in ``ReaderMode.CHECKPOINT(id)`` -- which
writes nothing (the default mode writes two manifests per open, measured) -- and scans one range
in batches: one loop hop and one binding call (``DbIterator.next_batch``) per batch, not per row
(measured, 100,000 rows from a local directory: one ``next`` per hop 12-16 s, 8192 ``next`` per
hop 4.9 s, ``next_batch(8192)`` 0.54-0.84 s; docs/design/slatedb-engine.md, "Spark read").

The reader replays the WAL SSTs the checkpoint's manifest covers, as SlateDB's own reader does, so
a range scan returns exactly what ``DbReader`` at that checkpoint returns.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import TracebackType
from typing import Any

from slate_ops.engines.slatedb.loop import DEFAULT_TIMEOUTS, LOOP, CallTimeouts, LoopOwner, binding
from slate_ops.engines.slatedb.store import binding_path, binding_store
from slate_ops.engines.slatedb.views import ManifestView
from slate_ops.objstore.base import ObjectStore

__all__ = ["BATCH_ROWS", "Batch", "CheckpointReader", "Span", "key_ranges"]

BATCH_ROWS = 8192
"""Rows one batch (one hop to the loop thread) holds."""

Span = tuple[bytes | None, bytes | None]
"""``[start, end)``; None bounds are open."""
Batch = tuple[list[bytes], list[bytes]]
"""Keys and values of one batch, in key order."""


def key_ranges(manifest: ManifestView, partitions: int) -> list[Span]:
    """At most ``partitions`` ranges covering every key (the first starts and the last ends open),
    of about equal estimated SST bytes, cut at SST boundary keys of ``manifest`` (L0 and sorted
    runs). Each SST's estimated size is spread over its own ``[first, last]`` in proportion to key
    space (keys read as numbers from their first 8 bytes after the boundary keys' common prefix),
    so overlapping L0 SSTs are cut where their data is and a sorted run's SSTs at their edges. Keys
    only in the WAL fall in whichever range covers them."""
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    ssts = [
        s
        for s in (*manifest.l0, *(v for r in manifest.sorted_runs for v in r.ssts))
        if s.first_key is not None and s.last_key is not None
    ]
    points = sorted({k for s in ssts for k in (s.first_key, s.last_key) if k is not None})
    if partitions == 1 or len(points) < 3:
        return [(None, None)]
    index = {k: i for i, k in enumerate(points)}
    position = _positions(points)
    gaps = len(points) - 1  # gap i is [points[i], points[i + 1])
    width = [position[i + 1] - position[i] for i in range(gaps)]
    density = [0.0] * (gaps + 1)  # a difference array of bytes per unit of key space
    point_mass = [0.0] * gaps
    for s in ssts:
        assert s.first_key is not None and s.last_key is not None
        lo, hi = index[s.first_key], index[s.last_key]
        span = position[hi] - position[lo]
        if span <= 0:  # a single key (or keys alike in their first bytes): a mass at its gap
            point_mass[min(lo, gaps - 1)] += max(s.size, 1)
            continue
        density[lo] += max(s.size, 1) / span
        density[hi] -= max(s.size, 1) / span
    weights, running = [], 0.0
    for i in range(gaps):
        running += density[i]
        weights.append(running * width[i] + point_mass[i])
    total = sum(weights)
    cuts: list[bytes] = []
    accumulated = 0.0
    i = 0
    while i < gaps - 1:  # never cut at the last point: the range after it would be empty
        accumulated += weights[i]
        if len(cuts) < partitions - 1 and accumulated >= total * (len(cuts) + 1) / partitions:
            while i + 1 < gaps - 1 and weights[i + 1] == 0:  # past empty key space (between SSTs)
                i += 1
            cuts.append(points[i + 1])
        i += 1
    edges: list[bytes | None] = [None, *cuts, None]
    return [(edges[i], edges[i + 1]) for i in range(len(edges) - 1)]


def _positions(points: list[bytes]) -> list[float]:
    """Each key (sorted) as a number: its first 8 bytes after the keys' common prefix, big-endian."""
    first, last = points[0], points[-1]
    common = 0
    while common < min(len(first), len(last)) and first[common] == last[common]:
        common += 1
    return [float(int.from_bytes(k[common : common + 8].ljust(8, b"\0"), "big")) for k in points]


async def _next_batch(iterator: Any, rows: int) -> tuple[Batch, bool]:
    """Up to ``rows`` rows in one binding call (``DbIterator.next_batch``); shorter means done."""
    got = await iterator.next_batch(rows)
    return ([kv.key for kv in got], [kv.value for kv in got]), len(got) < rows


class CheckpointReader:
    """The binding's ``DbReader`` on ``db_path`` in ``store`` at checkpoint ``checkpoint_id``
    (``ReaderMode.CHECKPOINT``: reads only). Use as a context manager, or call :meth:`close`.
    A missing or removed checkpoint fails at open with :class:`SlateDbError` naming the database."""

    def __init__(
        self,
        db_path: str,
        store: ObjectStore,
        checkpoint_id: str,
        *,
        loop: LoopOwner = LOOP,
        timeouts: CallTimeouts = DEFAULT_TIMEOUTS,
    ) -> None:
        self.db_path = db_path.strip("/")
        self.checkpoint_id = checkpoint_id
        self._loop = loop
        self._timeouts = timeouts  # each open, batch and close: timeouts.scan
        sdb = binding()
        builder = sdb.DbReaderBuilder(binding_path(store, self.db_path), binding_store(store))
        builder.with_reader_mode(sdb.ReaderMode.CHECKPOINT(checkpoint_id))
        self._reader = self._run(f"open a reader at checkpoint {checkpoint_id}", builder.build())

    def _run(self, operation: str, coro: Any) -> Any:
        return self._loop.call(self.db_path, operation, coro, self._timeouts.of("scan"))

    def scan(self, start: bytes | None, end: bytes | None, *, rows: int = BATCH_ROWS) -> Iterator[Batch]:
        """The live rows of ``[start, end)`` (None: open), in key order, ``rows`` per batch."""
        sdb = binding()
        rng = sdb.KeyRange(start=start, start_inclusive=start is not None, end=end, end_inclusive=False)
        iterator = self._run("scan", self._reader.scan(rng))
        done = False
        while not done:
            batch, done = self._run("scan", _next_batch(iterator, rows))
            if batch[0]:
                yield batch

    def close(self) -> None:
        self._run("close the reader", self._reader.shutdown())

    def __enter__(self) -> CheckpointReader:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
