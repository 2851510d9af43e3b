"""Rollback to a tag (Paimon's tag design (docs/design/tags.md) ``rollback``): make a tagged state the current
state again.

A real run does, in order (docs/design/tags.md "Rollback"):

1. **Fence the writer** as soft destroy does: bump the writer epoch, dropping writer checkpoints in
   the same commit (manifest V+1), then create a window fence at the end of the WAL chain
   (docs/design/engine.md, "Several WAL PUTs in flight"). The old writer's next manifest commit or
   WAL write raises :class:`~slate_ops.errors.FencedError`.
2. **Flush the tag's WAL**: the writes a reader of the tag replays from the WAL, i.e. the WAL SSTs
   in ``(replay_after_wal_id, wal_id_last_seen]`` of the tagged manifest, go into one new L0 SST.
3. **One manifest update** (V+2, through the fenced store) makes the tag's state current: L0 (the
   new SST first), sorted runs, SSTs, external databases and ``l0_last_compacted`` of the tagged
   manifest; ``replay_after_wal_id`` at the end of the fence's window, so no WAL SST written after
   the tag (nor an orphan the fenced writer's PUTs leave inside the window) is ever replayed;
   ``last_l0_seq`` the maximum of every sequence number seen, so sequence numbers stay monotonic;
   the compactor epoch bumped, so a running compaction cannot commit outputs built on
   the discarded state. Checkpoints (the tag itself included) are kept; writer checkpoints are not.

A crash part-way leaves a consistent database (at worst a fenced writer and an orphan L0 SST that
GC removes); running the rollback again completes it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace

from ulid import ULID

from slate_ops.admin.tags import Tag, find_tags
from slate_ops.engine.memtable import Memtable
from slate_ops.engine.wal_chain import Segment, first_writer_id, walk_chain
from slate_ops.engine.wal_store import WalStore, fence_chain_end
from slate_ops.errors import TagNotFoundError
from slate_ops.layout import WAL_DIR, own_directory, parse_wal_key, sst_key
from slate_ops.manifest.model import CompactedSst, ExternalDb, Manifest, SstView, WriterCheckpoint
from slate_ops.manifest.store import WRITER_EPOCH, ManifestStore, VersionedManifest, require_usable
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.metering import ZERO, RequestCounts
from slate_ops.runtime import SYSTEM_RUNTIME, Runtime
from slate_ops.sst import SstReader, encode_sst


@dataclass(frozen=True)
class DiscardedSst:
    """An SST that the current L0 or sorted runs reference and the tag does not."""

    sst_id: ULID
    level: str  # "l0" or "sorted_run:<id>"
    view_ids: tuple[ULID, ...]
    size_bytes: int
    num_entries: int


@dataclass(frozen=True)
class DiscardedWal:
    """A WAL SST written after the tag, not yet in L0: the next writer would have replayed it."""

    wal_id: int
    size_bytes: int
    num_entries: int
    max_seq: int


@dataclass(frozen=True)
class RollbackReport:
    """What :func:`rollback_to_tag` did, or would do with ``dry_run`` (then the ids, epochs and fence
    are those a real run would use if nothing else wrote meanwhile)."""

    path: str
    dry_run: bool
    at_s: int  # when it ran (the clock's time)
    tag: Tag
    manifest_id_before: int  # the current manifest when the rollback started
    manifest_id_after: int  # the manifest that makes the tag's state current
    writer_epoch: int  # the fenced writers' successor epoch (held by nobody afterwards)
    compactor_epoch: int
    fence_wal_id: int  # the window fence: nothing at or below it, nor in its window, is ever replayed
    discarded_ssts: tuple[DiscardedSst, ...]
    discarded_view_ids: tuple[ULID, ...]  # every current L0 / sorted-run view the tag lacks
    discarded_wal: tuple[DiscardedWal, ...]
    flushed_wal_ids: tuple[int, ...]  # the tag's WAL SSTs that hold writes, now in flushed_sst
    flushed_sst: CompactedSst | None  # the new L0 SST (None: the tag has no WAL-only writes)
    removed_writer_checkpoints: tuple[uuid.UUID, ...]
    last_l0_seq: int
    requests: RequestCounts = field(default=ZERO, compare=False)
    """The object-store requests and bytes this operation made (through the admin handle; zero
    when called directly)."""

    @property
    def discarded_bytes(self) -> int:
        return sum(s.size_bytes for s in self.discarded_ssts) + sum(w.size_bytes for w in self.discarded_wal)

    @property
    def discarded_entries(self) -> int:
        return sum(s.num_entries for s in self.discarded_ssts) + sum(
            w.num_entries for w in self.discarded_wal
        )


@dataclass(frozen=True)
class _WalFile:
    wal_id: int
    size_bytes: int


def rollback_to_tag(
    path: str,
    store: ObjectStore,
    name: str,
    *,
    dry_run: bool = True,
    clock: Runtime = SYSTEM_RUNTIME,
    new_sst_id: Callable[[], ULID] | None = None,
) -> RollbackReport:
    """Make the state of tag ``name`` current again; see the module docstring. Dry run by default.

    An unknown tag raises :class:`~slate_ops.errors.TagNotFoundError`, a destroyed database
    :class:`~slate_ops.errors.DbDestroyedError`; both write nothing. ``new_sst_id`` (else
    ``clock.new_ulid``) names the L0 SST that holds the tag's WAL writes (a test passes a fixed one
    to compare a dry and a real run).
    """
    at_s = int(clock.now())
    manifests = ManifestStore(store, path)
    wal = WalStore(store, manifests.path)
    current = manifests.read_latest_required()
    require_usable(current.value, manifests.location)
    tag = _find_tag(current.value, name, manifests.location)
    tagged = manifests.read(tag.manifest_id).value
    files = _list_wal(store, wal)
    flush = _flush_tag_wal(wal, files, tagged, new_sst_id or clock.new_ulid)

    if dry_run:
        m = current.value
        walk = walk_chain(((f.wal_id, f.size_bytes) for f in files), m.replay_after_wal_id)
        fence_id, first_id = walk.end, first_writer_id(walk.end, walk.highest)  # as WalStore.fence
        discarded_wal = _discarded_wal(store, wal, walk.segments, m, tagged)
        rolled = _rolled_back(m, tagged, flush.sst, first_id, discarded_wal, clock.new_ulid)
        writers = tuple(c.id for c in m.checkpoints if isinstance(c.metadata, WriterCheckpoint))
        return _report(
            manifests.path, True, at_s, tag, (current.id, current.id + 2), m.writer_epoch + 1, m, tagged,
            rolled, fence_id, discarded_wal, flush, writers,
        )  # fmt: skip

    removed: list[uuid.UUID] = []

    def fence_writer(latest: VersionedManifest, epoch: int) -> Manifest:
        require_usable(latest.value, manifests.location)
        _find_tag(latest.value, name, manifests.location, tag.checkpoint_id)
        checkpoints = latest.value.checkpoints
        removed[:] = [c.id for c in checkpoints if isinstance(c.metadata, WriterCheckpoint)]
        return latest.value.with_changes(checkpoints=tuple(c for c in checkpoints if c.id not in removed))

    # Step 1, as soft destroy: the epoch first, so a writer that finds its WAL id taken sees why.
    fenced, claimed = manifests.claim(WRITER_EPOCH, fence_writer)
    location, epoch = manifests.location, fenced.epoch
    fence = fence_chain_end(
        wal, claimed.value.replay_after_wal_id, fenced.confirm, location, "rollback", epoch
    )
    fence_id = fence.fence_id
    # The chain below the fence is final now: the fenced writer cannot add to it.
    discarded_wal = _discarded_wal(store, wal, fence.segments, claimed.value, tagged)
    # Step 2. A crash after this upload leaves an orphan SST (GC removes it); a re-run writes another.
    if flush.sst is not None and flush.data is not None:
        store.put(sst_key(manifests.path, flush.sst.id), flush.data)
    base: list[Manifest] = []

    def make_current(latest: VersionedManifest) -> Manifest:
        require_usable(latest.value, manifests.location)
        _find_tag(latest.value, name, manifests.location, tag.checkpoint_id)
        base[:] = [latest.value]
        return _rolled_back(latest.value, tagged, flush.sst, fence.first_id, discarded_wal, clock.new_ulid)

    # Step 3, through the fenced store: a writer opened since our claim makes this fail (re-run it).
    committed = fenced.update(make_current)
    return _report(
        manifests.path, False, at_s, tag, (current.id, committed.id), fenced.epoch, base[0], tagged,
        committed.value, fence_id, discarded_wal, flush, tuple(removed),
    )  # fmt: skip


def _find_tag(manifest: Manifest, name: str, location: str, checkpoint_id: uuid.UUID | None = None) -> Tag:
    """The tag ``name`` (and, when given, still the checkpoint ``checkpoint_id``)."""
    found = next((t for t in find_tags(manifest) if t.name == name), None)
    if found is None or (checkpoint_id is not None and found.checkpoint_id != checkpoint_id):
        raise TagNotFoundError(
            f"no tag {name!r} in the current manifest of {location}"
            + (" (it was deleted or replaced during the rollback; re-run it)" if checkpoint_id else "")
            + "; list them with `slate-ops list-tags`"
        )
    return found


def _rolled_back(
    current: Manifest,
    tagged: Manifest,
    flushed: CompactedSst | None,
    first_wal_id: int,
    discarded_wal: tuple[DiscardedWal, ...],
    new_view_id: Callable[[], ULID],
) -> Manifest:
    """``current`` with the tag's LSM state, the WAL from ``first_wal_id`` on (past the fence's window)
    and the compactor fenced.

    ``last_l0_seq`` also covers the discarded WAL writes: no sequence number is ever reused.
    """
    l0 = tagged.l0
    ssts = tagged.ssts
    seen = max((w.max_seq for w in discarded_wal), default=0)
    last_seq = max(current.last_l0_seq, tagged.last_l0_seq, seen)
    if flushed is not None:
        l0 = (SstView(new_view_id(), flushed.id), *l0)
        ssts = (*ssts, flushed)
        last_seq = max(last_seq, flushed.info.max_seq)
    return current.with_changes(
        l0=l0,
        compacted=tagged.compacted,
        ssts=ssts,
        external_dbs=_external_dbs(current, tagged),
        l0_last_compacted=tagged.l0_last_compacted,
        last_l0_seq=last_seq,
        replay_after_wal_id=max(current.replay_after_wal_id, first_wal_id - 1),
        wal_id_last_seen=max(current.wal_id_last_seen, first_wal_id - 1),
        next_wal_sst_id=max(current.next_wal_sst_id, first_wal_id),
        compactor_epoch=current.compactor_epoch + 1,
        checkpoints=tuple(c for c in current.checkpoints if not isinstance(c.metadata, WriterCheckpoint)),
    )


def _external_dbs(current: Manifest, tagged: Manifest) -> tuple[ExternalDb, ...]:
    """The tag's external databases; those only the current state reads stay with no SSTs, so GC
    releases their final checkpoints (detaches them) instead of leaking them."""
    now = {_ext_key(e) for e in current.external_dbs}
    then = {_ext_key(e) for e in tagged.external_dbs}
    restored = tuple(e for e in tagged.external_dbs if e.sst_ids or _ext_key(e) in now)
    dropped = (replace(e, sst_ids=()) for e in current.external_dbs if _ext_key(e) not in then)
    return (*restored, *dropped)


def _ext_key(external: ExternalDb) -> tuple[str, uuid.UUID]:
    return external.path, external.final_checkpoint_id


def _placed_views(manifest: Manifest) -> Iterator[tuple[str, SstView]]:
    for view in manifest.l0:
        yield "l0", view
    for run in manifest.compacted:
        for view in run.views:
            yield f"sorted_run:{run.id}", view


def _discarded_ssts(current: Manifest, tagged: Manifest) -> tuple[tuple[DiscardedSst, ...], tuple[ULID, ...]]:
    kept_views = {v.view_id for _, v in _placed_views(tagged)}
    kept_ssts = {v.sst_id for _, v in _placed_views(tagged)}
    infos = {s.id: s.info for s in current.ssts}
    views: list[ULID] = []
    by_sst: dict[ULID, tuple[str, list[ULID]]] = {}
    for level, view in _placed_views(current):
        if view.view_id in kept_views:
            continue
        views.append(view.view_id)
        if view.sst_id not in kept_ssts:
            by_sst.setdefault(view.sst_id, (level, []))[1].append(view.view_id)
    ssts = tuple(
        DiscardedSst(sst_id, level, tuple(ids), infos[sst_id].size_bytes, infos[sst_id].num_entries)
        for sst_id, (level, ids) in by_sst.items()
    )
    return ssts, tuple(views)


def _list_wal(store: ObjectStore, wal: WalStore) -> list[_WalFile]:
    files = []
    for meta in store.list(own_directory(wal.db_path, WAL_DIR)):
        wal_id = parse_wal_key(wal.db_path, meta.key)
        if wal_id is not None:
            files.append(_WalFile(wal_id, meta.size))
    return sorted(files, key=lambda f: f.wal_id)


def _discarded_wal(
    store: ObjectStore,
    wal: WalStore,
    chain: Iterable[Segment],
    current: Manifest,
    tagged: Manifest,
) -> tuple[DiscardedWal, ...]:
    """The WAL SSTs of the chain below the fence (``chain``) after the tag: writes the current state
    has not put in L0 yet."""
    after = max(current.replay_after_wal_id, tagged.wal_id_last_seen)
    discarded = []
    for wal_id, size in chain:
        if wal_id > after:
            info = SstReader.open(store, wal.key(wal_id), size=size).info
            discarded.append(DiscardedWal(wal_id, size, info.num_entries, info.max_seq))
    return tuple(discarded)


@dataclass(frozen=True)
class _Flush:
    """The tag's WAL SSTs that hold writes, and the L0 SST (bytes, id and info) they flush to."""

    wal_ids: tuple[int, ...]
    data: bytes | None
    sst: CompactedSst | None


def _flush_tag_wal(
    wal: WalStore, files: list[_WalFile], tagged: Manifest, new_sst_id: Callable[[], ULID]
) -> _Flush:
    """What a reader of the tag replays, the chain in ``(replay_after_wal_id, wal_id_last_seen]``, as
    one L0 SST with the newest version of each key (as a writer's replay and L0 flush build it)."""
    listing = ((f.wal_id, f.size_bytes) for f in files)
    ids = tuple(
        i for i, _ in walk_chain(listing, tagged.replay_after_wal_id, tagged.wal_id_last_seen).segments
    )
    if not ids:
        return _Flush((), None, None)
    memtable = Memtable()
    for wal_id in ids:
        for key, seq, kind, value in wal.read(wal_id):
            memtable.put(key, seq, kind, value)
    data, info = encode_sst(memtable.to_table())
    return _Flush(ids, data, CompactedSst(new_sst_id(), info))


def _report(
    path: str,
    dry_run: bool,
    at_s: int,
    tag: Tag,
    manifest_ids: tuple[int, int],
    writer_epoch: int,
    current: Manifest,
    tagged: Manifest,
    rolled: Manifest,
    fence_id: int,
    discarded_wal: tuple[DiscardedWal, ...],
    flush: _Flush,
    removed: tuple[uuid.UUID, ...],
) -> RollbackReport:
    ssts, views = _discarded_ssts(current, tagged)
    return RollbackReport(
        path=path,
        dry_run=dry_run,
        at_s=at_s,
        tag=tag,
        manifest_id_before=manifest_ids[0],
        manifest_id_after=manifest_ids[1],
        writer_epoch=writer_epoch,
        compactor_epoch=rolled.compactor_epoch,
        fence_wal_id=fence_id,
        discarded_ssts=ssts,
        discarded_view_ids=views,
        discarded_wal=discarded_wal,
        flushed_wal_ids=flush.wal_ids,
        flushed_sst=flush.sst,
        removed_writer_checkpoints=removed,
        last_l0_seq=rolled.last_l0_seq,
    )


__all__ = ["DiscardedSst", "DiscardedWal", "RollbackReport", "rollback_to_tag"]
