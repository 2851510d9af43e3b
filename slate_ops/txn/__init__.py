"""The coordination primitive: sequenced objects, GC boundaries and epoch fencing.

Layered like SlateDB's: a sequenced store (commit by create-if-absent) → a fenceable view (epoch
checks). The manifest and compactions stores are thin wrappers over these.
"""

from slate_ops.txn.boundary import BoundaryObject
from slate_ops.txn.fencing import EpochField, FenceableStore
from slate_ops.txn.sequenced import Codec, SequencedFile, SequencedStore, Versioned

__all__ = [
    "BoundaryObject",
    "Codec",
    "EpochField",
    "FenceableStore",
    "SequencedFile",
    "SequencedStore",
    "Versioned",
]
