"""The embedded engine: the writer (:class:`Db`) and the read-only :class:`DbReader`."""

from slate_ops.engine.batch import WriteBatch
from slate_ops.engine.db import Db
from slate_ops.engine.options import CheckpointScope, DbOptions, ReaderOptions
from slate_ops.engine.reader import DbReader

__all__ = ["CheckpointScope", "Db", "DbOptions", "DbReader", "ReaderOptions", "WriteBatch"]
