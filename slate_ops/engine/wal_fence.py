"""What a WAL object is, from its size alone: data, a window fence, or a legacy empty fence.

Several WAL PUTs of one writer may be in flight at once (docs/design/engine.md, "Several WAL PUTs in
flight"), so an opener can find WAL ``N + 1`` created while ``N`` is still missing. The WAL is read as a
*chain* from the replay point: data is replayed, a legacy empty fence is stepped over, a **window fence**
at id ``f`` skips the ids ``f .. f + WAL_FENCE_WINDOW - 1`` (whatever they hold: a stale writer's
orphans landing late), and the chain ends at the first missing id. A writer never has a WAL object in
flight at an id ``>=`` (the id of its first unacknowledged WAL SST) ``+ WAL_FENCE_WINDOW``, so one window
fence at the chain's end covers everything a fenced writer can still create.

A LIST gives every object's size, so the kinds are told apart without a GET: the window fence is
:data:`WINDOW_FENCE` (far shorter than the smallest WAL SST, whose footer alone is longer), the legacy
fence (written by slate_ops before several PUTs were in flight) is empty.
"""

from __future__ import annotations

import enum

WAL_FENCE_WINDOW = 8
"""Ids a window fence covers, itself included; the bound on a writer's WAL ids in flight past its first
unacknowledged one. A format constant: every writer and every opener of a database must agree on it."""

WINDOW_FENCE = b"slate_ops WAL window fence w8\n"
"""The content of a window fence object; recognised by its size in a listing."""


class WalObjectKind(enum.Enum):
    DATA = "data"
    WINDOW_FENCE = "window fence"
    LEGACY_FENCE = "legacy fence"


def wal_object_kind(size: int) -> WalObjectKind:
    """The kind of a WAL object of ``size`` bytes."""
    if size == 0:
        return WalObjectKind.LEGACY_FENCE
    if size == len(WINDOW_FENCE):
        return WalObjectKind.WINDOW_FENCE
    return WalObjectKind.DATA


__all__ = ["WAL_FENCE_WINDOW", "WINDOW_FENCE", "WalObjectKind", "wal_object_kind"]
