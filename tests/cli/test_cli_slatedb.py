"""The CLI on SlateDB databases written by SlateDB's own Db (through the binding): the same commands,
flags and JSON shapes as on ours, every effect read back WITH THE BINDING (its Admin lists the
checkpoints, its DbReader reads the rows), and the store listed before and after each GC and
destroy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from slate_ops import Db
from slate_ops.cli import main
from slate_ops.engines.slatedb import LOOP
from slate_ops.objstore import ObjectStore, open_store
from tests.support.engine import quiet
from tests.support.slatedb import local_store, read_all, write_db

DB = "dbs/sdb"


@pytest.fixture
def created_store_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The store's directory; ``$SLATE_OPS_STORE`` points at it."""
    store_root = tmp_path / "store"
    store_root.mkdir()
    monkeypatch.setenv("SLATE_OPS_STORE", store_root.as_uri())
    return store_root


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    """Exit code, the JSON printed (or the raw text with ``--format table`` / on failure), stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out and code == 0 and "table" not in argv else out), err


def ok(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    return out


def fails(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Exit 1 with one line on stderr and no traceback; returns that line."""
    code, out, err = run(capsys, *argv)
    assert code == 1 and out == "", (code, out, err)
    assert err.startswith("slate-ops: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def write(sdb: Any, root: Path, path: str = DB, **options: Any) -> dict[bytes, bytes]:
    """A database SlateDB's own Db wrote (3 L0 flushes of 50 keys by default); its rows."""
    settings: dict[str, Any] = {"rounds": 3, "keys": 50} | options
    return dict(LOOP.run(write_db(sdb, root, path, **settings)))


def rows(sdb: Any, root: Path, path: str = DB, checkpoint: str | None = None) -> dict[bytes, bytes]:
    """Every row SlateDB's own DbReader sees."""
    return dict(LOOP.run(read_all(sdb, root, path, checkpoint)))


def binding_checkpoints(sdb: Any, root: Path, path: str = DB) -> dict[str, Any]:
    """SlateDB's own list of the database's checkpoints, by id."""
    checkpoints = LOOP.run(sdb.AdminBuilder(path, local_store(sdb, root)).build().list_checkpoints(None))
    return {str(c.id): c for c in checkpoints}


def listing(root: Path) -> dict[str, int]:
    """Every object in the store: key -> size."""
    return {p.relative_to(root).as_posix(): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def age(root: Path, seconds: float) -> None:
    """Make every object in the store ``seconds`` older (its last-modified time)."""
    past = time.time() - seconds
    for p in root.rglob("*"):
        if p.is_file():
            os.utime(p, (past, past))


# --- engine detection, --engine, list-dbs ------------------------------------------------------


def test_list_dbs_shows_both_engines_in_one_store(
    sdb: Any, created_store_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(sdb, created_store_root)
    with Db.open("dbs/ours", open_store(created_store_root.as_uri()), quiet()) as db:
        db.put(b"k", b"v")
        db.flush_memtable()
    listed = {r["path"]: r for r in ok(capsys, "list-dbs")}
    assert sorted(listed) == ["dbs/ours", DB]
    ours, theirs = listed["dbs/ours"], listed[DB]
    assert (ours["engine"], ours["state"]) == ("slate_ops", "live")
    manifest = LOOP.run(
        sdb.AdminBuilder(DB, local_store(sdb, created_store_root)).build().read_manifest(None)
    )
    assert (theirs["engine"], theirs["state"], theirs["initialized"]) == ("slatedb", "live", True)
    assert theirs["manifest_id"] == manifest.id and theirs["error"] is None
    assert theirs["ssts"] == len({v.sst.id.value for v in manifest.l0}) > 0 and theirs["sst_bytes"] > 0
    assert set(theirs) == set(ours)  # one shape for both engines
    table = ok(capsys, "list-dbs", "--format", "table")
    assert table.splitlines()[0].split()[:3] == ["path", "engine", "state"]
    assert "slatedb" in table and "slate_ops" in table
    ok(capsys, "--path", "dbs/copy", "clone", "--parent", DB)
    copy = {r["path"]: r for r in ok(capsys, "list-dbs", "--path", "dbs/")}["dbs/copy"]
    assert (copy["engine"], copy["state"], copy["ssts"], copy["sst_bytes"], copy["external_dbs"]) == (
        "slatedb",
        "live",
        0,
        0,
        1,
    )  # it reads its parent's SSTs, owns none: as ours


def test_engine_is_detected_or_forced(
    sdb: Any, created_store_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(sdb, created_store_root)
    with Db.open("ours", open_store(created_store_root.as_uri()), quiet()) as db:
        db.put(b"k", b"v")
    detected = ok(capsys, "--path", DB, "list-checkpoints")
    assert ok(capsys, "--engine", "slatedb", "--path", DB, "list-checkpoints") == detected
    assert ok(capsys, "--path", DB, "--engine", "auto", "list-checkpoints") == detected
    before = listing(created_store_root)
    # A wrong forced engine fails on the first read and changes nothing, both ways.
    assert "SlateDB manifest" in fails(
        capsys, "--engine", "slate_ops", "--path", DB, "create-checkpoint", "-n", "x"
    )
    assert "SlateDB database ours" in fails(
        capsys, "--engine", "slatedb", "--path", "ours", "create-checkpoint", "-n", "x"
    )
    assert listing(created_store_root) == before
    with pytest.raises(SystemExit) as usage:
        main(["--engine", "rocksdb", "--path", DB, "list-checkpoints"])
    assert usage.value.code == 2 and "invalid choice: 'rocksdb'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ("put", "k", "v"),
        ("delete", "k0001"),
        ("get", "k0001"),
        ("scan",),
        ("read-manifest",),
        ("list-manifests",),
        ("create-db", "--exist-ok"),
    ],
)
def test_slate_ops_format_commands_refuse_a_slatedb_database(
    sdb: Any, created_store_root: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    expected = write(sdb, created_store_root, rounds=1, keys=10)
    before = listing(created_store_root)
    message = fails(capsys, "--path", DB, *argv)
    assert f"`slate-ops {argv[0]}` is not supported on slatedb databases ({DB})" in message
    assert "nothing was changed" in message
    assert listing(created_store_root) == before and rows(sdb, created_store_root) == expected


def test_create_db_with_engine_slatedb_is_refused(
    created_store_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    message = fails(capsys, "--engine", "slatedb", "--path", "new", "create-db")
    assert "create-db" in message and "SlateDB's own Db" in message
    assert listing(created_store_root) == {}


def test_without_the_binding_a_slatedb_database_names_the_extra(sdb: Any, created_store_root: Path) -> None:
    """A real `slate-ops` process in which `slatedb` cannot be imported (as when the extra is not
    installed): exit 1, one line naming `pip install 'slate_ops[slatedb]'`; list-dbs still lists the
    database with its engine, state ``slatedb`` and the same message as ``error``."""
    write(sdb, created_store_root, rounds=1, keys=10)
    blocked = (
        "import sys; sys.modules['slatedb'] = None; sys.modules['slatedb.uniffi'] = None; "
        "from slate_ops.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    env = {**os.environ, "SLATE_OPS_STORE": created_store_root.as_uri()}

    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", blocked, *argv], capture_output=True, text=True, env=env, timeout=120
        )

    done = cli("--path", DB, "list-checkpoints")
    assert done.returncode == 1 and done.stdout == "", done
    assert done.stderr.count("\n") == 1 and "pip install 'slate_ops[slatedb]'" in done.stderr
    done = cli("list-dbs")
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)
    assert (row["path"], row["engine"], row["state"]) == (DB, "slatedb", "slatedb")
    assert "pip install 'slate_ops[slatedb]'" in row["error"]


# --- checkpoints ------------------------------------------------------------------------------


def test_checkpoints_create_list_refresh_delete(
    sdb: Any, created_store_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = write(sdb, created_store_root)
    created = ok(capsys, "--path", DB, "create-checkpoint", "-l", "1h", "-n", "nightly")
    assert set(created) == {"id", "manifest_id", "requests"}  # + what creating it cost
    cid = created["id"]
    theirs = binding_checkpoints(sdb, created_store_root)[cid]
    assert theirs.name == "nightly" and theirs.expire_time_secs is not None
    (listed,) = ok(capsys, "--path", DB, "list-checkpoints", "-n", "nightly")
    assert listed["id"] == cid and listed["expire_time_s"] - listed["create_time_s"] in (3600, 3601)
    assert set(listed) >= {"id", "manifest_id", "create_time_s", "create_time", "expire_time_s", "name"}
    assert (
        rows(sdb, created_store_root, checkpoint=cid) == expected
    )  # SlateDB reads the data at our checkpoint

    refreshed = ok(capsys, "--path", DB, "refresh-checkpoint", "-i", cid)
    assert refreshed["id"] == cid and refreshed["expire_time_s"] is None
    assert binding_checkpoints(sdb, created_store_root)[cid].expire_time_secs is None
    derived = ok(capsys, "--path", DB, "create-checkpoint", "-s", cid)
    assert derived["id"] != cid and derived["id"] in binding_checkpoints(sdb, created_store_root)

    # delete: a dry run by default (nothing changes), then --no-dry-run
    dry = ok(capsys, "--path", DB, "delete-checkpoint", "-i", cid)
    assert dry["id"] == cid and cid in binding_checkpoints(sdb, created_store_root)
    ok(capsys, "--path", DB, "delete-checkpoint", "-i", cid, "--no-dry-run")
    assert cid not in binding_checkpoints(sdb, created_store_root)
    assert [c["id"] for c in ok(capsys, "--path", DB, "list-checkpoints")] == [derived["id"]]
    assert "tag:" in fails(capsys, "--path", DB, "create-checkpoint", "-n", "tag:x")  # reserved, as ours
    missing = str(uuid.uuid4())
    assert missing in fails(capsys, "--path", DB, "delete-checkpoint", "-i", missing, "--no-dry-run")
    assert rows(sdb, created_store_root) == expected


# --- GC ---------------------------------------------------------------------------------------


def test_gc_plan_equals_run(sdb: Any, created_store_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``gc`` (a dry run: slate_ops' plan) lists exactly what ``gc --no-dry-run`` (SlateDB's
    run_gc_once) then deletes: the store listed before and after; every row still there."""
    expected = write(sdb, created_store_root, compact=True)
    for c in ok(capsys, "--path", DB, "list-checkpoints"):  # the compactor's: let GC collect
        ok(capsys, "--path", DB, "delete-checkpoint", "-i", c["id"], "--no-dry-run")
    age(created_store_root, 3600)
    before = listing(created_store_root)
    plan = ok(capsys, "--path", DB, "gc", "--min-age", "10min")
    assert plan["dry_run"] is True and listing(created_store_root) == before  # the plan writes nothing
    planned = {d["key"] for r in plan["resources"] for d in r["deleted"]}
    assert planned and "manifest" in {k.split("/")[2] for k in planned}
    table = ok(capsys, "--path", DB, "gc", "--min-age", "10min", "--format", "table")
    assert "would delete" in table

    run_report = ok(capsys, "--path", DB, "gc", "--min-age", "10min", "--no-dry-run")
    assert run_report["dry_run"] is False and run_report["errors"] == []
    deleted = {d["key"] for r in run_report["resources"] for d in r["deleted"]}
    after = listing(created_store_root)
    assert deleted == planned == set(before) - set(after)
    assert {r["resource"]: r["count"] for r in plan["resources"]} == {
        r["resource"]: r["count"] for r in run_report["resources"]
    }
    assert rows(sdb, created_store_root) == expected


# --- destroy ----------------------------------------------------------------------------------


def test_destroy_soft_refused_hard_dry_run_then_real(
    sdb: Any, created_store_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = write(sdb, created_store_root, rounds=2, keys=20)
    ours = listing(created_store_root)
    message = fails(capsys, "--path", DB, "destroy", "--no-dry-run")
    assert "a soft destroy is not supported on slatedb databases" in message and "destroy --hard" in message
    assert listing(created_store_root) == ours and rows(sdb, created_store_root) == expected

    keep = ok(capsys, "--path", DB, "create-checkpoint", "-n", "keep")["id"]
    assert "unexpired checkpoint" in fails(capsys, "--path", DB, "destroy", "--hard", "--no-dry-run")
    ok(capsys, "--path", DB, "delete-checkpoint", "-i", keep, "--no-dry-run")

    before = listing(created_store_root)
    dry = ok(capsys, "--path", DB, "destroy", "--hard")
    assert (dry["dry_run"], dry["soft"]) == (True, False) and listing(created_store_root) == before
    assert set(dry["deleted"]) == {k for k in before if k.startswith(DB + "/")}
    done = ok(capsys, "--path", DB, "destroy", "--hard", "--no-dry-run")
    # the real run also deletes the `.deleting` marker SlateDB's delete_db writes first
    assert done["dry_run"] is False and set(done["deleted"]) - set(dry["deleted"]) <= {DB + "/.deleting"}
    assert not any(k.startswith(DB + "/") for k in listing(created_store_root))
    assert ok(capsys, "list-dbs") == []


def test_gc_health_fails_when_gc_is_dead_and_passes_after_a_run(
    sdb: Any, created_store_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SlateDB #2089 ("GC had been dead for six days"): garbage collectable for longer than
    --interval x --intervals fails the check (exit 1, the report printed); one GC run fixes it."""
    expected = write(sdb, created_store_root, compact=True)
    for c in ok(capsys, "--path", DB, "list-checkpoints"):
        ok(capsys, "--path", DB, "delete-checkpoint", "-i", c["id"], "--no-dry-run")
    age(created_store_root, 6 * 86400)  # six days without GC
    before = listing(created_store_root)
    code, out, err = run(capsys, "--path", DB, "gc-health", "--interval", "10min")
    health = json.loads(out)
    assert code == 1 and err == "" and listing(created_store_root) == before  # reads only
    assert (health["engine"], health["passed"], health["intervals"]) == ("slatedb", False, 3)
    assert health["overdue_count"] > 0 and health["problems"]
    ok(capsys, "--path", DB, "gc", "--no-dry-run")
    assert ok(capsys, "--path", DB, "gc-health", "--interval", "10min")["passed"] is True
    assert rows(sdb, created_store_root) == expected


# --- compaction -------------------------------------------------------------------------------


class Writer:
    """SlateDB's own Db, open (its embedded compactor polling every 100 ms) while the CLI runs."""

    def __init__(self, sdb: Any, root: Path, path: str = DB) -> None:
        from tests.support.slatedb import fast_settings

        self.sdb = sdb
        builder = sdb.DbBuilder(path, local_store(sdb, root))
        builder.with_settings(fast_settings(sdb))
        self.db = LOOP.run(builder.build())
        self.rows: dict[bytes, bytes] = {}

    def flushes(self, n: int) -> None:
        for r in range(n):
            for i in range(40):
                k, v = b"k%04d" % (i * 3 + r), b"v%d-%d" % (r, i)
                LOOP.run(self.db.put(k, v))
                self.rows[k] = v
            LOOP.run(
                self.db.flush_with_options(self.sdb.FlushOptions(flush_type=self.sdb.FlushType.MEM_TABLE))
            )

    def close(self) -> None:
        LOOP.run(self.db.shutdown())


def test_compact_through_a_running_slatedb_compactor(
    sdb: Any, created_store_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    writer = Writer(sdb, created_store_root)
    try:
        writer.flushes(3)
        shape = ok(capsys, "--path", DB, "shape")
        assert len(shape["l0"]) == 3
        report = ok(capsys, "--path", DB, "compact", "--full")
        assert report["compacted"] is True and report["kind"] == "full" and len(report["sources"]) == 3
        manifest = LOOP.run(
            sdb.AdminBuilder(DB, local_store(sdb, created_store_root)).build().read_manifest(None)
        )
        assert not manifest.l0 and [r.id for r in manifest.compacted] == [report["sorted_run_id"]]
        assert report["manifest_id"] == manifest.id
        again = ok(capsys, "--path", DB, "compact", "--full")
        assert again["compacted"] is False and "nothing to compact" in again["reason"]
        assert (again["l0_views"], again["sorted_runs"]) == (0, 1)
    finally:
        writer.close()
    assert rows(sdb, created_store_root) == writer.rows


def test_compact_without_a_compactor_exits_1_with_its_message(
    sdb: Any, created_store_root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from slate_ops.admin.handle import SlateDbHandle

    writer = Writer(sdb, created_store_root)
    writer.flushes(3)
    writer.close()  # no writer, no compactor
    monkeypatch.setattr(SlateDbHandle, "compaction_timeout_s", 0.5)
    message = fails(capsys, "--path", DB, "compact", "--full")
    assert "no SlateDB compactor picked it up" in message and "A SlateDB compactor must be running" in message
    manifest = LOOP.run(
        sdb.AdminBuilder(DB, local_store(sdb, created_store_root)).build().read_manifest(None)
    )
    assert len(manifest.l0) == 3  # nothing compacted
    assert rows(sdb, created_store_root) == writer.rows


# --- state: describe, verify, history, shape --------------------------------------------------


def ours_db(root: Path, path: str) -> None:
    """A slate_ops database of a similar shape, to compare JSON shapes with."""
    with Db.open(path, open_store(root.as_uri()), quiet()) as db:
        for r in range(2):
            for i in range(20):
                db.put(b"k%04d" % i, b"v%d" % r)
            db.flush_memtable()


def test_state_commands_have_our_shapes(
    sdb: Any, created_store_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(sdb, created_store_root, compact=True)
    ours_db(created_store_root, "ours")
    manifest = LOOP.run(
        sdb.AdminBuilder(DB, local_store(sdb, created_store_root)).build().read_manifest(None)
    )
    theirs, ours = ok(capsys, "--path", DB, "describe"), ok(capsys, "--path", "ours", "describe")
    assert list(theirs) == list(ours)
    assert theirs["manifest_id"] == manifest.id and theirs["sorted_runs"] == len(manifest.compacted) == 1
    assert theirs["initialized"] is True and theirs["sst_bytes"] > 0

    checks = ok(capsys, "--path", DB, "verify")
    assert [c["name"] for c in checks] == [c["name"] for c in ok(capsys, "--path", "ours", "verify")]
    assert all(c["passed"] for c in checks if c["severity"] == "error")

    history = ok(capsys, "--path", DB, "history", "--limit", "3")
    assert len(history) == 3 and history[0]["id"] == manifest.id
    assert (
        set(history[0])
        == set(ok(capsys, "--path", "ours", "history")[0])
        == {"id", "time", "kinds", "details"}
    )
    shape = ok(capsys, "--path", DB, "shape")
    assert set(shape) == set(ok(capsys, "--path", "ours", "shape")) and len(shape["sorted_runs"]) == 1
    assert ok(capsys, "--path", DB, "shape", "--format", "table").splitlines()[1].startswith("SR ")


# --- tags, expiry, restore --------------------------------------------------------------------


def test_tags_on_a_slatedb_database(
    sdb: Any, created_store_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = write(sdb, created_store_root)
    tag = ok(capsys, "--path", DB, "create-tag", "-n", "v1")
    (theirs,) = [c for c in binding_checkpoints(sdb, created_store_root).values() if c.name == "tag:v1"]
    assert str(theirs.id) == str(tag["checkpoint_id"]) and theirs.expire_time_secs is None
    assert "already exists" in fails(capsys, "--path", DB, "create-tag", "-n", "v1")
    (listed,) = ok(capsys, "--path", DB, "list-tags")
    assert listed["tag_name"] == "v1" and listed["checkpoint_id"] == tag["checkpoint_id"]
    ours_db(created_store_root, "ours")
    ok(capsys, "--path", "ours", "create-tag", "-n", "v1")
    assert list(listed) == list(ok(capsys, "--path", "ours", "list-tags")[0])  # one shape

    # the tag's checkpoint is protected, as ours
    cid = str(theirs.id)
    assert "delete-tag" in fails(capsys, "--path", DB, "delete-checkpoint", "-i", cid, "--no-dry-run")
    assert "delete-tag" in fails(capsys, "--path", DB, "refresh-checkpoint", "-i", cid, "-l", "1h")
    # rollback in place is ours only: one line naming restore
    message = fails(capsys, "--path", DB, "rollback", "-n", "v1", "--no-dry-run")
    assert "rollback in place is not supported on slatedb databases" in message and "restore" in message

    # restore the tag into a new database after more writes: SlateDB reads the tagged state
    later = Writer(sdb, created_store_root)
    later.flushes(1)
    later.close()
    restored = ok(capsys, "--path", DB, "restore", "--tag", "v1", "--into", "restored")
    assert (restored["path"], restored["source"], restored["tag"]) == ("restored", DB, "v1")
    assert restored["initialized"] is True
    assert rows(sdb, created_store_root, "restored") == expected != rows(sdb, created_store_root)
    assert "restored" in {r["path"] for r in ok(capsys, "list-dbs") if r["engine"] == "slatedb"}

    dry = ok(capsys, "--path", DB, "delete-tag", "-n", "v1")
    assert dry["dry_run"] is True and cid in binding_checkpoints(sdb, created_store_root)
    ok(capsys, "--path", DB, "delete-tag", "-n", "v1", "--no-dry-run")
    assert (
        cid not in binding_checkpoints(sdb, created_store_root)
        and ok(capsys, "--path", DB, "list-tags") == []
    )


def test_expire_checkpoints_and_tag_policy(
    sdb: Any, created_store_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(sdb, created_store_root, rounds=1, keys=10)
    short = ok(capsys, "--path", DB, "create-checkpoint", "-l", "1s", "-n", "short")["id"]
    ok(capsys, "--path", DB, "create-tag", "-n", "keep")
    time.sleep(1.5)
    dry = ok(capsys, "--path", DB, "expire-checkpoints")
    assert [c["id"] for c in dry["expired"]] == [short] and short in binding_checkpoints(
        sdb, created_store_root
    )
    ok(capsys, "--path", DB, "expire-checkpoints", "--no-dry-run")
    names = {c.name for c in binding_checkpoints(sdb, created_store_root).values()}
    assert "short" not in names and "tag:keep" in names  # never a tag

    plan = ok(capsys, "--path", DB, "apply-tag-policy", "--keep", "3")
    assert plan["dry_run"] is True and plan["created"]["name"] == plan["due_tag"]
    assert not any(n and n.startswith("tag:daily") for n in names)
    done = ok(capsys, "--path", DB, "apply-tag-policy", "--keep", "3", "--no-dry-run")
    created = done["created"]["name"]
    assert f"tag:{created}" in {c.name for c in binding_checkpoints(sdb, created_store_root).values()}


# --- clone, split, merge ----------------------------------------------------------------------


def test_clone_and_restore_at_a_checkpoint(
    sdb: Any, created_store_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = write(sdb, created_store_root)
    cid = ok(capsys, "--path", DB, "create-checkpoint", "-n", "at")["id"]
    clone = ok(capsys, "--path", "copy", "clone", "--parent", DB)
    assert (clone["path"], clone["parent"], clone["checkpoint"]) == ("copy", DB, None)
    ours_db(created_store_root, "ours")
    assert list(clone) == list(ok(capsys, "--path", "ours_copy", "clone", "--parent", "ours"))
    assert rows(sdb, created_store_root, "copy") == expected
    later = Writer(sdb, created_store_root)
    later.flushes(1)
    later.close()
    at = ok(capsys, "--path", "copy_at", "clone", "--parent", DB, "--checkpoint", cid)
    assert at["checkpoint"] == cid and rows(sdb, created_store_root, "copy_at") == expected
    restored = ok(capsys, "--path", DB, "restore", "--checkpoint", cid, "--into", "restored")
    assert restored["checkpoint"] == cid and rows(sdb, created_store_root, "restored") == expected
    assert "copy" in fails(capsys, "--path", DB, "restore", "--checkpoint", cid, "--into", "copy")


def test_split_and_merge_read_back_by_slatedb(
    sdb: Any, created_store_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = write(sdb, created_store_root, rounds=2, keys=100, wal=False)
    suggestion = ok(capsys, "--path", DB, "suggest-split-keys", "-n", "2")
    assert suggestion["n"] == 2 and len(suggestion["split_keys"]) <= 1
    report = ok(capsys, "--path", DB, "split", "--at", "k0050", "--into", "low", "--into", "high")
    assert report["operation"] == "split" and [d["path"] for d in report["databases"]] == ["low", "high"]
    assert report["databases"][0]["key_range"]["end"] == "k0050"
    low, high = rows(sdb, created_store_root, "low"), rows(sdb, created_store_root, "high")
    assert low == {k: v for k, v in expected.items() if k < b"k0050"}
    assert high == {k: v for k, v in expected.items() if k >= b"k0050"}

    merged = ok(capsys, "--path", "all", "merge", "--source", "low", "--source", "high")
    assert merged["operation"] == "merge" and merged["sources"] == ["low", "high"]
    assert rows(sdb, created_store_root, "all") == expected
    assert "common range" in fails(capsys, "--path", "again", "merge", "--source", DB, "--source", "low")


def test_flush_moves_the_wal_into_l0_then_split_is_accepted(
    sdb: Any, created_store_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = write(
        sdb, created_store_root, rounds=1, keys=40
    )  # with the WAL on: data left in its replay range
    argv = ("--path", DB, "split", "--at", "k0020", "--into", "a", "--into", "b")
    assert "--flush-wal" in fails(capsys, *argv)
    flushed = ok(capsys, "--path", DB, "flush")
    manifest = LOOP.run(
        sdb.AdminBuilder(DB, local_store(sdb, created_store_root)).build().read_manifest(None)
    )
    assert flushed == {"path": DB, "manifest_id": manifest.id, "l0_views": len(manifest.l0)}
    ok(capsys, *argv)
    assert (
        {**rows(sdb, created_store_root, "a"), **rows(sdb, created_store_root, "b")}
        == expected
        == rows(sdb, created_store_root)
    )
    assert "no database at 'nope'" in fails(capsys, "--path", "nope", "flush")


def test_split_refuses_wal_data_until_flush_wal(
    sdb: Any, created_store_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = write(
        sdb, created_store_root, rounds=1, keys=40
    )  # with the WAL on: data left in its replay range
    before = listing(created_store_root)
    message = fails(capsys, "--path", DB, "split", "--at", "k0020", "--into", "a", "--into", "b")
    assert "--flush-wal" in message and listing(created_store_root) == before
    ok(capsys, "--path", DB, "split", "--at", "k0020", "--into", "a", "--into", "b", "--flush-wal")
    assert (
        {**rows(sdb, created_store_root, "a"), **rows(sdb, created_store_root, "b")}
        == expected
        == rows(sdb, created_store_root)
    )


# --- S3 (moto on loopback) --------------------------------------------------------------------


@pytest.mark.s3
def test_on_s3_a_slatedb_database_is_maintained_through_the_same_commands(
    sdb: Any,
    moto_endpoint: str,
    make_bucket: Callable[[], str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A SlateDB database written by SlateDB's Db into a bucket (with a key prefix) on moto: the CLI
    lists it beside ours, checkpoints, tags and restores it, and SlateDB reads every effect back
    through its own S3 store."""
    from slate_ops.engines.slatedb.store import binding_path, binding_store

    url = f"s3://{make_bucket()}/fleet?endpoint_url={moto_endpoint}&region=us-east-1"
    store = open_store(url)
    target = binding_store(store)
    expected = LOOP.run(write_db(sdb, None, binding_path(store, DB), rounds=2, keys=30, store=target))
    ours_db_in(store, "ours")

    def s3_rows(path: str, checkpoint: str | None = None) -> dict[bytes, bytes]:
        return dict(LOOP.run(read_all(sdb, None, binding_path(store, path), checkpoint, store=target)))

    listed = {r["path"]: r["engine"] for r in ok(capsys, "--store", url, "list-dbs")}
    assert listed == {DB: "slatedb", "ours": "slate_ops"}
    cid = ok(capsys, "--store", url, "--path", DB, "create-checkpoint", "-n", "s3")["id"]
    assert s3_rows(DB, cid) == expected
    ok(capsys, "--store", url, "--path", DB, "create-tag", "-n", "v1")
    assert [t["tag_name"] for t in ok(capsys, "--store", url, "--path", DB, "list-tags")] == ["v1"]
    restored = ok(capsys, "--store", url, "--path", DB, "restore", "--tag", "v1", "--into", "restored")
    assert restored["initialized"] is True and s3_rows("restored") == expected
    plan = ok(capsys, "--store", url, "--path", DB, "gc")
    assert plan["dry_run"] is True and {r["resource"] for r in plan["resources"]} >= {"manifest", "wal"}
    assert s3_rows(DB) == expected


def ours_db_in(store: ObjectStore, path: str) -> None:
    with Db.open(path, store, quiet()) as db:
        db.put(b"k", b"v")
        db.flush_memtable()


def test_read_only_commands_write_nothing_on_a_slatedb_database(
    sdb: Any, created_store_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/cli.md "Safety": read-only commands and dry runs write nothing, on SlateDB's databases
    too (the store listed, sizes included, before and after each)."""
    write(sdb, created_store_root, compact=True)
    cid = ok(capsys, "--path", DB, "create-checkpoint", "-n", "c", "-l", "1h")["id"]
    ok(capsys, "--path", DB, "create-tag", "-n", "t")
    before = listing(created_store_root)
    for argv in (
        ("describe",),
        ("verify",),
        ("history",),
        ("shape",),
        ("list-checkpoints",),
        ("list-tags",),
        ("suggest-split-keys", "-n", "2"),
        ("gc",),
        ("gc-health",),
        ("expire-checkpoints",),
        ("delete-checkpoint", "-i", cid),
        ("delete-tag", "-n", "t"),
        ("apply-tag-policy",),
        ("destroy", "--hard"),
    ):
        assert run(capsys, "--path", DB, *argv)[0] in (0, 1), argv
        assert listing(created_store_root) == before, argv
    assert run(capsys, "list-dbs")[0] == 0 and listing(created_store_root) == before
