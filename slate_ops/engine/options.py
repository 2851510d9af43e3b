"""Options of the writer (:class:`DbOptions`) and reader (:class:`ReaderOptions`).

Defaults follow SlateDB's where SlateDB has the option (docs/design/engine.md, "Options" lists them).
"""

from __future__ import annotations

import enum
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from slate_ops.config import Duration
from slate_ops.engine.wal_fence import WAL_FENCE_WINDOW
from slate_ops.sst.readahead import ReadAheadLimits

MiB = 1024 * 1024
WAL_PUTS_IN_FLIGHT = 4
"""The default of :attr:`DbOptions.wal_puts_in_flight`, chosen by measurement (docs/design/engine.md,
"The writer's WAL pipeline")."""


class CheckpointScope(enum.Enum):
    """What a checkpoint taken by :meth:`Db.create_checkpoint` includes (docs/design/engine.md,
    "Creating a checkpoint").

    ``ALL``: every write issued before the call (the WAL is flushed and memtables are flushed to L0
    on a best-effort basis, without waiting on backpressure). ``DURABLE``: only writes already
    durable at the time of the call; faster.
    """

    ALL = "all"
    DURABLE = "durable"


class DbOptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    wal_flush_interval: Duration = Field(default=timedelta(milliseconds=100))
    """How often buffered writes are written to a WAL SST (SlateDB: 100 ms)."""
    await_durable: bool = False
    """Make every write wait until its WAL SST is written (per-call override available)."""
    l0_sst_size_bytes: int = Field(default=64 * MiB, gt=0)
    """A memtable freezes and is flushed to an L0 SST once it holds this much memory (SlateDB: 64
    MiB). Memory as accounted by the memtable: mostly packed rows, ~1.1-1.3x their key + value
    bytes for small values (docs/design/engine.md, "Memory")."""
    l0_max_ssts: int = Field(default=8, gt=0)
    """L0 flushes wait while L0 holds this many SSTs (SlateDB: 8); the writer logs a warning at once
    (then at most once a minute) when it stalls on it."""
    max_unflushed_bytes: int = Field(default=1024 * MiB, gt=0)
    """Writes wait while the memory of the memtables — the mutable one and the frozen ones not yet in
    L0 — exceeds this (SlateDB: 1 GiB). It bounds the writer's memtable memory, not only payload."""
    backpressure_timeout: Duration = Field(default=timedelta(minutes=5))
    """How long a flush or write waits on backpressure before raising BackpressureTimeoutError."""
    manifest_poll_interval: Duration = Field(default=timedelta(seconds=1))
    """How often the writer re-reads the manifest to see the compactor's changes (SlateDB: 1 s)."""
    block_cache_bytes: int = Field(default=64 * MiB, ge=0)
    """Decoded SST blocks kept in memory (charged key + value bytes plus per-row overhead)."""
    wal_buffer_bytes: int = Field(default=4 * MiB, gt=0)
    """The WAL buffer is flushed early when it holds this many bytes (key + value + 16 per entry);
    a write finding twice this unwritten (the flusher is busy with an L0 SST) writes the WAL
    itself, so the buffer stays within about twice this."""
    wal_puts_in_flight: int = Field(default=WAL_PUTS_IN_FLIGHT, ge=1, le=WAL_FENCE_WINDOW)
    """The background flusher keeps up to this many WAL PUTs in flight, WAL ``N + 1``'s started while
    ``N``'s is pending (docs/design/engine.md, "The writer's WAL pipeline"); 1: one at a time. At most
    ``WAL_FENCE_WINDOW`` (a writer's reach past its first unacknowledged WAL SST)."""
    scan_read_ahead_bytes: int = Field(default=8 * MiB, ge=0)
    """A scan fetches SST blocks ahead of the merge, in the background, up to this many bytes
    requested and not yet scanned (docs/design/engine.md, "Read-ahead"); 0: no read-ahead, each
    run of blocks fetched when the scan reaches it."""
    scan_max_fetches: int = Field(default=8, gt=0)
    """At most this many GETs of one scan at a time (its read-ahead threads)."""

    def read_ahead_limits(self) -> ReadAheadLimits:
        return ReadAheadLimits(self.scan_read_ahead_bytes, self.scan_max_fetches)


class ReaderOptions(BaseModel):
    """Options of :class:`DbReader` (docs/design/engine.md, "Options")."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    manifest_poll_interval: Duration = Field(default=timedelta(seconds=10))
    checkpoint_lifetime: Duration | None = Field(default=timedelta(minutes=10))
    """Lifetime of the reader's own checkpoint; must exceed twice the poll interval. None: the
    checkpoint never expires (it is removed when the reader closes, or by hand), so the reader never
    refreshes it."""
    max_memtable_bytes: int = Field(default=64 * MiB, gt=0)
    block_cache_bytes: int = Field(default=64 * MiB, ge=0)
    scan_read_ahead_bytes: int = Field(default=8 * MiB, ge=0)
    """As :attr:`DbOptions.scan_read_ahead_bytes`."""
    scan_max_fetches: int = Field(default=8, gt=0)

    def read_ahead_limits(self) -> ReadAheadLimits:
        return ReadAheadLimits(self.scan_read_ahead_bytes, self.scan_max_fetches)

    @model_validator(mode="after")
    def _lifetime_exceeds_two_polls(self) -> ReaderOptions:
        if (
            self.checkpoint_lifetime is not None
            and self.checkpoint_lifetime <= 2 * self.manifest_poll_interval
        ):
            raise ValueError(
                f"checkpoint_lifetime ({self.checkpoint_lifetime}) must exceed twice "
                f"manifest_poll_interval ({self.manifest_poll_interval}), or the checkpoint can "
                "expire between two polls"
            )
        return self


def seconds(value: Any) -> float:
    assert isinstance(value, timedelta)
    return value.total_seconds()
