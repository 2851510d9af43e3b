"""SlateDB's GC rules, step by step (slate_ops/engines/slatedb/gc_plan.py), on hand-made manifests and
listings: no binding, no store. tests/engines/test_slatedb_engine.py checks the whole plan against
what SlateDB's ``run_gc_once`` deletes; these pin each rule's edges (inclusive/exclusive WAL
ranges, the latest manifest, pinned manifests, the compacted cutoff)."""

from __future__ import annotations

from dataclasses import replace

from ulid import ULID

from slate_ops.engines.slatedb.gc_plan import GcPlanning, GcPolicy, ListedObject
from slate_ops.engines.slatedb.views import CheckpointView, ManifestView, SstView

NOW_MS = 10_000_000
OLD_MS = NOW_MS - 400_000  # older than SlateDB's default 300 s
YOUNG_MS = NOW_MS - 100_000


def manifest(manifest_id: int, **changes: object) -> ManifestView:
    base = ManifestView(
        id=manifest_id,
        writer_epoch=1,
        compactor_epoch=1,
        initialized=True,
        l0=(),
        sorted_runs=(),
        checkpoints=(),
        external_dbs=(),
        segments=0,
        next_wal_sst_id=100,
        replay_after_wal_id=0,
        last_compacted_l0_sst_view_id=None,
        last_l0_seq=0,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def checkpoint(cid: str, manifest_id: int, expire_s: int | None = None) -> CheckpointView:
    return CheckpointView(cid, manifest_id, create_time_s=0, expire_time_s=expire_s, name=None)


def obj(key: str, mtime_ms: int = OLD_MS, size: int = 10) -> ListedObject:
    return ListedObject(key, size, mtime_ms)


def ulid_at(ms: int) -> str:
    return str(ULID.from_timestamp(ms / 1000))


def deleted(planning: GcPlanning) -> list[tuple[str, str]]:
    return [(d.directory, d.key) for d in planning.plan().deletions]


def test_wal_ranges_keep_from_the_latest_replay_point_and_inside_checkpointed_ranges() -> None:
    latest = manifest(9, replay_after_wal_id=10, checkpoints=(checkpoint("c", 5),))
    pinned = manifest(5, replay_after_wal_id=3, next_wal_sst_id=6)
    planning = GcPlanning("db", GcPolicy(), NOW_MS, latest, {9: latest, 5: pinned})
    planning.wal([(i, obj(f"w{i}")) for i in (3, 4, 5, 6, 9, 10, 11)] + [(2, obj("young", YOUNG_MS))])
    # 3: the checkpoint's range is (3, 6), exclusive at both ends; 10 on: the latest's [10, inf).
    assert deleted(planning) == [("wal", "w3"), ("wal", "w6"), ("wal", "w9")]
    assert planning.plan().listed == (("wal", 8),)


def test_wal_fences_are_collected_only_under_their_own_policy() -> None:
    latest = manifest(1, replay_after_wal_id=50)
    listed = [(1, obj("sst", size=10)), (2, obj("fence", size=0))]
    default = GcPlanning("db", GcPolicy(), NOW_MS, latest, {1: latest})
    default.wal(listed)
    assert deleted(default) == [("wal", "sst")]
    fences = GcPlanning("db", GcPolicy(wal=None, wal_fence=300.0), NOW_MS, latest, {1: latest})
    fences.wal(listed)
    assert deleted(fences) == [("wal_fence", "fence")]
    assert fences.plan().listed == (("wal_fence", 1),)


def test_manifests_keep_the_latest_the_pinned_the_newer_and_the_young() -> None:
    live = checkpoint("live", 3)
    latest = manifest(7, checkpoints=(live,))
    planning = GcPlanning("db", GcPolicy(), NOW_MS, latest, {7: latest})
    planning.manifests(
        [(2, obj("m2")), (3, obj("m3")), (4, obj("m4", YOUNG_MS)), (7, obj("m7")), (8, obj("m8"))], 300.0
    )
    assert deleted(planning) == [("manifest", "m2")]


def test_an_expired_checkpoint_makes_the_latest_eligible_and_frees_its_manifest() -> None:
    expired = checkpoint("gone", 3, expire_s=NOW_MS // 1000 - 1)
    latest = manifest(7, checkpoints=(expired,))
    planning = GcPlanning("db", GcPolicy(), NOW_MS, latest, {7: latest})
    planning.manifests([(3, obj("m3")), (7, obj("m7"))], 300.0)
    plan = planning.plan()
    assert deleted(planning) == [("manifest", "m3"), ("manifest", "m7")]
    assert plan.expired_checkpoints == ("gone",)
    assert plan.expired_checkpoint_views == (expired,)
    assert plan.notes == ("removes 1 expired checkpoint(s) first, writing manifest 8",)


def test_the_compacted_cutoff_is_the_earliest_of_age_compactions_and_newest_l0() -> None:
    l0 = SstView(view_id="v", sst_id=ulid_at(5_000_000), first_key=None, last_key=None, size=1)
    latest = manifest(1, l0=(l0,))
    planning = GcPlanning("db", GcPolicy(), NOW_MS, latest, {1: latest})
    assert planning.compacted_cutoff([ulid_at(7_000_000), ulid_at(8_000_000)], 300.0) == 5_000_000
    assert planning.compacted_cutoff([ulid_at(4_000_000)], 300.0) == 4_000_000
    assert planning.compacted_cutoff([], 300.0) == 0  # no compaction recorded: the epoch
    assert planning.plan().notes[-1].startswith("compacted SSTs: cutoff is the epoch")


def test_compacted_ssts_before_the_cutoff_and_unreferenced_are_deleted() -> None:
    kept = ulid_at(1_000)
    latest = manifest(1, l0=(SstView("v", kept, None, None, 1),))
    planning = GcPlanning("db", GcPolicy(), NOW_MS, latest, {1: latest})
    before, at = ULID.from_str(ulid_at(2_000)), ULID.from_str(ulid_at(3_000))
    planning.compacted([(ULID.from_str(kept), obj("kept")), (before, obj("before")), (at, obj("at"))], 3_000)
    assert deleted(planning) == [("compacted", "before")]


def test_every_compactions_file_but_the_latest_once_old() -> None:
    latest = manifest(1)
    planning = GcPlanning("db", GcPolicy(), NOW_MS, latest, {1: latest})
    planning.compactions([(1, obj("c1")), (2, obj("c2", YOUNG_MS)), (3, obj("c3"))], 300.0)
    assert deleted(planning) == [("compactions", "c1")]
