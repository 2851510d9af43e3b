"""One subcompaction: merge every source's rows in one key range into new SSTs, vectorized.

The same function runs on the local executor's threads and as a Spark task. It reads the inputs
as Arrow record batches, sorts them by (key asc, seq desc) with ``pyarrow.compute``, keeps the
newest version of each key (older versions are shadowed: readers that still need them read the
old SSTs, which their checkpoints pin), drops tombstones when the output is the oldest sorted run,
and writes outputs of about ``target_sst_bytes``. There is no per-row Python loop.

I/O goes through a :class:`CompactionIo`: its bounded pools fetch the inputs as parallel ranged
GETs of at most ``FETCH_RUN_BYTES`` (decoded where they land, in order of need) and upload each
output while the next is encoded (large outputs as parallel multipart uploads where the store has
them, :func:`~slate_ops.objstore.base.put_large`). An object store's latency is then paid a few
times per subcompaction instead of once per request.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType

import pyarrow as pa
import pyarrow.compute as pc
from ulid import ULID

from slate_ops.compaction.spec import CompactionSpec, SubcompactionResult, intersect
from slate_ops.layout import sst_key
from slate_ops.manifest.model import CompactedSst, KeyRange
from slate_ops.objstore.base import ObjectStore, PutResult, put_large
from slate_ops.sst import KIND_VALUE, SCHEMA, SstReader, encode_sst

ROW_OVERHEAD = 13  # seq + kind + offsets, for sizing outputs
MiB = 1024 * 1024
# Ranged GETs in flight per CompactionIo, and the most stored bytes one of them asks for. Measured
# on moto behind a +50 ms proxy and on a local directory (benchmarks/notes/s3_compaction.md).
READ_CONCURRENCY = 8
FETCH_RUN_BYTES = 4 * MiB
# Outputs uploading at once per CompactionIo (each may send its own parts in parallel); encoded
# outputs held until their upload ends, per CompactionIo (an encoder waits for room: memory bound).
WRITE_CONCURRENCY = 4
PENDING_OUTPUTS = 4


class CompactionIo:
    """The I/O of one compaction: bounded read and write pools and the open SST readers.

    Readers (footer, index, bloom filter: ~1-3 % of an SST) are opened once per input and shared by
    every subcompaction. Use as a context manager; closing cancels queued requests and waits for
    running ones, so nothing outlives the compaction.
    """

    def __init__(
        self,
        store: ObjectStore,
        read_concurrency: int | None = None,
        write_concurrency: int | None = None,
    ) -> None:
        self.store = store
        self.reads = ThreadPoolExecutor(
            read_concurrency or READ_CONCURRENCY, thread_name_prefix="slate-ops-compaction-get"
        )
        self.writes = ThreadPoolExecutor(
            write_concurrency or WRITE_CONCURRENCY, thread_name_prefix="slate-ops-compaction-put"
        )
        self._pending = threading.Semaphore(PENDING_OUTPUTS)
        self._readers: dict[str, SstReader] = {}
        self._opening: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def reader(self, key: str, size: int) -> SstReader:
        """The open reader of SST ``key``, opened on first use (concurrent callers wait for it)."""
        with self._lock:
            reader = self._readers.get(key)
            if reader is not None:
                return reader
            opening = self._opening.setdefault(key, threading.Lock())
        with opening:
            with self._lock:
                reader = self._readers.get(key)
            if reader is None:
                reader = SstReader.open(self.store, key, size=size)
                with self._lock:
                    self._readers[key] = reader
            return reader

    def upload(self, key: str, data: bytes) -> Future[PutResult]:
        """Start writing ``data`` to ``key``; waits first while ``PENDING_OUTPUTS`` uploads are pending."""
        self._pending.acquire()
        try:
            future = self.writes.submit(put_large, self.store, key, data)
        except BaseException:
            self._pending.release()
            raise
        future.add_done_callback(lambda _: self._pending.release())
        return future

    def close(self) -> None:
        self.reads.shutdown(wait=True, cancel_futures=True)
        self.writes.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> CompactionIo:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


@dataclass
class _ViewFetch:
    """The GETs of one source view's rows in the key range (submitted, maybe not yet done)."""

    runs: list[Future[pa.RecordBatch | None]]
    stored_bytes: int


class PendingInputs:
    """One subcompaction's inputs being fetched: :meth:`fetch_inputs` returns it without waiting."""

    def __init__(self, views: list[Future[_ViewFetch]]) -> None:
        self._views = views

    def table(self) -> tuple[pa.Table, int]:
        """Wait for every GET; the rows (sources newest first) and the stored bytes read.

        Called once: the fetched batches are then referenced only by the returned table."""
        batches: list[pa.RecordBatch] = []
        bytes_read = 0
        views, self._views = self._views, []
        for view in views:
            fetch = view.result()
            bytes_read += fetch.stored_bytes
            for run in fetch.runs:
                batch = run.result()
                if batch is not None:
                    batches.append(batch)
        return pa.Table.from_batches(batches, schema=SCHEMA), bytes_read

    def cancel(self) -> None:
        for view in self._views:
            view.cancel()
            if view.done() and not view.cancelled() and view.exception() is None:
                for run in view.result().runs:
                    run.cancel()


def fetch_inputs(io: CompactionIo, spec: CompactionSpec, key_range: KeyRange) -> PendingInputs:
    """Start fetching every source row within ``key_range`` (and its view's visible range).

    Each view's reader is opened (or reused) on the read pool, which then queues that view's block
    runs as ranged GETs; the runs are decoded on the pool thread that fetched them.
    """

    def fetch_view(key: str, size: int, bounds: KeyRange) -> _ViewFetch:
        reader = io.reader(key, size)
        runs = [
            io.reads.submit(reader.read_run, i, j, bounds.start, bounds.end)
            for i, j in reader.plan_runs(bounds.start, bounds.end, FETCH_RUN_BYTES)
        ]
        return _ViewFetch(runs, reader.stored_bytes(bounds.start, bounds.end))

    views = []
    for run in spec.sources:
        for view in run.views:
            bounds = intersect(view.visible, key_range)
            if bounds is not None:
                views.append(io.reads.submit(fetch_view, view.key, view.size, bounds))
    return PendingInputs(views)


def read_inputs(store: ObjectStore, spec: CompactionSpec, key_range: KeyRange) -> tuple[pa.Table, int]:
    """Every source row within ``key_range`` (and its view's visible range), and the stored bytes read."""
    with CompactionIo(store) as io:
        return fetch_inputs(io, spec, key_range).table()


def merge(table: pa.Table, drop_tombstones: bool) -> pa.Table:
    """The newest version of every key, in key order; tombstones dropped if asked.

    ``table`` holds the sources newest first, each in (key asc, seq desc) order, so a *stable*
    sort on the key alone (Arrow's ``sort_indices`` is stable) puts the newest version of each key
    first; one ``take`` of the first row per key then builds the output. This is ~40% faster than
    sorting on (key, seq) and taking the whole table before filtering. The chunks (one per fetched
    run) are not combined first: ``take`` gathers from them directly, which saves a copy of the
    whole input (measured 2-4x faster merges, most at 100+ MB, where fresh pages cost the most).
    """
    if table.num_rows == 0:
        return table
    order = pc.sort_indices(table, sort_keys=[("key", "ascending")])
    if table.num_rows > 1:
        keys = table.column("key").take(order)
        changed = pc.not_equal(keys.slice(1), keys.slice(0, table.num_rows - 1))
        order = order.filter(pa.concat_arrays([pa.array([True]), changed.combine_chunks()]))
    merged = table.take(order)
    if drop_tombstones:
        merged = merged.filter(pc.equal(merged.column("kind"), KIND_VALUE))
    return merged


def split_points(table: pa.Table, target_bytes: int) -> list[int]:
    """Row offsets where outputs start, cutting at about ``target_bytes`` of row data each."""
    if table.num_rows == 0:
        return []
    sizes = pc.add(
        pc.add(pc.binary_length(table.column("key")), pc.binary_length(table.column("value"))), ROW_OVERHEAD
    )
    cumulative = pc.cumulative_sum(sizes).to_numpy()
    total = int(cumulative[-1])
    cuts = [0]
    boundary = target_bytes
    while boundary < total:
        row = int(cumulative.searchsorted(boundary, side="left")) + 1
        if row >= table.num_rows:
            break
        if row > cuts[-1]:
            cuts.append(row)
        boundary = int(cumulative[row - 1]) + target_bytes
    return cuts


def write_outputs(
    io: CompactionIo, db_path: str, table: pa.Table, target_bytes: int
) -> tuple[list[CompactedSst], int, list[Future[PutResult]]]:
    """Encode the outputs in order, each uploading while the next is encoded; the uploads are
    returned running (the caller waits for them: :func:`wait_uploads`)."""
    cuts = split_points(table, target_bytes)
    outputs = []
    written = 0
    uploads: list[Future[PutResult]] = []
    try:
        for index, start in enumerate(cuts):
            end = cuts[index + 1] if index + 1 < len(cuts) else table.num_rows
            data, info = encode_sst(table.slice(start, end - start))
            sst_id = ULID()
            uploads.append(io.upload(sst_key(db_path, sst_id), data))
            outputs.append(CompactedSst(sst_id, info))
            written += len(data)
            del data
    except BaseException:
        drop_uploads(uploads)
        raise
    return outputs, written, uploads


def wait_uploads(uploads: Sequence[Future[PutResult]]) -> None:
    """Wait for every upload; on a failure, :func:`drop_uploads` and raise it."""
    try:
        for upload in uploads:
            upload.result()
    except BaseException:
        drop_uploads(uploads)
        raise


def drop_uploads(uploads: Sequence[Future[PutResult]]) -> None:
    """Cancel the uploads not started and wait for the running ones (their errors are dropped: the
    caller is failing already), so none outlives a failed compaction. Outputs already written are
    orphans that GC removes: the manifest never names them."""
    for upload in uploads:
        upload.cancel()
    for upload in uploads:
        if not upload.cancelled():
            upload.exception()


def run_subcompaction(
    store: ObjectStore,
    spec: CompactionSpec,
    key_range: KeyRange,
    *,
    io: CompactionIo | None = None,
    inputs: PendingInputs | None = None,
    inputs_done: threading.Semaphore | None = None,
    uploads: list[Future[PutResult]] | None = None,
) -> SubcompactionResult:
    """Read, merge and write one key range; ``store`` is used only when no ``io`` is given.

    An executor that pipelines subcompactions passes ``io`` and the ``inputs`` it started fetching;
    learns from ``inputs_done`` (released once the inputs are merged and freed, even on failure)
    when it may start fetching the next ones; and with ``uploads`` takes over waiting for the
    outputs' uploads (they are appended, still running) so this thread can merge the next range.
    Without ``uploads`` the outputs are written when this returns.
    """
    if io is None:
        with CompactionIo(store) as own:
            return run_subcompaction(
                store, spec, key_range, io=own, inputs=inputs, inputs_done=inputs_done, uploads=uploads
            )
    try:
        pending = inputs if inputs is not None else fetch_inputs(io, spec, key_range)
        table, bytes_read = pending.table()
        del pending, inputs
        rows_in = table.num_rows
        merged = merge(table, spec.drop_tombstones)
        del table  # the inputs are no longer needed while the outputs are encoded and written
    finally:
        if inputs_done is not None:
            inputs_done.release()
    outputs, bytes_written, started = write_outputs(io, spec.db_path, merged, spec.target_sst_bytes)
    if uploads is None:
        wait_uploads(started)
    else:
        uploads.extend(started)
    return SubcompactionResult(tuple(outputs), bytes_read, bytes_written, rows_in, merged.num_rows)
