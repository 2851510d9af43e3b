"""A database's history: the manifest versions still stored, each with what it changed.

Every commit to a database writes a new manifest version, so comparing each stored version with the
one before it tells what happened: an L0 flush, a compaction, a checkpoint or tag added or removed,
a new writer or compactor (fencing the previous one), a rollback, the initialisation of a clone,
split shard or merge, a destroy. Modelled on Delta Lake's ``DESCRIBE HISTORY`` and Iceberg's
snapshot listing, but derived from the manifests themselves: nothing extra is written. GC deletes old
versions (keeping the latest), so the history starts at the oldest version still stored.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypeVar

from slate_ops.admin.checkpoints import TAG_PREFIX
from slate_ops.clock import render_utc
from slate_ops.errors import CorruptObjectError, InvalidArgumentError, ObjectNotFoundError
from slate_ops.manifest.model import Checkpoint, ExternalDb, Manifest, WriterCheckpoint
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore.base import ObjectStore

# The kinds of change, in the order a row lists them.
CREATE = "create"
CLONE = "clone"
SPLIT = "split"
MERGE = "merge"
OLDEST = "oldest stored"
INITIALIZED = "initialized"
DESTROY = "destroy"
ROLLBACK = "rollback"
COMPACTION = "compaction"
L0_FLUSH = "l0 flush"
NEW_WRITER = "new writer"
NEW_COMPACTOR = "new compactor"
TAG_ADDED = "tag added"
TAG_REMOVED = "tag removed"
CHECKPOINT_ADDED = "checkpoint added"
CHECKPOINT_REMOVED = "checkpoint removed"
CHECKPOINT_REFRESHED = "checkpoint refreshed"
WRITER_CHECKPOINT = "writer checkpoint"
EXTERNAL_DETACHED = "external detached"
WAL = "wal"
UNREADABLE = "unreadable"
OTHER = "other"


@dataclass(frozen=True)
class ManifestChange:
    """One stored manifest version: its id, when it was written (the object's last-modified time),
    the kinds of change from the version before it, and one detail per change."""

    id: int
    time: datetime
    kinds: tuple[str, ...]
    details: tuple[str, ...]


def manifest_history(path: str, store: ObjectStore, *, limit: int | None = None) -> list[ManifestChange]:
    """The stored manifest versions of the database at ``path``, newest first, each compared with the
    version stored before it (:func:`changes`). ``limit`` keeps the newest ``limit`` versions.

    Reads every stored version (one LIST and one GET each; with ``limit``, ``limit + 1`` GETs). A
    version GC deletes while this runs is skipped; an unreadable one is listed as ``unreadable`` and
    the next one is compared with the last version that could be read.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InvalidArgumentError(f"limit must be an int >= 1 or None, got {limit!r}")
    manifests = ManifestStore(store, path)
    manifests.read_latest_required()
    files = manifests.list()
    if limit is not None:
        files = files[-(limit + 1) :]
    rows: list[ManifestChange] = []
    read: dict[int, Manifest] = {}
    previous: tuple[int, Manifest] | None = None
    for file in files:
        try:
            current = manifests.read(file.id).value
        except ObjectNotFoundError:
            continue  # deleted by GC since the LIST
        except CorruptObjectError as error:
            rows.append(ManifestChange(file.id, file.meta.last_modified, (UNREADABLE,), (str(error),)))
            continue
        kinds, details = changes(previous, file.id, current, read)
        rows.append(ManifestChange(file.id, file.meta.last_modified, tuple(kinds), tuple(details)))
        read[file.id] = current
        previous = (file.id, current)
    rows.reverse()  # newest first; with a limit, the extra oldest version was read only to compare
    return rows[:limit] if limit is not None else rows


def changes(
    previous: tuple[int, Manifest] | None,
    manifest_id: int,
    current: Manifest,
    known: Mapping[int, Manifest] | None = None,
) -> tuple[list[str], list[str]]:
    """What manifest ``manifest_id`` changed from ``previous`` (its id and manifest; None for the
    oldest stored version): the kinds of change and one detail per kind. ``known`` (other versions
    by id) lets a rollback name its tag. Pure."""
    if previous is None:
        return _first(manifest_id, current)
    before_id, before = previous
    kinds: list[str] = []
    details: list[str] = []

    def add(kind: str, detail: str) -> None:
        kinds.append(kind)
        details.append(detail)

    if not before.initialized and current.initialized:
        add(INITIALIZED, f"{_init_kind(current)} finished: {_reads(current.external_dbs)}")
    destroyed = before.destroyed_at_s is None and current.destroyed_at_s is not None
    if current.destroyed_at_s is not None and destroyed:
        add(DESTROY, f"destroyed at {_iso(current.destroyed_at_s)}; writer and compactor fenced")
    lsm_changed = (before.l0, before.compacted) != (current.l0, current.compacted)
    rolled_back = lsm_changed and current.compactor_epoch > before.compactor_epoch
    if rolled_back:
        add(ROLLBACK, _rollback_detail(before, current, known or {}))
    elif lsm_changed:
        for kind, detail in _lsm_changes(before, current):
            add(kind, detail)
    if current.writer_epoch > before.writer_epoch and not destroyed:
        fenced = (
            f"writer epoch {before.writer_epoch} -> {current.writer_epoch}: the previous writer is fenced"
        )
        add(NEW_WRITER, fenced)
    if current.compactor_epoch > before.compactor_epoch and not (rolled_back or destroyed):
        add(NEW_COMPACTOR, f"compactor epoch {before.compactor_epoch} -> {current.compactor_epoch}")
    for kind, detail in _checkpoint_changes(before.checkpoints, current.checkpoints):
        add(kind, detail)
    if not rolled_back:
        kept = {e.path for e in current.external_dbs}
        gone = [e.path for e in before.external_dbs if e.path not in kept]
        if gone:
            add(EXTERNAL_DETACHED, f"no longer reads the SSTs of {', '.join(gone)}")
    if not kinds:
        if _wal_fields(before) != _wal_fields(current):
            wal = (
                f"WAL ids: replayed after {current.replay_after_wal_id}, last seen "
                f"{current.wal_id_last_seen}, next {current.next_wal_sst_id}"
            )
            add(WAL, wal)
        elif before == current:
            add(OTHER, "no change")
        else:
            add(OTHER, "other fields changed")
    if before_id != manifest_id - 1:
        add(OTHER, f"compared with manifest {before_id}: the versions in between are not stored")
    return kinds, details


def _first(manifest_id: int, current: Manifest) -> tuple[list[str], list[str]]:
    if manifest_id != 1:
        return [OLDEST], [
            f"the oldest version still stored (GC deleted the ones before it): {_state(current)}"
        ]
    if current.initialized:
        return [CREATE], [f"database created: {_state(current)}"]
    kind = _init_kind(current)
    key_range = "" if current.visible_range is None else f", key range {current.visible_range}"
    return [kind], [f"{kind} started (not initialized yet){key_range}: {_reads(current.external_dbs)}"]


def _init_kind(manifest: Manifest) -> str:
    """Which operation wrote this first manifest: a merge (a union: epochs start at 0), a split
    shard (a projected clone: a fresh WAL and a key range), else a clone (the parent's WAL state and
    writer epoch + 1). A clone of a shard that never had a WAL reads as a split."""
    if manifest.writer_epoch == 0 and manifest.external_dbs:
        return MERGE
    if manifest.visible_range is not None and manifest.next_wal_sst_id == 1:
        return SPLIT
    return CLONE


def _reads(external_dbs: Iterable[ExternalDb]) -> str:
    paths = list(dict.fromkeys(e.path for e in external_dbs))
    return f"reads the SSTs of {', '.join(paths)}" if paths else "reads no other database"


def _state(manifest: Manifest) -> str:
    return (
        f"{len(manifest.l0)} L0 view(s), {len(manifest.compacted)} sorted run(s), "
        f"{len(manifest.checkpoints)} checkpoint(s)"
    )


def _wal_fields(manifest: Manifest) -> tuple[int, int, int, int]:
    return (
        manifest.replay_after_wal_id,
        manifest.wal_id_last_seen,
        manifest.next_wal_sst_id,
        manifest.last_l0_seq,
    )


def _lsm_changes(before: Manifest, current: Manifest) -> list[tuple[str, str]]:
    """An L0 flush adds L0 views; a compaction removes L0 views or sorted runs and writes a run."""
    added, removed = l0_delta(before.l0, current.l0)
    found: list[tuple[str, str]] = []
    if removed or before.compacted != current.compacted:
        found.append(
            compaction_change(
                len(removed),
                {r.id: r for r in before.compacted},
                [(r.id, r, len(r.views)) for r in current.compacted],
            )
        )
    if added:
        sizes = {s.id: s.info for s in current.ssts}
        size = sum(sizes[v.sst_id].size_bytes for v in added if v.sst_id in sizes)
        entries = sum(sizes[v.sst_id].num_entries for v in added if v.sst_id in sizes)
        found.append(l0_flush_change(len(added), size, current.replay_after_wal_id, entries))
    return found


class _View(Protocol):
    @property
    def view_id(self) -> Hashable: ...


V = TypeVar("V", bound=_View)


def l0_delta(before: Sequence[V], current: Sequence[V]) -> tuple[list[V], list[V]]:
    """The L0 views ``current`` added and the ones it removed since ``before``, by view id."""
    before_ids = {v.view_id for v in before}
    current_ids = {v.view_id for v in current}
    return [v for v in current if v.view_id not in before_ids], [
        v for v in before if v.view_id not in current_ids
    ]


def compaction_change(
    removed_l0: int, before_runs: Mapping[int, object], current_runs: Sequence[tuple[int, object, int]]
) -> tuple[str, str]:
    """The ``compaction`` row of a version that removed ``removed_l0`` L0 views or changed sorted
    runs: ``before_runs`` by id (any comparable content), ``current_runs`` as (id, content, SST
    count), newest first (both engines' history)."""
    inputs = [f"{removed_l0} L0 view(s)"] if removed_l0 else []
    gone = sorted(set(before_runs) - {run_id for run_id, _, _ in current_runs})
    if gone:
        inputs.append(f"sorted run(s) {', '.join(map(str, gone))}")
    written = [  # new or rewritten runs
        (run_id, ssts)
        for run_id, content, ssts in current_runs
        if run_id not in before_runs or before_runs[run_id] != content
    ]
    outputs = [f"run {run_id} ({ssts} SST(s))" for run_id, ssts in written] or ["nothing (all dropped)"]
    return COMPACTION, f"{' and '.join(inputs) or 'sorted runs'} -> {', '.join(outputs)}"


def l0_flush_change(
    added: int, size: int, replay_after_wal_id: int, entries: int | None = None
) -> tuple[str, str]:
    """The ``l0 flush`` row of a version that added ``added`` L0 SSTs (``entries`` None: unknown)."""
    counted = "" if entries is None else f"{entries} entries, "
    return L0_FLUSH, f"+{added} L0 SST(s), {counted}{size} bytes; WAL replayed after {replay_after_wal_id}"


def _rollback_detail(before: Manifest, current: Manifest, known: Mapping[int, Manifest]) -> str:
    """A rollback restores the tagged manifest's sorted runs and L0 views (plus, first, one new L0
    SST of the tag's WAL-only writes); the tag is named when its manifest is among ``known``."""
    view_ids = {v.view_id for v in current.l0}
    tags = [
        _tag_name(c)
        for c in current.checkpoints
        if _is_tag(c)
        and (tagged := known.get(c.manifest_id)) is not None
        and tagged.compacted == current.compacted
        and {v.view_id for v in tagged.l0} <= view_ids
    ]
    state = f"the state of tag {' or '.join(tags)}" if tags else "a tag's state"
    return (
        f"L0 and sorted runs replaced by {state}: {len(before.l0)} -> {len(current.l0)} L0 view(s), "
        f"{len(before.compacted)} -> {len(current.compacted)} sorted run(s); compactor epoch "
        f"{before.compactor_epoch} -> {current.compactor_epoch}"
    )


def _tag_name(checkpoint: Checkpoint) -> str:
    return (checkpoint.name or "")[len(TAG_PREFIX) :]


def _is_tag(checkpoint: Checkpoint) -> bool:
    return checkpoint.name is not None and checkpoint.name.startswith(TAG_PREFIX)


def _checkpoint_changes(before: Iterable[Checkpoint], current: Iterable[Checkpoint]) -> list[tuple[str, str]]:
    """Tags and checkpoints added, removed or refreshed; the writer's own checkpoints (which a writer
    adds when it opens, moves with each L0 flush and removes when it closes) as one change."""
    old = {c.id: c for c in before}
    new = {c.id: c for c in current}
    found: list[tuple[str, str]] = []
    writer_added: list[Checkpoint] = []
    writer_removed: list[Checkpoint] = []
    for checkpoint in new.values():
        if checkpoint.id not in old:
            if _is_writers(checkpoint):
                writer_added.append(checkpoint)
                continue
            kind = TAG_ADDED if _is_tag(checkpoint) else CHECKPOINT_ADDED
            found.append((kind, _describe(checkpoint)))
        elif old[checkpoint.id].expires_at != checkpoint.expires_at:
            found.append((CHECKPOINT_REFRESHED, _describe(checkpoint)))
    for checkpoint in old.values():
        if checkpoint.id not in new:
            if _is_writers(checkpoint):
                writer_removed.append(checkpoint)
                continue
            kind = TAG_REMOVED if _is_tag(checkpoint) else CHECKPOINT_REMOVED
            found.append((kind, _describe(checkpoint)))
    if writer_added or writer_removed:
        found.append((WRITER_CHECKPOINT, _writer_detail(writer_added, writer_removed)))
    return found


def _writer_detail(added: list[Checkpoint], removed: list[Checkpoint]) -> str:
    if len(added) == 1 and len(removed) == 1:
        return f"moved from manifest {removed[0].manifest_id} to {added[0].manifest_id} ({added[0].id})"
    parts = [f"added at manifest {c.manifest_id} ({c.id})" for c in added]
    parts += [f"removed (was at manifest {c.manifest_id}, {c.id})" for c in removed]
    return ", ".join(parts)


def _is_writers(checkpoint: Checkpoint) -> bool:
    return isinstance(checkpoint.metadata, WriterCheckpoint)


def _describe(checkpoint: Checkpoint) -> str:
    if _is_tag(checkpoint):
        return f"tag {_tag_name(checkpoint)} ({checkpoint.id}, manifest {checkpoint.manifest_id})"
    name = "" if checkpoint.name is None else f" {checkpoint.name}"
    expires = checkpoint.expires_at
    expiry = "never expires" if expires is None else f"expires {_iso(expires)}"
    return f"checkpoint{name} {checkpoint.id} (manifest {checkpoint.manifest_id}, {expiry})"


def _iso(unix_s: float) -> str:
    return render_utc(unix_s)


__all__ = [
    "ManifestChange",
    "changes",
    "compaction_change",
    "l0_delta",
    "l0_flush_change",
    "manifest_history",
]
