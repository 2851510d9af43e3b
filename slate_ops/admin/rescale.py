"""Rescaling: split a database into key-range shards, merge shards back (docs/design/rescaling.md).

:func:`split` creates one projected clone per key range and :func:`merge` one union of several
databases (:mod:`slate_ops.manifest.projection`). Both are metadata-only: the new manifests
reference the sources' SSTs in place, pinned by final checkpoints on the sources, exactly like a
clone (docs/design/clones-and-destroy.md, "The procedure"): each new manifest is written
uninitialised, then the final checkpoints are created, then it is marked initialised. Every step first
checks whether it already happened, so re-running the same call after a crash finishes it.

The sources are read at an ephemeral checkpoint named after the operation (``slate_ops/split:`` or
``slate_ops/merge:`` plus the new paths) that a re-run finds and reuses, so all shards of one split
come from one consistent state; it is deleted once every new database is initialised. Projection
and union carry no WAL: a source with writes only in its WAL is refused (:class:`WalNotFlushedError`)
before anything is written.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from slate_ops.admin.clone import clone_manifest, ensure_final_checkpoints
from slate_ops.config import CheckpointOptions
from slate_ops.engine.batch import check_key
from slate_ops.engine.wal_store import WalStore
from slate_ops.errors import (
    CheckpointExpiredError,
    CheckpointNotFoundError,
    CloneMismatchError,
    DbAlreadyExistsError,
    DbNotInitializedError,
    InvalidArgumentError,
    WalNotFlushedError,
)
from slate_ops.keytext import render_bytes
from slate_ops.layout import normalize_db_path as normalize
from slate_ops.manifest.checkpoints import live_checkpoint, with_new_checkpoint
from slate_ops.manifest.model import Checkpoint, KeyRange, Manifest
from slate_ops.manifest.projection import UnionSource, database_range, project, union
from slate_ops.manifest.store import ManifestStore, VersionedManifest, require_usable
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.metering import ZERO, RequestCounts
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime

SOURCE_LIFETIME = timedelta(minutes=15)
"""Lifetime of the ephemeral source checkpoints: the window in which a crashed split or merge can be
re-run to completion from the same state."""

SPLIT_CHECKPOINT_PREFIX = "slate_ops/split:"
MERGE_CHECKPOINT_PREFIX = "slate_ops/merge:"


@dataclass(frozen=True)
class NewDatabase:
    """One database a split or merge created: its path, key range and what it references."""

    path: str
    key_range: KeyRange | None
    manifest_id: int
    l0_views: int
    sorted_runs: int
    ssts: int
    bytes: int


@dataclass(frozen=True)
class RescaleReport:
    """What :func:`split` or :func:`merge` did. ``created`` is False when every new database already
    existed (a repeated call); ``sst_bytes_copied`` is always 0 (metadata only)."""

    operation: str
    sources: list[str]
    source_checkpoints: dict[str, str]
    databases: list[NewDatabase]
    created: bool
    seconds: float
    sst_bytes_copied: int = 0
    notes: list[str] = field(default_factory=list)
    requests: RequestCounts = field(default=ZERO, compare=False)
    """The object-store requests and bytes this operation made (through the admin handle; zero
    when called directly)."""


def split(
    source_path: str,
    store: ObjectStore,
    split_keys: Sequence[bytes],
    target_paths: Sequence[str],
    *,
    clock: Runtime = SYSTEM_RUNTIME,
) -> RescaleReport:
    """Split ``source_path`` at ``split_keys`` into ``len(split_keys) + 1`` shards at ``target_paths``.

    Shard ``i`` holds the source's keys in ``[split_keys[i-1], split_keys[i])`` (the first and last
    shards extend to the source's own range bounds) and refuses writes and reads outside it. The
    source is left as it was (plus the shards' final checkpoints); destroy it once the shards serve.
    """
    elapsed = _stopwatch(clock)
    keys = [check_key(k) for k in split_keys]
    targets = _check_new_paths(source_path, target_paths, store)
    if len(targets) != len(keys) + 1:
        raise InvalidArgumentError(
            f"{len(keys)} split keys make {len(keys) + 1} shards, but {len(targets)} target paths were "
            "given; pass one more path than keys"
        )
    sources = ManifestStore(store, source_path)
    latest = _usable_source(sources)
    ranges = shard_ranges(database_range(latest.value), keys, sources.location)
    name = SPLIT_CHECKPOINT_PREFIX + ",".join(targets)
    existing = [ManifestStore(store, t).read_latest() for t in targets]
    # Existing shards are compared with the state the split started from: the operation's
    # checkpoint while it is unfinished (the source may have changed since), else the latest.
    started_from = _split_state(sources, latest.value, name, clock)
    if all(e is not None and e.value.initialized for e in existing):
        for target, current, key_range in zip(targets, existing, ranges, strict=True):
            assert current is not None
            _require_shard(current.value, target, sources.path, key_range, started_from)
        _drop_named_checkpoint(sources, name)
        return _report("split", [sources.path], {}, targets, ranges, existing, False, elapsed)
    for target, current, key_range in zip(targets, existing, ranges, strict=True):
        if current is not None:  # validate every existing target before writing anything
            _require_shard(current.value, target, sources.path, key_range, started_from)
    _require_flushed(store, sources.path, latest.value, sources.location)
    fresh = all(e is None for e in existing)
    checkpoint, at_source = _source_checkpoint(sources, name, store, clock, fresh=fresh)
    results = []
    for target, current, key_range in zip(targets, existing, ranges, strict=True):
        if current is None:  # each shard gets final checkpoints of its own (clone_manifest)
            shard = project(clone_manifest(at_source, sources.path, checkpoint.id, clock=clock), key_range)
            current = _create(ManifestStore(store, target), _fresh_wal(shard))
        _require_shard(current.value, target, sources.path, key_range, at_source)
        results.append(current)
    finished = [
        _initialise(ManifestStore(store, t), c, store, clock) for t, c in zip(targets, results, strict=True)
    ]
    _drop_named_checkpoint(sources, name)
    return _report(
        "split", [sources.path], {sources.path: str(checkpoint.id)}, targets, ranges, finished, True, elapsed
    )


def merge(
    source_paths: Sequence[str],
    store: ObjectStore,
    target_path: str,
    *,
    clock: Runtime = SYSTEM_RUNTIME,
) -> RescaleReport:
    """Merge the databases at ``source_paths`` (disjoint key ranges) into a new one at ``target_path``.

    Shards of a split are merged back into one database with their combined range; their recorded
    ranges must be adjacent. Databases without a recorded range (independent databases) only need
    disjoint data. Overlapping sources are refused with :class:`OverlappingSourcesError` before
    anything is written. The sources stay as they were (plus final checkpoints).
    """
    elapsed = _stopwatch(clock)
    target = _check_new_paths(None, [target_path], store)[0]
    paths = [normalize(p) for p in source_paths]
    if len(set(paths)) != len(paths) or not paths:
        raise InvalidArgumentError(f"merge needs one or more distinct source paths, got {list(source_paths)}")
    if target in paths:
        raise InvalidArgumentError(f"the merged database needs a new path; {target!r} is a source")
    sources = [ManifestStore(store, p) for p in paths]
    targets = ManifestStore(store, target)
    existing = targets.read_latest()
    if existing is not None and existing.value.initialized:
        for s in sources:  # a finished merge still has its sources; a typo must not pass as one
            s.read_latest_required()
        _require_merge_of(existing.value, targets.location, sources)
        for s in sources:
            _drop_named_checkpoint(s, MERGE_CHECKPOINT_PREFIX + target)
        return _report(
            "merge", paths, {}, [target], [existing.value.visible_range], [existing], False, elapsed
        )
    name = MERGE_CHECKPOINT_PREFIX + target
    checkpoints: dict[str, str] = {}
    if existing is None:
        latest = [_usable_source(s) for s in sources]
        for s, current in zip(sources, latest, strict=True):
            _require_flushed(store, s.path, current.value, s.location)
        # Validate before writing anything: overlapping sources fail here, not after checkpoints.
        union(
            [UnionSource(s.path, c.value, uuid.UUID(int=0)) for s, c in zip(sources, latest, strict=True)],
            clock=clock,
        )
        inputs = []
        for s in sources:
            checkpoint, at_source = _source_checkpoint(s, name, store, clock, fresh=True)
            checkpoints[s.path] = str(checkpoint.id)
            inputs.append(UnionSource(s.path, at_source, checkpoint.id))
        existing = _create(targets, union(inputs, clock=clock))
    _require_merge_of(existing.value, targets.location, sources)
    finished = _initialise(targets, existing, store, clock)
    for s in sources:
        _drop_named_checkpoint(s, name)
    return _report(
        "merge", paths, checkpoints, [target], [finished.value.visible_range], [finished], True, elapsed
    )


# --- steps ------------------------------------------------------------------------------------------


def _check_new_paths(source: str | None, targets: Sequence[str], store: ObjectStore) -> list[str]:
    paths = [normalize(t) for t in targets]
    if len(set(paths)) != len(paths):
        raise InvalidArgumentError(f"target paths must be distinct, got {list(targets)}")
    everything = paths if source is None else [normalize(source), *paths]
    for outer in everything:
        for inner in everything:
            if outer != inner and (outer == "" or inner.startswith(outer + "/")):
                raise InvalidArgumentError(
                    f"database paths must not nest: {inner!r} is inside {outer!r} (destroying the outer "
                    "one would delete the inner one's objects)"
                )
    if source is not None and normalize(source) in paths:
        raise InvalidArgumentError(f"a shard needs its own path; {source!r} is the source")
    return paths


def _usable_source(sources: ManifestStore) -> VersionedManifest:
    current = sources.read_latest_required()
    if not current.value.initialized:
        raise DbNotInitializedError(
            f"{sources.location} is not initialised (a clone, split or merge of it did not finish); "
            "finish that first"
        )
    require_usable(current.value, sources.location)
    return current


def _split_state(sources: ManifestStore, latest: Manifest, name: str, clock: Runtime) -> Manifest:
    """The manifest the unfinished split ``name`` pinned on the source, else ``latest``."""
    found = next((c for c in latest.checkpoints if c.name == name and not c.is_expired(clock.now())), None)
    return latest if found is None else sources.read(found.manifest_id).value


def check_split_keys(keys: Sequence[bytes], location: str) -> None:
    """At least one split key, strictly increasing (both engines' splits, before anything is
    written); else :class:`InvalidArgumentError`."""
    if not keys:
        raise InvalidArgumentError("a split needs at least one split key")
    for before, after in itertools.pairwise(keys):
        if before >= after:
            raise InvalidArgumentError(
                f"split keys must be strictly increasing: {render_bytes(before)} >= {render_bytes(after)} "
                f"in the split of {location}; nothing was written. Sort the keys and remove duplicates"
            )


def shard_ranges(whole: KeyRange, keys: Sequence[bytes], location: str) -> list[KeyRange]:
    """The shards' ranges of a split of ``whole`` at ``keys`` (:func:`check_split_keys`; every key
    strictly inside ``whole``), the first and last extending to ``whole``'s bounds."""
    check_split_keys(keys, location)
    for key in keys:
        if not whole.contains(key) or key == whole.start:
            raise InvalidArgumentError(
                f"split key {render_bytes(key)} is not strictly inside {location}'s key range {whole}; "
                "every shard must get a non-empty range. Nothing was written"
            )
    bounds: list[bytes | None] = [whole.start, *keys, whole.end]
    return [KeyRange(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]


def _require_flushed(store: ObjectStore, path: str, manifest: Manifest, location: str) -> None:
    """Refuse a source whose WAL holds writes not yet in L0: a WAL SST after ``replay_after_wal_id``
    with entries newer than ``last_l0_seq``. (A WAL SST whose entries an L0 flush already holds, as a
    writer may leave one when it closes, carries nothing a projection would lose.)"""
    wal = WalStore(store, path)
    # The chain only: objects beyond its first missing id are orphans, never acknowledged.
    for wal_id, size in wal.chain(manifest.replay_after_wal_id).segments:
        max_seq = wal.max_seq(wal_id, size)
        if max_seq is not None and max_seq > manifest.last_l0_seq:
            raise WalNotFlushedError(
                f"{location} has writes only in its WAL ({wal.key(wal_id)}); projection and union carry no "
                f"WAL. Flush its memtable first (Db.flush_memtable(), or `slate-ops --path {path} flush`, "
                "which fences the current writer) and retry"
            )


def _source_checkpoint(
    sources: ManifestStore, name: str, store: ObjectStore, clock: Runtime, *, fresh: bool
) -> tuple[Checkpoint, Manifest]:
    """The operation's ephemeral checkpoint on a source and the manifest it pins.

    A re-run finds it by name and reuses it, so every new database sees the same state; an expired
    one is replaced only while no new database exists yet (``fresh``). A new checkpoint is checked
    for writes only in the WAL once more (they may have arrived since the first check) and deleted
    again if there are, so a refusal leaves nothing behind.
    """
    current = sources.read_latest_required()
    found = next((c for c in current.value.checkpoints if c.name == name), None)
    if found is not None:
        if not (fresh and found.is_expired(clock.now())):
            try:
                live = live_checkpoint(current.value, found.id, clock.now(), sources.location)
            except CheckpointExpiredError as error:
                raise CheckpointExpiredError(
                    f"{error}. The databases this operation already created were made from it: destroy "
                    "them and run the operation again"
                ) from error
            return live, sources.read(live.manifest_id).value
        _drop_named_checkpoint(sources, name)
    checkpoint_id = clock.new_uuid()
    options = CheckpointOptions(lifetime=SOURCE_LIFETIME, name=name)
    committed = sources.update(
        lambda c: with_new_checkpoint(c, options, checkpoint_id, clock.now(), sources.location)
    )
    try:
        _require_flushed(store, sources.path, committed.value, sources.location)
    except WalNotFlushedError:
        _drop_named_checkpoint(sources, name)
        raise
    created = committed.value.checkpoint(checkpoint_id)
    assert created is not None
    return created, committed.value


def _fresh_wal(manifest: Manifest) -> Manifest:
    """A new database's WAL starts empty (docs/design/rescaling.md, "Union": WAL fields reset; the source's
    WAL was checked to be fully in L0)."""
    return manifest.with_changes(replay_after_wal_id=0, wal_id_last_seen=0, next_wal_sst_id=1)


def _create(targets: ManifestStore, manifest: Manifest) -> VersionedManifest:
    try:
        return targets.create_initial(manifest)
    except DbAlreadyExistsError:
        current = targets.read_latest_required()  # a concurrent run created it; validated by the caller
        return current


def _initialise(
    targets: ManifestStore, current: VersionedManifest, store: ObjectStore, clock: Runtime
) -> VersionedManifest:
    if current.value.initialized:
        return current
    try:
        ensure_final_checkpoints(current.value, store, targets.path, clock)
    except (CheckpointNotFoundError, CheckpointExpiredError) as error:
        raise type(error)(
            f"{error}. {targets.location} cannot be finished: destroy it (`slate-ops --path "
            f"{targets.path} destroy --hard`) and run the split or merge again"
        ) from error
    return targets.update(lambda c: None if c.value.initialized else c.value.with_changes(initialized=True))


def _require_shard(
    manifest: Manifest, target: str, source: str, key_range: KeyRange, source_manifest: Manifest
) -> None:
    """An existing target must be this split's shard: the shard's range, and made from ``source``.

    A shard references ``source`` directly, or inherits one of its external entries (its source
    checkpoint is the source's final checkpoint there: the case of a source owning no SST itself),
    or the shard's range holds none of the source's data. Once GC detached a shard that compacted
    all of the source's SSTs away, a re-run reports a mismatch; that is safe.
    """
    source_finals = {(e.path, e.final_checkpoint_id) for e in source_manifest.external_dbs}
    made_from_source = any(
        e.path == source or (e.path, e.source_checkpoint_id) in source_finals for e in manifest.external_dbs
    ) or (not manifest.external_dbs and not project(source_manifest, key_range).ssts)
    if manifest.visible_range != key_range or not made_from_source:
        parents = sorted({e.path for e in manifest.external_dbs})
        origin = f"references {parents}" if parents else "references no other database"
        raise CloneMismatchError(
            f"a database already exists at {target!r} with key range {database_range(manifest)} that "
            f"{origin}; it is not the shard {key_range} of a split of {source!r}: destroy it or choose "
            "another target path"
        )


def _require_merge_of(manifest: Manifest, location: str, sources: list[ManifestStore]) -> None:
    """An existing target must be this merge: the sources' combined range, and external databases
    among the sources and the databases they reference."""
    latest = [s.read_latest() for s in sources]
    ranges = [None if m is None else m.value.visible_range for m in latest]
    expected = None
    if all(r is not None for r in ranges):
        ordered = sorted((r for r in ranges if r is not None), key=lambda r: r.start or b"")
        expected = KeyRange(ordered[0].start, ordered[-1].end)
    allowed = {s.path for s in sources}
    allowed |= {e.path for m in latest if m is not None for e in m.value.external_dbs}
    unknown = {e.path for e in manifest.external_dbs} - allowed
    # A merge of sources with data references them (until GC detaches it once it compacted all of
    # their SSTs away: a re-run then reports a mismatch, which is safe).
    missing_sources = not manifest.external_dbs and any(m is not None and m.value.ssts for m in latest)
    if manifest.visible_range != expected or unknown or missing_sources:
        raise CloneMismatchError(
            f"a database already exists at {location} that is not a merge of {[s.path for s in sources]}; "
            "destroy it or choose another target path"
        )


def _drop_named_checkpoint(sources: ManifestStore, name: str) -> None:
    def drop(current: VersionedManifest) -> Manifest | None:
        keep = tuple(c for c in current.value.checkpoints if c.name != name)
        return (
            None
            if len(keep) == len(current.value.checkpoints)
            else current.value.with_changes(checkpoints=keep)
        )

    if sources.read_latest() is not None:
        sources.update(drop)


def _stopwatch(clock: Runtime) -> Callable[[], float]:
    """Seconds since this call, by ``clock``'s monotonic time."""
    started = clock.monotonic()
    return lambda: clock.monotonic() - started


def _report(
    operation: str,
    sources: list[str],
    checkpoints: dict[str, str],
    targets: list[str],
    ranges: Sequence[KeyRange | None],
    manifests: Sequence[VersionedManifest | None],
    created: bool,
    elapsed: Callable[[], float],
) -> RescaleReport:
    databases = []
    for target, key_range, current in zip(targets, ranges, manifests, strict=True):
        assert current is not None
        m = current.value
        databases.append(
            NewDatabase(
                path=target,
                key_range=key_range,
                manifest_id=current.id,
                l0_views=len(m.l0),
                sorted_runs=len(m.compacted),
                ssts=len(m.ssts),
                bytes=sum(s.info.size_bytes for s in m.ssts),
            )
        )
    return RescaleReport(operation, sources, checkpoints, databases, created, elapsed())


__all__ = [
    "MERGE_CHECKPOINT_PREFIX",
    "SOURCE_LIFETIME",
    "SPLIT_CHECKPOINT_PREFIX",
    "NewDatabase",
    "RescaleReport",
    "check_split_keys",
    "merge",
    "shard_ranges",
    "split",
]
