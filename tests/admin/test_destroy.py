"""Destroying databases (SlateDB's Checkpoints and Clones design, "Deleting a Database"): soft, hard,
dry runs and clones."""

from __future__ import annotations

import contextlib
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from ulid import ULID

from slate_ops import Db, DbReader, admin
from slate_ops.admin.clone import FINAL_CHECKPOINT_PREFIX
from slate_ops.admin.fleet import discover_databases, latest_manifest_since
from slate_ops.compaction import Compactor
from slate_ops.compaction.state import CompactionRecord
from slate_ops.config import CheckpointOptions
from slate_ops.errors import (
    DbDestroyedError,
    DbNotFoundError,
    FencedError,
    InvalidDeletionError,
    SlateOpsError,
)
from slate_ops.gc import GarbageCollector, GcOptions
from slate_ops.gc.destroyed import release_external_checkpoints
from slate_ops.manifest.model import ExternalDb, Manifest, WriterCheckpoint
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import FaultInjectingStore, LocalStore, MemoryStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.wrappers import SimulatedCrash
from slate_ops.runtime import ManualRuntime
from tests.support.engine import QUIET_READER, quiet, simulate_crash
from tests.support.stores import snapshot

DB = "dbs/main"
NOW = 1_700_000_000.0


@pytest.fixture
def clock() -> ManualRuntime:
    return ManualRuntime(NOW)


def fill(store: ObjectStore, path: str = DB, rounds: int = 2) -> None:
    """L0 SSTs, WAL SSTs and a few manifests; the writer is closed cleanly."""
    with Db.open(path, store, quiet()) as db:
        for round_ in range(rounds):
            for i in range(20):
                db.put(b"k%02d" % i, b"v%d" % round_)
            db.flush_memtable()
        db.put(b"wal-only", b"w")


def current(store: ObjectStore, path: str = DB) -> Manifest:
    return ManifestStore(store, path).read_latest_required().value


def keys_under(store: ObjectStore, path: str) -> list[str]:
    return [m.key for m in store.list(path + "/")]


def leftovers(store: ObjectStore, path: str) -> set[str]:
    """What a deleted database keeps besides its GC boundary files: the tombstone manifest, the WAL
    fence, the last .compactions file and the gc/deleted.<id> marker."""
    return {k for k in keys_under(store, path) if not k.endswith(".boundary")}


def test_soft_destroy_fences_a_live_writer_and_removes_its_checkpoint(
    engine_store: ObjectStore, clock: ManualRuntime
) -> None:
    fill(engine_store)
    writer = Db.open(DB, engine_store, quiet())
    compactor = Compactor(DB, engine_store)
    writer.put(b"before", b"1")
    writer.flush()
    (writer_checkpoint,) = [c.id for c in current(engine_store).checkpoints if c.metadata is not None]
    before = len(keys_under(engine_store, DB))

    report = admin.destroy(DB, engine_store, clock=clock, dry_run=False)
    assert (report.soft, report.dry_run, report.destroyed_at_s) == (True, False, int(NOW))
    assert report.removed_writer_checkpoints == (writer_checkpoint,)
    assert report.deleted == () and report.released_parent_checkpoints == ()
    manifest = current(engine_store)
    assert manifest.destroyed_at_s == int(NOW)
    assert not [c for c in manifest.checkpoints if isinstance(c.metadata, WriterCheckpoint)]
    assert len(keys_under(engine_store, DB)) > before  # only added: manifests and the WAL fence

    writer.put(b"after", b"2")
    with pytest.raises(FencedError):
        writer.flush()  # its next WAL id is the fence
    with pytest.raises(FencedError):
        writer.close()
    with pytest.raises(FencedError):
        compactor.run_once(full=True)  # a running compactor is fenced too

    with pytest.raises(DbDestroyedError):
        Db.open(DB, engine_store, quiet())
    with pytest.raises(DbDestroyedError):
        DbReader.open(DB, engine_store, options=QUIET_READER)
    with pytest.raises(DbDestroyedError):
        admin.create_checkpoint(DB, engine_store)
    with pytest.raises(DbDestroyedError):
        admin.create_clone("dbs/clone", DB, engine_store)
    assert admin.describe_db(DB, engine_store).destroyed_at_s == int(NOW)


def test_soft_destroy_again_keeps_the_first_time_and_a_dry_run_changes_nothing(
    local_dir_store: LocalStore, clock: ManualRuntime
) -> None:
    fill(local_dir_store)
    before = snapshot(local_dir_store)
    dry = admin.destroy(DB, local_dir_store, dry_run=True, clock=clock)
    assert snapshot(local_dir_store) == before
    assert (dry.dry_run, dry.destroyed_at_s, dry.deleted) == (True, int(NOW), ())
    admin.destroy(DB, local_dir_store, clock=clock, dry_run=False)
    clock.advance(100)
    again = admin.destroy(DB, local_dir_store, clock=clock, dry_run=False)
    assert again.destroyed_at_s == int(NOW)  # the grace period is not restarted
    assert current(local_dir_store).destroyed_at_s == int(NOW)


def test_hard_destroy_with_a_live_checkpoint_deletes_nothing(
    local_dir_store: LocalStore, clock: ManualRuntime
) -> None:
    fill(local_dir_store)
    checkpoint = admin.create_checkpoint(
        DB, local_dir_store, CheckpointOptions(lifetime="1h", name="nightly"), clock=clock
    )
    before = snapshot(local_dir_store)
    for dry_run in (True, False):
        with pytest.raises(InvalidDeletionError, match=rf"{checkpoint.id} \(nightly\).*Nothing was deleted"):
            admin.destroy(DB, local_dir_store, soft=False, dry_run=dry_run, clock=clock)
    assert snapshot(local_dir_store) == before
    # A live writer holds a checkpoint too; a crashed one leaves it: soft destroy removes it.
    writer = Db.open(DB, local_dir_store, quiet())
    with pytest.raises(InvalidDeletionError):
        admin.destroy(DB, local_dir_store, soft=False, clock=clock, dry_run=False)
    simulate_crash(writer)
    clock.advance(3601)  # "nightly" expired: only the crashed writer's checkpoint is left
    with pytest.raises(InvalidDeletionError, match="1 unexpired"):
        admin.destroy(DB, local_dir_store, soft=False, clock=clock, dry_run=False)
    admin.destroy(DB, local_dir_store, clock=clock, dry_run=False)
    report = admin.destroy(DB, local_dir_store, soft=False, clock=clock, dry_run=False)
    assert report.destroyed_at_s == int(NOW) + 3601  # kept from the soft destroy
    assert leftovers(local_dir_store, DB) == set(report.kept)


def test_hard_destroy_of_a_clone_removes_everything_and_releases_the_parent(
    engine_store: ObjectStore, clock: ManualRuntime
) -> None:
    fill(engine_store, "dbs/parent")
    admin.create_clone(DB, "dbs/parent", engine_store, clock=clock)
    fill(engine_store, DB, rounds=1)  # the clone's own SSTs and WAL
    final = current(engine_store).external_dbs[0].final_checkpoint_id
    assert [c.id for c in current(engine_store, "dbs/parent").checkpoints if c.name] == [final]
    with pytest.raises(InvalidDeletionError, match=FINAL_CHECKPOINT_PREFIX + DB):
        admin.destroy(
            "dbs/parent", engine_store, soft=False, clock=clock, dry_run=False
        )  # the clone needs it
    parent_objects = snapshot(engine_store, "dbs/parent/compacted/")

    report = admin.destroy(DB, engine_store, soft=False, clock=clock, dry_run=False)
    assert report.released_parent_checkpoints == (("dbs/parent", final),)
    assert report.deleted[-1].endswith(".manifest") and len(report.deleted) == len(set(report.deleted))
    assert leftovers(engine_store, DB) == set(report.kept) and report.tombstone in report.kept
    assert current(engine_store, "dbs/parent").checkpoint(final) is None
    assert snapshot(engine_store, "dbs/parent/compacted/") == parent_objects
    with DbReader.open("dbs/parent", engine_store, options=QUIET_READER) as reader:
        assert reader.get(b"wal-only") == b"w"
    with pytest.raises(DbNotFoundError, match="was deleted at"):
        current(engine_store)
    again = admin.destroy(DB, engine_store, soft=False, clock=clock, dry_run=False)  # nothing left to delete
    assert (again.deleted, again.tombstone) == ((), report.tombstone)
    parent = admin.destroy("dbs/parent", engine_store, soft=False, clock=clock, dry_run=False)
    assert leftovers(engine_store, "dbs/parent") == set(parent.kept)  # nothing held it any more


@pytest.mark.parametrize("already_soft", [False, True], ids=["live", "soft-destroyed"])
def test_hard_dry_run_reports_exactly_what_a_real_run_deletes(
    local_dir_store: LocalStore, clock: ManualRuntime, already_soft: bool
) -> None:
    fill(local_dir_store, "dbs/parent")
    admin.create_clone(DB, "dbs/parent", local_dir_store, clock=clock)
    fill(local_dir_store, DB, rounds=1)
    if already_soft:
        admin.destroy(DB, local_dir_store, clock=clock, dry_run=False)
    before = snapshot(local_dir_store)
    dry = admin.destroy(DB, local_dir_store, soft=False, dry_run=True, clock=clock)
    assert snapshot(local_dir_store) == before
    real = admin.destroy(DB, local_dir_store, soft=False, clock=clock, dry_run=False)
    assert dry.deleted == real.deleted and real.deleted
    existing = {k for k in before if k.startswith(DB + "/")}
    assert existing <= set(real.deleted) and set(real.deleted) - existing <= {real.deleted[-1]}
    assert dry.released_parent_checkpoints == real.released_parent_checkpoints
    assert dry.destroyed_at_s == real.destroyed_at_s
    assert (dry.tombstone, dry.kept) == (real.tombstone, real.kept)
    assert leftovers(local_dir_store, DB) == set(real.kept)


def test_a_crash_at_every_step_of_a_hard_destroy_is_finished_by_a_rerun(
    local_dir_store: LocalStore, clock: ManualRuntime
) -> None:
    fill(local_dir_store, "dbs/parent")
    for n in range(500):
        clone = f"dbs/clone{n}"
        admin.create_clone(clone, "dbs/parent", local_dir_store, clock=clock)
        fill(local_dir_store, clone, rounds=1)
        faulty = FaultInjectingStore(local_dir_store)
        faulty.crash_after(n)
        try:
            report = admin.destroy(clone, faulty, soft=False, clock=clock, dry_run=False)
        except SimulatedCrash:
            assert ManifestStore(local_dir_store, clone).read_current() is not None  # the tombstone stays
            report = admin.destroy(clone, local_dir_store, soft=False, clock=clock, dry_run=False)
        else:
            break
        assert leftovers(local_dir_store, clone) == set(report.kept)
        assert not [
            c
            for c in current(local_dir_store, "dbs/parent").checkpoints
            if c.name == FINAL_CHECKPOINT_PREFIX + clone
        ]
    else:
        pytest.fail("destroy never completed")
    assert n >= 10


def test_release_external_checkpoints_is_idempotent_and_tolerates_missing_parents(
    local_dir_store: LocalStore, clock: ManualRuntime
) -> None:
    fill(local_dir_store, "dbs/parent")
    clone = admin.create_clone(DB, "dbs/parent", local_dir_store, clock=clock).value
    ghost = ExternalDb("dbs/gone", uuid.uuid4(), uuid.uuid4())
    manifest = clone.with_changes(external_dbs=(*clone.external_dbs, ghost))
    final = clone.external_dbs[0].final_checkpoint_id
    assert release_external_checkpoints(manifest, local_dir_store) == [("dbs/parent", final)]
    assert release_external_checkpoints(manifest, local_dir_store) == []
    admin.destroy("dbs/parent", local_dir_store, clock=clock, dry_run=False)  # a destroyed parent is fine too
    assert release_external_checkpoints(manifest, local_dir_store) == []


def test_hard_destroy_deletes_only_its_own_directories_and_spares_nested_databases_and_siblings(
    local_dir_store: LocalStore, clock: ManualRuntime
) -> None:
    fill(local_dir_store)
    fill(local_dir_store, DB + "/nested", rounds=1)
    fill(local_dir_store, DB + "x", rounds=1)  # a sibling whose name starts the same
    local_dir_store.put(DB + "/README", b"not a database object")
    others = {
        k: v
        for k, v in snapshot(local_dir_store).items()
        if not k.startswith(DB + "/") or k == DB + "/README"
    }
    others.update(snapshot(local_dir_store, DB + "/nested/"))
    dry = admin.destroy(DB, local_dir_store, soft=False, dry_run=True, clock=clock)
    assert not [k for k in dry.deleted if k.startswith((DB + "/nested/", DB + "x/")) or k == DB + "/README"]
    real = admin.destroy(DB, local_dir_store, soft=False, clock=clock, dry_run=False)
    assert real.deleted == dry.deleted
    survivors = snapshot(local_dir_store)
    assert {k: survivors.get(k) for k in others} == others
    own = {k for k in survivors if k.startswith(DB + "/") and not k.startswith(DB + "/nested/")}
    assert own - {DB + "/README"} == set(real.kept) | {k for k in own if k.startswith(DB + "/gc/")}
    with DbReader.open(DB + "/nested", local_dir_store, options=QUIET_READER) as reader:
        assert reader.get(b"wal-only") == b"w"


def test_a_crash_at_every_step_of_a_soft_destroy_is_finished_by_a_rerun(
    local_dir_store: LocalStore, clock: ManualRuntime
) -> None:
    for n in range(100):
        path = f"dbs/db{n}"
        fill(local_dir_store, path, rounds=1)
        writer = Db.open(path, local_dir_store, quiet())
        faulty = FaultInjectingStore(local_dir_store)
        faulty.crash_after(n)
        try:
            admin.destroy(path, faulty, clock=clock, dry_run=False)
        except SimulatedCrash:
            admin.destroy(path, local_dir_store, clock=clock, dry_run=False)
        else:
            simulate_crash(writer)
            break
        assert current(local_dir_store, path).destroyed_at_s == int(NOW)
        writer.put(b"late", b"1")
        with pytest.raises(FencedError):
            writer.flush()
        simulate_crash(writer)
    else:
        pytest.fail("destroy never completed")
    assert n >= 5


def test_cli_clone_and_destroy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from slate_ops.cli import main

    monkeypatch.setenv("SLATE_OPS_STORE", (tmp_path / "cli").as_uri())
    store = LocalStore(tmp_path / "cli")
    fill(store, "parent")

    def run(*argv: str) -> tuple[int, object, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, json.loads(out) if out.strip() else None, err

    code, cloned, _ = run("--path", "clone", "clone", "--parent", "parent")
    assert code == 0 and isinstance(cloned, dict)
    # one shape on both engines (issue 21): the clone's summary, external_dbs a count
    assert cloned["initialized"] is True and (cloned["parent"], cloned["external_dbs"]) == ("parent", 1)
    assert run("--path", "clone", "clone", "--parent", "other")[0] == 1  # CloneMismatchError
    code, _, err = run("--path", "parent", "destroy", "--hard")
    assert code == 1 and "clone:clone" in err and "Nothing was deleted" in err
    before = snapshot(store)
    _, final, _ = run("--path", "parent", "list-checkpoints", "-n", "slate_ops/clone:clone")
    assert isinstance(final, list) and len(final) == 1  # the clone's final checkpoint (docs/cli.md)
    code, dry, _ = run("--path", "clone", "destroy", "--hard", "--dry-run")
    assert code == 0 and snapshot(store) == before
    code, real, _ = run("--path", "clone", "destroy", "--hard")
    assert isinstance(dry, dict) and isinstance(real, dict) and dry["deleted"] == real["deleted"]
    assert real["released_parent_checkpoints"] == [["parent", final[0]["id"]]]
    code, soft, _ = run("--path", "parent", "destroy")
    assert code == 0 and isinstance(soft, dict) and soft["soft"] is True and soft["deleted"] == []
    with pytest.raises(SystemExit):
        main(["--path", "clone", "clone", "--parent", "parent", "--checkpoint", "nope"])


# --- the adversary: stale processes across a deletion, the root database, nested names -------------
# (docs/design/clones-and-destroy.md, "Deleting a Database")

GRACE = timedelta(hours=1)


def delete(store: ObjectStore, clock: ManualRuntime, route: str, path: str = DB) -> None:
    """Soft destroy, then delete: by hard destroy (what docs/cli.md recommends) or by GC past the grace."""
    admin.destroy(path, store, clock=clock, dry_run=False)
    if route == "hard":
        admin.destroy(path, store, soft=False, clock=clock, dry_run=False)
    else:
        clock.advance(GRACE.total_seconds())
        report = GarbageCollector(path, store, GcOptions(db_delete_grace=GRACE), clock=clock).run_once(
            dry_run=False
        )
        assert report.destroyed


def manifest_ids(store: ObjectStore, path: str = DB) -> list[int]:
    return [f.id for f in ManifestStore(store, path).list()]


def assert_deleted_and_reusable(
    store: ObjectStore, clock: ManualRuntime, tombstone_id: int, path: str = DB
) -> None:
    """The path reads as no database, its tombstone is still the latest manifest, nothing references
    anything missing, and a new database there holds nothing old."""
    manifests = ManifestStore(store, path)
    current = manifests.read_current()
    assert current is not None and current.id == tombstone_id and current.value.is_tombstone
    assert max(manifest_ids(store, path)) == tombstone_id
    assert manifests.read_latest() is None
    with pytest.raises(DbNotFoundError, match="was deleted at"):
        DbReader.open(path, store, options=QUIET_READER)
    assert admin.check_references(store, now=clock.now()) == []
    assert path not in discover_databases(store) and path not in [d.path for d in admin.list_dbs("", store)]
    for known in (None, 1, tombstone_id - 1):  # a fleet sensor's tick: the database is gone
        with pytest.raises(DbNotFoundError, match="was deleted at"):
            latest_manifest_since(path, store, known)
    with pytest.raises(DbNotFoundError, match="was deleted at"):  # its probe finds the tombstone
        latest_manifest_since(path, store, tombstone_id - 1, probe=True)
    with Db.open(path, store, quiet(), clock=clock) as db:
        assert list(db.scan()) == []
        db.put(b"new", b"life")
    with DbReader.open(path, store, options=QUIET_READER) as reader:
        assert list(reader.scan()) == [(b"new", b"life")]


@pytest.mark.parametrize("route", ["hard", "gc"])
def test_a_paused_writer_cannot_acknowledge_commit_or_resurrect_after_a_deletion(
    local_dir_store: LocalStore, clock: ManualRuntime, route: str
) -> None:
    fill(local_dir_store)
    stale = Db.open(
        DB, local_dir_store, quiet(), clock=clock
    )  # quiet: it does not poll the manifest ("paused")
    stale.put(b"before", b"1", await_durable=True)
    delete(local_dir_store, clock, route)
    tombstone = ManifestStore(local_dir_store, DB).read_current()
    assert tombstone is not None and tombstone.value.is_tombstone
    with pytest.raises(FencedError):  # never acknowledged into a deleted database
        stale.put(b"late", b"2", await_durable=True)
    with pytest.raises(SlateOpsError):
        stale.flush_memtable()  # its L0 commit: fenced (or refused: the writer already failed)
    with contextlib.suppress(SlateOpsError):
        stale.close()
    assert_deleted_and_reusable(local_dir_store, clock, tombstone.id)
    with pytest.raises(SlateOpsError):  # the new database did not un-fence it
        stale.put(b"later", b"3", await_durable=True)


@pytest.mark.parametrize("route", ["hard", "gc"])
def test_a_paused_compactor_cannot_commit_after_a_deletion(
    local_dir_store: LocalStore, clock: ManualRuntime, route: str
) -> None:
    fill(local_dir_store, rounds=3)
    compactor = Compactor(DB, local_dir_store, clock=clock)
    try:
        delete(local_dir_store, clock, route)
        tombstone = ManifestStore(local_dir_store, DB).read_current()
        assert tombstone is not None
        before = snapshot(local_dir_store)
        with pytest.raises(SlateOpsError):  # fenced, or its input SSTs are gone
            compactor.run_once(full=True)
        # Its .compactions commits are fenced by the file the deletion kept (and its boundary).
        record = CompactionRecord(str(ULID()), compactor.epoch, "l0", "running", ())
        with pytest.raises(FencedError):
            compactor.compactions.record(record)
        added = set(snapshot(local_dir_store)) - set(before)
        assert not [k for k in added if k.endswith((".manifest", ".compactions"))]
    finally:
        with contextlib.suppress(SlateOpsError):
            compactor.close()
    assert_deleted_and_reusable(local_dir_store, clock, tombstone.id)


@pytest.mark.parametrize("route", ["hard", "gc"])
def test_a_stale_admin_process_cannot_commit_after_a_deletion(
    local_dir_store: LocalStore, clock: ManualRuntime, route: str
) -> None:
    fill(local_dir_store)
    stale = ManifestStore(local_dir_store, DB)
    stale.read_latest_required()  # holds manifest M
    delete(local_dir_store, clock, route)
    tombstone = ManifestStore(local_dir_store, DB).read_current()
    assert tombstone is not None
    with pytest.raises(DbNotFoundError, match="was deleted at"):
        stale.update(lambda current: current.value.with_changes(last_l0_seq=99))
    assert_deleted_and_reusable(local_dir_store, clock, tombstone.id)


def test_root_database_deletion_spares_objects_of_no_database_and_nested_databases(
    local_dir_store: LocalStore, clock: ManualRuntime
) -> None:
    fill(local_dir_store, "")
    fill(local_dir_store, "team/db", rounds=1)
    local_dir_store.put("README", b"about this bucket")
    local_dir_store.put("backups/2026-11-01.tar", b"a backup")
    others = {
        k: v for k, v in snapshot(local_dir_store).items() if k.startswith(("README", "backups/", "team/"))
    }
    dry = admin.destroy("", local_dir_store, soft=False, dry_run=True, clock=clock)
    assert dry.deleted and all(
        k.startswith(("manifest/", "wal/", "compacted/", "compactions/")) for k in dry.deleted
    )
    real = admin.destroy("", local_dir_store, soft=False, clock=clock, dry_run=False)
    assert real.deleted == dry.deleted and (real.tombstone, real.kept) == (dry.tombstone, dry.kept)
    after = snapshot(local_dir_store)
    assert {k: after.get(k) for k in others} == others
    root_left = {k for k in after if k not in others}
    assert root_left == set(real.kept) | {k for k in root_left if k.startswith("gc/")}
    with DbReader.open("team/db", local_dir_store, options=QUIET_READER) as reader:
        assert reader.get(b"wal-only") == b"w"
    assert (
        admin.list_dbs("", local_dir_store)[0].path == "team/db"
        and len(admin.list_dbs("", local_dir_store)) == 1
    )
    assert_deleted_and_reusable(
        local_dir_store, clock, int(real.tombstone.rsplit("/", 1)[1].split(".")[0]), ""
    )


RESERVED = ("wal", "manifest", "compacted", "compactions", "gc")


def plant_nested(store: ObjectStore, path: str) -> dict[str, bytes]:
    """A database copied under ``<path>/<name>`` for every reserved directory name: what a database
    named ``a/wal`` (refused today, docs/design/names.md) would have written, or a foreign copy."""
    source = MemoryStore()
    with Db.open("src", source, quiet()) as db:
        db.put(b"planted", b"p")
        db.flush_memtable()
        db.put(b"planted-wal", b"p")  # left in its WAL: ids 1.. under <path>/<name>/wal/
    planted: dict[str, bytes] = {}
    for name in RESERVED:
        prefix = f"{path}/{name}" if path else name
        for meta in source.list("src/"):
            key = prefix + meta.key[len("src") :]
            planted[key] = source.get(meta.key).data
            store.put(key, planted[key])
    return planted


@pytest.mark.parametrize("path", ["", "a", "x/y/a"], ids=["root", "a", "x-y-a"])
def test_a_database_nested_in_a_reserved_directory_never_breaks_the_outer_one(
    clock: ManualRuntime, path: str
) -> None:
    store = MemoryStore("nested", now=lambda: datetime.fromtimestamp(clock.now(), UTC))
    fill(store, path)
    planted = plant_nested(store, path)
    with Db.open(path, store, quiet(), clock=clock) as db:  # replays its own WAL only
        assert (db.get(b"wal-only"), db.get(b"k00"), db.get(b"planted-wal")) == (b"w", b"v1", None)
        db.flush_memtable()
    with DbReader.open(path, store, options=QUIET_READER) as reader:
        assert reader.get(b"wal-only") == b"w" and reader.get(b"planted") is None
    if path:  # split reads its WAL listing: the nested WAL is not "writes left in its WAL"
        admin.split(path, store, [b"k10"], [f"shards{path}/0", f"shards{path}/1"], clock=clock)
    clock.advance(7 * 86_400)
    GarbageCollector(path, store, GcOptions(), clock=clock).run_once(dry_run=False)
    assert {k: store.get(k).data for k in planted} == planted
    with DbReader.open(path, store, options=QUIET_READER) as reader:
        assert reader.get(b"wal-only") == b"w"
    if path:
        for shard in (f"shards{path}/0", f"shards{path}/1"):
            admin.destroy(shard, store, soft=False, clock=clock, dry_run=False)
    admin.destroy(path, store, clock=clock, dry_run=False)
    dry = admin.destroy(path, store, soft=False, dry_run=True, clock=clock)
    real = admin.destroy(path, store, soft=False, clock=clock, dry_run=False)
    assert real.deleted == dry.deleted and not set(real.deleted) & set(planted)
    assert {k: store.get(k).data for k in planted} == planted
