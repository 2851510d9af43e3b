"""Manifest projection and union (docs/design/rescaling.md, "Projection" and "Union"), as pure
functions.

:func:`project` restricts a manifest to a key range by narrowing SST views (``visible_range``);
:func:`union` combines manifests with disjoint key ranges into one. Neither touches a store:
:mod:`slate_ops.admin.rescale` turns them into split and merge operations (checkpoints, final
checkpoints, initialisation). Both only rewrite metadata; no SST is copied.

Two refinements of the spec text, documented in docs/design/rescaling.md:

* ``external_dbs[].sst_ids`` lists the SST ids *as this manifest knows them* (after a rename), and
  ``original_id`` names the file. With the spec's literal rule (the old id in ``sst_ids``) two
  sources that both own an SST ``X`` would both list ``X`` and path resolution would be ambiguous.
* sorted runs with the same id in several sources are merged into one run (the spec's "similarly
  sized SRs can be merged" optimisation, keyed by the ids projection preserves), so splitting and
  merging back restores the original LSM shape instead of stacking one run per shard.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from ulid import ULID

from slate_ops.errors import InvalidArgumentError, NonAdjacentSourcesError, OverlappingSourcesError
from slate_ops.manifest.model import (
    CompactedSst,
    ExternalDb,
    KeyRange,
    Manifest,
    SortedRun,
    SstInfo,
    SstView,
)
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime

UNBOUNDED = KeyRange()


def physical_range(info: SstInfo) -> KeyRange:
    """The half-open range of an SST's keys: ``[first_key, last_key + b"\\0")``."""
    return KeyRange(info.first_key, info.last_key + b"\x00")


def effective_range(info: SstInfo, view: SstView) -> KeyRange:
    """What a view can return: the SST's physical range intersected with the view's visible range."""
    physical = physical_range(info)
    return physical if view.visible_range is None else physical.intersect(view.visible_range)


def database_range(manifest: Manifest) -> KeyRange:
    """The keys ``manifest`` may hold (its ``visible_range``; all keys when it has none)."""
    return manifest.visible_range or UNBOUNDED


def data_range(manifest: Manifest) -> KeyRange | None:
    """The smallest range holding every key an L0 or sorted-run view can return, or None if none."""
    infos = {s.id: s.info for s in manifest.ssts}
    ranges = [effective_range(infos[v.sst_id], v) for v in _all_views(manifest)]
    ranges = [r for r in ranges if not r.is_empty()]
    if not ranges:
        return None
    start = min(r.start or b"" for r in ranges)
    ends = [r.end for r in ranges]
    end = None if None in ends else max(e for e in ends if e is not None)
    return KeyRange(start, end)


# --- projection ---------------------------------------------------------------------------------


def project(manifest: Manifest, key_range: KeyRange) -> Manifest:
    """``manifest`` restricted to ``key_range`` (docs/design/rescaling.md, "Projection").

    Each L0 view is narrowed on its own; a sorted-run view is first bounded by the next view's start
    (``[current_start, next_start)``). Views left empty are dropped, then runs left empty (the
    others keep their ids), then SSTs no view references, and their ids from ``external_dbs``
    (entries left with no SST are removed, so their checkpoints can be released). The manifest's own
    ``visible_range`` becomes its intersection with ``key_range``: it only ever narrows.
    """
    if key_range.is_empty():
        raise InvalidArgumentError(f"cannot project onto the empty range {key_range}")
    infos = {s.id: s.info for s in manifest.ssts}
    l0 = tuple(
        view
        for view in (
            _narrow(view, effective_range(infos[view.sst_id], view), key_range) for view in manifest.l0
        )
        if view is not None
    )
    runs = []
    for run in manifest.compacted:
        views = _project_run(run.views, infos, key_range)
        if views:
            runs.append(SortedRun(run.id, views))
    projected = manifest.with_changes(
        l0=l0, compacted=tuple(runs), visible_range=database_range(manifest).intersect(key_range)
    )
    return _prune_ssts(projected)


def _project_run(
    views: Sequence[SstView], infos: dict[ULID, SstInfo], key_range: KeyRange
) -> tuple[SstView, ...]:
    ranges = [effective_range(infos[v.sst_id], v) for v in views]
    out = []
    for i, (view, effective) in enumerate(zip(views, ranges, strict=True)):
        if i + 1 < len(ranges):
            # Bounded by the next view's start, so narrowed views never overlap within the run.
            effective = effective.intersect(KeyRange(None, ranges[i + 1].start or b""))
        narrowed = _narrow(view, effective, key_range)
        if narrowed is not None:
            out.append(narrowed)
    return tuple(out)


def _narrow(view: SstView, effective: KeyRange, key_range: KeyRange) -> SstView | None:
    visible = effective.intersect(key_range)
    return None if visible.is_empty() else replace(view, visible_range=visible)


def _prune_ssts(manifest: Manifest) -> Manifest:
    referenced = {v.sst_id for v in _all_views(manifest)}
    external_dbs = tuple(
        replace(e, sst_ids=ids)
        for e in manifest.external_dbs
        if (ids := tuple(i for i in e.sst_ids if i in referenced))
    )
    return manifest.with_changes(
        ssts=tuple(s for s in manifest.ssts if s.id in referenced), external_dbs=external_dbs
    )


def _all_views(manifest: Manifest) -> Iterable[SstView]:
    yield from manifest.l0
    for run in manifest.compacted:
        yield from run.views


# --- union --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UnionSource:
    """One input of :func:`union`: a database's manifest at its source checkpoint.

    ``source_checkpoint_id`` is the checkpoint on ``path`` that pins ``manifest``; ``key_range`` is
    the range the caller assigns to the source (None: derived from its data and ``visible_range``).
    """

    path: str
    manifest: Manifest
    source_checkpoint_id: uuid.UUID
    key_range: KeyRange | None = None


def source_range(source: UnionSource) -> KeyRange | None:
    """The keys ``source`` contributes: its data's range within its assigned or visible range."""
    data = data_range(source.manifest)
    if data is None:
        return None
    bound = source.key_range or database_range(source.manifest)
    narrowed = data.intersect(bound)
    return None if narrowed.is_empty() else narrowed


def check_disjoint(sources: Sequence[UnionSource]) -> list[UnionSource]:
    """The sources in key order; :class:`OverlappingSourcesError` if two share keys, and
    :class:`NonAdjacentSourcesError` if every source has a range (assigned or ``visible_range``)
    and they leave a gap."""
    data = [source_range(s) for s in sources]  # each source's data range, computed once
    ranged = sorted(
        ((r, s) for r, s in zip(data, sources, strict=True) if r is not None),
        key=lambda rs: rs[0].start or b"",
    )
    for i, (later_range, later) in enumerate(ranged):
        for earlier_range, earlier in ranged[:i]:
            if earlier_range.overlaps(later_range):
                _overlap(earlier, earlier_range, later, later_range)
    assigned = [(r, s) for s in sources if (r := _assigned_range(s)) is not None]
    if len(assigned) < len(sources):
        by_start = sorted(
            zip(data, sources, strict=True), key=lambda rs: b"" if rs[0] is None else rs[0].start or b""
        )
        return [s for _, s in by_start]
    assigned.sort(key=lambda rs: rs[0].start or b"")
    for (left_range, left), (right_range, right) in itertools.pairwise(assigned):
        right_start = right_range.start or b""
        if left_range.end is None or left_range.end > right_start:
            _overlap(left, left_range, right, right_range)
        if left_range.end != right_start:
            raise NonAdjacentSourcesError(
                f"merge sources {left.path!r} (range {left_range}) and {right.path!r} (range "
                f"{right_range}) leave the gap {KeyRange(left_range.end, right_range.start)}; merge "
                "neighbouring shards so the result has one contiguous range"
            )
    return [s for _, s in assigned]


def _assigned_range(source: UnionSource) -> KeyRange | None:
    return source.key_range or source.manifest.visible_range


def _overlap(first: UnionSource, first_range: KeyRange, second: UnionSource, second_range: KeyRange) -> None:
    raise OverlappingSourcesError(
        f"merge sources {first.path!r} (keys {first_range}) and {second.path!r} (keys {second_range}) "
        f"overlap in {first_range.intersect(second_range)}; merge only databases with disjoint key ranges"
    )


def union(
    sources: Sequence[UnionSource],
    *,
    clock: Runtime = SYSTEM_RUNTIME,
) -> Manifest:
    """One uninitialised manifest holding every source's L0 and sorted runs (docs/design/rescaling.md,
    "Union").

    A source with an assigned ``key_range`` is first projected onto it. Every external entry gets
    its own newly generated final checkpoint id (from ``clock``; the new database's checkpoint on
    that external database, created by the caller before it sets ``initialized``), so no two
    entries share one: two entries of one path with different source checkpoints pin two different
    manifests. External entries with the same ``(path, source_checkpoint_id)`` are
    merged, and the merged entry's ``source_checkpoint_id`` becomes the first source's *final*
    checkpoint there: a live checkpoint pinning the same manifest, to create the new final one from
    (as for nested clones). Each source becomes an entry listing the SSTs it owns. An SST id already
    used by another file gets a fresh id, ``original_id`` naming the file; views get fresh ids.
    Epochs are 0, WAL fields start fresh, ``last_l0_seq`` is the maximum over the sources.
    """
    if not sources:
        raise InvalidArgumentError("a merge needs at least one source database")
    paths = [s.path for s in sources]
    if len(set(paths)) != len(paths):
        raise InvalidArgumentError(f"merge sources must be distinct databases, got {paths}")
    sources = [
        s if s.key_range is None else replace(s, manifest=project(s.manifest, s.key_range)) for s in sources
    ]
    ordered = check_disjoint(sources)
    merged = _Merger(clock.new_uuid, clock.new_ulid)
    for source in ordered:
        merged.add(source)
    ranges = [_assigned_range(s) for s in ordered]
    visible = None
    if all(r is not None for r in ranges):
        first, last = ranges[0], ranges[-1]
        assert first is not None and last is not None
        visible = KeyRange(first.start, last.end)
    return Manifest(
        initialized=False,
        last_l0_seq=max(max(s.manifest.last_l0_seq for s in ordered), merged.max_seq),
        external_dbs=merged.external_dbs(),
        ssts=tuple(merged.ssts.values()),
        l0=tuple(merged.l0),
        compacted=tuple(
            SortedRun(i, _join_adjacent(v)) for i, v in sorted(merged.runs.items(), reverse=True)
        ),
        visible_range=visible,
    )


def _join_adjacent(views: list[SstView]) -> tuple[SstView, ...]:
    """A run's views with neighbouring views of one SST over adjacent ranges joined into one view
    (docs/design/rescaling.md, "Union": SlateDB's "Merging SST", allowed within a sorted run), so
    split-then-merge restores the run."""
    out: list[SstView] = []
    for view in views:
        last = out[-1] if out else None
        if (
            last is not None
            and last.sst_id == view.sst_id
            and last.visible_range is not None
            and view.visible_range is not None
            and last.visible_range.end is not None
            and last.visible_range.end == view.visible_range.start
        ):
            out[-1] = replace(last, visible_range=KeyRange(last.visible_range.start, view.visible_range.end))
        else:
            out.append(view)
    return tuple(out)


_File = tuple[str, ULID]  # (path of the database holding the file, the file's id)
_EntryKey = tuple[str, uuid.UUID]  # (path, source_checkpoint_id): the spec's deduplication key


class _Merger:
    """Accumulates sources into the union's SSTs, views and external databases."""

    def __init__(self, new_final_id: Callable[[], uuid.UUID], new_ulid: Callable[[], ULID]) -> None:
        self.new_final_id = new_final_id
        self.new_ulid = new_ulid
        self.ssts: dict[ULID, CompactedSst] = {}
        self.id_of_file: dict[_File, ULID] = {}
        self.entries: dict[_EntryKey, list[ULID]] = {}
        self.pin_from: dict[_EntryKey, uuid.UUID] = {}
        self.l0: list[SstView] = []
        self.runs: dict[int, list[SstView]] = {}
        self.max_seq = 0

    def add(self, source: UnionSource) -> None:
        manifest = source.manifest
        renamed: dict[ULID, ULID] = {}
        for sst in manifest.ssts:
            owner = manifest.owner_of(sst)
            if owner is None:  # the source's own file
                key = (source.path, source.source_checkpoint_id)
                self.pin_from.setdefault(key, source.source_checkpoint_id)
            else:
                key = (owner.path, owner.source_checkpoint_id)
                self.pin_from.setdefault(key, owner.final_checkpoint_id)
            renamed[sst.id] = self._add_sst(sst, key)
            self.max_seq = max(self.max_seq, sst.info.max_seq)
        self.l0.extend(SstView(self.new_ulid(), renamed[v.sst_id], v.visible_range) for v in manifest.l0)
        for run in manifest.compacted:
            self.runs.setdefault(run.id, []).extend(
                SstView(self.new_ulid(), renamed[v.sst_id], v.visible_range) for v in run.views
            )

    def _add_sst(self, sst: CompactedSst, key: _EntryKey) -> ULID:
        file = (key[0], sst.physical_id)
        union_id = self.id_of_file.get(file)
        if union_id is None:
            union_id = sst.id if sst.id not in self.ssts else self.new_ulid()  # taken: rename
            self.id_of_file[file] = union_id
            original = None if union_id == sst.physical_id else sst.physical_id
            self.ssts[union_id] = CompactedSst(union_id, sst.info, original)
        ids = self.entries.setdefault(key, [])
        if union_id not in ids:
            ids.append(union_id)
        return union_id

    def external_dbs(self) -> tuple[ExternalDb, ...]:
        return tuple(
            ExternalDb(key[0], self.pin_from[key], self.new_final_id(), tuple(ids))
            for key, ids in self.entries.items()
        )


__all__ = [
    "UnionSource",
    "check_disjoint",
    "data_range",
    "database_range",
    "effective_range",
    "physical_range",
    "project",
    "source_range",
    "union",
]
