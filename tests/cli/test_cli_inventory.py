"""What is in a store and what happened to it: ``--version``, ``list-dbs``, ``history``, ``describe``'s
labels, ``suggest-split-keys``' reasons, and docs/cli.md naming every command."""

from __future__ import annotations

import importlib.metadata
import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from slate_ops import Db, admin
from slate_ops.admin.history import changes
from slate_ops.cli import build_parser, main
from slate_ops.cli.output import render_time
from slate_ops.manifest.model import Manifest
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import ObjectStore
from tests.support.engine import simulate_crash

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    """Run ``slate-ops ARGV``: exit code, parsed JSON (raw text with --format), stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    if code == 0 and "--format" not in argv:
        return code, json.loads(out), err
    return code, out, err


def load(store: ObjectStore, path: str, keys: range, flushes: int = 1) -> None:
    with Db.open(path, store) as db:
        for round_ in range(flushes):
            for i in keys:
                db.put(b"k%03d" % i, b"v%d-%d" % (round_, i))
            db.flush_memtable()


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"slate-ops {importlib.metadata.version('slate_ops')}"


# --- list-dbs -----------------------------------------------------------------------------------------


def test_list_dbs_shows_each_database_with_its_state(
    cli_store: ObjectStore, capsys: pytest.CaptureFixture[str]
) -> None:
    load(cli_store, "team/a", range(20))
    admin.create_clone("team/b", "team/a", cli_store)
    admin.create_db("other", cli_store)
    admin.destroy("other", cli_store, soft=True, dry_run=False)
    ManifestStore(cli_store, "team/unfinished").create_initial(Manifest(initialized=False))

    code, rows, _ = cli(capsys, "list-dbs")  # no --path: the whole store
    assert code == 0 and [r["path"] for r in rows] == ["other", "team/a", "team/b", "team/unfinished"]
    by_path = {r["path"]: r for r in rows}
    a, b = by_path["team/a"], by_path["team/b"]
    current_a = admin.read_manifest("team/a", cli_store)
    assert (a["state"], a["manifest_id"], a["initialized"]) == ("live", current_a.id, True)
    assert a["sst_bytes"] == sum(s.info.size_bytes for s in current_a.value.ssts) > 0 and a["ssts"] == 1
    assert (b["state"], b["sst_bytes"], b["ssts"], b["external_dbs"]) == ("live", 0, 0, 1)  # reads a's SSTs
    other = by_path["other"]
    assert other["state"] == "destroyed" and other["destroyed_at"] == render_time(other["destroyed_at_s"])
    assert by_path["team/unfinished"]["state"] == "uninitialized"
    latest = ManifestStore(cli_store, "team/a").list()[-1]
    assert a["last_write"] == render_time(latest.meta.last_modified)

    code, rows, _ = cli(capsys, "--path", "team/", "list-dbs")
    assert code == 0 and [r["path"] for r in rows] == ["team/a", "team/b", "team/unfinished"]
    assert [r["path"] for r in cli(capsys, "--path", "", "list-dbs")[1]] == sorted(by_path)
    assert [r["path"] for r in cli(capsys, "--path", "team/a", "list-dbs")[1]] == ["team/a"]
    assert cli(capsys, "--path", "nothing-here", "list-dbs")[:2] == (0, [])

    code, table, _ = cli(capsys, "list-dbs", "--format", "table")
    header = table.splitlines()[0].split()
    assert code == 0 and header[:4] == ["path", "engine", "state", "manifest_id"] and "last_write" in header
    assert "KiB" in table or " B " in table


def test_list_dbs_refuses_dot_dot(cli_store: ObjectStore, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "--path", "../x", "list-dbs")
    assert code == 1 and "must not contain" in err


# --- history ------------------------------------------------------------------------------------------


def kinds_of(rows: list[dict[str, Any]]) -> list[list[str]]:
    return [r["kinds"] for r in reversed(rows)]  # oldest first


def test_history_names_what_each_version_changed(
    cli_store: ObjectStore, capsys: pytest.CaptureFixture[str]
) -> None:
    cli(capsys, "--path", "db", "create-db")
    load(cli_store, "db", range(10), flushes=4)
    cli(capsys, "--path", "db", "create-tag", "-n", "v1")
    cli(capsys, "--path", "db", "compact")
    _, checkpoint, _ = cli(capsys, "--path", "db", "create-checkpoint", "-l", "1h")
    admin.delete_checkpoint("db", cli_store, uuid.UUID(checkpoint["id"]), dry_run=False)
    cli(capsys, "--path", "db", "rollback", "-n", "v1", "--no-dry-run")
    cli(capsys, "--path", "db", "delete-tag", "-n", "v1", "--no-dry-run")
    cli(capsys, "--path", "db", "destroy", "--no-dry-run")

    code, rows, _ = cli(capsys, "--path", "db", "history")
    assert code == 0
    ids = [r["id"] for r in rows]
    assert ids == sorted(ids, reverse=True) and ids[-1] == 1  # newest first, down to manifest 1
    assert all(r["time"].endswith("Z") and len(r["kinds"]) == len(r["details"]) for r in rows)
    flat = [kind for kinds in kinds_of(rows) for kind in kinds]
    assert flat[0] == "create"
    expected_order = [
        "new writer",
        "l0 flush",
        "tag added",
        "new compactor",
        "compaction",
        "checkpoint added",
        "checkpoint removed",
        "rollback",
        "tag removed",
        "destroy",
    ]
    positions = [flat.index(kind) for kind in expected_order]
    assert positions == sorted(positions), flat
    assert flat.count("l0 flush") == 4
    rollback = next(r for r in rows if "rollback" in r["kinds"])
    assert "tag v1" in rollback["details"][rollback["kinds"].index("rollback")]
    compaction = next(r for r in rows if "compaction" in r["kinds"])
    assert "4 L0 view(s) -> run 0" in compaction["details"][compaction["kinds"].index("compaction")]

    code, newest, _ = cli(capsys, "--path", "db", "history", "--limit", "2")
    assert code == 0 and newest == rows[:2]
    code, table, _ = cli(capsys, "--path", "db", "history", "--format", "table")
    assert code == 0 and table.splitlines()[0].split() == ["id", "time", "kinds", "details"]
    assert "destroy" in table.splitlines()[1]


def test_history_of_clones_splits_and_merges(
    cli_store: ObjectStore, capsys: pytest.CaptureFixture[str]
) -> None:
    load(cli_store, "db", range(20))
    assert cli(capsys, "--path", "copy", "clone", "--parent", "db")[0] == 0
    assert cli(capsys, "--path", "db", "split", "--at", "k010", "--into", "low", "--into", "high")[0] == 0
    assert cli(capsys, "--path", "all", "merge", "--source", "low", "--source", "high")[0] == 0
    for path, kind in (("copy", "clone"), ("low", "split"), ("all", "merge")):
        _, rows, _ = cli(capsys, "--path", path, "history")
        assert kinds_of(rows)[:2] == [[kind], ["initialized"]], (path, rows)
        assert "reads the SSTs of db" in rows[-1]["details"][0]
    _, rows, _ = cli(capsys, "--path", "high", "history")
    assert "key range [k010, +inf)" in rows[-1]["details"][0]
    _, rows, _ = cli(capsys, "--path", "db", "history", "--limit", "3")
    assert any("checkpoint added" in r["kinds"] for r in rows)


def test_history_starts_at_the_oldest_stored_version() -> None:
    kinds, details = changes(None, 7, Manifest())
    assert kinds == ["oldest stored"] and "GC deleted" in details[0]
    kinds, details = changes((5, Manifest()), 7, Manifest())
    assert kinds == ["other", "other"] and "manifest 5" in details[1]


def test_history_of_a_missing_database_is_an_error(
    cli_store: ObjectStore, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(capsys, "--path", "nope", "history")
    assert code == 1 and "no database at" in err


# --- describe -----------------------------------------------------------------------------------------


def test_describe_tells_views_from_sst_objects(
    cli_store: ObjectStore, capsys: pytest.CaptureFixture[str]
) -> None:
    load(cli_store, "db", range(30), flushes=2)
    admin.split("db", cli_store, [b"k015"], ["low", "high"])
    admin.merge(["low", "high"], cli_store, "all")
    code, described, _ = cli(capsys, "--path", "all", "describe")
    assert code == 0
    # Each of the 2 SST objects backs one view per shard: 4 L0 views over 2 objects, all external.
    assert (described["l0_views"], described["sst_objects"]) == (4, 2)
    assert (described["own_ssts"], described["external_ssts"]) == (0, 2)
    assert described["own_sst_bytes"] == 0 and described["external_sst_bytes"] == described["sst_bytes"] > 0
    assert (described["sorted_runs"], described["sorted_run_views"]) == (0, 0)
    assert "l0_ssts" not in described and "ssts" not in described
    assert described["key_range"] == {"start": None, "end": None}
    _, shard, _ = cli(capsys, "--path", "high", "describe")
    assert shard["key_range"] == {"start": "k015", "end": None}
    # The Python API (and the Dagster metadata built from it) keeps its names.
    status = admin.describe_db("all", cli_store)
    assert (status.l0_ssts, status.ssts) == (4, 2)


# --- suggest-split-keys -------------------------------------------------------------------------------


def test_suggest_split_keys_explains_an_empty_answer(
    cli_store: ObjectStore, capsys: pytest.CaptureFixture[str]
) -> None:
    cli(capsys, "--path", "empty", "create-db")
    code, out, _ = cli(capsys, "--path", "empty", "suggest-split-keys", "-n", "4")
    assert code == 0 and out["split_keys"] == [] and "no SSTs" in out["reason"] and "flush" in out["reason"]

    load(cli_store, "small", range(3))
    code, out, _ = cli(capsys, "--path", "small", "suggest-split-keys", "-n", "2")
    assert code == 0 and out["split_keys"] == []
    assert "3 entries in one block" in out["reason"] and "nothing to split by size" in out["reason"]
    code, out, _ = cli(capsys, "--path", "small", "suggest-split-keys", "-n", "1")
    assert out["split_keys"] == [] and "n is 1" in out["reason"]

    with Db.open("walonly", cli_store) as db:
        db.put(b"k", b"v")
        db.flush()
        simulate_crash(db)
    code, out, _ = cli(capsys, "--path", "walonly", "suggest-split-keys", "-n", "2")
    assert code == 0 and out["split_keys"] == [] and "flush" in out["reason"]

    with Db.open("big", cli_store) as db:
        for i in range(4000):
            db.put(b"k%05d" % i, b"x" * 100)
        db.flush_memtable()
    code, out, _ = cli(capsys, "--path", "big", "suggest-split-keys", "-n", "2")
    assert code == 0 and len(out["split_keys"]) == 1 and "reason" not in out


# --- docs ---------------------------------------------------------------------------------------------


def test_docs_name_every_command() -> None:
    """docs/cli.md documents every command (by its own name, in backticks) and --version."""
    text = DOCS.read_text()
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    assert commands is not None
    missing = [name for name in commands if not re.search(rf"`{re.escape(name)}[` ]", text)]
    assert not missing, f"docs/cli.md does not mention: {missing}"
    assert "`slate-ops --version`" in text
