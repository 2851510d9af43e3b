"""Destroying databases (spec 000 "Deleting a Database"): soft, hard, dry runs and clones."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from slate_ops import Db, DbReader, admin
from slate_ops.admin.clone import FINAL_CHECKPOINT_PREFIX
from slate_ops.clock import ManualClock
from slate_ops.compaction import Compactor
from slate_ops.config import CheckpointOptions
from slate_ops.errors import (
    DbDestroyedError,
    DbNotFoundError,
    FencedError,
    InvalidDeletionError,
)
from slate_ops.gc.destroyed import release_external_checkpoints
from slate_ops.manifest.model import ExternalDb, Manifest, WriterCheckpoint
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import FaultInjectingStore, LocalStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.wrappers import SimulatedCrash
from tests.conftest import snapshot
from tests.engine.conftest import QUIET_READER, engine_store, quiet, simulate_crash, stop_leftover_threads

FIXTURES = (engine_store, stop_leftover_threads)  # used by name: local and S3 stores, thread cleanup

DB = "dbs/main"
NOW = 1_700_000_000.0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "store")


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
    """What a deleted database keeps besides its gc/ boundary files: the tombstone manifest, the WAL
    fence and the last .compactions file."""
    return {k for k in keys_under(store, path) if not k.startswith(path + "/gc/")}


def test_soft_destroy_fences_a_live_writer_and_removes_its_checkpoint(
    engine_store: ObjectStore, clock: ManualClock
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
    store: LocalStore, clock: ManualClock
) -> None:
    fill(store)
    before = snapshot(store)
    dry = admin.destroy(DB, store, dry_run=True, clock=clock)
    assert snapshot(store) == before
    assert (dry.dry_run, dry.destroyed_at_s, dry.deleted) == (True, int(NOW), ())
    admin.destroy(DB, store, clock=clock, dry_run=False)
    clock.advance(100)
    again = admin.destroy(DB, store, clock=clock, dry_run=False)
    assert again.destroyed_at_s == int(NOW)  # the grace period is not restarted
    assert current(store).destroyed_at_s == int(NOW)


def test_hard_destroy_with_a_live_checkpoint_deletes_nothing(store: LocalStore, clock: ManualClock) -> None:
    fill(store)
    checkpoint = admin.create_checkpoint(
        DB, store, CheckpointOptions(lifetime="1h", name="nightly"), clock=clock
    )
    before = snapshot(store)
    for dry_run in (True, False):
        with pytest.raises(InvalidDeletionError, match=rf"{checkpoint.id} \(nightly\).*Nothing was deleted"):
            admin.destroy(DB, store, soft=False, dry_run=dry_run, clock=clock)
    assert snapshot(store) == before
    # A live writer holds a checkpoint too; a crashed one leaves it: soft destroy removes it.
    writer = Db.open(DB, store, quiet())
    with pytest.raises(InvalidDeletionError):
        admin.destroy(DB, store, soft=False, clock=clock, dry_run=False)
    simulate_crash(writer)
    clock.advance(3601)  # "nightly" expired: only the crashed writer's checkpoint is left
    with pytest.raises(InvalidDeletionError, match="1 unexpired"):
        admin.destroy(DB, store, soft=False, clock=clock, dry_run=False)
    admin.destroy(DB, store, clock=clock, dry_run=False)
    report = admin.destroy(DB, store, soft=False, clock=clock, dry_run=False)
    assert report.destroyed_at_s == int(NOW) + 3601  # kept from the soft destroy
    assert leftovers(store, DB) == set(report.kept)


def test_hard_destroy_of_a_clone_removes_everything_and_releases_the_parent(
    engine_store: ObjectStore, clock: ManualClock
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
    store: LocalStore, clock: ManualClock, already_soft: bool
) -> None:
    fill(store, "dbs/parent")
    admin.create_clone(DB, "dbs/parent", store, clock=clock)
    fill(store, DB, rounds=1)
    if already_soft:
        admin.destroy(DB, store, clock=clock, dry_run=False)
    before = snapshot(store)
    dry = admin.destroy(DB, store, soft=False, dry_run=True, clock=clock)
    assert snapshot(store) == before
    real = admin.destroy(DB, store, soft=False, clock=clock, dry_run=False)
    assert dry.deleted == real.deleted and real.deleted
    existing = {k for k in before if k.startswith(DB + "/")}
    assert existing <= set(real.deleted) and set(real.deleted) - existing <= {real.deleted[-1]}
    assert dry.released_parent_checkpoints == real.released_parent_checkpoints
    assert dry.destroyed_at_s == real.destroyed_at_s
    assert (dry.tombstone, dry.kept) == (real.tombstone, real.kept)
    assert leftovers(store, DB) == set(real.kept)


def test_a_crash_at_every_step_of_a_hard_destroy_is_finished_by_a_rerun(
    store: LocalStore, clock: ManualClock
) -> None:
    fill(store, "dbs/parent")
    for n in range(500):
        clone = f"dbs/clone{n}"
        admin.create_clone(clone, "dbs/parent", store, clock=clock)
        fill(store, clone, rounds=1)
        faulty = FaultInjectingStore(store)
        faulty.crash_after(n)
        try:
            report = admin.destroy(clone, faulty, soft=False, clock=clock, dry_run=False)
        except SimulatedCrash:
            assert ManifestStore(store, clone).read_current() is not None  # the tombstone stays
            report = admin.destroy(clone, store, soft=False, clock=clock, dry_run=False)
        else:
            break
        assert leftovers(store, clone) == set(report.kept)
        assert not [
            c for c in current(store, "dbs/parent").checkpoints if c.name == FINAL_CHECKPOINT_PREFIX + clone
        ]
    else:
        pytest.fail("destroy never completed")
    assert n >= 10


def test_release_external_checkpoints_is_idempotent_and_tolerates_missing_parents(
    store: LocalStore, clock: ManualClock
) -> None:
    fill(store, "dbs/parent")
    clone = admin.create_clone(DB, "dbs/parent", store, clock=clock).value
    ghost = ExternalDb("dbs/gone", uuid.uuid4(), uuid.uuid4())
    manifest = clone.with_changes(external_dbs=(*clone.external_dbs, ghost))
    final = clone.external_dbs[0].final_checkpoint_id
    assert release_external_checkpoints(manifest, store) == [("dbs/parent", final)]
    assert release_external_checkpoints(manifest, store) == []
    admin.destroy("dbs/parent", store, clock=clock, dry_run=False)  # a destroyed parent is fine too
    assert release_external_checkpoints(manifest, store) == []


def test_hard_destroy_deletes_only_its_own_directories_and_spares_nested_databases_and_siblings(
    store: LocalStore, clock: ManualClock
) -> None:
    fill(store)
    fill(store, DB + "/nested", rounds=1)
    fill(store, DB + "x", rounds=1)  # a sibling whose name starts the same
    store.put(DB + "/README", b"not a database object")
    others = {k: v for k, v in snapshot(store).items() if not k.startswith(DB + "/") or k == DB + "/README"}
    others.update(snapshot(store, DB + "/nested/"))
    dry = admin.destroy(DB, store, soft=False, dry_run=True, clock=clock)
    assert not [k for k in dry.deleted if k.startswith((DB + "/nested/", DB + "x/")) or k == DB + "/README"]
    real = admin.destroy(DB, store, soft=False, clock=clock, dry_run=False)
    assert real.deleted == dry.deleted
    survivors = snapshot(store)
    assert {k: survivors.get(k) for k in others} == others
    own = {k for k in survivors if k.startswith(DB + "/") and not k.startswith(DB + "/nested/")}
    assert own - {DB + "/README"} == set(real.kept) | {k for k in own if k.startswith(DB + "/gc/")}
    with DbReader.open(DB + "/nested", store, options=QUIET_READER) as reader:
        assert reader.get(b"wal-only") == b"w"


def test_a_crash_at_every_step_of_a_soft_destroy_is_finished_by_a_rerun(
    store: LocalStore, clock: ManualClock
) -> None:
    for n in range(100):
        path = f"dbs/db{n}"
        fill(store, path, rounds=1)
        writer = Db.open(path, store, quiet())
        faulty = FaultInjectingStore(store)
        faulty.crash_after(n)
        try:
            admin.destroy(path, faulty, clock=clock, dry_run=False)
        except SimulatedCrash:
            admin.destroy(path, store, clock=clock, dry_run=False)
        else:
            simulate_crash(writer)
            break
        assert current(store, path).destroyed_at_s == int(NOW)
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
    assert cloned["initialized"] is True and cloned["external_dbs"] == ["parent"]
    assert run("--path", "clone", "clone", "--parent", "other")[0] == 1  # CloneMismatchError
    code, _, err = run("--path", "parent", "destroy", "--hard")
    assert code == 1 and "clone:clone" in err and "Nothing was deleted" in err
    before = snapshot(store)
    code, dry, _ = run("--path", "clone", "destroy", "--hard", "--dry-run")
    assert code == 0 and snapshot(store) == before
    code, real, _ = run("--path", "clone", "destroy", "--hard")
    assert isinstance(dry, dict) and isinstance(real, dict) and dry["deleted"] == real["deleted"]
    assert real["released_parent_checkpoints"] == [["parent", cloned["final_checkpoint_id"]]]
    code, soft, _ = run("--path", "parent", "destroy")
    assert code == 0 and isinstance(soft, dict) and soft["soft"] is True and soft["deleted"] == []
    with pytest.raises(SystemExit):
        main(["--path", "clone", "clone", "--parent", "parent", "--checkpoint", "nope"])
