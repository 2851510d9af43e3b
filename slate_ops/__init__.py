"""slate_ops: an embedded LSM key-value engine on object storage, maintained by Dagster and Spark.

Layers, lowest first: ``objstore`` → ``txn`` (sequenced commits, boundaries, fencing) → ``manifest``
→ ``sst`` / ``engine`` → ``admin`` → ``orchestration`` / ``cli``. Nothing below ``orchestration``
imports Dagster.

The engine's names are re-exported here but imported lazily, so ``import slate_ops.errors`` stays
light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_ENGINE = ("CheckpointScope", "Db", "DbOptions", "DbReader", "ReaderOptions", "WriteBatch")

if TYPE_CHECKING:
    from slate_ops.engine import CheckpointScope, Db, DbOptions, DbReader, ReaderOptions, WriteBatch


def __getattr__(name: str) -> Any:
    if name in _ENGINE:
        return getattr(importlib.import_module("slate_ops.engine"), name)
    raise AttributeError(f"module 'slate_ops' has no attribute {name!r}")


__all__ = ["CheckpointScope", "Db", "DbOptions", "DbReader", "ReaderOptions", "WriteBatch", "__version__"]
