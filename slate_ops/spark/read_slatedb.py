"""A SlateDB database as a Spark DataFrame: the steps (:data:`SLATEDB_READ`) :func:`~slate_ops.spark.read_db`
and ``format("slate_ops")`` take when the database at ``path`` was written by SlateDB
(:mod:`slate_ops.spark.read_base` holds what both engines share).

The driver fixes the checkpoint to read (given, a tag's -- a checkpoint named ``tag:<name>``, as
ours -- or a new ``spark-read`` one that expires after the lifetime), reads that checkpoint's
manifest through the binding and cuts the key space at SST first keys into ranges of about equal
estimated bytes (:func:`~slate_ops.engines.slatedb.reader.key_ranges`). Each task opens the store
from its URL with the job's S3 credentials (as ours), then the binding's ``DbReader`` in
``ReaderMode.CHECKPOINT(id)`` (which writes nothing) and scans its range. No row passes through
the driver. Key filters are pushed down as for ours (ranges clipped, ranges without a wanted key
dropped).

Forking: the binding's Rust runtime does not survive ``fork`` (a forked child of a process that
used it hangs; :class:`~slate_ops.engines.slatedb.LoopOwner` raises
:class:`~slate_ops.errors.SlateDbForkError` there instead). Spark's Python workers are forked by
``pyspark.daemon``, which never imports the binding; each worker first uses it in itself.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from datetime import timedelta

import pyarrow as pa

from slate_ops.admin.handle import SlateDbHandle
from slate_ops.engines.slatedb import SlateDbAdmin
from slate_ops.engines.slatedb.reader import CheckpointReader, key_ranges
from slate_ops.errors import CheckpointExpiredError
from slate_ops.layout import normalize_db_path
from slate_ops.manifest.checkpoints import checkpoint_not_found
from slate_ops.manifest.model import KeyRange
from slate_ops.objstore import ObjectStore
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime
from slate_ops.spark.credentials import NO_CREDENTIALS, S3Credentials
from slate_ops.spark.executor import _worker_store
from slate_ops.spark.read_base import READ_ARROW_SCHEMA, EngineRead, partition_count, resolve_read_checkpoint


@dataclass(frozen=True)
class SlateDbReadPlan:
    """What the tasks of one read of a SlateDB database need; pickled into the job."""

    store_url: str
    path: str
    checkpoint_id: uuid.UUID
    manifest_id: int
    ranges: tuple[KeyRange, ...]
    """One per partition, in key order; together they cover every key (before narrowing)."""


def _location(store: ObjectStore, path: str) -> str:
    return f"SlateDB database {path} in {store.url}"


def require_live(
    store: ObjectStore, path: str, checkpoint_id: uuid.UUID, clock: Runtime = SYSTEM_RUNTIME
) -> int:
    """The manifest id of the live checkpoint ``checkpoint_id``; :class:`CheckpointNotFoundError`
    or :class:`CheckpointExpiredError` otherwise (a lazy DataFrame evaluated after its checkpoint
    expired fails by name, not on a file GC removed)."""
    found = next(
        (c for c in SlateDbAdmin(path, store).list_checkpoints() if c.id == str(checkpoint_id)), None
    )
    if found is None:
        raise checkpoint_not_found(checkpoint_id, _location(store, path))
    if found.expire_time_s is not None and found.expire_time_s <= clock.now():
        raise CheckpointExpiredError(
            f"checkpoint {checkpoint_id} of {_location(store, path)} expired at {found.expire_time_s} "
            "(unix seconds); read a live checkpoint, or give none to read a new one"
        )
    return found.manifest_id


def resolve_slatedb_checkpoint(
    store: ObjectStore,
    path: str,
    *,
    checkpoint: uuid.UUID | None,
    tag: str | None,
    lifetime: timedelta,
    clock: Runtime = SYSTEM_RUNTIME,
) -> uuid.UUID:
    """The checkpoint to read: ``checkpoint``, the tag's, or a new one named ``spark-read`` that
    expires after ``lifetime`` (through the admin handle: slate_ops' rules on names and lifetimes;
    :func:`~slate_ops.spark.read_base.resolve_read_checkpoint`)."""

    return resolve_read_checkpoint(
        SlateDbHandle(path, store, clock=clock),
        _location(store, path),
        checkpoint=checkpoint,
        tag=tag,
        lifetime=lifetime,
    )


def plan_slatedb_read(
    store: ObjectStore,
    store_url: str,
    path: str,
    checkpoint_id: uuid.UUID,
    partitions: int | None = None,
    *,
    min_partitions: int = 1,
    clock: Runtime = SYSTEM_RUNTIME,
) -> SlateDbReadPlan:
    """At most ``partitions`` key ranges (default: ``min_partitions``, or more so that one holds at
    most 128 MiB of estimated SST bytes) of the checkpoint's manifest."""
    path = normalize_db_path(path)
    manifest_id = require_live(store, path, checkpoint_id, clock)
    manifest = SlateDbAdmin(path, store).read_manifest(manifest_id)
    if manifest is None:  # the checkpoint pins it; gone means the database is damaged
        raise checkpoint_not_found(checkpoint_id, _location(store, path))
    sizes = {s.sst_id: s.size for s in (*manifest.l0, *(v for r in manifest.sorted_runs for v in r.ssts))}
    partitions = partition_count(sum(sizes.values()), partitions, min_partitions)
    ranges = tuple(KeyRange(s, e) for s, e in key_ranges(manifest, partitions))
    return SlateDbReadPlan(store_url, path, checkpoint_id, manifest_id, ranges)


def narrow_slatedb_plan(
    plan: SlateDbReadPlan, bounds: KeyRange, keys: Collection[bytes] | None = None
) -> SlateDbReadPlan:
    """``plan`` read only inside ``bounds`` (ranges clipped, those outside dropped); with ``keys``,
    only the ranges holding one of them."""
    kept = []
    for r in plan.ranges:
        clipped = r.intersect(bounds)
        if not clipped.is_empty() and (keys is None or any(clipped.contains(k) for k in keys)):
            kept.append(clipped)
    return dataclasses.replace(plan, ranges=tuple(kept))


def read_slatedb_partition(
    plan: SlateDbReadPlan, index: int, credentials: S3Credentials = NO_CREDENTIALS
) -> Iterator[pa.RecordBatch]:
    """Task ``index``: its range's live rows as Arrow batches, in key order (a ``DbReader`` at the
    checkpoint, opened in this worker)."""
    store = _worker_store(plan.store_url, credentials)
    require_live(store, plan.path, plan.checkpoint_id)
    key_range = plan.ranges[index]
    with CheckpointReader(plan.path, store, str(plan.checkpoint_id)) as reader:
        for keys, values in reader.scan(key_range.start, key_range.end):
            yield pa.RecordBatch.from_arrays(
                [pa.array(keys, pa.binary()), pa.array(values, pa.binary())], schema=READ_ARROW_SCHEMA
            )


def _range_count(plan: SlateDbReadPlan) -> int:
    return len(plan.ranges)


SLATEDB_READ: EngineRead[SlateDbReadPlan] = EngineRead(
    resolve=resolve_slatedb_checkpoint,
    require_live=require_live,
    plan=plan_slatedb_read,
    narrow=narrow_slatedb_plan,
    count=_range_count,
    read_partition=read_slatedb_partition,
)
"""A SlateDB database's read, for :func:`~slate_ops.spark.read_db` and ``format("slate_ops")``."""


__all__ = [
    "SLATEDB_READ",
    "SlateDbReadPlan",
    "narrow_slatedb_plan",
    "plan_slatedb_read",
    "read_slatedb_partition",
    "require_live",
    "resolve_slatedb_checkpoint",
]
