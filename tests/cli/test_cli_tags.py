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
from tests.conftest import snapshot


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ObjectStore:
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


def test_create_list_and_delete(store: ObjectStore, capsys: pytest.CaptureFixture[str]) -> None:
    code, tag, _ = cli(capsys, "create-tag", "-n", "v1")
    assert code == 0 and tag["name"] == "v1"
    checkpoint = admin.create_checkpoint("db", store).id
    code, from_checkpoint, _ = cli(capsys, "create-tag", "-n", "v2", "-s", str(checkpoint))
    assert code == 0 and from_checkpoint["manifest_id"] == admin.list_checkpoints("db", store)[1].manifest_id

    code, rows, _ = cli(capsys, "list-tags")
    assert code == 0 and [r["tag_name"] for r in rows] == ["v1", "v2"]
    assert rows[0]["checkpoint_id"] == tag["checkpoint_id"] and rows[0]["record_count"] == 5
    assert set(rows[0]) == {
        "tag_name",
        "checkpoint_id",
        "manifest_id",
        "create_time",
        "record_count",
        "bytes",
    }

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

    before = snapshot(store)
    code, out, _ = cli(capsys, "delete-tag", "-n", "v1", "--dry-run")
    assert code == 0 and out["dry_run"] and out["deleted"]["name"] == "v1"
    assert snapshot(store) == before
    code, out, _ = cli(capsys, "delete-tag", "-n", "v1")
    assert code == 0 and not out["dry_run"]
    code, rows, _ = cli(capsys, "list-tags")
    assert [r["tag_name"] for r in rows] == ["v2"]


def test_refusals_exit_non_zero_and_write_nothing(
    store: ObjectStore, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(capsys, "create-tag", "-n", "v1")[0] == 0
    before = snapshot(store)
    code, _, err = cli(capsys, "create-tag", "-n", "v1")
    assert code != 0 and "already exists" in err
    code, _, err = cli(capsys, "delete-tag", "-n", "nope")
    assert code != 0 and "no tag 'nope'" in err
    code, _, err = cli(capsys, "create-tag", "-n", "has space")
    assert code != 0 and "whitespace" in err
    assert snapshot(store) == before
    code, replaced, _ = cli(capsys, "create-tag", "-n", "v1", "--replace")
    assert code == 0
    assert [c.id for c in admin.list_checkpoints("db", store) if c.name == "tag:v1"] == [
        uuid.UUID(replaced["checkpoint_id"])
    ]
