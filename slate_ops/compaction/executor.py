"""Executors run a compaction spec's subcompactions and return the SSTs they wrote."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass
from typing import Protocol

from slate_ops.compaction.spec import CompactionSpec, ExecutionResult, SubcompactionResult
from slate_ops.compaction.subcompaction import (
    CompactionIo,
    PendingInputs,
    drop_uploads,
    fetch_inputs,
    run_subcompaction,
    wait_uploads,
)
from slate_ops.errors import InvalidArgumentError
from slate_ops.manifest.model import KeyRange
from slate_ops.objstore.base import ObjectStore, PutResult
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime


class Executor(Protocol):
    name: str

    def execute(self, store: ObjectStore, spec: CompactionSpec) -> ExecutionResult: ...


def combine(results: Sequence[SubcompactionResult]) -> ExecutionResult:
    """Results in subcompaction (key-range) order → one result whose outputs form a sorted run."""
    return ExecutionResult(
        outputs=tuple(sst for r in results for sst in r.outputs),
        bytes_read=sum(r.bytes_read for r in results),
        bytes_written=sum(r.bytes_written for r in results),
        rows_in=sum(r.rows_in for r in results),
        rows_out=sum(r.rows_out for r in results),
        subcompactions=len(results),
    )


class LocalExecutor:
    """Subcompactions on a thread pool; pyarrow releases the GIL in sorts, filters and codecs.

    Inputs are prefetched: while ``threads`` subcompactions merge, the next one's GETs are already
    running. At most ``threads + 1`` subcompactions hold their inputs at a time (a fetch starts
    only when a running subcompaction has merged and freed its own), so memory stays about that
    many times one subcompaction's, as without prefetching plus one.
    """

    name = "local"

    def __init__(self, threads: int = 2, *, clock: Runtime = SYSTEM_RUNTIME) -> None:
        if threads < 1:
            raise InvalidArgumentError(f"LocalExecutor needs at least one thread, got {threads}")
        self.threads = threads
        self.clock = clock  # names the output SSTs, gives the thread pools

    def execute(self, store: ObjectStore, spec: CompactionSpec) -> ExecutionResult:
        window = threading.Semaphore(self.threads + 1)  # subcompactions holding inputs
        failed = threading.Event()
        futures: list[Future[SubcompactionResult | None]] = []
        uploads: list[Future[PutResult]] = []  # appended by the subcompactions, awaited here
        with (
            CompactionIo(store, clock=self.clock, opened=spec.opened, first_reads=spec.first_reads) as io,
            self.clock.executor(self.threads, "slate-ops-compaction") as pool,
        ):
            for key_range in spec.subcompactions:
                window.acquire()
                if failed.is_set():
                    window.release()
                    break
                inputs = fetch_inputs(io, spec, key_range)
                task = _Task(io, spec, key_range, inputs, window, failed, uploads, self.clock)
                futures.append(pool.submit(task.run))
            wait(futures)
            for future in futures:
                error = future.exception()
                if error is not None:
                    drop_uploads(uploads)
                    raise error
            wait_uploads(list(uploads))  # every output is written before the result is returned
        results = [f.result() for f in futures]
        return combine([r for r in results if r is not None])


@dataclass(frozen=True)
class _Task:
    """One subcompaction of :meth:`LocalExecutor.execute`; skipped (None) once another has failed."""

    io: CompactionIo
    spec: CompactionSpec
    key_range: KeyRange
    inputs: PendingInputs
    window: threading.Semaphore
    failed: threading.Event
    uploads: list[Future[PutResult]]
    clock: Runtime

    def run(self) -> SubcompactionResult | None:
        if self.failed.is_set():
            self.inputs.cancel()
            self.window.release()
            return None
        started: list[Future[PutResult]] = []
        try:
            return run_subcompaction(
                self.io.store, self.spec, self.key_range,
                io=self.io, inputs=self.inputs, inputs_done=self.window, uploads=started, clock=self.clock,
            )  # fmt: skip
        except BaseException:
            self.failed.set()
            raise
        finally:
            for upload in started:
                upload.add_done_callback(self._check)
            self.uploads.extend(started)  # list.extend is atomic under the GIL

    def _check(self, upload: Future[PutResult]) -> None:
        if upload.cancelled() or upload.exception() is not None:
            self.failed.set()
