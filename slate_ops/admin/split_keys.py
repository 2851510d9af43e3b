"""Split keys: cut a database's key space into ranges of about equal stored bytes.

The weights come from SST block indexes only: each block contributes its stored (compressed) size
at its first key. Opening an SST reads its tail (footer, index, bloom filter) in one ranged GET;
data blocks are never fetched. A view narrowed to a ``visible_range`` contributes only its blocks
that overlap that range, and a projected database (``Manifest.visible_range``) only its blocks
inside that range. Used by :func:`slate_ops.spark.read_db` to plan one Spark partition per range.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from slate_ops.errors import InvalidArgumentError
from slate_ops.keytext import render_bytes
from slate_ops.manifest.checkpoints import live_checkpoint
from slate_ops.manifest.model import KeyRange, Manifest, SstView, resolve_sst_path
from slate_ops.manifest.store import ManifestStore, VersionedManifest, require_not_destroyed, require_usable
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime
from slate_ops.sst import SstReader

BlockWeight = tuple[bytes, int]
"""``(first key, stored bytes)`` of one SST block (or of the visible part of one)."""

OPEN_THREADS = 16
"""SST footers are read concurrently (one GET each) by at most this many threads."""


def check_count(n: object, what: str = "n") -> int:
    """``n`` if it is an int >= 1, else :class:`InvalidArgumentError`."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidArgumentError(f"{what} must be an int >= 1, got {n!r}")
    return n


def clip_range(outer: KeyRange | None, inner: KeyRange | None) -> KeyRange | None:
    """The intersection of two optional ranges (None means unbounded); may be empty."""
    if outer is None:
        return inner
    return outer if inner is None else outer.intersect(inner)


def visible_blocks(
    blocks: Sequence[BlockWeight], last_key: bytes, visible: KeyRange | None
) -> list[BlockWeight]:
    """The blocks of one SST (``last_key`` is the SST's) that may hold keys of ``visible``.

    A block is taken to span ``[its first key, the next block's first key)`` (the last block: up
    to ``last_key`` inclusive), exact when keys do not repeat across blocks (L0 and sorted-run SSTs
    hold one version per key). A block straddling ``visible.start`` counts whole, at that key.
    """
    if visible is None or (visible.start is None and visible.end is None):
        return list(blocks)
    start, end = visible.start, visible.end
    kept: list[BlockWeight] = []
    for i, (first, size) in enumerate(blocks):
        if end is not None and first >= end:
            break
        if start is not None:
            below = blocks[i + 1][0] <= start if i + 1 < len(blocks) else last_key < start
            if below:
                continue
        kept.append((first if start is None else max(first, start), size))
    return kept


def manifest_blocks(
    path: str, store: ObjectStore, manifest: Manifest, *, clock: Runtime = SYSTEM_RUNTIME
) -> list[BlockWeight]:
    """The visible block weights of every L0 view and sorted-run view of ``manifest``, unsorted
    (the SSTs opened on ``clock``'s executor)."""
    ssts = {s.id: s for s in manifest.ssts}
    views = _visible_views(manifest)
    bounds = manifest.visible_range

    def one(view: SstView) -> list[BlockWeight]:
        sst = ssts[view.sst_id]
        key = resolve_sst_path(manifest, path, sst)
        reader = SstReader.open(store, key, size=sst.info.size_bytes)
        visible = clip_range(bounds, view.visible_range)
        return visible_blocks(reader.block_sizes(), sst.info.last_key, visible)

    if not views:
        return []
    with clock.executor(min(OPEN_THREADS, len(views)), "slate-ops-split-keys") as pool:
        return [block for blocks in pool.map(one, views) for block in blocks]


def split_points(blocks: Iterable[BlockWeight], n: int) -> list[bytes]:
    """At most ``n - 1`` strictly increasing keys cutting ``blocks`` into ``n`` parts of about equal bytes.

    Pure. Each cut falls on a block's first key, at the block boundary nearest to ``k / n`` of the
    total; fewer keys come back when single blocks outweigh ``1 / n`` of the total (two targets
    fall on the same boundary) and none for no blocks or ``n == 1``. A cut never precedes the
    smallest key, so no range is empty by construction.
    """
    n = check_count(n)
    merged: dict[bytes, int] = {}
    for key, size in blocks:
        merged[key] = merged.get(key, 0) + size
    ordered = sorted(merged.items())
    total = sum(size for _, size in ordered)
    cuts: list[bytes] = []
    if n == 1 or total <= 0:
        return cuts
    k = 1
    before = 0
    for j, (key, size) in enumerate(ordered):
        # Target k * total / n lies before this block's midpoint: the nearest boundary is its start.
        while k < n and 2 * k * total <= n * (2 * before + size):
            if j > 0 and (not cuts or cuts[-1] != key):
                cuts.append(key)
            k += 1
        before += size
    return cuts


def balanced_ranges(
    blocks: Iterable[BlockWeight], n: int, *, bounds: KeyRange | None = None
) -> list[KeyRange]:
    """Contiguous ranges covering ``bounds`` (default: every key), cut by :func:`split_points`.

    Pure. At most ``n`` ranges, at least one (a single range when there are no blocks); cuts
    outside ``bounds`` are dropped. The ranges are half-open and in key order, as read_db expects.
    """
    cuts = split_points(blocks, n)
    start = None if bounds is None else bounds.start
    end = None if bounds is None else bounds.end
    inside = [c for c in cuts if (start is None or c > start) and (end is None or c < end)]
    edges: list[bytes | None] = [start, *inside, end]
    return [KeyRange(edges[i], edges[i + 1]) for i in range(len(edges) - 1)]


def manifest_at(
    path: str, store: ObjectStore, checkpoint: uuid.UUID | None = None, *, clock: Runtime = SYSTEM_RUNTIME
) -> VersionedManifest:
    """The current manifest, or the one ``checkpoint`` pins (a missing or expired one is refused)."""
    manifests = ManifestStore(store, path)
    latest = manifests.read_latest_required()
    if checkpoint is None:
        require_usable(latest.value, manifests.location)
        return latest
    require_not_destroyed(latest.value, manifests.location)
    pinned = live_checkpoint(latest.value, checkpoint, clock.now(), manifests.location)
    return manifests.read(pinned.manifest_id)


def suggest_split_keys(
    path: str,
    store: ObjectStore,
    n: int,
    *,
    checkpoint: uuid.UUID | None = None,
    clock: Runtime = SYSTEM_RUNTIME,
) -> list[bytes]:
    """At most ``n - 1`` keys that cut the database into ``n`` ranges of about equal stored bytes.

    Weighs the L0 and sorted-run SSTs of the current manifest (or of ``checkpoint``'s) by their
    block indexes (one GET of each SST's tail; no data block is read). The WAL is not weighed.
    Range ``i`` is ``[keys[i-1], keys[i])``. An empty database gives ``[]``; so does ``n == 1``.
    ``n < 1`` raises :class:`InvalidArgumentError`; a missing or expired checkpoint raises
    :class:`CheckpointNotFoundError` / :class:`CheckpointExpiredError`.
    """
    return explain_split_keys(path, store, n, checkpoint=checkpoint, clock=clock).keys


@dataclass(frozen=True)
class SplitSuggestion:
    """:func:`suggest_split_keys`'s keys, and ``reason``: why there are fewer than the ``n - 1`` asked
    for (none, or some), None when there are ``n - 1``."""

    keys: list[bytes]
    reason: str | None


def explain_split_keys(
    path: str,
    store: ObjectStore,
    n: int,
    *,
    checkpoint: uuid.UUID | None = None,
    clock: Runtime = SYSTEM_RUNTIME,
) -> SplitSuggestion:
    """:func:`suggest_split_keys`, with the reason of a short answer (:func:`empty_reason` for none,
    :func:`short_reason` for fewer than ``n - 1``)."""
    n = check_count(n)
    manifest = manifest_at(path, store, checkpoint, clock=clock).value
    blocks = manifest_blocks(path, store, manifest, clock=clock)
    ranges = balanced_ranges(blocks, n, bounds=manifest.visible_range)
    keys = [r.start for r in ranges[1:] if r.start is not None]
    if not keys:
        return SplitSuggestion(keys, empty_reason(manifest, blocks, n))
    return SplitSuggestion(keys, None if len(keys) == n - 1 else short_reason(manifest, blocks, n, len(keys)))


def short_reason(manifest: Manifest, blocks: Sequence[BlockWeight], n: int, found: int) -> str:
    """Why only ``found`` (>= 1) of the ``n - 1`` split keys asked for cut ``blocks`` into parts of about
    equal bytes: too few blocks (a key falls on a block boundary), or blocks too heavy."""
    entries, total, starts = _weighed(manifest, blocks)
    asked = f"{found} split key{'s' if found != 1 else ''} instead of the {n - 1} that -n {n} asks for"
    possible = len(starts) - 1
    if possible < n - 1:
        at_most = f"{possible} split key is" if possible == 1 else f"{possible} split keys are"
        return (
            f"{asked}: the database holds {entries} entries in only {len(starts)} blocks ({total} bytes) "
            f"and a split key falls on a block boundary, so at most {at_most} possible (split at keys of "
            "your choice with `split --at`)"
        )
    first, heaviest = max(blocks, key=lambda block: block[1])
    return (
        f"{asked}: of the {total} bytes in {len(starts)} blocks ({entries} entries), the block at "
        f"{render_bytes(first)} alone holds {heaviest} bytes, so some of the {n} parts of about equal "
        "bytes share a block boundary (split at keys of your choice with `split --at`)"
    )


def _visible_views(manifest: Manifest) -> list[SstView]:
    return [*manifest.l0, *(v for run in manifest.compacted for v in run.views)]


def _weighed(manifest: Manifest, blocks: Sequence[BlockWeight]) -> tuple[int, int, set[bytes]]:
    """What the reasons quote: the entries of ``manifest``'s visible SSTs, the bytes of ``blocks``
    and their distinct start keys."""
    infos = {s.id: s.info for s in manifest.ssts}
    entries = sum(infos[v.sst_id].num_entries for v in _visible_views(manifest) if v.sst_id in infos)
    return entries, sum(size for _, size in blocks), {key for key, _ in blocks}


def empty_reason(manifest: Manifest, blocks: Sequence[BlockWeight], n: int) -> str:
    """Why no split key cuts ``blocks`` (the visible block weights of ``manifest``) into ``n`` parts."""
    if n == 1:
        return "n is 1: a single shard needs no split key"
    if not _visible_views(manifest):
        return (
            "the database holds no SSTs, so there is nothing to weigh (writes still only in the WAL "
            "are not weighed: run `flush` first)"
        )
    if not blocks:
        return "none of the database's SST blocks lies inside its key range; nothing to split by size"
    entries, total, starts = _weighed(manifest, blocks)
    if len(starts) == 1:
        return (
            f"the database holds {entries} entries in one block ({total} bytes); a split key can only "
            "fall on a block boundary, so there is nothing to split by size (split at keys of your "
            "choice with `split --at`)"
        )
    first, heaviest = max(blocks, key=lambda block: block[1])
    return (
        f"no block boundary balances the {total} bytes of {len(starts)} blocks ({entries} entries) "
        f"into {n} parts: the block at {render_bytes(first)} alone holds {heaviest} bytes; split at "
        "keys of your choice with `split --at`"
    )


__all__ = [
    "BlockWeight",
    "SplitSuggestion",
    "balanced_ranges",
    "empty_reason",
    "explain_split_keys",
    "manifest_at",
    "manifest_blocks",
    "short_reason",
    "split_points",
    "suggest_split_keys",
    "visible_blocks",
]
