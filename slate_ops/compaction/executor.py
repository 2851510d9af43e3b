"""Executors run a compaction spec's subcompactions and return the SSTs they wrote."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from slate_ops.compaction.spec import CompactionSpec, ExecutionResult, SubcompactionResult
from slate_ops.compaction.subcompaction import run_subcompaction
from slate_ops.errors import InvalidArgumentError
from slate_ops.objstore.base import ObjectStore


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
    """Subcompactions on a thread pool; pyarrow releases the GIL in sorts, filters and codecs."""

    name = "local"

    def __init__(self, threads: int = 2) -> None:
        if threads < 1:
            raise InvalidArgumentError(f"LocalExecutor needs at least one thread, got {threads}")
        self.threads = threads

    def execute(self, store: ObjectStore, spec: CompactionSpec) -> ExecutionResult:
        if self.threads == 1 or len(spec.subcompactions) == 1:
            return combine([run_subcompaction(store, spec, r) for r in spec.subcompactions])
        with ThreadPoolExecutor(self.threads, thread_name_prefix="slate-ops-compaction") as pool:
            return combine(list(pool.map(lambda r: run_subcompaction(store, spec, r), spec.subcompactions)))
