"""``slate-ops gc``: JSON and table output, dry run, resources, the min-age floor, failures."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from slate_ops import Db
from slate_ops.cli import main
from slate_ops.compaction import Compactor, CompactorOptions
from slate_ops.errors import ObjectStoreError
from slate_ops.objstore import LocalStore
from slate_ops.runtime import ManualRuntime
from tests.support.engine import quiet


@pytest.fixture
def aged_store_root(tmp_path: Path) -> Path:
    """A local store holding database ``db`` with garbage in every namespace, aged by a day."""
    root = tmp_path / "store"
    store = LocalStore(root)
    for round_ in range(3):
        with Db.open("db", store, quiet()) as db:
            for i in range(50):
                db.put(b"k%03d" % i, b"v%d" % round_)
            db.flush()
            db.flush_memtable()
    a_day_ago = ManualRuntime(time.time() - 86_400)  # its 1 s compaction checkpoint expired long ago
    options = CompactorOptions(min_sources=2, compaction_checkpoint_lifetime="1s")
    compactor = Compactor("db", store, options, clock=a_day_ago)
    compactor.run_once()
    compactor.close()
    age(root, 86_400)
    return root


def age(root: Path, seconds: float) -> None:
    then = time.time() - seconds
    for path in root.rglob("*"):
        if path.is_file() and ".locks" not in path.parts:
            os.utime(path, (then, then))


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and ".locks" not in p.parts}


def run(root: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["--store", root.as_uri(), "--path", "db", "gc", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_dry_run_prints_what_the_real_run_then_deletes(
    aged_store_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = files(aged_store_root)
    code, out, err = run(aged_store_root, capsys)  # a dry run by default
    assert code == 0 and files(aged_store_root) == before
    assert "nothing was changed" in err and "--no-dry-run" in err
    dry: dict[str, Any] = json.loads(out)
    assert dry["dry_run"] is True and dry["errors"] == []
    would = {d["key"] for r in dry["resources"] for d in r["deleted"]}
    assert {r["resource"] for r in dry["resources"] if r["count"]} == {
        "manifest",
        "compactions",
        "wal",
        "compacted",
    }

    code, out, _ = run(aged_store_root, capsys, "--no-dry-run")
    assert code == 0
    real = json.loads(out)
    assert real["dry_run"] is False
    assert {d["key"] for r in real["resources"] for d in r["deleted"]} == would
    assert not would & files(aged_store_root)
    added = files(aged_store_root) - before  # the boundaries, and the manifest that expired the checkpoint
    assert {"db/gc/manifest.boundary", "db/gc/compactions.boundary"} <= added
    assert {f for f in added if "/gc/" not in f} == {f"db/manifest/{real['manifest_id'] + 1:020d}.manifest"}


def test_table_format(aged_store_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(aged_store_root, capsys, "--dry-run", "--format", "table")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["resource", "action", "objects", "bytes", "listed", "boundary", "errors"]
    assert [line.split()[0] for line in lines[1:]] == [
        "manifest", "compactions", "wal", "compacted", "checkpoints", "clones", "requests",
    ]  # fmt: skip
    assert "would delete" in lines[1] and "would expire" in lines[5]
    assert " LIST, 0 DELETE, " in lines[7] and " 0 PUT, " in lines[7]  # what the dry run cost


def test_one_resource_and_a_min_age(aged_store_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(aged_store_root, capsys, "--resource", "wal", "--min-age", "2days", "--dry-run")
    assert code == 0
    report = json.loads(out)
    assert [r["resource"] for r in report["resources"]] == ["wal"]
    assert report["resources"][0]["count"] == 0  # nothing is two days old
    code, out, _ = run(
        aged_store_root, capsys, "--resource", "wal", "--resource", "manifest", "--min-age", "10min"
    )
    assert code == 0 and {r["resource"] for r in json.loads(out)["resources"]} == {"wal", "manifest"}


def test_min_age_below_the_floor_is_a_usage_error(
    aged_store_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        run(aged_store_root, capsys, "--min-age", "30s")
    assert exited.value.code == 2
    assert "below the minimum age floor of 2min" in capsys.readouterr().err


def test_failure_prints_the_report_then_the_error_and_exits_1(
    aged_store_root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real_delete = LocalStore.delete

    def failing_delete(self: LocalStore, key: str) -> None:
        if "/wal/" in key:
            raise ObjectStoreError(f"injected: cannot delete {key}", key)
        real_delete(self, key)

    monkeypatch.setattr(LocalStore, "delete", failing_delete)
    code, out, err = run(aged_store_root, capsys, "--no-dry-run")
    assert code == 1
    report = json.loads(out)
    assert report["errors"] and all("wal: deleting" in e for e in report["errors"])
    assert next(r for r in report["resources"] if r["resource"] == "compacted")["count"] > 0
    assert err.startswith("slate-ops: error: GC of") and "injected: cannot delete" in err


def test_missing_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--store", (tmp_path / "empty").as_uri(), "--path", "nothing", "gc"])
    assert code == 1 and "no database" in capsys.readouterr().err
