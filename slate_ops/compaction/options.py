"""Options of the compactor (defaults from SlateDB's size-tiered compactor)."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field

from slate_ops.config import Duration

MiB = 1024 * 1024


class CompactorOptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    poll_interval: Duration = Field(default=timedelta(seconds=5))
    """How often the long-running loop looks for work (SlateDB: 5 s)."""
    min_sources: int = Field(default=4, ge=2)
    """L0 SSTs (or adjacent similar sorted runs) that trigger a compaction (SlateDB: 4)."""
    max_sources: int = Field(default=8, ge=2)
    """At most this many sources per compaction (SlateDB: 8)."""
    include_size_threshold: float = Field(default=4.0, gt=1.0)
    """Adjacent sorted runs merge only while the largest is at most this times the smallest."""
    max_subcompaction_bytes: int = Field(default=16 * MiB, gt=0)
    """Stored input bytes per subcompaction; bounds the memory of one merge task (~8-10x this).

    16 MiB was chosen by measurement (benchmarks/notes/s3_compaction.md): larger subcompactions merge
    slower per byte (fresh memory for larger tables) and leave fewer to spread over the threads and
    to overlap I/O with. Spark executors should use 64 MiB or more (PySpark's per-task cost)."""
    target_sst_bytes: int = Field(default=64 * MiB, gt=0)
    """Output SSTs are cut at about this many bytes of row data."""
    compaction_checkpoint_lifetime: Duration = Field(default=timedelta(minutes=15))
    """A checkpoint on the pre-compaction manifest keeps inputs alive for in-flight readers."""
