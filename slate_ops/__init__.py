"""slate_ops: an embedded LSM key-value engine on object storage, maintained by Dagster and Spark.

Layers, lowest first: ``objstore`` → ``txn`` (sequenced commits, boundaries, fencing) → ``manifest``
→ ``admin`` → ``orchestration`` / ``cli``. Nothing below ``orchestration`` imports Dagster.
"""

__version__ = "0.1.0"
