"""Split and merge (SlateDB's Checkpoints and Clones design, "Manifest Projection and Union"): content,
ranges, refusals, resumability."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slate_ops import Db, admin
from slate_ops.admin.rescale import MERGE_CHECKPOINT_PREFIX, SPLIT_CHECKPOINT_PREFIX
from slate_ops.compaction import CompactorOptions
from slate_ops.errors import (
    CloneMismatchError,
    DbNotInitializedError,
    InvalidArgumentError,
    NonAdjacentSourcesError,
    OutOfRangeError,
    OverlappingSourcesError,
    WalNotFlushedError,
)
from slate_ops.gc import GarbageCollector, GcOptions
from slate_ops.layout import sst_key
from slate_ops.manifest.model import KeyRange, SortedRun, SstView
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import FaultInjectingStore, LocalStore, MemoryStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.wrappers import SimulatedCrash
from slate_ops.runtime import SYSTEM_RUNTIME, ManualRuntime, Runtime
from tests.support.compaction import compact_once
from tests.support.db_state import contents, manifest
from tests.support.engine import quiet
from tests.support.stores import snapshot

SOURCE = "dbs/source"
FULL = CompactorOptions(min_sources=2, target_sst_bytes=2048, max_subcompaction_bytes=1 << 20)


def build_source(
    store: ObjectStore, path: str = SOURCE, keys: range = range(100), *, clock: Runtime = SYSTEM_RUNTIME
) -> dict[bytes, bytes]:
    """Sorted runs from a full compaction plus L0 SSTs (with tombstones) on top; WAL fully flushed."""
    model: dict[bytes, bytes] = {}
    with Db.open(path, store, quiet(l0_max_ssts=1000), clock=clock) as db:
        for round_ in range(3):
            for i in keys[round_ :: round_ + 1]:
                key, value = b"k%03d" % i, b"r%d-%d" % (round_, i)
                db.put(key, value)
                model[key] = value
            db.delete(b"k%03d" % keys[round_ * 7])
            model.pop(b"k%03d" % keys[round_ * 7], None)
            db.flush_memtable()
    compact_once(path, store, FULL, clock=clock)
    with Db.open(path, store, quiet(l0_max_ssts=1000), clock=clock) as db:
        for i in keys[::5]:
            db.put(b"k%03d" % i, b"l0-%d" % i)
            model[b"k%03d" % i] = b"l0-%d" % i
        db.delete(b"k%03d" % keys[3])
        model.pop(b"k%03d" % keys[3], None)
        db.flush_memtable()
    return model


def restricted(model: dict[bytes, bytes], key_range: KeyRange) -> dict[bytes, bytes]:
    return {k: v for k, v in model.items() if key_range.contains(k)}


# --- content --------------------------------------------------------------------------------------


def test_split_then_merge_restores_the_content_and_shape(engine_store: ObjectStore) -> None:
    store = engine_store
    model = build_source(store)
    before = manifest(store, SOURCE)
    report = admin.split(SOURCE, store, [b"k030", b"k070"], ["dbs/s0", "dbs/s1", "dbs/s2"])
    assert [d.key_range for d in report.databases] == [
        KeyRange(None, b"k030"),
        KeyRange(b"k030", b"k070"),
        KeyRange(b"k070", None),
    ]
    for database in report.databases:
        assert contents(store, database.path) == restricted(model, database.key_range or KeyRange())
        # Sorted run ids are preserved by projection (spec: union matches tiers by id).
        assert {r.id for r in manifest(store, database.path).compacted} <= {r.id for r in before.compacted}

    merged = admin.merge(["dbs/s2", "dbs/s0", "dbs/s1"], store, "dbs/merged")
    assert merged.databases[0].key_range == KeyRange()
    assert contents(store, "dbs/merged") == model
    after = manifest(store, "dbs/merged")
    assert [r.id for r in after.compacted] == [r.id for r in before.compacted]
    # Adjacent views of one SST within a run are joined again: the runs have their original views.
    assert [len(r.views) for r in after.compacted] == [len(r.views) for r in before.compacted]
    assert after.last_l0_seq >= before.last_l0_seq
    assert (after.writer_epoch, after.compactor_epoch) == (0, 0)
    # The merged database is writable and its new writes win over the carried-over data.
    with Db.open("dbs/merged", store, quiet()) as db:
        db.put(b"k010", b"new")
        assert db.get(b"k010") == b"new"


def test_split_and_merge_copy_no_sst(tmp_path: Path) -> None:
    """Metadata only: every read, write or copy of an SST object would raise."""
    inner = LocalStore(tmp_path / "store")
    model = build_source(inner)
    store = FaultInjectingStore(inner)
    for op in ("get", "put", "delete"):
        store.fail(op, key_contains="/compacted/", times=None, error=AssertionError("SST touched"))
    admin.split(SOURCE, store, [b"k050"], ["dbs/a", "dbs/b"])
    admin.merge(["dbs/a", "dbs/b"], store, "dbs/c")
    assert contents(inner, "dbs/c") == model


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(
        st.tuples(st.integers(0, 40), st.none() | st.binary(min_size=1, max_size=4), st.booleans()),
        min_size=1,
        max_size=80,
    ),
    cuts=st.lists(st.integers(1, 40), min_size=1, max_size=3, unique=True),
    compact=st.booleans(),
)
def test_split_then_merge_is_the_identity(
    ops: list[tuple[int, bytes | None, bool]], cuts: list[int], compact: bool
) -> None:
    """Random writes and deletes, flushed at random points, split at random keys: every shard holds
    exactly the original restricted to its range and refuses keys outside it; merging gives back
    exactly the original."""
    store = MemoryStore()
    model: dict[bytes, bytes] = {}
    with Db.open("src", store, quiet(l0_max_ssts=1000)) as db:
        for i, value, flush in ops:
            key = b"%02d" % i
            if value is None:
                db.delete(key)
                model.pop(key, None)
            else:
                db.put(key, value)
                model[key] = value
            if flush:
                db.flush_memtable()
        db.flush_memtable()
    if compact:
        compact_once("src", store, FULL)
    keys = [b"%02d" % c for c in sorted(cuts)]
    targets = [f"shard{i}" for i in range(len(keys) + 1)]
    report = admin.split("src", store, keys, targets)
    for database in report.databases:
        key_range = database.key_range
        assert key_range is not None
        assert contents(store, database.path) == restricted(model, key_range)
        outside = b"%02d" % (int(keys[0]) - 1) if key_range.start is not None else keys[0]
        with Db.open(database.path, store, quiet()) as db:
            with pytest.raises(OutOfRangeError, match="outside"):
                db.put(outside, b"x")
            with pytest.raises(OutOfRangeError):
                db.get(outside)
    admin.merge(targets, store, "merged")
    assert contents(store, "merged") == model


def test_repeated_split_and_merge_does_not_grow_external_dbs(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    model = build_source(store)
    current = SOURCE
    sizes = []
    for cycle in range(4):
        shards = [f"dbs/c{cycle}-{i}" for i in range(3)]
        admin.split(current, store, [b"k020", b"k060"], shards)
        current = f"dbs/m{cycle}"
        admin.merge(shards, store, current)
        sizes.append(len(manifest(store, current).external_dbs))
        assert contents(store, current) == model
    assert sizes == [sizes[0]] * 4 and sizes[0] <= 2, sizes


def test_union_renames_colliding_sst_ids_and_reads_both_files(tmp_path: Path) -> None:
    """Two independent databases whose SSTs share an id (ULIDs are not globally unique)."""
    store = LocalStore(tmp_path / "store")
    low = build_source(store, "dbs/low", range(0, 50))
    high = build_source(store, "dbs/high", range(50, 100))
    # Give one of high's SSTs the id of one of low's, renaming its file accordingly.
    low_id = manifest(store, "dbs/low").compacted[0].views[0].sst_id
    versions = ManifestStore(store, "dbs/high")
    current = versions.read_latest_required()
    victim = current.value.compacted[0].views[0].sst_id
    data = store.get(sst_key("dbs/high", victim)).data
    store.put(sst_key("dbs/high", low_id), data)
    store.delete(sst_key("dbs/high", victim))
    ssts = tuple(s if s.id != victim else type(s)(low_id, s.info) for s in current.value.ssts)
    runs = tuple(
        SortedRun(
            r.id, tuple(SstView(v.view_id, low_id if v.sst_id == victim else v.sst_id) for v in r.views)
        )
        for r in current.value.compacted
    )
    versions.update(lambda c: c.value.with_changes(ssts=ssts, compacted=runs))
    assert contents(store, "dbs/high") == high

    admin.merge(["dbs/low", "dbs/high"], store, "dbs/both")
    merged = manifest(store, "dbs/both")
    renamed = [s for s in merged.ssts if s.original_id is not None]
    assert [s.original_id for s in renamed] == [low_id]
    assert renamed[0].id != low_id and merged.sst(low_id) is not None
    assert contents(store, "dbs/both") == {**low, **high}
    # A clone of the union resolves the renamed file too.
    admin.create_clone("dbs/both-clone", "dbs/both", store)
    assert contents(store, "dbs/both-clone") == {**low, **high}


def test_shards_compact_and_gc_without_losing_data(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    clock = ManualRuntime(1_700_000_000.0)
    model = build_source(store)
    admin.split(SOURCE, store, [b"k050"], ["dbs/a", "dbs/b"], clock=clock)
    with Db.open("dbs/a", store, quiet(), clock=clock) as db:
        db.put(b"k001", b"shard-write")
        db.flush_memtable()
    model[b"k001"] = b"shard-write"
    # The source compacts and runs GC: the shards' final checkpoints keep its SSTs.
    compact_once(SOURCE, store, FULL, clock=clock)
    gc = GcOptions()
    clock.advance(3600)
    GarbageCollector(SOURCE, store, gc, clock=clock).run_once(dry_run=False)
    assert contents(store, "dbs/a") | contents(store, "dbs/b") == model
    # The shard compacts everything into its own SSTs: GC detaches it from the source.
    compact_once("dbs/a", store, FULL, clock=clock)
    assert contents(store, "dbs/a") == restricted(model, KeyRange(None, b"k050"))
    clock.advance(3600)
    GarbageCollector("dbs/a", store, gc, clock=clock).run_once(dry_run=False)
    assert manifest(store, "dbs/a").external_dbs == ()
    assert contents(store, "dbs/a") == restricted(model, KeyRange(None, b"k050"))


# --- refusals (nothing written) -------------------------------------------------------------------


def test_overlapping_sources_are_refused_naming_both(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    build_source(store, "dbs/x", range(0, 60))
    build_source(store, "dbs/y", range(50, 100))
    before = snapshot(store)
    with pytest.raises(
        OverlappingSourcesError, match=r"'dbs/x'.*'dbs/y'.*overlap in \[k050, hex:6b30353900\)"
    ):
        admin.merge(["dbs/y", "dbs/x"], store, "dbs/z")
    assert snapshot(store) == before


def test_non_adjacent_shards_are_refused(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    build_source(store)
    admin.split(SOURCE, store, [b"k030", b"k070"], ["dbs/s0", "dbs/s1", "dbs/s2"])
    before = snapshot(store)
    with pytest.raises(NonAdjacentSourcesError, match="gap"):
        admin.merge(["dbs/s0", "dbs/s2"], store, "dbs/holes")
    assert snapshot(store) == before


def test_unflushed_wal_is_refused_with_the_instruction_to_flush(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    build_source(store)
    build_source(store, "dbs/other", range(100, 120))
    db = Db.open(SOURCE, store, quiet())
    db.put(b"k500", b"only-in-wal")
    db.flush()  # durable in the WAL, not in L0
    before = snapshot(store)
    with pytest.raises(WalNotFlushedError, match="flush"):
        admin.split(SOURCE, store, [b"k050"], ["dbs/a", "dbs/b"])
    with pytest.raises(WalNotFlushedError, match="dbs/source"):
        admin.merge(["dbs/other", SOURCE], store, "dbs/c")
    assert snapshot(store) == before
    db.flush_memtable()
    admin.split(SOURCE, store, [b"k050"], ["dbs/a", "dbs/b"])
    assert contents(store, "dbs/b")[b"k500"] == b"only-in-wal"
    db.close()


@pytest.mark.parametrize(
    ("keys", "targets", "message"),
    [
        ([], ["dbs/a"], "at least one split key"),
        ([b"k050"], ["dbs/a"], "one more path than keys"),
        ([b"k060", b"k050"], ["dbs/a", "dbs/b", "dbs/c"], "strictly increasing"),
        ([b"k050"], ["dbs/a", "dbs/a"], "distinct"),
        ([b"k050"], ["dbs/a", SOURCE], "own path"),
        ([b"k050"], ["dbs/a", "dbs/source/inner"], "nest"),
        ([b""], ["dbs/a", "dbs/b"], "empty"),
    ],
)
def test_bad_split_arguments_are_refused(
    tmp_path: Path, keys: list[bytes], targets: list[str], message: str
) -> None:
    store = LocalStore(tmp_path / "store")
    build_source(store)
    before = snapshot(store)
    with pytest.raises(InvalidArgumentError, match=message):
        admin.split(SOURCE, store, keys, targets)
    assert snapshot(store) == before


def test_a_shard_cannot_be_split_outside_its_range(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    build_source(store)
    admin.split(SOURCE, store, [b"k050"], ["dbs/a", "dbs/b"])
    before = snapshot(store)
    with pytest.raises(InvalidArgumentError, match="not strictly inside"):
        admin.split("dbs/a", store, [b"k060"], ["dbs/a0", "dbs/a1"])
    assert snapshot(store) == before
    admin.split("dbs/a", store, [b"k020"], ["dbs/a0", "dbs/a1"])  # a split of a shard narrows it
    assert manifest(store, "dbs/a1").visible_range == KeyRange(b"k020", b"k050")


def test_an_existing_unrelated_target_is_refused(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    build_source(store)
    admin.create_db("dbs/taken", store)
    before = snapshot(store)
    with pytest.raises(CloneMismatchError, match="dbs/taken"):
        admin.split(SOURCE, store, [b"k050"], ["dbs/a", "dbs/taken"])
    with pytest.raises(CloneMismatchError, match="dbs/taken"):
        admin.merge([SOURCE], store, "dbs/taken")
    assert snapshot(store) == before


# --- resumability ---------------------------------------------------------------------------------


@pytest.mark.parametrize("operation", ["split", "merge"])
def test_a_crash_at_every_step_is_completed_by_a_rerun(tmp_path: Path, operation: str) -> None:
    template = tmp_path / "template"
    base = LocalStore(template)
    model = build_source(base)
    if operation == "merge":
        admin.split(SOURCE, base, [b"k050"], ["dbs/a", "dbs/b"])

    def run(store: ObjectStore) -> None:
        if operation == "split":
            admin.split(SOURCE, store, [b"k050"], ["dbs/a", "dbs/b"])
        else:
            admin.merge(["dbs/a", "dbs/b"], store, "dbs/m")

    news = ["dbs/a", "dbs/b"] if operation == "split" else ["dbs/m"]
    prefix = SPLIT_CHECKPOINT_PREFIX if operation == "split" else MERGE_CHECKPOINT_PREFIX
    crashes = 0
    for n in range(200):
        root = tmp_path / f"run{n}"
        shutil.copytree(template, root)
        store = LocalStore(root)
        faulty = FaultInjectingStore(store)
        faulty.crash_after(n)
        try:
            run(faulty)
        except SimulatedCrash:
            crashes += 1
            for path in news:
                written = ManifestStore(store, path).read_latest()
                if written is not None and not written.value.initialized:
                    with pytest.raises(DbNotInitializedError):
                        Db.open(path, store, quiet())
        else:
            break
        run(store)  # the re-run
        got: dict[bytes, bytes] = {}
        for path in news:
            got.update(contents(store, path))
        assert got == model
        sources = [SOURCE] if operation == "split" else ["dbs/a", "dbs/b"]
        for source in sources:
            assert not [c for c in manifest(store, source).checkpoints if (c.name or "").startswith(prefix)]
    else:
        pytest.fail(f"{operation} never completed")
    assert crashes >= 8
    print(f"{operation} completed after {crashes} crashes")


def test_a_repeated_split_or_merge_is_a_no_op(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    build_source(store)
    admin.split(SOURCE, store, [b"k050"], ["dbs/a", "dbs/b"])
    admin.merge(["dbs/a", "dbs/b"], store, "dbs/m")
    before = snapshot(store)
    assert not admin.split(SOURCE, store, [b"k050"], ["dbs/a", "dbs/b"]).created
    assert not admin.merge(["dbs/a", "dbs/b"], store, "dbs/m").created
    assert snapshot(store) == before
    with pytest.raises(CloneMismatchError):
        admin.split(SOURCE, store, [b"k040"], ["dbs/a", "dbs/b"])
