"""What reading a database into Spark does the same way for both engines.

:func:`~slate_ops.spark.read_db` and ``format("slate_ops")`` read a slate_ops database
(:mod:`slate_ops.spark.read`) or a SlateDB one (:mod:`slate_ops.spark.read_slatedb`) in the same
steps; an engine supplies them as an :class:`EngineRead`. Shared here: the schema, the checkpoint
to read (given, a tag's, or a new ``spark-read`` one: :func:`resolve_read_checkpoint`), the number
of partitions (:func:`partition_count`), and the DataFrame of one task per partition
(:func:`partitions_frame`).
"""

from __future__ import annotations

import functools
import logging
import math
import uuid
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Generic, TypeVar
from urllib.parse import urlsplit

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from slate_ops.admin.checkpoints import TAG_PREFIX
from slate_ops.admin.handle import DatabaseHandle
from slate_ops.config import CheckpointOptions
from slate_ops.errors import InvalidArgumentError, TagNotFoundError
from slate_ops.manifest.model import KeyRange
from slate_ops.objstore import ObjectStore, redact_url
from slate_ops.spark.credentials import S3Credentials

log = logging.getLogger(__name__)

READ_SCHEMA = "key binary, value binary"
"""The columns of :func:`~slate_ops.spark.read_db`'s DataFrame."""
READ_ARROW_SCHEMA = pa.schema([pa.field("key", pa.binary()), pa.field("value", pa.binary())])
""":data:`READ_SCHEMA` in Arrow (nullable columns, as Spark's schema has them)."""
READ_CHECKPOINT_NAME = "spark-read"
"""The name of the checkpoint a read creates when given neither a checkpoint nor a tag."""
DEFAULT_READ_LIFETIME = timedelta(hours=1)
PARTITION_BYTES = 128 * 1024 * 1024
"""Default partitions: at least one per core, and one per this many stored bytes."""

P = TypeVar("P")


def require_shareable(url: str, what: str, otherwise: str | None = None) -> None:
    """Refuse ``memory://`` URLs: Spark tasks run in other processes and would see an empty store.
    ``otherwise``: what else the caller can use (added to the advice)."""
    if urlsplit(url).scheme.lower() == "memory":
        also = f", or {otherwise}" if otherwise else ""
        raise InvalidArgumentError(
            f"{what} cannot use the in-process store {redact_url(url)}: Spark tasks run in other "
            "processes and would see an empty store. Use a file:// store (on a filesystem all workers "
            f"share) or s3://{also}."
        )


def default_parallelism(spark: SparkSession) -> int:
    """``sparkContext.defaultParallelism``, or ``spark.sql.shuffle.partitions`` on Spark Connect."""
    try:
        return int(spark.sparkContext.defaultParallelism)
    except Exception:
        return int(spark.conf.get("spark.sql.shuffle.partitions") or 2)


def partition_count(stored_bytes: int, partitions: int | None, min_partitions: int) -> int:
    """``partitions`` if given, else ``min_partitions`` or more so that a partition holds at most
    :data:`PARTITION_BYTES` of the ``stored_bytes``."""
    if partitions is not None:
        return partitions
    return max(min_partitions, math.ceil(stored_bytes / PARTITION_BYTES))


def resolve_read_checkpoint(
    handle: DatabaseHandle,
    location: str,
    *,
    checkpoint: uuid.UUID | None,
    tag: str | None,
    lifetime: timedelta,
) -> uuid.UUID:
    """The checkpoint to read: ``checkpoint``, the tag's, or a new one named :data:`READ_CHECKPOINT_NAME`
    that expires after ``lifetime``, through the database's admin handle (either engine: slate_ops'
    rules on names and lifetimes).

    ``location`` names the database in errors and the log. Both ``checkpoint`` and ``tag``:
    :class:`InvalidArgumentError`; an unknown tag: :class:`TagNotFoundError`.
    """
    path = handle.path
    if checkpoint is not None and tag is not None:
        raise InvalidArgumentError(
            f"reading {path!r} takes a checkpoint or a tag, not both (got checkpoint {checkpoint} "
            f"and tag {tag!r})"
        )
    if checkpoint is not None:
        return checkpoint
    if tag is not None:
        tagged = handle.list_checkpoints(name=TAG_PREFIX + tag)
        if not tagged:
            raise TagNotFoundError(
                f"no tag {tag!r} in the current manifest of {location}; list them with `slate-ops list-tags`"
            )
        return tagged[0].id
    created = handle.create_checkpoint(CheckpointOptions(lifetime=lifetime, name=READ_CHECKPOINT_NAME)).id
    log.info("read_db of %s reads the new checkpoint %s (lifetime %s)", location, created, lifetime)
    return created


@dataclass(frozen=True)
class EngineRead(Generic[P]):
    """One engine's steps of a read whose plan (pickled into the job) is a ``P``.

    ``resolve(store, path, *, checkpoint, tag, lifetime, clock)``: the checkpoint to read;
    ``plan(store, store_url, path, checkpoint_id, partitions, *, min_partitions, clock)``: the plan;
    the others as typed. Their functions are module-level, so a reader holding them pickles by name.
    """

    resolve: Callable[..., uuid.UUID]
    require_live: Callable[[ObjectStore, str, uuid.UUID], object]
    """Raises :class:`CheckpointNotFoundError` / :class:`CheckpointExpiredError` unless the
    checkpoint lives."""
    plan: Callable[..., P]
    narrow: Callable[[P, KeyRange, Collection[bytes] | None], P]
    """The plan read only inside the key range (and, if given, only where one of the keys may be)."""
    count: Callable[[P], int]
    """The plan's partitions."""
    read_partition: Callable[[P, int, S3Credentials], Iterator[pa.RecordBatch]]
    """The body of one task: its partition's live rows as Arrow batches, in key order."""


def _read_batches(
    read_partition: Callable[[P, int, S3Credentials], Iterator[pa.RecordBatch]],
    plan: P,
    credentials: S3Credentials,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: partition indexes in, that partition's rows out."""
    for batch in batches:
        for index in batch.column(0).to_pylist():
            yield from read_partition(plan, int(index), credentials)


def partitions_frame(
    spark: SparkSession, read: EngineRead[P], plan: P, credentials: S3Credentials
) -> DataFrame:
    """The DataFrame of ``plan``: one task per partition, each running ``read.read_partition``."""
    count = read.count(plan)
    return spark.range(0, count, 1, count).mapInArrow(
        functools.partial(_read_batches, read.read_partition, plan, credentials), READ_SCHEMA
    )


__all__ = [
    "DEFAULT_READ_LIFETIME",
    "PARTITION_BYTES",
    "READ_ARROW_SCHEMA",
    "READ_CHECKPOINT_NAME",
    "READ_SCHEMA",
    "EngineRead",
    "default_parallelism",
    "partition_count",
    "partitions_frame",
    "require_shareable",
    "resolve_read_checkpoint",
]
