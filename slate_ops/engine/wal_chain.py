"""The WAL read as a chain (docs/design/engine.md, "Several WAL PUTs in flight", rule 1): pure, no I/O.

From the replay point on, data is applied and the walk goes on at the next id, a legacy empty fence is
stepped over, a window fence at ``f`` sends the walk to ``f + WAL_FENCE_WINDOW`` (the ids it covers are
never read, whatever they hold) and the chain ends at the first missing id. Every reader and fencer of
the WAL walks a LIST's ``(id, size)`` pairs with :func:`walk_chain`; objects beyond the chain's end are
a fenced writer's orphans (or PUTs still in flight) and are never read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from slate_ops.engine.wal_fence import WAL_FENCE_WINDOW, WalObjectKind, wal_object_kind

Segment = tuple[int, int]
"""``(WAL id, object size)``."""


@dataclass(frozen=True)
class ChainWalk:
    """The chain from ``after + 1``: the data segments to apply in order, the first missing id (where
    the next WAL object of the chain goes) and the highest id listed (``after`` if none)."""

    segments: tuple[Segment, ...]
    end: int
    highest: int


def walk_chain(listing: Iterable[Segment], after: int, upto: int | None = None) -> ChainWalk:
    """Walk ``listing`` (``(id, size)``, any order) from ``after + 1``; with ``upto``, the walk also ends
    before the first id above it (a reader bounded by a checkpoint's ``wal_id_last_seen``)."""
    sizes = {wal_id: size for wal_id, size in listing if wal_id > after}
    segments, end = walk_from(sizes, after + 1, upto)
    return ChainWalk(tuple(segments), end, max(sizes, default=after))


def walk_from(sizes: Mapping[int, int], start: int, upto: int | None = None) -> tuple[list[Segment], int]:
    """The data segments of the chain from ``start`` through ``sizes`` and the id where it ends."""
    segments: list[Segment] = []
    at = start
    while at in sizes and (upto is None or at <= upto):
        at = next_in_chain(at, sizes[at], segments)
    return segments, at


def first_writer_id(fence_id: int, highest: int) -> int:
    """The first WAL id a writer writes after an opener fenced the chain at ``fence_id`` with ``highest``
    the highest id seen: past the fence's window and every object listed (rule 3)."""
    return max(fence_id + WAL_FENCE_WINDOW, highest + 1)


def is_data(size: int) -> bool:
    """Whether a WAL object of ``size`` bytes is a WAL SST (not a fence of either kind)."""
    return wal_object_kind(size) is WalObjectKind.DATA


def next_in_chain(at: int, size: int, segments: list[Segment]) -> int:
    """The chain's next id after the object of ``size`` bytes at ``at``; data is appended to ``segments``."""
    kind = wal_object_kind(size)
    if kind is WalObjectKind.WINDOW_FENCE:
        return at + WAL_FENCE_WINDOW
    if kind is WalObjectKind.DATA:
        segments.append((at, size))
    return at + 1


__all__ = ["ChainWalk", "Segment", "first_writer_id", "is_data", "next_in_chain", "walk_chain", "walk_from"]
