"""Compaction: the size-tiered scheduler, the fenced compactor and its executors.

``Compactor`` plans and commits; executors (``LocalExecutor`` here, ``SparkExecutor`` in
:mod:`slate_ops.spark`) run the same :func:`run_subcompaction` over key ranges.
"""

from slate_ops.compaction.compactor import COMPACTION_CHECKPOINT, CompactionReport, Compactor, embedded
from slate_ops.compaction.executor import Executor, LocalExecutor, combine
from slate_ops.compaction.options import CompactorOptions
from slate_ops.compaction.scheduler import Proposal, propose
from slate_ops.compaction.spec import (
    CompactionSpec,
    ExecutionResult,
    SourceRun,
    SourceView,
    SubcompactionResult,
)
from slate_ops.compaction.state import CompactionRecord, CompactionsState, CompactionsStore
from slate_ops.compaction.subcompaction import run_subcompaction

__all__ = [
    "COMPACTION_CHECKPOINT",
    "CompactionRecord",
    "CompactionReport",
    "CompactionSpec",
    "CompactionsState",
    "CompactionsStore",
    "Compactor",
    "CompactorOptions",
    "ExecutionResult",
    "Executor",
    "LocalExecutor",
    "Proposal",
    "SourceRun",
    "SourceView",
    "SubcompactionResult",
    "combine",
    "embedded",
    "propose",
    "run_subcompaction",
]
