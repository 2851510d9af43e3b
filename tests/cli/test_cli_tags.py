"""The tag commands (create-tag, delete-tag, list-tags) of the slate-ops CLI, through ``main``."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from slate_ops import Db, admin
from slate_ops.cli import main
from slate_ops.objstore import ObjectStore, open_store
from tests.support.stores import snapshot


@pytest.fixture
def five_key_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ObjectStore:
    url = (tmp_path / "store").as_uri()
    monkeypatch.setenv("SLATE_OPS_STORE", url)
    store = open_store(url)
    with Db.open("db", store) as db:
        for i in range(5):
            db.put(b"k%d" % i, b"v%d" % i)
        db.flush_memtable()
    return store


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    """Run ``slate-ops --path db ARGV``: exit code, parsed JSON (raw text with --format), stderr."""
    code = main(["--path", "db", *argv])
    out, err = capsys.readouterr()
    if code == 0 and "--format" not in argv:
        return code, json.loads(out), err
    return code, out, err


def test_create_list_and_delete(five_key_store: ObjectStore, capsys: pytest.CaptureFixture[str]) -> None:
    code, tag, _ = cli(capsys, "create-tag", "-n", "v1")
    assert code == 0 and tag["name"] == "v1"
    checkpoint = admin.create_checkpoint("db", five_key_store).id
    code, from_checkpoint, _ = cli(capsys, "create-tag", "-n", "v2", "-s", str(checkpoint))
    assert (
        code == 0
        and from_checkpoint["manifest_id"] == admin.list_checkpoints("db", five_key_store)[1].manifest_id
    )

    code, rows, _ = cli(capsys, "list-tags")
    assert code == 0 and [r["tag_name"] for r in rows] == ["v1", "v2"]
    assert rows[0]["checkpoint_id"] == tag["checkpoint_id"] and rows[0]["record_count"] == 5
    assert set(rows[0]) == {
        "tag_name",
        "checkpoint_id",
        "manifest_id",
        "create_time_s",
        "create_time",
        "record_count",
        "bytes",
    }
    # One time language: Unix seconds beside ISO 8601 UTC, as create-tag prints them.
    assert rows[0]["create_time_s"] == tag["create_time_s"]
    assert rows[0]["create_time"] == tag["create_time"] and tag["create_time"].endswith("Z")

    code, text, _ = cli(capsys, "list-tags", "--format", "table")
    assert code == 0 and text.splitlines()[0].split() == [
        "tag_name",
        "checkpoint_id",
        "manifest_id",
        "create_time",
        "record_count",
        "bytes",
    ]
    assert "v1" in text and "v2" in text

    before = snapshot(five_key_store)
    code, out, _ = cli(capsys, "delete-tag", "-n", "v1", "--dry-run")
    assert code == 0 and out["dry_run"] and out["deleted"]["name"] == "v1"
    assert snapshot(five_key_store) == before
    code, out, _ = cli(capsys, "delete-tag", "-n", "v1", "--no-dry-run")
    assert code == 0 and not out["dry_run"]
    code, rows, _ = cli(capsys, "list-tags")
    assert [r["tag_name"] for r in rows] == ["v2"]


def test_refusals_exit_non_zero_and_write_nothing(
    five_key_store: ObjectStore, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(capsys, "create-tag", "-n", "v1")[0] == 0
    before = snapshot(five_key_store)
    code, _, err = cli(capsys, "create-tag", "-n", "v1")
    assert code != 0 and "already exists" in err
    code, _, err = cli(capsys, "delete-tag", "-n", "nope")
    assert code != 0 and "no tag 'nope'" in err
    code, _, err = cli(capsys, "create-tag", "-n", "has space")
    assert code != 0 and "whitespace" in err
    assert snapshot(five_key_store) == before
    code, replaced, _ = cli(capsys, "create-tag", "-n", "v1", "--replace")
    assert code == 0
    assert [c.id for c in admin.list_checkpoints("db", five_key_store) if c.name == "tag:v1"] == [
        uuid.UUID(replaced["checkpoint_id"])
    ]


def write_after(store: ObjectStore) -> None:
    """A new L0 SST (k0 overwritten, k9 added) and a WAL-only write (k1 deleted)."""
    with Db.open("db", store) as db:
        db.put(b"k0", b"later")
        db.put(b"k9", b"later")
        db.flush_memtable()
        db.delete(b"k1", await_durable=True)


def test_rollback_reports_then_discards_what_came_after_the_tag(
    five_key_store: ObjectStore, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(capsys, "create-tag", "-n", "v1")[0] == 0
    write_after(five_key_store)
    before = snapshot(five_key_store)
    code, dry, _ = cli(capsys, "rollback", "-n", "v1", "--dry-run")
    assert code == 0 and dry["dry_run"] and snapshot(five_key_store) == before
    assert len(dry["discarded_ssts"]) == 1 and len(dry["discarded_wal"]) == 1
    assert dry["discarded_entries"] == 2 + 1 and dry["discarded_bytes"] > 0
    assert dry["tag"]["name"] == "v1" and dry["manifest_id_after"] == dry["manifest_id_before"] + 2

    code, text, _ = cli(capsys, "rollback", "-n", "v1", "--dry-run", "--format", "table")
    assert code == 0 and text.splitlines()[0].split() == ["action", "object", "where", "bytes", "entries"]
    assert "would discard" in text and snapshot(five_key_store) == before
    assert text.splitlines()[1].startswith("would roll back to") and "tag v1" in text.splitlines()[1]

    code, real, _ = cli(capsys, "rollback", "-n", "v1", "--no-dry-run")
    assert code == 0 and not real["dry_run"]
    assert real["discarded_ssts"] == dry["discarded_ssts"] and real["discarded_wal"] == dry["discarded_wal"]
    assert real["manifest_id_after"] == admin.read_manifest("db", five_key_store).id
    assert main(["--path", "db", "scan"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["key"]: r["value"] for r in rows} == {f"k{i}": f"v{i}" for i in range(5)}


@pytest.mark.parametrize("mode", ["--dry-run", "--no-dry-run"])
def test_rollback_as_a_table_prints_the_rollback_even_when_it_discards_nothing(
    five_key_store: ObjectStore, capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    """Before issue 20 a rollback with nothing after the tag printed ``(none)`` in a table."""
    assert cli(capsys, "create-tag", "-n", "v1")[0] == 0
    before = admin.read_manifest("db", five_key_store).id
    code, text, _ = cli(capsys, "rollback", "-n", "v1", mode, "--format", "table")
    assert code == 0 and "(none)" not in text
    header, first, *rest = text.splitlines()
    assert header.split() == ["action", "object", "where", "bytes", "entries"]
    verb = "would roll back to" if mode == "--dry-run" else "rolled back to"
    assert first.startswith(verb) and "tag v1" in first and f"manifest {before} -> " in first
    # nothing came after the tag: no SST or WAL row, only what the rollback cost
    assert len(rest) == 1 and rest[0].startswith("requests") and " GET, " in rest[0] and "$" in rest[0]


def test_rollback_to_a_missing_tag_exits_1_and_writes_nothing(
    five_key_store: ObjectStore, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(five_key_store)
    for extra in ((), ("--dry-run",)):
        code, _, err = cli(capsys, "rollback", "-n", "nope", *extra)
        assert code == 1 and "no tag 'nope'" in err and "list-tags" in err
    assert snapshot(five_key_store) == before


def test_apply_tag_policy_creates_keeps_and_leaves_hand_made_tags_alone(
    five_key_store: ObjectStore, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("auto-2020-01-01", "auto-2020-01-02", "manual"):
        admin.create_tag("db", five_key_store, name)
    before = snapshot(five_key_store)
    code, dry, _ = cli(capsys, "apply-tag-policy", "--keep", "2", "--dry-run")
    assert code == 0 and dry["dry_run"] and snapshot(five_key_store) == before
    assert dry["created"]["name"] == dry["due_tag"] and dry["due_tag"].startswith("auto-20")
    assert [(d["tag"]["name"], d["reason"]) for d in dry["deleted"]] == [
        ("auto-2020-01-01", "num_retained_max")
    ]

    code, real, _ = cli(capsys, "apply-tag-policy", "--keep", "2", "--no-dry-run")
    assert code == 0 and not real["dry_run"] and real["deleted"] == dry["deleted"]
    assert real["retained"] == [real["due_tag"], "auto-2020-01-02"]
    code, rows, _ = cli(capsys, "list-tags")
    assert sorted(r["tag_name"] for r in rows) == sorted(["auto-2020-01-02", "manual", real["due_tag"]])

    before = snapshot(five_key_store)
    code, again, _ = cli(capsys, "apply-tag-policy", "--keep", "2", "--no-dry-run")
    assert (
        code == 0
        and again["created"] is None
        and again["deleted"] == []
        and snapshot(five_key_store) == before
    )

    code, expired, _ = cli(
        capsys, "apply-tag-policy", "--expire-after", "30days", "--interval-days", "1", "--no-dry-run"
    )
    assert code == 0 and [d["tag"]["name"] for d in expired["deleted"]] == ["auto-2020-01-02"]
    assert expired["deleted"][0]["reason"] == "expired"


def test_apply_tag_policy_refuses_invalid_policies(
    five_key_store: ObjectStore, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(five_key_store)
    for bad in (("--create-time", "25:00"), ("--interval-days", "0"), ("--expire-after", "soon")):
        with pytest.raises(SystemExit) as exited:
            main(["--path", "db", "apply-tag-policy", *bad])
        assert exited.value.code == 2
    capsys.readouterr()
    code, _, err = cli(capsys, "apply-tag-policy", "--name-format", "auto-%Y-%m")
    assert code == 1 and "invalid tag policy: name_format 'auto-%Y-%m'" in err
    assert snapshot(five_key_store) == before


@pytest.mark.parametrize("command", ["rollback", "apply-tag-policy"])
def test_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0 and "--dry-run" in capsys.readouterr().out
