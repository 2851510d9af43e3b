"""SlateDB's GC decisions, one step per directory (:class:`GcPlanning`): what one ``run_gc_once``
deletes, decided as SlateDB 0.17's collector decides (slatedb/src/garbage_collector/*.rs,
wal/slatedb/gc.rs). :meth:`SlateDbAdmin.gc_plan <slate_ops.engines.slatedb.admin.SlateDbAdmin.gc_plan>`
does the reads (manifests, listings, the ``.compactions`` state) and hands each step what it listed;
the steps only decide, so each rule reads on its own:

* expired checkpoints are removed first (each SlateDB task does it; one manifest write);
* :meth:`GcPlanning.manifests`, :meth:`GcPlanning.wal`, :meth:`GcPlanning.compacted`,
  :meth:`GcPlanning.compactions`: one per collected directory, in SlateDB's order.
"""

from __future__ import annotations

from dataclasses import dataclass

from ulid import ULID

from slate_ops.engines.slatedb.views import CheckpointView, ManifestView, ulid_time_ms


@dataclass(frozen=True)
class GcPolicy:
    """Per-directory minimum ages (seconds) as in SlateDB's ``GarbageCollectorOptions``; a
    directory whose age is None is not collected. SlateDB's defaults: 300 s each, the WAL fence
    directory off (SlateDB runs it as a dry run by default)."""

    manifest: float | None = 300.0
    wal: float | None = 300.0
    wal_fence: float | None = None
    compacted: float | None = 300.0
    compactions: float | None = 300.0

    def age(self, directory: str) -> float | None:
        return getattr(self, directory)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class PlannedDeletion:
    key: str
    directory: str
    size: int
    reason: str
    last_modified_ms: int = 0  # the object's, as listed


@dataclass(frozen=True)
class GcPlan:
    """What one ``run_gc_once`` with :attr:`policy` at :attr:`now_ms` would do: the checkpoints it
    first removes as expired (one manifest write) and the objects it deletes, each with a reason."""

    db_path: str
    now_ms: int
    policy: GcPolicy
    expired_checkpoints: tuple[str, ...]
    deletions: tuple[PlannedDeletion, ...]
    notes: tuple[str, ...] = ()
    manifest_id: int | None = None  # the latest manifest the plan read
    listed: tuple[tuple[str, int], ...] = ()  # (directory, objects listed) for each collected directory
    expired_checkpoint_views: tuple[CheckpointView, ...] = ()  # the checkpoints of expired_checkpoints

    def keys(self) -> set[str]:
        return {d.key for d in self.deletions}


@dataclass(frozen=True)
class ListedObject:
    """One object of a database directory as listed: key, size, last-modified (ms)."""

    key: str
    size: int
    mtime_ms: int


def live_checkpoints(latest: ManifestView, now_ms: int) -> list[CheckpointView]:
    """The checkpoints of ``latest`` not expired at ``now_ms``: the ones whose manifests GC keeps."""
    return [c for c in latest.checkpoints if c.expire_time_s is None or c.expire_time_s * 1000 > now_ms]


class GcPlanning:
    """One GC plan being decided at ``now_ms`` from the ``latest`` manifest and the ``referenced``
    ones (the latest and those live checkpoints pin, by id): each step adds its directory's
    deletions, listed count and notes; :meth:`plan` is the result."""

    def __init__(
        self,
        db_path: str,
        policy: GcPolicy,
        now_ms: int,
        latest: ManifestView,
        referenced: dict[int, ManifestView],
    ) -> None:
        self.db_path = db_path
        self.policy = policy
        self.now_ms = now_ms
        self.latest = latest
        self.referenced = referenced
        self.live = live_checkpoints(latest, now_ms)
        self.expired = tuple(c.id for c in latest.checkpoints if c not in self.live)
        self.deletions: list[PlannedDeletion] = []
        self.listed: dict[str, int] = {}  # directory -> objects listed (the directories the policy collects)
        self.notes: list[str] = []
        if self.expired:
            self.notes.append(
                f"removes {len(self.expired)} expired checkpoint(s) first, writing manifest {latest.id + 1}"
            )

    def _old(self, o: ListedObject, min_age_s: float) -> bool:
        return self.now_ms - o.mtime_ms > min_age_s * 1000

    def _delete(self, o: ListedObject, directory: str, reason: str) -> None:
        self.deletions.append(PlannedDeletion(o.key, directory, o.size, reason, last_modified_ms=o.mtime_ms))

    def manifests(self, listed: list[tuple[int, ListedObject]], min_age_s: float) -> None:
        """Every manifest but the latest, not referenced by a live checkpoint, whose last-modified is
        more than ``min_age_s`` ago. After expiring checkpoints the current manifest is
        ``latest.id + 1`` and the old latest becomes eligible like any other; without expiry the
        latest is kept. A manifest newer than the latest read is a newer writer's: kept."""
        self.listed["manifest"] = len(listed)
        latest_id = self.latest.id
        pinned = {c.manifest_id for c in self.live}
        for mid, o in listed:
            if (mid == latest_id and not self.expired) or mid > latest_id or mid in pinned:
                continue
            if self._old(o, min_age_s):
                self._delete(
                    o,
                    "manifest",
                    f"manifest {mid}: not latest, no live checkpoint, older than {min_age_s:g}s",
                )

    def _wal_referenced(self, wal_id: int) -> bool:
        """In a WAL range a referenced manifest needs: ``[replay_after_wal_id, inf)`` for the latest,
        ``(replay_after_wal_id, next_wal_sst_id)`` for a checkpointed one."""
        for mid, m in self.referenced.items():
            if mid == self.latest.id:
                if wal_id >= m.replay_after_wal_id:
                    return True
            elif m.replay_after_wal_id < wal_id < m.next_wal_sst_id:
                return True
        return False

    def wal(self, listed: list[tuple[int, ListedObject]]) -> None:
        """WAL (non-empty) SSTs for ``policy.wal``, WAL fence (zero-byte) ones for
        ``policy.wal_fence``: older than the directory's ``min_age`` by last-modified and outside every
        WAL range a referenced manifest needs."""
        if self.policy.wal is not None:
            self.listed["wal"] = sum(1 for _, o in listed if o.size > 0)
        if self.policy.wal_fence is not None:
            self.listed["wal_fence"] = sum(1 for _, o in listed if o.size == 0)
        for directory, want_empty in (("wal", False), ("wal_fence", True)):
            age = self.policy.age(directory)
            if age is None:
                continue
            kind = "WAL fence (zero-byte)" if want_empty else "WAL SST"
            for wid, o in listed:
                if (o.size == 0) == want_empty and self._old(o, age) and not self._wal_referenced(wid):
                    self._delete(
                        o, directory, f"{kind} {wid}: outside every referenced WAL range, older than {age:g}s"
                    )

    def compacted_cutoff(self, compaction_ids: list[str], min_age_s: float) -> int:
        """The ULID time (ms) before which an unreferenced compacted SST may go: ``min(now -
        min_age, the oldest of ``compaction_ids`` (the latest .compactions file's; epoch if none), the
        newest L0's ULID time or else last_compacted_l0_sst_view_id's (epoch if neither))``."""
        latest = self.latest
        low_watermark = min((ulid_time_ms(i) for i in compaction_ids), default=0)
        if latest.l0:
            newest_l0 = max(ulid_time_ms(s.sst_id) for s in latest.l0)
        elif latest.last_compacted_l0_sst_view_id:
            newest_l0 = ulid_time_ms(latest.last_compacted_l0_sst_view_id)
        else:
            newest_l0 = 0
        if latest.segments:
            self.notes.append(
                "segments present: the compacted cutoff also spans segment trees (not modelled)"
            )
        cutoff = min(self.now_ms - int(min_age_s * 1000), low_watermark, newest_l0)
        if cutoff == 0:
            self.notes.append(
                "compacted SSTs: cutoff is the epoch (no compaction recorded or no L0 ever), none deleted"
            )
        return cutoff

    def compacted(self, listed: list[tuple[ULID, ListedObject]], cutoff: int) -> None:
        """Compacted SSTs in no referenced manifest whose ULID time is before ``cutoff``
        (:meth:`compacted_cutoff`); an id that is not a ULID is kept."""
        self.listed["compacted"] = len(listed)
        active: set[str] = set()
        for m in self.referenced.values():
            active |= m.sst_ids()
        for sst_id, o in listed:
            sid = str(sst_id)
            try:
                t = ulid_time_ms(sid)
            except KeyError:
                continue
            if t < cutoff and sid not in active:
                self._delete(
                    o,
                    "compacted",
                    f"SST {sid}: in no referenced manifest, created before the cutoff {cutoff}",
                )

    def compactions(self, listed: list[tuple[int, ListedObject]], min_age_s: float) -> None:
        """Every ``.compactions`` file but the latest, last-modified more than ``min_age_s`` ago."""
        self.listed["compactions"] = len(listed)
        for cid, o in listed[:-1]:  # the latest is kept
            if self._old(o, min_age_s):
                self._delete(
                    o, "compactions", f"compactions file {cid}: not latest, older than {min_age_s:g}s"
                )

    def plan(self) -> GcPlan:
        return GcPlan(
            self.db_path,
            self.now_ms,
            self.policy,
            self.expired,
            tuple(self.deletions),
            tuple(self.notes),
            manifest_id=self.latest.id,
            listed=tuple(sorted(self.listed.items())),
            expired_checkpoint_views=tuple(c for c in self.latest.checkpoints if c.id in self.expired),
        )
