"""Cutting key-ordered rows into SSTs of about a target size: the one rule every writer of SSTs uses.

An SST closes at the first row where the row bytes it holds reach the target (so each SST but the
last holds at least ``target_bytes``, and at most one row more), and the next SST starts at the row
after. A row's bytes are its key and value lengths plus :data:`ROW_OVERHEAD`. A subcompaction feeds
its whole merged table at once; a bulk load's task feeds its partition batch by batch, so rows are
kept pending across batches until the SST that holds them closes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ROW_OVERHEAD = 13
"""Bytes counted per row beyond its key and value (seq, kind and offsets), for sizing SSTs."""


class SstCutter:
    """Takes key-ordered rows and calls ``write`` with the rows of each SST, in order.

    The rows are Arrow tables or record batches with ``key`` and ``value`` columns (others are
    carried along). ``write`` gets a table of one SST's rows (possibly chunked) each time the
    pending rows reach ``target_bytes``; :meth:`finish` writes whatever is left.
    """

    def __init__(self, target_bytes: int, write: Callable[[pa.Table], None]) -> None:
        self.target_bytes = target_bytes
        self._write = write
        self._pending: list[pa.Table] = []
        self._pending_bytes = 0

    def add(self, rows: pa.Table | pa.RecordBatch) -> None:
        """Append ``rows`` (after every row added before), writing each SST they complete."""
        table = pa.Table.from_batches([rows]) if isinstance(rows, pa.RecordBatch) else rows
        n = table.num_rows
        if n == 0:
            return
        sizes = pc.add(
            pc.add(pc.binary_length(table.column("key")), pc.binary_length(table.column("value"))),
            ROW_OVERHEAD,
        )
        cumulative = np.cumsum(sizes.to_numpy(), dtype=np.int64)
        offset = 0
        while offset < n:
            base = int(cumulative[offset - 1]) if offset else 0
            # the first row at which the pending SST reaches its target
            at = int(np.searchsorted(cumulative, base + self.target_bytes - self._pending_bytes, side="left"))
            if at >= n:
                break
            self._pending.append(table.slice(offset, at + 1 - offset))
            self._flush()
            offset = at + 1
        if offset < n:
            self._pending.append(table.slice(offset))
            self._pending_bytes += int(cumulative[-1]) - (int(cumulative[offset - 1]) if offset else 0)

    def finish(self) -> None:
        """Write the pending rows, if any, as the last SST."""
        self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        pending = self._pending
        self._pending = []
        self._pending_bytes = 0
        self._write(pending[0] if len(pending) == 1 else pa.concat_tables(pending))
