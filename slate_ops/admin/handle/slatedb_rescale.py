"""Clones, restore-to-new, split, merge and split keys of SlateDB databases, as SlateDB clones
(docs/design/slatedb-engine.md §4 and "Capability table").

* a clone or a restore is a single-source clone (SlateDB copies the WAL, so it works whatever the
  WAL holds); a split is one projection clone per shard and a merge one union clone, all at a
  checkpoint slate_ops takes first (``slate_ops/split:...``/``slate_ops/merge:...``, 15 minutes),
  so every shard reads the same state;
* slate_ops' checks run first and a refused call writes nothing: targets must be empty (a
  database, or foreign objects, is refused -- :class:`TargetNotEmptyError`) and must not nest with
  the sources; a checkpoint must be live; split keys strictly increasing, one fewer than targets;
  merge sources must not overlap (the bounding ranges of their SST views, as SlateDB's union
  compares them) and shards must be adjacent; a source with data in its WAL replay range is
  refused (:class:`SlateDbWalNotFlushedError`) unless ``flush_wal=True``;
* a target holding an unfinished SlateDB clone (``initialized`` false) is resumed, as SlateDB does.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

from slate_ops.admin.handle.slatedb_state import projected_range
from slate_ops.admin.rescale import (
    MERGE_CHECKPOINT_PREFIX,
    SOURCE_LIFETIME,
    SPLIT_CHECKPOINT_PREFIX,
    NewDatabase,
    RescaleReport,
    check_split_keys,
    shard_ranges,
)
from slate_ops.admin.split_keys import SplitSuggestion, check_count, split_points
from slate_ops.engines.slatedb.admin import CloneSource, SlateDbAdmin
from slate_ops.engines.slatedb.clones import flush_wal_to_l0, wal_data_ids
from slate_ops.engines.slatedb.views import ManifestView
from slate_ops.errors import (
    InvalidArgumentError,
    NonAdjacentSourcesError,
    OverlappingSourcesError,
    SlateDbWalNotFlushedError,
    SlateOpsError,
    TargetNotEmptyError,
)
from slate_ops.keytext import render_bytes
from slate_ops.layout import MANIFEST_DIR, normalize_db_path, own_directory
from slate_ops.manifest.model import KeyRange

if TYPE_CHECKING:
    from slate_ops.admin.db import DbStatus
    from slate_ops.admin.handle.slatedb_handle import SlateDbHandle

__all__ = [
    "clone_to",
    "explain_split_keys",
    "flush_wal",
    "merge_with",
    "restore_to_new",
    "split",
    "suggest_split_keys",
]


# --- checks -----------------------------------------------------------------------------------


def _check_paths(sources: Sequence[str], targets: Sequence[str]) -> list[str]:
    paths = [normalize_db_path(t) for t in targets]
    if len(set(paths)) != len(paths):
        raise InvalidArgumentError(f"target paths must be distinct, got {list(targets)}")
    everything = [*sources, *paths]
    if len(set(everything)) != len(everything):
        raise InvalidArgumentError(
            f"a new database needs its own path: {sorted(set(sources) & set(paths))} is a source"
        )
    for outer, inner in itertools.permutations(everything, 2):
        if outer == "" or inner.startswith(outer + "/"):
            raise InvalidArgumentError(
                f"database paths must not nest: {inner!r} is inside {outer!r} (destroying the outer "
                "one would delete the inner one's objects)"
            )
    return paths


def _require_empty(handle: SlateDbHandle, target: str) -> bool:
    """True when ``target`` holds nothing, False when it holds an unfinished SlateDB clone (to
    resume); else :class:`TargetNotEmptyError`."""
    keys = [m.key for m in handle.store.list(f"{target}/")]
    if not keys:
        return True
    location = f"{target} in {handle.store.url}"
    has_manifest = any(k.startswith(own_directory(target, MANIFEST_DIR)) for k in keys)
    if has_manifest:
        try:
            m = SlateDbAdmin(target, handle.store).read_manifest()
        except SlateOpsError:  # not a SlateDB manifest (ours, or foreign bytes): refuse below
            m = None
        if m is not None and not m.initialized:
            return False
    raise TargetNotEmptyError(location, sorted(keys), has_manifest)


def _require_no_wal_data(source: SlateDbHandle, flush: bool) -> None:
    """SlateDB's own check for projections and unions, made first (a refusal writes nothing);
    with ``flush`` the WAL is flushed to L0 instead (fences a running writer)."""
    m = source.current_manifest()
    ids = wal_data_ids(source.db, m)
    if not ids:
        return
    if not flush:
        raise SlateDbWalNotFlushedError(source.path, ids)
    flush_wal(source)


def flush_wal(handle: SlateDbHandle) -> None:
    """:func:`flush_wal_to_l0`; :class:`SlateDbWalNotFlushedError` if data WAL SSTs are left."""
    left = flush_wal_to_l0(handle.db).wal_left
    if left:
        raise SlateDbWalNotFlushedError(handle.path, list(left))


def _new_database(handle: SlateDbHandle, path: str, key_range: KeyRange | None = None) -> NewDatabase:
    """The report of a new database; its key range the one asked for (a shard), else the
    bounding range of its views (:func:`projected_range`, a merge)."""
    m = SlateDbAdmin(path, handle.store).read_manifest()
    assert m is not None
    sizes = m.sst_sizes()
    return NewDatabase(
        path,
        key_range or projected_range(m),
        m.id,
        len(m.l0),
        len(m.sorted_runs),
        len(sizes),
        sum(sizes.values()),
    )


# --- clone and restore --------------------------------------------------------------------------


def clone_to(handle: SlateDbHandle, target_path: str, checkpoint: uuid.UUID | None) -> DbStatus:
    """A SlateDB clone of this database at ``checkpoint`` (or its current state) at ``target_path``."""
    from slate_ops.admin.handle.slatedb_handle import SlateDbHandle

    (target,) = _check_paths([handle.path], [target_path])
    handle.current_manifest()  # the source exists
    if checkpoint is not None:
        handle.live_checkpoint(checkpoint)
    _require_empty(handle, target)
    SlateDbAdmin(target, handle.store).clone_from(
        [CloneSource(handle.path, None if checkpoint is None else str(checkpoint))]
    )
    return SlateDbHandle(target, handle.store, clock=handle.clock).describe()


def restore_to_new(
    handle: SlateDbHandle, target_path: str, checkpoint: uuid.UUID | None, tag: str | None
) -> DbStatus:
    """SlateDB cannot roll back in place: a restore is a clone at the tag's or the checkpoint's
    state at a new path."""
    from slate_ops.admin.handle.slatedb_tags import find_tag

    if tag is not None and checkpoint is not None:
        raise InvalidArgumentError("restore from a checkpoint or from a tag, not both")
    if tag is None and checkpoint is None:
        raise InvalidArgumentError("restore needs a checkpoint or a tag (the state to restore)")
    if tag is not None:
        checkpoint = find_tag(handle, tag).checkpoint_id
    return clone_to(handle, target_path, checkpoint)


# --- split and merge ----------------------------------------------------------------------------


def split(
    handle: SlateDbHandle, split_keys: Sequence[bytes], target_paths: Sequence[str], flush_wal: bool
) -> RescaleReport:
    """Shard ``i`` is a projection clone of ``[split_keys[i-1], split_keys[i])`` (the first and
    last open-ended), all at one checkpoint of the source."""
    started = handle.clock.monotonic()
    keys = list(split_keys)
    check_split_keys(keys, handle.location)
    if len(target_paths) != len(keys) + 1:
        raise InvalidArgumentError(
            f"{len(keys)} split key(s) make {len(keys) + 1} shards, but {len(target_paths)} target "
            "path(s) were given; nothing was written"
        )
    targets = _check_paths([handle.path], target_paths)
    source = handle.current_manifest()
    ranges = shard_ranges(projected_range(source) or KeyRange(), keys, handle.location)
    fresh = [_require_empty(handle, t) for t in targets]
    _require_no_wal_data(handle, flush_wal)
    cp, _ = handle.db.create_checkpoint(
        lifetime_s=SOURCE_LIFETIME.total_seconds(), name=SPLIT_CHECKPOINT_PREFIX + ",".join(targets)
    )
    for target, key_range in zip(targets, ranges, strict=True):
        shard = CloneSource(handle.path, cp, key_range.start, key_range.end)
        SlateDbAdmin(target, handle.store).clone_from([shard])
    notes = ["SlateDB projection clones; the source checkpoint expires in 15 minutes"]
    return RescaleReport(
        "split",
        [handle.path],
        {handle.path: cp},
        [_new_database(handle, t, r) for t, r in zip(targets, ranges, strict=True)],
        any(fresh),
        handle.clock.monotonic() - started,
        notes=notes,
    )


def _bounds(m: ManifestView) -> tuple[bytes | None, tuple[bytes, bool] | None]:
    """The bounding range of ``m``'s SST views as SlateDB's union compares them: the smallest
    first key, and the largest upper bound with whether it is inclusive (a last entry) or
    exclusive (a projection's end). None, None for a database without SSTs."""
    views = m.views()
    if not views:
        return None, None
    firsts = [v.visible_start if v.visible_start is not None else v.first_key for v in views]
    low = None if any(f is None for f in firsts) else min(f for f in firsts if f is not None)
    uppers: list[tuple[bytes, bool]] = []
    for v in views:
        if v.visible_end is not None:
            uppers.append((v.visible_end, False))
        elif v.last_key is not None:
            uppers.append((v.last_key, True))
        else:
            return low, None  # open-ended
    return low, max(uppers)


def merge_with(
    handle: SlateDbHandle, other_paths: Sequence[str], target_path: str, flush_wal: bool
) -> RescaleReport:
    """One union clone of this database and ``other_paths``, each at a checkpoint slate_ops takes."""
    from slate_ops.admin.handle.slatedb_handle import SlateDbHandle

    started = handle.clock.monotonic()
    sources = [handle, *(SlateDbHandle(p, handle.store, clock=handle.clock) for p in other_paths)]
    paths = [s.path for s in sources]
    if len(sources) < 2:
        raise InvalidArgumentError("a merge needs at least two source databases")
    (target,) = _check_paths(paths, [target_path])
    ranges = []
    for s in sources:
        low, high = _bounds(s.current_manifest())
        if (
            low is None
            and high is None
            and not s.current_manifest().l0
            and not s.current_manifest().sorted_runs
        ):
            continue  # no SSTs: contributes nothing, overlaps nothing
        ranges.append((low or b"", high, s))
    ranges.sort(key=lambda r: r[0])
    for (_, a_high, a), (b_low, _, b) in itertools.pairwise(ranges):
        if a_high is None or b_low < a_high[0] or (a_high[1] and b_low == a_high[0]):
            raise OverlappingSourcesError(
                f"merge sources {a.path} and {b.path} hold keys in a common range (from "
                f"{render_bytes(b_low)}); nothing was written. Merge only databases with disjoint key "
                "ranges (the shards of a split, or independently keyed databases)"
            )
        a_end = a_high[0] if not a_high[1] else None
        b_start = projected_range(b.current_manifest())
        if a_end is not None and b_start is not None and b_start.start is not None and b_start.start != a_end:
            raise NonAdjacentSourcesError(
                f"merge sources {a.path} (ends at {render_bytes(a_end)}) and {b.path} (starts at "
                f"{render_bytes(b_start.start)}) are shards with a gap between them; nothing was "
                "written. Merge a shard with its neighbours"
            )
    fresh = _require_empty(handle, target)
    for s in sources:
        _require_no_wal_data(s, flush_wal)
    checkpoints = {
        s.path: s.db.create_checkpoint(
            lifetime_s=SOURCE_LIFETIME.total_seconds(), name=MERGE_CHECKPOINT_PREFIX + target
        )[0]
        for s in sources
    }
    SlateDbAdmin(target, handle.store).clone_from([CloneSource(p, cp) for p, cp in checkpoints.items()])
    return RescaleReport(
        "merge",
        paths,
        checkpoints,
        [_new_database(handle, target)],
        fresh,
        handle.clock.monotonic() - started,
        notes=["a SlateDB union clone; the source checkpoints expire in 15 minutes"],
    )


# --- split keys ---------------------------------------------------------------------------------


def _manifest_at(handle: SlateDbHandle, checkpoint: uuid.UUID | None) -> ManifestView:
    if checkpoint is None:
        return handle.current_manifest()
    m = handle.db.read_manifest(handle.live_checkpoint(checkpoint).manifest_id)
    assert m is not None
    return m


def explain_split_keys(handle: SlateDbHandle, n: int, checkpoint: uuid.UUID | None) -> SplitSuggestion:
    """Up to ``n - 1`` keys cutting the database into ``n`` ranges of about equal bytes, from the
    manifest's SST views: each view weighs its estimated size at its first key (SlateDB's SST
    block index is not read, so the granularity is one SST). A short answer says why."""
    n = check_count(n)
    m = _manifest_at(handle, checkpoint)
    views = m.views()
    blocks = [(v.first_key, v.size) for v in views if v.first_key is not None]
    keys = split_points(blocks, n)
    whole = projected_range(m)
    if whole is not None:
        keys = [k for k in keys if whole.contains(k) and k != whole.start]
    if len(keys) == n - 1:
        return SplitSuggestion(keys, None)
    firsts = len({k for k, _ in blocks})
    if not blocks:
        reason = "the database has no SSTs (nothing flushed to L0 yet, or empty)"
    else:
        reason = (
            f"the manifest has {len(views)} SST view(s) with {firsts} distinct first key(s); on SlateDB "
            "split keys are cut at SST boundaries (the SST block index is not read), so at most that "
            "many ranges can be balanced. Compact the database into a sorted run of more SSTs for finer keys"
        )
    return SplitSuggestion(keys, reason)


def suggest_split_keys(handle: SlateDbHandle, n: int, checkpoint: uuid.UUID | None) -> list[bytes]:
    return explain_split_keys(handle, n, checkpoint).keys
