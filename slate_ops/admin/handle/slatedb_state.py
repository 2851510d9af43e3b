"""The state of a SlateDB database in slate_ops' report types: :func:`detail` (``DbDetail``),
:func:`shape` (``LsmShape``) and :func:`history` (``ManifestChange`` rows), all from SlateDB's
manifests as the binding reads them (docs/design/slatedb-engine.md, "Capability table").

What SlateDB's manifest does not carry is reported as such: an SST's entry count is not in
SlateDB's ``SsTableInfo`` (``num_entries`` is 0), and a database-wide key range does not exist in
SlateDB (a projection narrows each SST view), so ``DbDetail.visible_range`` is the bounding range
of the views when every view is projected (a split shard), else None.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from slate_ops.admin import history as kinds
from slate_ops.admin.checkpoints import TAG_PREFIX
from slate_ops.admin.db import DbDetail, SstCounts
from slate_ops.admin.history import ManifestChange
from slate_ops.admin.shape import LsmShape, RunSummary, SstSummary
from slate_ops.clock import render_utc
from slate_ops.engines.slatedb.views import CheckpointView, ManifestView, SstView
from slate_ops.errors import InvalidArgumentError
from slate_ops.layout import MANIFEST_DIR, own_directory, parse_own_manifest_key
from slate_ops.manifest.model import KeyRange

if TYPE_CHECKING:
    from slate_ops.admin.handle.slatedb_handle import SlateDbHandle

__all__ = ["detail", "history", "projected_range", "shape"]


def projected_range(m: ManifestView) -> KeyRange | None:
    """The bounding range of the views' projections when every view is projected (a shard of a
    split, a merge of shards), else None (every key), in slate_ops' convention: start inclusive,
    end exclusive, None open. SlateDB records a projection intersected with each SST's own range,
    an open side as the SST's first or last entry: a bound set by such a view is reported open, so
    a split's first shard has an open start and its last shard an open end, as ours do."""
    views = m.views()
    if not views or any(v.visible_start is None and v.visible_end is None for v in views):
        return None
    start = end = None
    if all(v.visible_start is not None for v in views):
        start = min(v.visible_start for v in views if v.visible_start is not None)
        if any(v.visible_start == start and not v.bounds_start() for v in views):
            start = None
    if all(v.visible_end is not None for v in views):
        end = max(v.visible_end for v in views if v.visible_end is not None)
        if any(v.visible_end == end and not v.bounds_end() for v in views):
            end = None
    return KeyRange(start, end)


def detail(handle: SlateDbHandle) -> DbDetail:
    """:class:`DbDetail` from one manifest read: views and SST objects told apart; an SST object is
    external when an ``ExternalDb`` of the manifest lists it (a clone's parent, a shard's source)."""
    m = handle.current_manifest()
    status = handle.status_of(m)
    external_ids = {s for e in m.external_dbs for s in e.sst_ids}
    sizes = m.sst_sizes()
    external = {k: n for k, n in sizes.items() if k in external_ids}
    counts = SstCounts(
        l0_views=len(m.l0),
        sorted_runs=len(m.sorted_runs),
        sorted_run_views=sum(len(r.ssts) for r in m.sorted_runs),
        sst_objects=len(sizes),
        own_ssts=len(sizes) - len(external),
        external_ssts=len(external),
        own_sst_bytes=sum(sizes.values()) - sum(external.values()),
        external_sst_bytes=sum(external.values()),
    )
    return DbDetail(status, counts, projected_range(m))


def _summary(v: SstView) -> SstSummary:
    return SstSummary(v.sst_id, v.first_key or b"", v.last_key or b"", v.size, 0)


def shape_of(m: ManifestView) -> LsmShape:
    """L0 (newest first, as SlateDB orders it) and sorted runs (newest first) of ``m``: key ranges
    from SlateDB's SST first/last entries (narrowed by a projection), sizes SlateDB's estimates,
    ``num_entries`` 0 (not in SlateDB's manifest)."""
    runs = tuple(
        RunSummary(
            id=r.id,
            ssts=len(r.ssts),
            first_key=r.ssts[0].first_key if r.ssts else None,
            last_key=r.ssts[-1].last_key if r.ssts else None,
            size_bytes=sum(v.size for v in r.ssts),
            num_entries=0,
        )
        for r in m.sorted_runs
    )
    return LsmShape(m.id, tuple(_summary(v) for v in m.l0), runs)


def shape(handle: SlateDbHandle) -> LsmShape:
    return shape_of(handle.current_manifest())


# --- history ----------------------------------------------------------------------------------


def history(handle: SlateDbHandle, limit: int | None = None) -> list[ManifestChange]:
    """Every manifest version SlateDB's GC kept, newest first, each compared with the version
    stored before it, in the kinds slate_ops' history uses (``create``, ``clone``, ``oldest
    stored``, ``initialized``, ``l0 flush``, ``compaction``, ``new writer``, ``new compactor``,
    ``tag added``/``removed``, ``checkpoint added``/``removed``/``refreshed``, ``external
    detached``, ``wal``, ``other``). Reads the manifests through the binding's ``list_manifests``
    (with ``limit``: only the newest ``limit + 1``) and their times from one LIST of
    ``manifest/``."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InvalidArgumentError(f"limit must be an int >= 1 or None, got {limit!r}")
    latest = handle.current_manifest()
    start = None if limit is None else max(1, latest.id - limit)
    manifests = handle.db.list_manifests(start, None)
    times = _manifest_times(handle)
    rows: list[ManifestChange] = []
    previous: ManifestView | None = None
    for m in manifests:
        found = _changes(previous, m)
        when = times.get(m.id, datetime.fromtimestamp(0, tz=UTC))
        rows.append(ManifestChange(m.id, when, tuple(k for k, _ in found), tuple(d for _, d in found)))
        previous = m
    rows.reverse()
    return rows[:limit] if limit is not None else rows


def _manifest_times(handle: SlateDbHandle) -> dict[int, datetime]:
    times: dict[int, datetime] = {}
    for meta in handle.store.list(own_directory(handle.path, MANIFEST_DIR)):
        manifest_id = parse_own_manifest_key(handle.path, meta.key)
        if manifest_id is not None:
            times[manifest_id] = meta.last_modified
    return times


def _state(m: ManifestView) -> str:
    return f"{len(m.l0)} L0 view(s), {len(m.sorted_runs)} sorted run(s), {len(m.checkpoints)} checkpoint(s)"


def _changes(before: ManifestView | None, m: ManifestView) -> list[tuple[str, str]]:
    if before is None:
        if m.id != 1:
            oldest = f"the oldest version still stored (GC deleted the ones before it): {_state(m)}"
            return [(kinds.OLDEST, oldest)]
        if m.external_dbs:
            paths = ", ".join(dict.fromkeys(e.path for e in m.external_dbs))
            started = "" if m.initialized else " started (not initialized yet)"
            return [(kinds.CLONE, f"clone{started}: reads the SSTs of {paths}")]
        return [(kinds.CREATE, f"database created: {_state(m)}")]
    found: list[tuple[str, str]] = []
    if not before.initialized and m.initialized:
        found.append((kinds.INITIALIZED, "clone finished"))
    found += _lsm_changes(before, m)
    if m.writer_epoch > before.writer_epoch:
        found.append(
            (
                kinds.NEW_WRITER,
                f"writer epoch {before.writer_epoch} -> {m.writer_epoch}: the previous writer is fenced",
            )
        )
    if m.compactor_epoch > before.compactor_epoch:
        epochs = f"compactor epoch {before.compactor_epoch} -> {m.compactor_epoch}"
        found.append((kinds.NEW_COMPACTOR, epochs))
    found += _checkpoint_changes(before.checkpoints, m.checkpoints)
    kept = {e.path for e in m.external_dbs}
    gone = [e.path for e in before.external_dbs if e.path not in kept]
    if gone:
        found.append((kinds.EXTERNAL_DETACHED, f"no longer reads the SSTs of {', '.join(gone)}"))
    if not found:
        wal = (before.replay_after_wal_id, before.next_wal_sst_id, before.last_l0_seq)
        if wal != (m.replay_after_wal_id, m.next_wal_sst_id, m.last_l0_seq):
            found.append(
                (kinds.WAL, f"WAL ids: replayed after {m.replay_after_wal_id}, next {m.next_wal_sst_id}")
            )
        else:
            found.append((kinds.OTHER, "no change slate_ops can see in SlateDB's manifest"))
    if before.id != m.id - 1:
        gap = f"compared with manifest {before.id}: the versions in between are not stored"
        found.append((kinds.OTHER, gap))
    return found


def _lsm_changes(before: ManifestView, m: ManifestView) -> list[tuple[str, str]]:
    """A compaction removes L0 views or rewrites sorted runs; an L0 flush adds L0 views."""
    added, removed = kinds.l0_delta(before.l0, m.l0)
    found: list[tuple[str, str]] = []
    before_runs = {r.id: tuple(v.view_id for v in r.ssts) for r in before.sorted_runs}
    now_runs = {r.id: tuple(v.view_id for v in r.ssts) for r in m.sorted_runs}
    if removed or before_runs != now_runs:
        current = [(r.id, now_runs[r.id], len(r.ssts)) for r in m.sorted_runs]
        found.append(kinds.compaction_change(len(removed), before_runs, current))
    if added:
        found.append(kinds.l0_flush_change(len(added), sum(v.size for v in added), m.replay_after_wal_id))
    return found


def _is_tag(c: CheckpointView) -> bool:
    return c.name is not None and c.name.startswith(TAG_PREFIX)


def _describe(c: CheckpointView) -> str:
    if _is_tag(c):
        assert c.name is not None
        return f"tag {c.name[len(TAG_PREFIX) :]} ({c.id}, manifest {c.manifest_id})"
    name = "" if c.name is None else f" {c.name}"
    expiry = "never expires" if c.expire_time_s is None else f"expires {render_utc(c.expire_time_s)}"
    return f"checkpoint{name} {c.id} (manifest {c.manifest_id}, {expiry})"


def _checkpoint_changes(
    before: tuple[CheckpointView, ...], now: tuple[CheckpointView, ...]
) -> list[tuple[str, str]]:
    old = {c.id: c for c in before}
    new = {c.id: c for c in now}
    found: list[tuple[str, str]] = []
    for c in now:
        if c.id not in old:
            found.append((kinds.TAG_ADDED if _is_tag(c) else kinds.CHECKPOINT_ADDED, _describe(c)))
        elif old[c.id].expire_time_s != c.expire_time_s:
            found.append((kinds.CHECKPOINT_REFRESHED, _describe(c)))
    for c in before:
        if c.id not in new:
            found.append((kinds.TAG_REMOVED if _is_tag(c) else kinds.CHECKPOINT_REMOVED, _describe(c)))
    return found
