"""SlateDB databases, maintained through SlateDB's own Python binding (``slatedb==0.17.0``, the
optional extra ``slate_ops[slatedb]``), imported lazily: this package imports without it, and a
SlateDB call then raises :class:`~slate_ops.errors.SlateDbBindingMissingError` naming the extra. No
module outside this package imports the binding (the ``lint-imports`` contract in pyproject.toml).

* :mod:`.loop` -- the lazy import and the one event-loop owner;
* :mod:`.store` -- the binding's object store for a slate_ops store;
* :mod:`.views` -- typed views of manifests, SSTs and checkpoints;
* :mod:`.admin` -- :class:`SlateDbAdmin`, one database's operations;
* :mod:`.gc_plan` -- SlateDB's GC decisions, one step per directory (:meth:`SlateDbAdmin.gc_plan`).
"""

from slate_ops.engines.slatedb.admin import (
    CloneSource,
    CompactionOutcome,
    GcRunReport,
    SlateDbAdmin,
)
from slate_ops.engines.slatedb.gc_plan import GcPlan, GcPolicy, PlannedDeletion
from slate_ops.engines.slatedb.loop import (
    DEFAULT_TIMEOUTS,
    LOOP,
    PINNED_VERSION,
    CallTimeouts,
    LoopOwner,
    binding,
)
from slate_ops.engines.slatedb.store import binding_store
from slate_ops.engines.slatedb.views import CheckpointView, ManifestView, SstView

__all__ = [
    "DEFAULT_TIMEOUTS",
    "LOOP",
    "PINNED_VERSION",
    "CallTimeouts",
    "CheckpointView",
    "CloneSource",
    "CompactionOutcome",
    "GcPlan",
    "GcPolicy",
    "GcRunReport",
    "LoopOwner",
    "ManifestView",
    "PlannedDeletion",
    "SlateDbAdmin",
    "SstView",
    "binding",
    "binding_store",
]
