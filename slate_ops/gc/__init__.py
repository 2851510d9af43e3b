"""The garbage collector (docs/design/gc.md, "One run"; it follows SlateDB's *Checkpoints and Clones*,
"Garbage Collector", and its GC boundary-file design).

``GarbageCollector(path, store, GcOptions(...)).run_once(dry_run=False) -> GcReport`` runs every
task once; ``run(stop_event)`` repeats it every ``interval`` until the database is gone.
"""

from slate_ops.gc.collector import GarbageCollector
from slate_ops.gc.options import ALL_RESOURCES, MIN_AGE_FLOOR, GcOptions, Resource
from slate_ops.gc.report import DeletedObject, GcReport, ResourceReport

__all__ = [
    "ALL_RESOURCES",
    "MIN_AGE_FLOOR",
    "DeletedObject",
    "GarbageCollector",
    "GcOptions",
    "GcReport",
    "Resource",
    "ResourceReport",
]
