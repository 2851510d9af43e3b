"""One subcompaction: merge every source's rows in one key range into new SSTs, vectorized.

The same function runs on the local executor's threads and as a Spark task. It reads the inputs
as Arrow record batches, sources newest first, keeps the newest version of each key with the
shared vectorized merge (:func:`slate_ops.sst.merge.newest_per_key`; older versions are shadowed:
readers that still need them read the old SSTs, which their checkpoints pin), drops tombstones
when the output is the oldest sorted run, and writes outputs of about ``target_sst_bytes`` (cut by
:class:`slate_ops.sst.cut.SstCutter`). There is no per-row Python loop.

I/O goes through a :class:`CompactionIo`: its bounded pools fetch the inputs as parallel ranged
GETs of at most ``FETCH_RUN_BYTES`` (decoded where they land, in order of need) and upload each
output while the next is encoded (large outputs as parallel multipart uploads where the store has
them, :func:`~slate_ops.objstore.base.put_large`). An object store's latency is then paid a few
times per subcompaction instead of once per request.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from types import TracebackType

import pyarrow as pa
from ulid import ULID

from slate_ops.compaction.firstreads import FirstReads
from slate_ops.compaction.spec import CompactionSpec, SubcompactionResult, intersect
from slate_ops.layout import sst_key
from slate_ops.manifest.model import CompactedSst, KeyRange
from slate_ops.objstore.base import ObjectStore, PutResult, put_large
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime
from slate_ops.sst import SCHEMA, SstReader, encode_sst
from slate_ops.sst.cut import SstCutter
from slate_ops.sst.merge import newest_per_key

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
    every subcompaction; ``opened`` seeds them (the readers planning opened: no second round trip
    for the tails), and blocks found in ``first_reads`` (fetched while planning) are not requested
    again. Use as a context manager; closing cancels queued requests and waits for
    running ones, so nothing outlives the compaction. The pools come from ``clock``.
    """

    def __init__(
        self,
        store: ObjectStore,
        read_concurrency: int | None = None,
        write_concurrency: int | None = None,
        *,
        clock: Runtime = SYSTEM_RUNTIME,
        opened: Mapping[str, SstReader] | None = None,
        first_reads: FirstReads | None = None,
    ) -> None:
        self.store = store
        self.first_reads = first_reads
        if first_reads is None:
            self.reads = clock.executor(read_concurrency or READ_CONCURRENCY, "slate-ops-compaction-get")
        else:  # its pool: the first reads and the executor's GETs share one bound
            self.reads = first_reads.reads
        self.writes = clock.executor(write_concurrency or WRITE_CONCURRENCY, "slate-ops-compaction-put")
        self._pending = threading.Semaphore(PENDING_OUTPUTS)
        self._readers: dict[str, SstReader] = dict(opened or {})
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

    def read_run(
        self, key: str, reader: SstReader, i: int, j: int, start: bytes | None, end: bytes | None
    ) -> pa.RecordBatch | None:
        """:meth:`SstReader.read_run` of SST ``key``, its first blocks taken from ``first_reads``
        where they were fetched: the rest, if any, is requested before waiting for them (one GET
        each, the two round trips overlapping), and all of them if their read failed."""
        first_reads = self.first_reads
        covered = i if first_reads is None else first_reads.covered(key, i, j)
        if covered == i:
            return reader.read_run(i, j, start, end)
        rest = reader.fetch_run(covered, j) if covered < j else {}
        assert first_reads is not None
        framed = first_reads.fetched(key, i, covered)
        if len(framed) < covered - i:  # the first read failed: fetch those blocks here
            framed = reader.fetch_run(i, covered)
        framed.update(rest)
        return reader.decode_run(i, j, framed, start, end)

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
            io.reads.submit(io.read_run, key, reader, i, j, bounds.start, bounds.end)
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


def write_outputs(
    io: CompactionIo, db_path: str, table: pa.Table, target_bytes: int, new_sst_id: Callable[[], ULID]
) -> tuple[list[CompactedSst], int, list[Future[PutResult]]]:
    """Encode the outputs in order (cut by :class:`~slate_ops.sst.cut.SstCutter`), each uploading
    while the next is encoded; the uploads are returned running (the caller waits for them:
    :func:`wait_uploads`)."""
    outputs: list[CompactedSst] = []
    written = 0
    uploads: list[Future[PutResult]] = []

    def write(rows: pa.Table) -> None:
        nonlocal written
        data, info = encode_sst(rows)
        sst_id = new_sst_id()
        uploads.append(io.upload(sst_key(db_path, sst_id), data))
        outputs.append(CompactedSst(sst_id, info))
        written += len(data)

    try:
        cutter = SstCutter(target_bytes, write)
        cutter.add(table)
        cutter.finish()
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
    clock: Runtime = SYSTEM_RUNTIME,
) -> SubcompactionResult:
    """Read, merge and write one key range; ``store`` is used only when no ``io`` is given.

    An executor that pipelines subcompactions passes ``io`` and the ``inputs`` it started fetching;
    learns from ``inputs_done`` (released once the inputs are merged and freed, even on failure)
    when it may start fetching the next ones; and with ``uploads`` takes over waiting for the
    outputs' uploads (they are appended, still running) so this thread can merge the next range.
    Without ``uploads`` the outputs are written when this returns. The outputs' SST ids come from
    ``clock`` (a Spark task's is its worker's real one); every run makes new ones, so a re-run never
    overwrites an earlier attempt's orphan that GC may be deleting.
    """
    if io is None:
        with CompactionIo(store, clock=clock, opened=spec.opened) as own:
            return run_subcompaction(
                store, spec, key_range,
                io=own, inputs=inputs, inputs_done=inputs_done, uploads=uploads, clock=clock,
            )  # fmt: skip
    try:
        pending = inputs if inputs is not None else fetch_inputs(io, spec, key_range)
        table, bytes_read = pending.table()
        del pending, inputs
        rows_in = table.num_rows
        merged = newest_per_key(table, drop_tombstones=spec.drop_tombstones)
        del table  # the inputs are no longer needed while the outputs are encoded and written
    finally:
        if inputs_done is not None:
            inputs_done.release()
    outputs, bytes_written, started = write_outputs(
        io, spec.db_path, merged, spec.target_sst_bytes, clock.new_ulid
    )
    if uploads is None:
        wait_uploads(started)
    else:
        uploads.extend(started)
    return SubcompactionResult(tuple(outputs), bytes_read, bytes_written, rows_in, merged.num_rows)
